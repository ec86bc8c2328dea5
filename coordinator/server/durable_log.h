// What the member needs from durable storage: the raft::Storage view read at
// start-up, one-fsync batches, and snapshots. An adapter over the storage
// module's WAL implements it for real data directories; MemoryLog (below) is
// for tests.
//
// Threading: persist() and adopt_snapshot() run one at a time: on the
// writer thread (writer.h), or persist() on the loop thread while no
// snapshot adoption is queued (a follower's inline write; DiskTurn,
// disk_turn.h, decides which). write_snapshot_file() runs on the snapshot
// thread, beside them. storage() is read once, on the loop thread, before
// the threads start.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "raft/storage.h"
#include "raft/types.h"
#include "storage/durable_storage.h"
#include "storage/meta_files.h"

namespace pgfence::server {

class DurableLog {
public:
    virtual ~DurableLog() = default;
    virtual const raft::Storage& storage() const = 0;
    // One Ready's persistence part, durable on return (one fdatasync), in
    // the order raft.h's Ready states: the snapshot before the entries
    // (which truncate a conflicting suffix), the hard state before or after
    // them. The data directory's order is storage/durable_storage.h's.
    virtual void persist(const std::optional<raft::HardState>& hard_state,
                         const std::optional<raft::Snapshot>& snapshot,
                         const std::vector<raft::Entry>& entries) = 0;
    // The last persist()'s WAL write and fdatasync, timed, and its bytes
    // (zeros where there is no WAL); read on persist()'s thread after it.
    using PersistTimes = storage::DurableStorage::PersistTimes;
    virtual PersistTimes last_persist() const { return {}; }
    // The application's own snapshot at an applied index, in the storage's
    // two steps (storage/durable_storage.h): the file, durable on return,
    // while persists go on (false: an installed snapshot is as new, nothing
    // written); then its adoption, which drops the log it covers. Kept
    // shared, not copied: the Raft core keeps the same snapshot.
    virtual bool write_snapshot_file(const raft::Snapshot& snapshot) = 0;
    virtual void adopt_snapshot(const std::shared_ptr<const raft::Snapshot>& snapshot) = 0;
    // The hard state with its commit index, durable on return, so the next
    // start knows that commit (storage/durable_storage.h persist_commit).
    virtual void persist_commit(const raft::HardState& hard_state) = 0;
};

class MemoryLog final : public DurableLog {
public:
    const raft::Storage& storage() const override { return storage_; }
    void persist(const std::optional<raft::HardState>& hard_state, const std::optional<raft::Snapshot>& snapshot,
                 const std::vector<raft::Entry>& entries) override {
        if (snapshot) storage_.apply_snapshot(*snapshot);
        if (!entries.empty()) storage_.append(entries);
        if (hard_state) storage_.set_hard_state(*hard_state);
    }
    bool write_snapshot_file(const raft::Snapshot&) override { return true; }  // no file
    void adopt_snapshot(const std::shared_ptr<const raft::Snapshot>& snapshot) override { storage_.compact(*snapshot); }
    void persist_commit(const raft::HardState& hard_state) override { storage_.set_hard_state(hard_state); }

private:
    raft::MemoryStorage storage_;
};

// Opens the data directory with the storage module (refuses a directory of
// another cluster or member; creates an empty one with `identity`). Throws
// with a message naming the problem.
std::unique_ptr<DurableLog> open_durable_log(const std::string& dir, const storage::Identity& identity);

}  // namespace pgfence::server
