// The simulated disk of one member.
//
// SimStorage is the simulation's own raft::Storage: an image of hard state,
// snapshot and log. SimDisk keeps two of them:
//   durable  - what survives a crash: only writes completed by sync();
//   volatile - durable plus the writes of the Ready being persisted; it is the
//              member's view of its own log while the write is in flight.
// A Ready's persistence part becomes pending writes, in the order a single
// write-ahead log would hold them: snapshot, each entry, then hard state; or,
// when set_hard_state_first() (drawn per seed), hard state first, the way
// coordinator/storage writes its hard-state file before appending to the WAL
// (raft.h allows either order). sync() is the fsync that completes the
// Ready's persist step. crash() loses the pending writes, or keeps a torn
// prefix of them (never all of them), or, rarely, all of them; it never
// loses synced data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "raft/raft.h"
#include "raft/storage.h"
#include "sim_random.h"

namespace pgfence::sim {

class SimStorage final : public raft::Storage {
public:
    raft::HardState hard_state() const override { return hard_state_; }
    raft::Snapshot snapshot() const override { return snapshot_; }
    const raft::SnapshotMeta& snapshot_meta() const { return snapshot_.meta; }  // without copying the data
    raft::Index first_index() const override { return snapshot_.meta.index + 1; }
    raft::Index last_index() const override { return snapshot_.meta.index + log_.size(); }
    std::vector<raft::Entry> entries(raft::Index lo, raft::Index hi) const override;

    // Term of the entry at `index` if this image knows it (the snapshot's own
    // index included; index 0 has term 0).
    std::optional<raft::Term> term_at(raft::Index index) const;
    const raft::Entry* entry_at(raft::Index index) const;

    void set_hard_state(const raft::HardState& hs) { hard_state_ = hs; }

    // Appends one entry; an entry at an existing index replaces it and drops
    // everything after it (conflict truncation). Entries at or below the
    // snapshot index are ignored. A gap after the last index is a SimFailure.
    void append(const raft::Entry& entry);

    // A snapshot received from the leader: drops covered entries, and all
    // entries if the log disagrees with it at its index. Older ones ignored.
    void install_snapshot(const raft::Snapshot& snap);

    // The application's own snapshot at an index this log holds: keeps the
    // entries after it.
    void compact(const raft::Snapshot& snap);

    std::size_t entry_count() const { return log_.size(); }

    // Lowest index whose entry was replaced or dropped by a conflicting write
    // since reset_overwritten() (UINT64_MAX: none). Lets the durable-ack check
    // tell an acknowledged entry the core itself overwrote (legal: a newer
    // leader's log won) from one the disk lost.
    raft::Index lowest_overwritten() const { return lowest_overwritten_; }
    void reset_overwritten() { lowest_overwritten_ = UINT64_MAX; }

private:
    raft::Index lowest_overwritten_ = UINT64_MAX;
    raft::HardState hard_state_;
    raft::Snapshot snapshot_;
    std::deque<raft::Entry> log_;  // entries after snapshot_.meta.index, contiguous
};

// How a crash treated the writes that were pending when it hit.
enum class CrashLoss : std::uint8_t { kNothingPending, kAllLost, kTornPrefix, kAllKept };

const char* to_string(CrashLoss loss);

class SimDisk {
public:
    const SimStorage& durable() const { return durable_; }
    const SimStorage& volatile_image() const { return volatile_; }

    // Write order of a Ready's hard state: first (before snapshot and
    // entries) or last (the default).
    void set_hard_state_first(bool first) { hard_state_first_ = first; }

    // Queues the persistence part of `ready` (snapshot, entries, hard state)
    // as pending writes and applies it to the volatile image.
    void write(const raft::Ready& ready);

    // See SimStorage::lowest_overwritten(): restarts the durable image's record.
    void reset_overwritten() { durable_.reset_overwritten(); }

    bool has_pending() const { return !pending_.empty(); }
    std::size_t pending_count() const { return pending_.size(); }

    // fsync: every pending write becomes durable.
    void sync();

    // The application's snapshot, written and synced on the spot (temp file,
    // fsync, rename). Applied to both images.
    void compact(const raft::Snapshot& snap);

    // Power loss: pending writes are lost or torn (see the file comment);
    // the volatile image becomes the durable one.
    CrashLoss crash(SimRandom& random);

private:
    using Write = std::variant<raft::Snapshot, raft::Entry, raft::HardState>;
    static void apply(SimStorage& image, const Write& w);

    bool hard_state_first_ = false;
    SimStorage durable_;
    SimStorage volatile_;
    std::vector<Write> pending_;  // bounded by one Ready: the core issues one at a time
};

}  // namespace pgfence::sim
