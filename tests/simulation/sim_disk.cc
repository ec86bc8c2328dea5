// The simulated disk: see sim_disk.h for the crash model.
#include "sim_disk.h"

#include <algorithm>

#include "sim_failure.h"

namespace pgfence::sim {

std::vector<raft::Entry> SimStorage::entries(raft::Index lo, raft::Index hi) const {
    require(lo >= first_index() && hi <= last_index() + 1 && lo <= hi,
            "Storage::entries(", lo, ", ", hi, ") outside the stored range [", first_index(), ", ",
            last_index() + 1, ")");
    std::vector<raft::Entry> out;
    out.reserve(hi - lo);
    for (raft::Index i = lo; i < hi; ++i) out.push_back(log_[i - first_index()]);
    return out;
}

std::optional<raft::Term> SimStorage::term_at(raft::Index index) const {
    if (index == snapshot_.meta.index) return snapshot_.meta.term;
    if (index < first_index() || index > last_index()) return std::nullopt;
    return log_[index - first_index()].term;
}

const raft::Entry* SimStorage::entry_at(raft::Index index) const {
    if (index < first_index() || index > last_index()) return nullptr;
    return &log_[index - first_index()];
}

void SimStorage::append(const raft::Entry& entry) {
    if (entry.index <= snapshot_.meta.index) return;
    require(entry.index <= last_index() + 1, "persisted entry ", entry.index,
            " leaves a gap after the last stored index ", last_index());
    if (entry.index <= last_index()) lowest_overwritten_ = std::min(lowest_overwritten_, entry.index);
    log_.resize(entry.index - first_index());
    log_.push_back(entry);
}

void SimStorage::install_snapshot(const raft::Snapshot& snap) {
    if (snap.meta.index <= snapshot_.meta.index) return;
    const auto term = term_at(snap.meta.index);
    if (term && *term == snap.meta.term) {
        log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(snap.meta.index -
                                                                             snapshot_.meta.index));
    } else {
        if (!log_.empty()) lowest_overwritten_ = std::min(lowest_overwritten_, first_index());
        log_.clear();
    }
    snapshot_ = snap;
}

void SimStorage::compact(const raft::Snapshot& snap) {
    if (snap.meta.index <= snapshot_.meta.index) return;
    require(snap.meta.index <= last_index(), "compaction at ", snap.meta.index,
            " past the stored log (last index ", last_index(), ")");
    install_snapshot(snap);
}

const char* to_string(CrashLoss loss) {
    switch (loss) {
        case CrashLoss::kNothingPending: return "nothing pending";
        case CrashLoss::kAllLost: return "pending writes lost";
        case CrashLoss::kTornPrefix: return "pending writes torn";
        case CrashLoss::kAllKept: return "pending writes kept";
    }
    return "?";
}

void SimDisk::apply(SimStorage& image, const Write& w) {
    if (const auto* snap = std::get_if<raft::Snapshot>(&w)) image.install_snapshot(*snap);
    if (const auto* entry = std::get_if<raft::Entry>(&w)) image.append(*entry);
    if (const auto* hs = std::get_if<raft::HardState>(&w)) image.set_hard_state(*hs);
}

void SimDisk::write(const raft::Ready& ready) {
    const std::size_t first_new = pending_.size();
    if (ready.hard_state && hard_state_first_) pending_.emplace_back(*ready.hard_state);
    if (ready.snapshot) pending_.emplace_back(*ready.snapshot);
    for (const auto& e : ready.entries) pending_.emplace_back(e);
    if (ready.hard_state && !hard_state_first_) pending_.emplace_back(*ready.hard_state);
    for (std::size_t i = first_new; i < pending_.size(); ++i) apply(volatile_, pending_[i]);
}

void SimDisk::sync() {
    for (const auto& w : pending_) apply(durable_, w);
    pending_.clear();
}

void SimDisk::compact(const raft::Snapshot& snap) {
    durable_.compact(snap);
    volatile_.compact(snap);
}

CrashLoss SimDisk::crash(SimRandom& random) {
    CrashLoss loss = CrashLoss::kNothingPending;
    if (!pending_.empty()) {
        const std::uint64_t roll = random.between(0, 9);
        std::size_t keep = 0;
        if (roll < 4) {
            loss = CrashLoss::kAllLost;
        } else if (roll < 8) {
            loss = CrashLoss::kTornPrefix;
            keep = static_cast<std::size_t>(random.between(0, pending_.size() - 1));
        } else {
            loss = CrashLoss::kAllKept;
            keep = pending_.size();
        }
        for (std::size_t i = 0; i < keep; ++i) apply(durable_, pending_[i]);
        pending_.clear();
    }
    volatile_ = durable_;
    return loss;
}

}  // namespace pgfence::sim
