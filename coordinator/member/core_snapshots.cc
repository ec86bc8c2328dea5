// The member core's snapshots: when one is taken, built a slice per turn
// while entries go on applying, saved and compacted; and the backup, the
// same snapshot of the applied table (core.h "Snapshots").
#include <algorithm>
#include <stdexcept>

#include "member/core.h"

namespace pgfence::member {

namespace {
std::string num(std::uint64_t v) { return std::to_string(v); }
}  // namespace

void Core::snapshot_saved(std::shared_ptr<const raft::Snapshot> snapshot, Time /*now*/) {
    if (!saving_) throw std::logic_error("Core::snapshot_saved: no SaveSnapshot outstanding");
    saving_ = false;
    const raft::Index index = snapshot->meta.index;
    // A snapshot installed from the leader meanwhile may be newer.
    last_snapshot_index_ = std::max(last_snapshot_index_, index);
    ++counters_.snapshots;
    raft_->compact(std::move(snapshot), config_.snapshot_keep);
    log(LogLevel::kInfo, "snapshot_taken", {{"index", num(index)}, {"locks", num(table_.size())}});
}


std::shared_ptr<raft::Snapshot> Core::applied_snapshot() const {
    auto snap = std::make_shared<raft::Snapshot>();
    snap->meta.index = table_.applied_index();
    snap->meta.term = applied_term_;
    snap->meta.config = raft_->configuration_at(snap->meta.index);
    snap->meta.config_index = raft_->configuration_index_at(snap->meta.index);
    snap->data = table_.snapshot();
    return snap;
}

void Core::maybe_snapshot() {
    const raft::Index applied = table_.applied_index();
    if (saving_ || table_.snapshotting()) return;  // one at a time
    if (applied >= last_snapshot_index_ && applied - last_snapshot_index_ < config_.snapshot_every) return;
    // Overflow-free: a table's bytes stay below raft::kMaxSnapshotBytes (its
    // snapshot fits), and the percentage is at most kMaxSnapshotLogPct.
    if (applied_bytes_since_snapshot_ < table_.bytes() * config_.snapshot_log_pct / 100) return;
    applied_bytes_since_snapshot_ = 0;
    building_ = raft::SnapshotMeta{applied, applied_term_, raft_->configuration_at(applied),
                                   raft_->configuration_index_at(applied)};
    table_.begin_snapshot();
    continue_snapshot();
}

// A table restored meanwhile (a snapshot from the leader) dropped the build.
void Core::continue_snapshot() {
    if (!table_.snapshotting() || !table_.continue_snapshot(config_.snapshot_slice_locks)) return;
    auto snap = std::make_shared<raft::Snapshot>();
    snap->meta = building_;
    snap->data = table_.take_snapshot();
    saving_ = true;
    effects_.save = std::move(snap);
}

void Core::take_backup(RequestId id) {
    // After the confirming round: every entry committed before the request
    // arrived is applied by then (ReadIndex), so the backup holds every
    // grant a client was answered before it asked.
    confirm([this, id](bool ok, Time) {
        if (!ok) {
            unavailable(id);
            return;
        }
        respond(id, Backup{applied_snapshot()}, Witness{table_.applied_index(), 0, nullptr});
    });
}

}  // namespace pgfence::member
