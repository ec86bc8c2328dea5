#include "storage/durable_storage.h"

#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "storage/meta_files.h"

namespace pgfence::storage {
namespace {

constexpr const char* kLockFile = "LOCK";

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_known_file(const std::string& name) {
    std::uint64_t seq = 0;
    return name == kLockFile || name == kIdentityFile || name == kHardStateFile ||
           name == kSnapshotFile || parse_segment_file_name(name, seq);
}

std::string parent_of(const std::string& dir) {
    std::string d = dir;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    const auto slash = d.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : d.substr(0, slash);
}

}  // namespace

DurableStorage::DurableStorage(std::string dir, const StorageOptions& options)
    : dir_(std::move(dir)), options_(options) {}

void DurableStorage::warn(std::string message) {
    if (options_.on_warning) options_.on_warning(message);
    warnings_.push_back(std::move(message));
}

std::unique_ptr<DurableStorage> DurableStorage::open(const std::string& dir, const Identity& identity,
                                                     const StorageOptions& options) {
    if (identity.cluster_id == 0 || identity.member_id == raft::kNoNode) {
        throw StorageError("opening " + dir + ": cluster ID and member ID must be non-zero");
    }
    const bool existed = path_exists(dir);
    make_dir(dir);
    if (!existed) sync_dir(parent_of(dir));
    std::unique_ptr<DurableStorage> s(new DurableStorage(dir, options));
    s->lock_directory();
    s->check_identity(identity);
    s->durable_hard_state_ = load_hard_state(dir).value_or(raft::HardState{});
    s->snapshot_ = std::make_shared<const raft::Snapshot>(
        load_snapshot(dir, options.max_snapshot_bytes).value_or(raft::Snapshot{}));
    s->file_index_ = s->snapshot_->meta.index;
    WalOptions wal_options{options.segment_bytes, options.preallocate,
                           [raw = s.get()](const std::string& m) { raw->warn(m); }};
    s->wal_ = Wal::open(dir, wal_options);
    s->reconcile_log_with_snapshot();
    s->hard_state_ = s->durable_hard_state_;
    s->hard_state_.commit =
        std::clamp(s->hard_state_.commit, s->snapshot_->meta.index, s->wal_->last_index());
    return s;
}

// One process per data directory: a second open fails instead of corrupting.
void DurableStorage::lock_directory() {
    const std::string path = join_path(dir_, kLockFile);
    lock_fd_ = open_file(path, O_RDWR | O_CREAT);
    if (::flock(lock_fd_.get(), LOCK_EX | LOCK_NB) != 0) {
        throw StorageError("data directory " + dir_ + " is in use by another process (" + path +
                           " is locked: " + std::strerror(errno) + "); stop it first");
    }
}

// Creates the identity of a new member, or checks that an existing directory
// belongs to this cluster and member; only then removes stale temp files (a
// foreign directory is refused untouched).
void DurableStorage::check_identity(const Identity& identity) {
    std::vector<std::string> temps;
    std::vector<std::string> others;
    for (const std::string& name : list_dir(dir_)) {
        if (ends_with(name, ".tmp")) {
            temps.push_back(name);
        } else if (!is_known_file(name)) {
            warn(join_path(dir_, name) + ": unknown file in the data directory, ignored");
        } else if (name != kLockFile) {
            others.push_back(name);
        }
    }
    check_or_create_identity(identity, others);
    for (const std::string& name : temps) {
        warn(join_path(dir_, name) +
             ": removing a temporary file left by an interrupted write; "
             "the previous version of the file stays in use");
        remove_file(join_path(dir_, name));
    }
    if (!temps.empty()) sync_dir(dir_);
}

void DurableStorage::check_or_create_identity(const Identity& identity, const std::vector<std::string>& others) {
    const std::optional<Identity> id = load_identity(dir_);
    if (!id) {
        if (!others.empty()) {
            throw StorageError("data directory " + dir_ + " holds " + others.front() +
                               " but no identity file: it was not created by pgfence or its "
                               "identity was lost; refusing to use it (restore it or start empty)");
        }
        write_file_atomically(dir_, kIdentityFile, encode_identity(identity));
        meta_syncs_ += 2;
        identity_ = identity;
        return;
    }
    if (id->cluster_id != identity.cluster_id || id->member_id != identity.member_id) {
        throw StorageError("data directory " + dir_ + " belongs to cluster " +
                           std::to_string(id->cluster_id) + " member " +
                           std::to_string(id->member_id) + ", not cluster " +
                           std::to_string(identity.cluster_id) + " member " +
                           std::to_string(identity.member_id) +
                           "; refusing to start (wrong data directory "
                           "or wrong --cluster-id/--id?)");
    }
    identity_ = *id;
    if (!identity.first_config) return;
    if (id->first_config) {
        if (*id->first_config != *identity.first_config) {
            throw StorageError("data directory " + dir_ +
                               " records another first configuration than the one given; refusing to start");
        }
        return;
    }
    // A version 1 file: the first configuration is recorded from now on.
    write_file_atomically(dir_, kIdentityFile, encode_identity(identity));
    meta_syncs_ += 2;
    identity_ = identity;
    warn(join_path(dir_, kIdentityFile) + ": recorded the first configuration (format version 2)");
}

// At open: makes the recovered log consistent with the snapshot, repeating
// whatever an interrupted snapshot install had not finished.
// A log starting after snapshot index + 1 (entries, or an empty log left by a
// reset record) means entries or the snapshot they were compacted into are
// missing: refused, whether or not the log holds entries now.
void DurableStorage::reconcile_log_with_snapshot() {
    const raft::Index s = snapshot_->meta.index;
    const bool empty = wal_->first_index() > wal_->last_index();
    if (wal_->first_index() > s + 1) {
        const std::string snap =
            s == 0 ? "there is no snapshot file" : "the snapshot file ends at " + std::to_string(s);
        throw StorageError("data directory " + dir_ + ": the log starts at index " +
                           std::to_string(wal_->first_index()) + " but " + snap +
                           ": the entries before it are lost (corruption). Restore this member "
                           "from another one (remove its data directory and add it back).");
    }
    if (s == 0) return;
    if (empty) {
        wal_->set_empty_start(s + 1);
        return;
    }
    place_log_after_snapshot(true);
}

// The log is non-empty and starts at or before snapshot index + 1: keep the
// entries after the snapshot if the log holds the snapshot's last entry (or
// starts right after it), else discard the log (it conflicts or is behind).
void DurableStorage::place_log_after_snapshot(bool at_open) {
    const raft::Index s = snapshot_->meta.index;
    const raft::Index first = wal_->first_index();
    const raft::Index last = wal_->last_index();
    if (first == s + 1 && last >= first) return;
    const bool holds =
        first <= s && s <= last && wal_->read(s, s + 1).front().term == snapshot_->meta.term;
    if (holds) {
        wal_->drop_prefix(s);
    } else {
        if (at_open) {
            warn(dir_ + ": the log [" + std::to_string(first) + ", " + std::to_string(last) +
                 "] does not contain the snapshot's last entry (" + std::to_string(s) + ", term " +
                 std::to_string(snapshot_->meta.term) +
                 "); discarding it, as the interrupted snapshot install would have");
        }
        wal_->reset(s + 1);
    }
    wal_->sync();
}

void DurableStorage::require_usable() const {
    if (broken_) {
        throw StorageError("storage in " + dir_ +
                           " is unusable after an earlier failed write; restart the member so it "
                           "recovers from what is on disk");
    }
}

// Raft never lowers its term or changes its vote within a term (Figure 2); a
// hard state that would is a caller bug that could make this member vote twice.
void DurableStorage::check_hard_state(const raft::HardState& hs) const {
    const raft::HardState& d = durable_hard_state_;
    if (hs.term < d.term || (hs.term == d.term && d.vote != raft::kNoNode && hs.vote != d.vote)) {
        throw StorageError("hard state term " + std::to_string(hs.term) + " vote " +
                           std::to_string(hs.vote) + " would undo the durable term " +
                           std::to_string(d.term) + " vote " + std::to_string(d.vote) + " in " +
                           dir_ + "; refused, nothing written (caller bug)");
    }
}

void DurableStorage::persist_commit(const raft::HardState& hs) {
    require_usable();
    check_hard_state(hs);
    if (hs.commit > wal_->last_index() && hs.commit > snapshot_->meta.index) {
        throw StorageError("commit " + std::to_string(hs.commit) + " is beyond the log's last index " +
                           std::to_string(wal_->last_index()) + " (caller bug)");
    }
    write_hard_state(hs);
    hard_state_ = hs;
}

void DurableStorage::write_hard_state(const raft::HardState& hs) {
    write_file_atomically(dir_, kHardStateFile, encode_hard_state(hs));
    meta_syncs_ += 2;
    durable_hard_state_ = hs;
}

// The encoded snapshot, after checking it may replace the stored one.
std::string DurableStorage::checked_snapshot_bytes(const raft::Snapshot& snap) const {
    if (snap.empty() || snap.meta.index <= snapshot_->meta.index) {
        throw StorageError("snapshot at index " + std::to_string(snap.meta.index) +
                           " is not newer than the stored one at " +
                           std::to_string(snapshot_->meta.index) + " (caller bug)");
    }
    const std::string bytes = encode_snapshot(snap);
    if (bytes.size() > options_.max_snapshot_bytes) {
        throw StorageError("snapshot of " + std::to_string(bytes.size()) + " bytes exceeds " +
                           "max_snapshot_bytes " + std::to_string(options_.max_snapshot_bytes));
    }
    return bytes;
}

void DurableStorage::write_snapshot(std::shared_ptr<const raft::Snapshot> snap, const std::string& bytes) {
    const std::lock_guard<std::mutex> guard(snapshot_mutex_);
    write_file_atomically(dir_, kSnapshotFile, bytes);
    meta_syncs_ += 2;
    file_index_ = snap->meta.index;
    snapshot_ = std::move(snap);
}

bool DurableStorage::write_snapshot_file(const raft::Snapshot& snap) {
    const std::lock_guard<std::mutex> guard(snapshot_mutex_);
    if (!snap.empty() && snap.meta.index <= snapshot_->meta.index) return false;
    write_file_atomically(dir_, kSnapshotFile, checked_snapshot_bytes(snap));
    meta_syncs_ += 2;
    file_index_ = snap.meta.index;
    return true;
}

void DurableStorage::adopt_snapshot(std::shared_ptr<const raft::Snapshot> snap) {
    require_usable();
    const raft::Index index = snap->meta.index;
    {
        const std::lock_guard<std::mutex> guard(snapshot_mutex_);
        if (index <= snapshot_->meta.index) return;
        // The file must hold this very snapshot: recording one whose file
        // another write replaced would drop entries the file does not cover.
        if (file_index_ != index) {
            throw StorageError("adopt_snapshot at index " + std::to_string(index) + ", but the snapshot file holds index " +
                               std::to_string(file_index_) + " (caller bug: write_snapshot_file first)");
        }
    }
    check_snapshot_in_log(*snap);
    BreakOnThrow guard(broken_);
    {
        const std::lock_guard<std::mutex> lock(snapshot_mutex_);
        snapshot_ = std::move(snap);
    }
    wal_->drop_prefix(index);
    wal_->sync();
}

void DurableStorage::persist(const raft::HardState* hard_state, const raft::Snapshot* snapshot,
                             const std::vector<raft::Entry>& entries) {
    require_usable();
    if (hard_state != nullptr) check_hard_state(*hard_state);
    const bool installing = snapshot != nullptr && !snapshot->empty();
    const std::string snapshot_bytes = installing ? checked_snapshot_bytes(*snapshot) : "";
    if (!installing) wal_->check_append(entries);  // with a snapshot, checked after it
    BreakOnThrow guard(broken_);
    if (hard_state != nullptr) {
        if (hard_state->term != durable_hard_state_.term ||
            hard_state->vote != durable_hard_state_.vote) {
            write_hard_state(*hard_state);
        }
        hard_state_ = *hard_state;
    }
    if (installing) {
        write_snapshot(std::make_shared<const raft::Snapshot>(*snapshot), snapshot_bytes);
        const raft::Index s = snapshot->meta.index;
        if (wal_->first_index() <= s + 1 && wal_->last_index() >= s) {
            place_log_after_snapshot(false);
        } else {
            wal_->reset(s + 1);
        }
    }
    const std::uint64_t bytes_before = wal_->bytes_written();
    const auto t0 = std::chrono::steady_clock::now();
    wal_->append(entries);
    const auto t1 = std::chrono::steady_clock::now();
    wal_->sync();
    last_persist_.write = t1 - t0;
    last_persist_.sync = std::chrono::steady_clock::now() - t1;
    last_persist_.bytes = wal_->bytes_written() - bytes_before;
}

void DurableStorage::save_snapshot(const raft::Snapshot& snap) {
    require_usable();
    check_snapshot_in_log(snap);
    const std::string bytes = checked_snapshot_bytes(snap);
    BreakOnThrow guard(broken_);
    write_snapshot(std::make_shared<const raft::Snapshot>(snap), bytes);
    wal_->drop_prefix(snap.meta.index);
    wal_->sync();
}

// A snapshot the application took must cover an entry the log holds, with
// its term: else reopening would find the log not holding the snapshot's
// last entry and discard every entry after it.
void DurableStorage::check_snapshot_in_log(const raft::Snapshot& snap) const {
    if (snap.meta.index > wal_->last_index() || snap.meta.index < wal_->first_index()) {
        throw StorageError("save_snapshot at index " + std::to_string(snap.meta.index) +
                           " outside the stored log [" + std::to_string(wal_->first_index()) +
                           ", " + std::to_string(wal_->last_index()) + "] (caller bug)");
    }
    const raft::Term stored_term = wal_->read(snap.meta.index, snap.meta.index + 1).front().term;
    if (stored_term != snap.meta.term) {
        throw StorageError("save_snapshot at index " + std::to_string(snap.meta.index) + " term " +
                           std::to_string(snap.meta.term) + ", but the log has term " +
                           std::to_string(stored_term) + " there (caller bug)");
    }
}

std::vector<raft::Entry> DurableStorage::entries(raft::Index lo, raft::Index hi) const {
    require_usable();
    return wal_->read(lo, hi);
}

}  // namespace pgfence::storage
