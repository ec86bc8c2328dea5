// DurableStorage: the Raft core's storage on disk — the write-ahead log
// (wal.h, which documents the whole data-directory format), the hard-state
// file and the snapshot file. What a server persists each Ready into, and
// what a restarted member's core is built from.
//
// Durability, per Ready (raft.h): persist() writes, in this order,
//   1. hard state — only if term or vote changed: hardstate.tmp, fdatasync,
//      rename, directory fsync. A change of commit alone is kept in memory
//      and reaches disk with the next term/vote change (see below);
//   2. an installed snapshot — snapshot.tmp, fdatasync, rename, dir fsync;
//      then the log keeps the entries after it if it holds the snapshot's
//      (index, term), else it is reset to start after it;
//   3. entries — one WAL record, one write(), ONE fdatasync (group commit).
// When persist() returns, everything in it is durable; a leader appending in
// its own term pays exactly one fdatasync per batch.
//
// Why commit is not synced: Raft does not need a durable commit index; the
// core recomputes it from the leader. It is stored only so a restarted member
// can re-apply sooner, so after a restart hard_state().commit may lag (it is
// raised to the snapshot index and capped at last_index()). Term and vote are
// always durable before persist() returns, which is what safety needs.
//
// Why hard state is written before entries: after any crash, the durable
// term is then never below the term of a durable entry.
//
// Memory: the log keeps one 32-byte location per WAL record of the entries
// after the snapshot; entries() reads them back from the segment files.
// Compaction (save_snapshot) bounds both.
//
// Errors: everything throws StorageError. A call refused for a caller bug
// found before anything is written (a batch with a gap, a hard state that
// would undo a durable term or vote, a snapshot to adopt whose file is not
// the one written) changes nothing. Any other failure of persist(),
// save_snapshot() or adopt_snapshot() leaves the object refusing every
// further call (a failed write_snapshot_file() leaves the stored snapshot
// as it was; the server stops on it all the same):
// stop the member and restart it (a failed fsync cannot be retried safely).
//
// Threading: one thread at a time calls it (the server persists on its event
// loop or on its writer thread, never both at once), except
// write_snapshot_file(), which may run on another thread meanwhile: it and
// the snapshot an install (persist()) or adopt_snapshot() records take a
// mutex of their own, and it touches nothing else.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "raft/storage.h"
#include "raft/types.h"
#include "storage/file_util.h"
#include "storage/meta_files.h"
#include "storage/wal.h"

namespace pgfence::storage {

struct StorageOptions {
    std::uint64_t segment_bytes = 8u << 20;         // WAL segment rotation size
    bool preallocate = true;                        // fallocate WAL segments (see wal.h)
    std::uint64_t max_snapshot_bytes = raft::kMaxSnapshotBytes;  // larger snapshots are refused (write and read)
    // Called for each warning (torn tail cut, stale temp file removed, ...)
    // as it happens; warnings() keeps them too.
    std::function<void(const std::string&)> on_warning;
};

class DurableStorage final : public raft::Storage {
  public:
    // Opens the data directory `dir` (creating it, one level, if missing).
    // An empty directory becomes a new member with this identity; a directory
    // of another cluster or member is refused. An identity with a
    // first_config is checked against the directory's (refused if it
    // differs), and recorded in a version 1 file that has none (the file is
    // rewritten as version 2). Throws StorageError.
    static std::unique_ptr<DurableStorage> open(const std::string& dir, const Identity& identity,
                                                const StorageOptions& options = {});
    // The same with an identity of cluster and member only.
    static std::unique_ptr<DurableStorage> open(const std::string& dir, std::uint64_t cluster_id,
                                                raft::NodeId member_id,
                                                const StorageOptions& options = {}) {
        return open(dir, Identity{cluster_id, member_id, std::nullopt, std::nullopt}, options);
    }

    // The directory's identity as it is on disk now.
    const Identity& identity() const { return identity_; }

    raft::HardState hard_state() const override { return hard_state_; }
    raft::Snapshot snapshot() const override { return *snapshot_; }
    raft::Index first_index() const override { return wal_->first_index(); }
    raft::Index last_index() const override { return wal_->last_index(); }
    std::vector<raft::Entry> entries(raft::Index lo, raft::Index hi) const override;

    // Persists one Ready's hard_state, snapshot and entries (null/empty for
    // none), durable on return. See the top of this file for the order.
    void persist(const raft::HardState* hard_state, const raft::Snapshot* snapshot,
                 const std::vector<raft::Entry>& entries);

    // The last persist()'s entries part, timed (steady clock): encoding and
    // writing its WAL record, then its fdatasync, and the record bytes
    // written. The server's commit-path metrics (server/commit_phases.h).
    struct PersistTimes {
        std::chrono::nanoseconds write{0};  // encode + write()
        std::chrono::nanoseconds sync{0};   // the WAL's fdatasync
        std::uint64_t bytes = 0;
    };
    const PersistTimes& last_persist() const { return last_persist_; }

    // Writes the hard state with its commit index even when term and vote
    // are unchanged (persist() leaves commit alone then: it is recovered),
    // for a commit that must be known at the next open (a member's own
    // removal). commit <= last_index(). Durable on return.
    void persist_commit(const raft::HardState& hard_state);

    // The application took a snapshot (index <= last_index()): writes it
    // atomically, then drops the log entries it covers (whole segments).
    void save_snapshot(const raft::Snapshot& snapshot);
    // save_snapshot() in two steps, so that the long one runs while entries
    // go on being persisted:
    //   write_snapshot_file(s)  the snapshot file (encode, snapshot.tmp,
    //                           fdatasync, rename, directory fsync); may run on
    //                           another thread concurrently with persist() and
    //                           entries(). False, and nothing written, when the
    //                           stored snapshot is as new (an install came first).
    //                           Every entry up to its index must be durable already.
    //   adopt_snapshot(s)       then, as any other call: records it and drops
    //                           the log entries it covers. Nothing, when the
    //                           stored snapshot is as new.
    // A crash between the two leaves the new file beside a log that still
    // holds the entries it covers: the next open uses the file and skips them.
    bool write_snapshot_file(const raft::Snapshot& snapshot);
    void adopt_snapshot(std::shared_ptr<const raft::Snapshot> snapshot);

    const std::vector<std::string>& warnings() const { return warnings_; }

    // fdatasync/fsync calls made since open (tests check group commit).
    std::uint64_t sync_count() const { return meta_syncs_ + wal_->sync_count(); }

  private:
    DurableStorage(std::string dir, const StorageOptions& options);
    void warn(std::string message);
    void lock_directory();
    void check_identity(const Identity& identity);
    void check_or_create_identity(const Identity& identity, const std::vector<std::string>& others);
    void reconcile_log_with_snapshot();
    void place_log_after_snapshot(bool at_open);
    void require_usable() const;
    void check_hard_state(const raft::HardState& hs) const;
    void write_hard_state(const raft::HardState& hs);
    std::string checked_snapshot_bytes(const raft::Snapshot& snap) const;
    void write_snapshot(std::shared_ptr<const raft::Snapshot> snap, const std::string& bytes);
    void check_snapshot_in_log(const raft::Snapshot& snap) const;

    std::string dir_;
    StorageOptions options_;
    Identity identity_;
    Fd lock_fd_;
    std::unique_ptr<Wal> wal_;
    raft::HardState hard_state_;          // latest given (commit may be ahead of disk)
    raft::HardState durable_hard_state_;  // what the hardstate file holds
    // The snapshot file and snapshot_ change under snapshot_mutex_ (a
    // write_snapshot_file() on another thread reads snapshot_ and writes the file).
    mutable std::mutex snapshot_mutex_;
    std::shared_ptr<const raft::Snapshot> snapshot_;  // never null
    raft::Index file_index_ = 0;  // of the snapshot the file holds (ahead of snapshot_ between the two steps)
    std::vector<std::string> warnings_;
    std::atomic<std::uint64_t> meta_syncs_{0};
    PersistTimes last_persist_;  // persist()'s thread only
    bool broken_ = false;  // a write failed part-way: refuse everything (see Errors above)
};

}  // namespace pgfence::storage
