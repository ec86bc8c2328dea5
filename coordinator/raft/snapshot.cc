// Snapshots, log compaction and InstallSnapshot (thesis §5.1-§5.4).
//
// Invariants: snapshot.meta.index <= applied <= commit (we only snapshot
// applied state, §5.1); log.base_index() <= snapshot.meta.index once the log
// was compacted; a snapshot received from the leader covers only committed
// entries, so installing it never loses a committed entry.
#include <stdexcept>

#include "raft/core.h"

namespace pgfence::raft {

void Raft::Impl::compact(Index index, std::string data, Index keep_entries) {
    if (index > applied) {
        throw std::invalid_argument("Raft::compact: index " + std::to_string(index) +
                                    " is beyond the applied index " + std::to_string(applied));
    }
    if (index <= snapshot.meta.index) return;  // nothing newer than what we hold
    const std::optional<Term> t = log.term(index);
    if (!t) {
        throw std::logic_error("Raft::compact: term of applied index " + std::to_string(index) +
                               " unknown (log starts after " + std::to_string(log.base_index()) +
                               ")");
    }
    snapshot = Snapshot{SnapshotMeta{index, *t, config_at(index)}, std::move(data)};
    compact_configs(index);
    // Keep a tail of entries so slightly lagging followers get entries, not
    // the whole snapshot (etcd's compaction margin).
    const Index drop_to = index > keep_entries ? index - keep_entries : 0;
    log.compact_to(drop_to);
}

void Raft::Impl::send_snapshot(NodeId to, Progress& pr) {
    if (snapshot.empty() || log.term(pr.next - 1)) {
        throw std::logic_error("Raft: follower " + std::to_string(to) + " needs index " +
                               std::to_string(pr.next) + " but no snapshot covers it");
    }
    pr.become_snapshot(snapshot.meta.index);
    send(to, SnapshotRequest{snapshot});
}

void Raft::Impl::handle_snapshot(const Message& m, const SnapshotRequest& req) {
    if (is_leader()) fail_two_leaders(m, "SnapshotRequest");
    heard_from_leader(m.from);
    const SnapshotMeta& meta = req.snapshot.meta;
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
        reset_configs(meta.index, meta.config);
        snapshot = req.snapshot;
        unsent_snapshot = req.snapshot;
        commit = meta.index;
        handed_commit = meta.index;  // the snapshot replaces applying entries up to it
        resp.match_index = meta.index;
    }
    send(m.from, resp);  // in Ready::messages: after the snapshot is durable
}

}  // namespace pgfence::raft
