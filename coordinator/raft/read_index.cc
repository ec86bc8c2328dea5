// Heartbeats and ReadIndex (thesis §6.4).
//
// A read is safe at index R if, after R was the leader's commit index, a
// majority confirmed this member was still leader. Steps (§6.4):
//   1. the leader must have committed an entry of its current term (so its
//      commit index is at least every earlier leader's): reads wait for it;
//   2. R = commit index when the read arrives;
//   3. a heartbeat round started after the read arrived must be acked by a
//      majority (rounds are numbered; a follower echoes the round);
//   4. the caller serves the read once applied >= R (Ready::reads).
// Reads are dropped (Ready::dropped_reads) when leadership is lost or a
// transfer starts: they can no longer be confirmed.
// Invariant: read rounds are strictly increasing for this Raft object; a
// response at our current term echoes a round we sent in this leadership.
#include <algorithm>

#include "raft/core.h"

namespace pgfence::raft {

bool Raft::Impl::read_index(std::uint64_t context) {
    Leader* l = leader_state();
    if (l == nullptr || l->transfer_target != kNoNode) return false;
    if (l->pending_reads() >= kMaxPendingReads) return false;
    if (log.term(commit) != term) {
        l->reads_waiting_commit.push_back(context);  // step 1
    } else {
        l->reads_unsent.push_back(PendingRead{context, commit, 0});
    }
    return true;
}

// Starts one heartbeat round for all reads that arrived since the last one
// (many reads share one round trip).
void Raft::Impl::start_read_round(Leader& l) {
    const std::uint64_t round = ++read_round;
    for (PendingRead& r : l.reads_unsent) {
        r.round = round;
        l.reads_inflight.push_back(r);
    }
    l.reads_unsent.clear();
    if (quorum() == 1) {
        release_reads(l);
        return;
    }
    l.heartbeat_elapsed_ticks = 0;
    bcast_heartbeat(l);
}

void Raft::Impl::bcast_heartbeat(Leader& l) {
    heartbeat_round_for_leaving(l);
    for (auto& [id, pr] : l.progress) {
        // The commit index is capped at what the follower is known to hold:
        // its log beyond match may still be an unverified stale suffix.
        send(id, Heartbeat{std::min(pr.match, commit), read_round});
    }
}

void Raft::Impl::handle_heartbeat(const Message& m, const Heartbeat& hb) {
    if (is_leader()) fail_two_leaders(m, "Heartbeat");
    heard_from_leader(m.from);
    const Index new_commit = std::min(hb.commit, log.last_index());
    if (new_commit > commit) commit = new_commit;
    send(m.from, HeartbeatResponse{hb.read_round});
}

void Raft::Impl::handle_heartbeat_response(const Message& m, const HeartbeatResponse& resp) {
    Leader* l = leader_state();
    if (l == nullptr) return;
    Progress* found = progress_of(m.from);
    if (found == nullptr) return;  // not replicated to (removed and forgotten, or a stranger)
    Progress& pr = *found;
    pr.recently_active = true;  // §6.2
    pr.acked_read_round = std::max(pr.acked_read_round, resp.read_round);
    if (told_of_removal(pr, resp.read_round)) {
        l->progress.erase(m.from);  // it knows: nothing more to tell it
        return;
    }
    on_ack(pr, m.from);
    if (pr.state == ReplicationState::kProbe) pr.probe_sent = false;  // retry a lost probe
    if (pr.state == ReplicationState::kReplicate &&
        pr.inflights.full(cfg.max_inflight_appends, cfg.max_inflight_bytes)) {
        pr.inflights.free_first();  // an ack may have been lost: let one more through
    }
    // A follower behind our log (a lost append, or a restart) gets an append
    // now; if even that is stale it answers with a rejection and we probe.
    if (pr.match < log.last_index() && pr.state != ReplicationState::kSnapshot) {
        maybe_send_append(m.from, pr, true);
    }
    release_reads(*l);
}

// Confirms, in order, the reads whose round a majority (us included) acked.
void Raft::Impl::release_reads(Leader& l) {
    while (!l.reads_inflight.empty()) {
        const PendingRead& r = l.reads_inflight.front();
        std::size_t acks = is_voter(cfg.id) ? 1 : 0;  // voters only
        for (const auto& [id, pr] : l.progress) acks += is_voter(id) && pr.acked_read_round >= r.round ? 1 : 0;
        if (acks < quorum()) break;
        reads_out.push_back(ReadState{r.context, r.index});
        l.reads_inflight.pop_front();
    }
}

void Raft::Impl::drop_reads(Leader& l) {
    dropped_reads_out.insert(dropped_reads_out.end(), l.reads_waiting_commit.begin(),
                             l.reads_waiting_commit.end());
    for (const PendingRead& r : l.reads_unsent) dropped_reads_out.push_back(r.context);
    for (const PendingRead& r : l.reads_inflight) dropped_reads_out.push_back(r.context);
    l.reads_waiting_commit.clear();
    l.reads_unsent.clear();
    l.reads_inflight.clear();
}

}  // namespace pgfence::raft
