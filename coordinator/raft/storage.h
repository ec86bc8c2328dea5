// The Raft core's narrow view of durable storage: read once, at start-up.
//
// The core never writes through this interface. It tells the application what
// to persist in each Ready batch (raft.h); the application writes it (in
// memory for tests, to the write-ahead log in coordinator/storage/), and when
// a member restarts, a new core is built from what the Storage then returns.
// Entries that were never persisted are simply absent: that is the crash model.
#pragma once

#include <optional>
#include <vector>

#include "raft/types.h"

namespace pgfence::raft {

class Storage {
public:
    virtual ~Storage() = default;

    // Last persisted hard state; all zero for a new member.
    virtual HardState hard_state() const = 0;

    // Latest persisted snapshot; empty() for none. Entries at or below its
    // index are not required to be present.
    virtual Snapshot snapshot() const = 0;

    // Index of the first stored entry (snapshot().meta.index + 1 when the
    // prefix was compacted; 1 for a fresh log).
    virtual Index first_index() const = 0;

    // Index of the last stored entry; snapshot().meta.index when none is stored
    // after the snapshot (0 for a fresh log).
    virtual Index last_index() const = 0;

    // Entries with indexes in [lo, hi), lo >= first_index(), hi <= last_index()+1.
    // Contiguous and in order.
    virtual std::vector<Entry> entries(Index lo, Index hi) const = 0;
};

// Storage kept in memory: what the simulation and unit tests persist into.
// Writers apply each Ready's persistence part in the order Ready documents.
class MemoryStorage final : public Storage {
public:
    HardState hard_state() const override { return hard_state_; }
    Snapshot snapshot() const override { return snapshot_; }
    Index first_index() const override { return snapshot_.meta.index + 1; }
    Index last_index() const override;
    std::vector<Entry> entries(Index lo, Index hi) const override;

    void set_hard_state(const HardState& hs) { hard_state_ = hs; }

    // Appends `batch` (contiguous); any stored entry with index >= the
    // batch's first index is discarded first (log conflict truncation).
    void append(const std::vector<Entry>& batch);

    // Installs a snapshot: drops every entry at or below its index (and all
    // entries if they conflict with it), keeping a consistent suffix.
    void apply_snapshot(const Snapshot& snap);

    // The application took a snapshot at `snap.meta.index`: keep it and drop
    // the entries it covers.
    void compact(const Snapshot& snap);

private:
    HardState hard_state_;
    Snapshot snapshot_;
    std::vector<Entry> log_;  // entries after snapshot_.meta.index, contiguous
};

}  // namespace pgfence::raft
