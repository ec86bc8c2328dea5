// Log replication: propose, AppendEntries on both sides, and commit.
//
// Thesis §3.5 (log replication, Figure 2 AppendEntries), §3.6.2 / paper
// Figure 8 (commit only by counting current-term entries), §5.3's fast
// back-off, §10.2.1 (leader writes its log in parallel with replication and
// counts itself only once durable; a configuration entry alone waits for that
// write, sendable_last) and §10.2.2 (pipelined, batched appends).
//
// Invariants:
//   Log Matching (Figure 3): an append is accepted only if the entry before it
//   matches (prev_log_index, prev_log_term).
//   Leader Append-Only: a leader never truncates its own log.
//   State Machine Safety: commit never decreases and never exceeds an index
//   that a majority holds durably with a current-term entry at or after it.
#include <algorithm>
#include <stdexcept>

#include "raft/core.h"

namespace pgfence::raft {

ProposeResult Raft::Impl::propose(std::string command) {
    Leader* l = leader_state();
    if (l == nullptr) return {ProposeError::kNotLeader, 0, 0};
    if (l->transfer_target != kNoNode) return {ProposeError::kTransferring, 0, 0};
    if (command.size() > cfg.max_entry_bytes) return {ProposeError::kTooLarge, 0, 0};
    if (l->uncommitted_bytes + command.size() > cfg.max_uncommitted_bytes) {
        return {ProposeError::kBacklog, 0, 0};
    }
    l->uncommitted_bytes += command.size();
    const Index index = log.last_index() + 1;
    log.append(Entry{term, index, EntryType::kNormal, std::move(command)});
    // Sent at the next ready() or take_messages_now(): every proposal until
    // then shares one AppendRequest per follower (batching, §10.2.2).
    return {ProposeError::kNone, index, term};
}

// The last index the leader sends: its last, except that a configuration
// entry leaves only once durable here (with what follows it). Sent in
// parallel with our own write, a crash before the write completes could leave
// it only on members it makes non-voters (removing 2 from {1, 2}: 2 holds the
// removal, 1 lost it and needs 2's vote, which 2, its log being longer,
// refuses, while 2 never campaigns: no leader ever again). Only one
// configuration entry is ever uncommitted, the last (membership.cc).
Index Raft::Impl::sendable_last() const {
    const Index pending = configs.back().index;
    return pending > log.stable() ? pending - 1 : log.last_index();
}

// Sends one AppendRequest (or an InstallSnapshot if the entries it needs were
// compacted). Returns false if nothing was sent.
bool Raft::Impl::maybe_send_append(NodeId to, Progress& pr, bool send_if_empty) {
    if (pr.paused(cfg.max_inflight_appends, cfg.max_inflight_bytes)) return false;
    const Index prev = pr.next - 1;
    const std::optional<Term> prev_term = log.term(prev);
    if (!prev_term) {
        if (pr.removed_at != 0) return false;  // a removed member behind our snapshot: tick_membership forgets it
        send_snapshot(to, pr);  // §5.4.2: the follower is behind our snapshot
        return true;
    }
    AppendRequest req{prev, *prev_term, {}, commit};
    if (const Index sendable = sendable_last(); pr.next <= sendable) {
        req.entries = log.slice(pr.next, sendable + 1, cfg.max_append_bytes);
    }
    if (req.entries.empty() && !send_if_empty) return false;
    std::size_t bytes = 0;
    for (const Entry& e : req.entries) bytes += e.data.size();
    const Index last = req.entries.empty() ? prev : req.entries.back().index;
    pr.sent_append(last, bytes, !req.entries.empty());
    pr.sent_commit = commit;
    send(to, std::move(req));
    return true;
}

// Would flush_appends() send anything? Exactly what maybe_send_append()
// would: has_ready() must neither miss a message nor promise one that is
// never sent (the shell runs another turn while it is true).
bool Raft::Impl::wants_flush(const Leader& l) const {
    if (!l.reads_unsent.empty()) return true;
    for (const auto& [id, pr] : l.progress) {
        if (pr.paused(cfg.max_inflight_appends, cfg.max_inflight_bytes)) continue;
        if (!log.term(pr.next - 1)) {
            if (pr.removed_at == 0) return true;  // needs a snapshot (a removed member gets none)
            continue;
        }
        if (pr.next <= sendable_last() || pr.sent_commit < commit) return true;
    }
    return false;
}

// At ready() and take_messages_now(): send every follower what it lacks, as far as its state allows
// (probe: one request; replicate: until the in-flight bounds), then the
// commit index to followers that are up to date but have not seen it.
void Raft::Impl::flush_appends(Leader& l) {
    for (auto& [id, pr] : l.progress) {
        for (std::size_t n = 0; n <= cfg.max_inflight_appends; ++n) {
            if (!maybe_send_append(id, pr, false)) break;
            if (pr.state != ReplicationState::kReplicate) break;
        }
        if (pr.sent_commit < commit) maybe_send_append(id, pr, true);
    }
    if (!l.reads_unsent.empty()) start_read_round(l);
}

void Raft::Impl::handle_append(const Message& m, const AppendRequest& req) {
    if (is_leader()) fail_two_leaders(m, "AppendRequest");
    heard_from_leader(m.from);  // candidates of this term give way (Figure 2)
    receiving = Snapshot{};     // the leader replicates by log again: a transfer it began is over
    AppendResponse resp;
    if (req.prev_log_index < commit) {
        // Everything up to commit is already known to match: say so (etcd).
        resp.success = true;
        resp.match_index = commit;
        send(m.from, resp);
        return;
    }
    if (!log.matches(req.prev_log_index, req.prev_log_term)) {
        // Figure 2 rule 2: reject; §5.3 hint: the last index whose term could
        // still match (term <= prev_log_term), so the leader skips a term at a time.
        resp.reject_index = req.prev_log_index;
        const auto [hint, hint_term] = log.find_conflict_by_term(
            std::min(req.prev_log_index, log.last_index()), req.prev_log_term);
        resp.reject_hint = hint;
        resp.hint_term = hint_term;
        send(m.from, resp);
        return;
    }
    log.append_from_leader(req.entries, commit);  // rules 3-4
    if (!req.entries.empty()) rebuild_configs_from(req.prev_log_index + 1);  // §4.1: in force once appended
    const Index last_new = req.prev_log_index + req.entries.size();
    // Rule 5: commit = min(leader_commit, index of last new entry) — not our
    // last index, which may hold an unverified stale suffix.
    const Index new_commit = std::min(req.leader_commit, last_new);
    if (new_commit > commit) commit = new_commit;
    resp.success = true;
    resp.match_index = last_new;
    send(m.from, resp);  // in Ready::messages: leaves only once the entries are durable
}

void Raft::Impl::handle_append_response(const Message& m, const AppendResponse& resp) {
    Leader* l = leader_state();
    if (l == nullptr) return;
    Progress* found = progress_of(m.from);
    if (found == nullptr) return;  // not replicated to (removed and forgotten, or a stranger)
    Progress& pr = *found;
    pr.recently_active = true;  // §6.2
    if (!resp.success) {
        Index probe_to = resp.reject_hint;
        if (resp.hint_term > 0) {
            probe_to = log.find_conflict_by_term(resp.reject_hint, resp.hint_term).first;
        }
        if (pr.maybe_decrease_to(resp.reject_index, probe_to) &&
            pr.state == ReplicationState::kReplicate) {
            pr.become_probe();
        }
        return;
    }
    if (!pr.maybe_update(resp.match_index)) {
        if (pr.state == ReplicationState::kReplicate) pr.inflights.free_to(resp.match_index);
        return;
    }
    switch (pr.state) {
        case ReplicationState::kProbe:
            pr.become_replicate();
            break;
        case ReplicationState::kSnapshot:
            if (pr.match >= pr.pending_snapshot) {
                pr.become_probe();
                pr.become_replicate();
            }
            break;
        case ReplicationState::kReplicate:
            pr.inflights.free_to(pr.match);
            break;
    }
    on_ack(pr, m.from);
    maybe_commit();
    if (l->transfer_target == m.from) maybe_send_timeout_now(*l, m.from);
}

// Figure 2 "rules for leaders" last bullet with §3.6.2: the largest N held by
// a majority (our own log counted only up to its durable index, §10.2.1) with
// log[N].term == currentTerm. Earlier-term entries commit only indirectly.
bool Raft::Impl::maybe_commit() {
    const Leader* l = leader_state();
    if (l == nullptr) return false;
    std::vector<Index> matches;  // of the voters
    matches.reserve(l->progress.size() + 1);
    if (is_voter(cfg.id)) matches.push_back(log.stable());
    for (const auto& [id, pr] : l->progress) {
        if (is_voter(id)) matches.push_back(pr.match);
    }
    if (matches.size() < quorum()) return false;
    std::sort(matches.begin(), matches.end(), std::greater<>());
    const Index n = matches[quorum() - 1];
    if (n <= commit || log.term(n) != term) return false;
    const Index old = commit;
    commit = n;
    on_commit_advanced(old);
    return true;
}

void Raft::Impl::on_commit_advanced(Index old_commit) {
    Leader* l = leader_state();
    if (l == nullptr) return;
    for (Index i = old_commit + 1; i <= commit; ++i) {
        const std::size_t size = log.at(i).data.size();
        if (log.at(i).term == term) l->uncommitted_bytes -= std::min(size, l->uncommitted_bytes);
    }
    // §6.4 step 1: reads wait until an entry of this term is committed.
    if (!l->reads_waiting_commit.empty() && log.term(commit) == term) {
        for (std::uint64_t ctx : l->reads_waiting_commit) {
            l->reads_unsent.push_back(PendingRead{ctx, commit, 0});
        }
        l->reads_waiting_commit.clear();
    }
}

}  // namespace pgfence::raft
