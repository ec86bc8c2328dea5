// Elections: timers, PreVote, RequestVote and role changes.
//
// Thesis §3.4 (leader election, randomized timeouts), §3.6.1 (up-to-date
// check), §9.6 (PreVote), §6.2 (CheckQuorum and leader stickiness).
// Safety invariant (Election Safety, Figure 3): at most one leader per term,
// because each member votes at most once per term (vote persisted with term
// before the response is sent: VoteResponse goes in Ready::messages).
#include <algorithm>

#include "raft/core.h"

namespace pgfence::raft {

void Raft::Impl::reset_election_timer() {
    election_elapsed_ticks = 0;
    // §3.4: random in [election_ticks, 2*election_ticks) so split votes are rare.
    randomized_timeout_ticks = rng.in_range(cfg.election_ticks, cfg.election_ticks);
}

// §6.2: we heard from a live leader within the minimum election timeout (or
// we are that leader). Only meaningful with CheckQuorum, which guarantees a
// leader that lost its majority steps down within that time.
bool Raft::Impl::in_lease() const {
    if (!cfg.check_quorum) return false;
    if (is_leader()) return true;
    return known_leader() != kNoNode && election_elapsed_ticks < cfg.election_ticks;
}

void Raft::Impl::tick() {
    if (Leader* l = leader_state()) {
        tick_leader(*l);
    } else {
        tick_election();
    }
}

void Raft::Impl::tick_election() {
    ++election_elapsed_ticks;
    if (election_elapsed_ticks >= randomized_timeout_ticks) {
        if (!is_voter(cfg.id)) {  // learners, removed and joining members never campaign
            reset_election_timer();
            return;
        }
        campaign(cfg.pre_vote ? CampaignKind::kPreVote : CampaignKind::kVote);
    }
}

void Raft::Impl::tick_leader(Leader& l) {
    ++l.heartbeat_elapsed_ticks;
    ++election_elapsed_ticks;
    if (l.transfer_target != kNoNode && ++l.transfer_elapsed_ticks >= cfg.election_ticks) {
        abort_transfer(l);  // §3.10: give up after an election timeout
    }
    tick_membership(l);
    for (auto& [id, pr] : l.progress) {
        // An InstallSnapshot may be lost: retry through probe after a timeout.
        if (pr.state == ReplicationState::kSnapshot &&
            ++pr.snapshot_elapsed_ticks >= cfg.election_ticks) {
            pr.become_probe();
        }
    }
    if (election_elapsed_ticks >= cfg.election_ticks) {
        election_elapsed_ticks = 0;
        if (cfg.check_quorum) {
            // §6.2 CheckQuorum: step down unless a majority of the voters
            // (us included) answered during the last election timeout.
            std::size_t active = is_voter(cfg.id) ? 1 : 0;
            for (auto& [id, pr] : l.progress) {
                if (pr.recently_active && is_voter(id)) ++active;
                pr.active_last_period = pr.recently_active;
                pr.recently_active = false;
            }
            if (active < quorum()) {
                become_follower(term, kNoNode);
                return;
            }
        }
    }
    if (l.heartbeat_elapsed_ticks >= cfg.heartbeat_ticks) {
        l.heartbeat_elapsed_ticks = 0;
        bcast_heartbeat(l);
    }
}

void Raft::Impl::become_follower(Term new_term, NodeId leader) {
    if (Leader* l = leader_state()) drop_reads(*l);  // §6.4: reads need this leadership
    if (new_term != term) {
        term = new_term;
        vote = kNoNode;  // Figure 2: a new term starts with no vote
        receiving = Snapshot{};  // a transfer from an older term's leader never completes
    }
    role = Follower{leader};
    reset_election_timer();
}

// An append, heartbeat or snapshot from this term's leader: follow it and
// restart the election timer (§3.4).
void Raft::Impl::heard_from_leader(NodeId leader) {
    auto* f = std::get_if<Follower>(&role);
    if (f != nullptr && f->leader == leader) {
        election_elapsed_ticks = 0;
    } else {
        become_follower(term, leader);
    }
}

void Raft::Impl::become_pre_candidate() {
    // §9.6: term and vote unchanged; we stop following whoever we followed
    // (and what it was sending us is dropped).
    receiving = Snapshot{};
    role = PreCandidate{Votes{{cfg.id, true}}};
    reset_election_timer();
}

void Raft::Impl::become_candidate(bool transfer) {
    ++term;
    vote = cfg.id;  // Figure 2: vote for self (persisted before requests go out)
    role = Candidate{Votes{{cfg.id, true}}, transfer};
    reset_election_timer();
}

void Raft::Impl::become_leader() {
    role = Leader{};
    Leader& l = std::get<Leader>(role);
    sync_progress(l);  // next = last log index + 1 for each (Figure 2)
    // Members removed by a configuration entry not known committed are told
    // too, once it commits (as if this leader had removed them).
    for (const ConfigMember& m : config_at(commit).members) {
        if (m.id == cfg.id || config().contains(m.id)) continue;
        Progress pr;
        pr.next = log.last_index() + 1;
        pr.removed_at = configs.back().index;
        l.progress.emplace(m.id, pr);
    }
    election_elapsed_ticks = 0;
    // §6.4 / §3.6.2: commit an entry of our own term at once; it also commits
    // every earlier entry and lets ReadIndex start.
    log.append(Entry{term, log.last_index() + 1, EntryType::kNoop, {}});
    maybe_commit();  // a single member commits once it is durable (after advance)
}

namespace {
// Granted and rejected votes of the voters of `config` (a vote from a member
// the configuration in force no longer counts is not counted).
std::pair<std::size_t, std::size_t> tally(const Votes& votes, const Configuration& config) {
    std::size_t granted = 0, rejected = 0;
    for (const auto& [id, g] : votes) {
        if (!config.is_voter(id)) continue;
        (g ? granted : rejected) += 1;
    }
    return {granted, rejected};
}
}  // namespace

void Raft::Impl::campaign(CampaignKind kind) {
    const bool pre = kind == CampaignKind::kPreVote;
    if (pre) {
        become_pre_candidate();
    } else {
        become_candidate(kind == CampaignKind::kTransfer);
    }
    const Term campaign_term = pre ? term + 1 : term;
    if (quorum() == 1) {  // single member: our own vote is a majority
        if (pre) {
            campaign(CampaignKind::kVote);
        } else {
            become_leader();
        }
        return;
    }
    const VoteRequest req{pre, log.last_index(), log.last_term(), kind == CampaignKind::kTransfer};
    for (const ConfigMember& m : config().members) {
        if (m.voter && m.id != cfg.id) send(m.id, req, campaign_term);
    }
}

void Raft::Impl::handle_vote_request(const Message& m, const VoteRequest& req) {
    // Figure 2 RequestVote rule 2 (+ §9.6 for pre-votes): grant if we have not
    // voted for someone else in this term (a pre-vote for a later term is not
    // a vote) and the candidate's log is at least as up-to-date (§3.6.1).
    const bool can_vote = vote == m.from || (vote == kNoNode && known_leader() == kNoNode) ||
                          (req.pre_vote && m.term > term);
    const bool granted = can_vote && log.is_up_to_date(req.last_log_index, req.last_log_term);
    if (granted && !req.pre_vote) {
        vote = m.from;           // persisted before the response leaves (Ready::messages)
        reset_election_timer();  // §3.4: granting a vote resets the election timer
    }
    // A granted pre-vote answers in the term asked about; rejections carry ours.
    send(m.from, VoteResponse{req.pre_vote, granted}, granted ? m.term : term);
}

void Raft::Impl::handle_vote_response(const Message& m, const VoteResponse& resp) {
    Votes* votes = nullptr;
    if (auto* p = std::get_if<PreCandidate>(&role); p != nullptr && resp.pre_vote)
        votes = &p->votes;
    if (auto* c = std::get_if<Candidate>(&role); c != nullptr && !resp.pre_vote) votes = &c->votes;
    if (votes == nullptr) return;  // late answer to an earlier campaign
    votes->emplace(m.from, resp.granted);
    const auto [granted, rejected] = tally(*votes, config());
    if (granted >= quorum()) {
        if (resp.pre_vote) {
            campaign(CampaignKind::kVote);  // §9.6: only now raise the term
        } else {
            become_leader();
        }
    } else if (rejected >= quorum()) {
        become_follower(term, kNoNode);
    }
}

}  // namespace pgfence::raft
