// Snapshots, log compaction and InstallSnapshot (thesis §5.1-§5.4), sent in
// chunks (§5.4.2): a follower assembles them in order, from one leader and
// term, and installs the whole once the last arrives.
//
// Invariants: snapshot.meta.index <= applied <= commit (we only snapshot
// applied state, §5.1); log.base_index() <= snapshot.meta.index once the log
// was compacted; a snapshot received from the leader covers only committed
// entries, so installing it never loses a committed entry.
#include <algorithm>
#include <stdexcept>

#include "raft/core.h"

namespace pgfence::raft {

// The term at `index`, where a snapshot may compact the log; nullopt when
// the snapshot held is as new (nothing to do). Throws for an index beyond
// the applied one, or one whose term the log no longer has.
std::optional<Term> Raft::Impl::compactable(Index index) const {
    if (index > applied) {
        throw std::invalid_argument("Raft::compact: index " + std::to_string(index) +
                                    " is beyond the applied index " + std::to_string(applied));
    }
    if (index <= snapshot->meta.index) return std::nullopt;  // nothing newer than what we hold
    const std::optional<Term> t = log.term(index);
    if (!t) {
        throw std::logic_error("Raft::compact: term of applied index " + std::to_string(index) +
                               " unknown (log starts after " + std::to_string(log.base_index()) +
                               ")");
    }
    return t;
}

void Raft::Impl::compact(Index index, std::string data, Index keep_entries) {
    const std::optional<Term> t = compactable(index);
    if (!t) return;
    const ConfigAt& c = config_entry_at(index);
    compact(std::make_shared<const Snapshot>(Snapshot{SnapshotMeta{index, *t, c.config, c.index}, std::move(data)}),
            keep_entries);
}

void Raft::Impl::compact(std::shared_ptr<const Snapshot> snap, Index keep_entries) {
    const Index index = snap->meta.index;
    const std::optional<Term> t = compactable(index);
    if (!t) return;
    const ConfigAt& c = config_entry_at(index);
    if (snap->meta.term != *t || !(snap->meta.config == c.config) || snap->meta.config_index != c.index) {
        throw std::invalid_argument("Raft::compact: the snapshot at index " + std::to_string(index) +
                                    " has term " + std::to_string(snap->meta.term) + " or configuration index " +
                                    std::to_string(snap->meta.config_index) +
                                    " or a configuration other than the log's there (term " + std::to_string(*t) +
                                    ", configuration index " + std::to_string(c.index) + ")");
    }
    snapshot = std::move(snap);
    compact_configs(index);
    // Keep a tail of entries so slightly lagging followers get entries, not
    // the whole snapshot (etcd's compaction margin), and the entries after a
    // snapshot still being sent, so that its follower goes on by log once it
    // has it — up to max_transfer_log_bytes of them: past that, a transfer
    // slower than the log grows gets a newer snapshot after it instead.
    Index drop_to = index > keep_entries ? index - keep_entries : 0;
    if (const Leader* l = leader_state()) {
        for (const auto& [id, pr] : l->progress) {
            if (pr.state != ReplicationState::kSnapshot || pr.pending_snapshot >= drop_to) continue;
            if (log_bytes_after(pr.pending_snapshot, index) <= cfg.max_transfer_log_bytes) {
                drop_to = pr.pending_snapshot;
            }
        }
    }
    log.compact_to(drop_to);
}

// The data bytes of the entries after `from` up to `to` that the log holds.
std::uint64_t Raft::Impl::log_bytes_after(Index from, Index to) const {
    std::uint64_t bytes = 0;
    for (Index i = std::max(from + 1, log.first_index()); i <= to && i <= log.last_index(); ++i) {
        bytes += log.at(i).data.size();
    }
    return bytes;
}

void Raft::Impl::send_snapshot(NodeId to, Progress& pr) {
    if (snapshot->empty() || log.term(pr.next - 1)) {
        throw std::logic_error("Raft: follower " + std::to_string(to) + " needs index " +
                               std::to_string(pr.next) + " but no snapshot covers it");
    }
    pr.become_snapshot(snapshot);
    send_snapshot_chunks(to, pr);
}

// Chunks from pr.snapshot_sent on, while at most max_inflight_bytes of data
// are un-acked (thesis §5.4.2; pipelined like appends, §10.2.2).
void Raft::Impl::send_snapshot_chunks(NodeId to, Progress& pr) {
    const Snapshot& pinned = *pr.sending;
    const std::uint64_t size = pinned.data.size();
    const std::uint64_t chunk = std::max<std::size_t>(cfg.max_snapshot_chunk_bytes, 1);
    if (size <= chunk) {
        if (pr.snapshot_sent == 0) send(to, SnapshotRequest{pinned, 0, true});
        pr.snapshot_sent = size;
        return;
    }
    while (pr.snapshot_sent < size && pr.snapshot_sent - pr.snapshot_acked < cfg.max_inflight_bytes) {
        const std::uint64_t n = std::min(chunk, size - pr.snapshot_sent);
        send(to, SnapshotRequest{Snapshot{pinned.meta, pinned.data.substr(pr.snapshot_sent, n)},
                                 pr.snapshot_sent, pr.snapshot_sent + n == size});
        pr.snapshot_sent += n;
    }
}

void Raft::Impl::handle_snapshot_ack(const Message& m, const SnapshotAck& ack) {
    if (leader_state() == nullptr) return;
    Progress* found = progress_of(m.from);
    if (found == nullptr) return;
    Progress& pr = *found;
    pr.recently_active = true;  // §6.2
    if (pr.state != ReplicationState::kSnapshot || ack.index != pr.pending_snapshot) return;  // stale
    pr.snapshot_elapsed_ticks = 0;  // it is making progress
    if (ack.rejected || ack.received < pr.snapshot_acked || ack.received > pr.snapshot_sent) {
        // Go on from what it holds: a chunk was lost, or it holds more (or
        // less) of this snapshot than this transfer sent.
        pr.snapshot_sent = std::min<std::uint64_t>(ack.received, pr.sending->data.size());
        pr.snapshot_acked = pr.snapshot_sent;
    } else {
        pr.snapshot_acked = ack.received;
    }
    send_snapshot_chunks(m.from, pr);
}

void Raft::Impl::handle_snapshot(const Message& m, const SnapshotRequest& req) {
    if (is_leader()) fail_two_leaders(m, "SnapshotRequest");
    heard_from_leader(m.from);
    const SnapshotMeta& meta = req.snapshot.meta;
    if ((req.offset == 0 && req.done) || meta.index <= commit) {
        receiving = Snapshot{};
        install_snapshot(m, req.snapshot);  // whole, or one we are past already
        return;
    }
    if (meta.index == refused_snapshot) return;  // unanswered: the leader retries after a timeout
    const bool same = receiving.meta == meta && receiving_from == m.from && receiving_term == m.term;
    if (same && req.offset < receiving.data.size()) {
        // A duplicate, or the start of a transfer the leader began again:
        // nothing new, but a restart learns where to go on from.
        if (req.offset == 0) send(m.from, SnapshotAck{meta.index, receiving.data.size(), true});
        return;
    }
    if (req.offset == 0 || !same) {
        receiving = Snapshot{meta, {}};
        receiving_from = m.from;
        receiving_term = m.term;
        rejected_at = kNotRejected;
    }
    const std::uint64_t have = receiving.data.size();
    if (req.offset != have) {
        // A gap (a chunk before this one was lost): say where to go on from, once.
        if (rejected_at != have) send(m.from, SnapshotAck{meta.index, have, true});
        rejected_at = have;
        return;
    }
    rejected_at = kNotRejected;
    if (have + req.snapshot.data.size() > cfg.max_snapshot_bytes) {
        receiving = Snapshot{};  // larger than this member accepts: it stays behind
        refused_snapshot = meta.index;
        return;
    }
    receiving.data += req.snapshot.data;
    if (!req.done) {
        send(m.from, SnapshotAck{meta.index, receiving.data.size(), false});
        return;
    }
    Snapshot whole = std::move(receiving);
    receiving = Snapshot{};
    install_snapshot(m, std::move(whole));
}

void Raft::Impl::install_snapshot(const Message& m, Snapshot snap) {
    const SnapshotMeta& meta = snap.meta;
    AppendResponse resp;
    resp.success = true;
    if (meta.index <= commit) {
        resp.match_index = commit;  // stale or duplicate: we are already past it
    } else if (log.matches(meta.index, meta.term)) {
        // §5.4.2 rule 6: our log already contains the snapshot's last entry:
        // keep the entries after it; everything up to it is committed.
        commit = meta.index;
        resp.match_index = meta.index;
    } else {
        // Rule 7: discard the whole log and install the snapshot. The caller
        // persists it and restores the state machine from Ready::snapshot.
        log.restore_snapshot(meta.index, meta.term);
        reset_configs(meta);
        commit = meta.index;
        handed_commit = meta.index;  // the snapshot replaces applying entries up to it
        resp.match_index = meta.index;
        snapshot = std::make_shared<const Snapshot>(snap);
        unsent_snapshot = std::move(snap);
    }
    send(m.from, resp);  // in Ready::messages: after the snapshot is durable
}

}  // namespace pgfence::raft
