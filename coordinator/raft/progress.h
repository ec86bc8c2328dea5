// Progress: the leader's view of one follower's log (etcd's Progress/Inflights).
//
// Figure 2 "volatile state on leaders": next (next index to send) and match
// (highest index known replicated). The state machine on top implements
// pipelining with bounded in-flight data (thesis §10.2.2):
//   probe     - match unknown: one AppendRequest at a time (probe_sent), resent
//               after a heartbeat response; rejections walk `next` back with
//               the follower's hints (fast back-off, thesis §5.3).
//   replicate - match known: `next` advances optimistically as requests go
//               out; at most max_inflight_appends requests / max_inflight_bytes
//               entry bytes are un-acked at once.
//   snapshot  - the entries the follower needs were compacted: an
//               InstallSnapshot is in flight, in chunks (at most
//               max_inflight_bytes of data un-acked); nothing else is sent
//               until it is acked or an election timeout passes without an
//               ack (then back to probe).
// Invariants: match < next; snapshot_acked <= snapshot_sent; inflights only non-empty in replicate state;
// inflight counts and bytes within the configured bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "raft/raft.h"
#include "raft/types.h"

namespace pgfence::raft {

// Un-acked AppendRequests to one follower, oldest first: (last index, bytes).
class Inflights {
public:
    void add(Index last, std::size_t bytes);
    void free_to(Index index);  // acks for everything up to index
    void free_first();
    void reset();
    bool full(std::size_t max_count, std::size_t max_bytes) const;
    std::size_t count() const { return items_.size(); }
    std::size_t bytes() const { return bytes_; }

private:
    struct Item {
        Index last;
        std::size_t bytes;
    };
    std::deque<Item> items_;
    std::size_t bytes_ = 0;
};

struct Progress {
    Index match = 0;
    Index next = 1;
    ReplicationState state = ReplicationState::kProbe;
    bool probe_sent = false;             // probe: an AppendRequest awaits its answer
    Index pending_snapshot = 0;          // snapshot: index of the snapshot sent
    int snapshot_elapsed_ticks = 0;      // snapshot: ticks since it was sent, or last acked
    std::uint64_t snapshot_sent = 0;     // snapshot: data bytes sent in chunks
    std::uint64_t snapshot_acked = 0;    // snapshot: data bytes the follower said it holds
    // snapshot: the one being sent, kept for the whole transfer (a newer
    // compaction does not restart it; compact() keeps the entries after it).
    std::shared_ptr<const Snapshot> sending;
    bool recently_active = false;        // CheckQuorum (§6.2): heard from in this election period
    bool active_last_period = false;     // ... and in the one before (a removal's quorum check)
    std::uint64_t acked_read_round = 0;  // ReadIndex (§6.4): highest heartbeat round acked
    Index sent_commit = 0;               // commit index last sent in an AppendRequest
    Inflights inflights;
    // Learners (raft.h "Membership changes"): the catch-up round under way
    // ends once match >= round_end; it has lasted round_ticks ticks.
    Index round_end = 0;
    int round_ticks = 0;
    bool last_round_fast = false;  // the last finished round took < an election timeout
    // A removed member being told of its removal: the index of the entry
    // that removed it (0: a member); ticks since that entry committed; the
    // heartbeat round that carried a commit index covering it (0: not sent).
    Index removed_at = 0;
    int leaving_ticks = 0;
    std::uint64_t final_round = 0;

    void become_probe();
    void become_replicate();
    void become_snapshot(std::shared_ptr<const Snapshot> snapshot);

    // Success ack up to `index`; false if stale (no new information).
    bool maybe_update(Index index);
    // Rejection of the request whose prev_log_index was `rejected`; `probe_to`
    // is the leader's best guess of the last matching index from the hints.
    // False if the rejection is stale (an older request's answer).
    bool maybe_decrease_to(Index rejected, Index probe_to);
    // Records an AppendRequest that was sent with entries up to `last`.
    void sent_append(Index last, std::size_t bytes, bool had_entries);

    bool paused(std::size_t max_count, std::size_t max_bytes) const;
    // `max_bytes` here is the hard bound: the configured limit plus one
    // request's worth (a request goes out while below the limit).
    std::string check(std::size_t max_count, std::size_t max_bytes) const;
};

}  // namespace pgfence::raft
