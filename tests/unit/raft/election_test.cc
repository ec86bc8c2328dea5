// Leader election: Figure 2 RequestVote rules, randomized timeouts (§3.4),
// PreVote (§9.6), CheckQuorum and leader stickiness (§6.2), term rules.
#define BOOST_TEST_MODULE raft_unit_tests
#include <boost/test/unit_test.hpp>
#include <set>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

namespace {

// Ticks a lone follower until it starts campaigning; returns the tick count.
int ticks_until_campaign(std::uint64_t seed) {
    MemoryStorage s;
    Config c = make_config(1, ids(3), seed);
    Raft r(c, s);
    for (int t = 1; t < 1000; ++t) {
        r.tick();
        if (r.role() != Role::kFollower) return t;
    }
    return -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(election)

BOOST_AUTO_TEST_CASE(election_timeout_randomized_within_one_to_two_timeouts) {
    std::set<int> seen;
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        const int t = ticks_until_campaign(seed);
        BOOST_TEST(t >= 10);
        BOOST_TEST(t < 20);
        seen.insert(t);
    }
    BOOST_TEST(seen.size() >= 3u);  // actually random, not a constant
    BOOST_TEST(ticks_until_campaign(7) == ticks_until_campaign(7));  // and deterministic
}

BOOST_AUTO_TEST_CASE(three_member_cluster_elects_one_leader) {
    Cluster c(3);
    BOOST_TEST(c.elect(1));
    int leaders = 0;
    for (NodeId id : ids(3)) {
        leaders += c.raft(id).role() == Role::kLeader ? 1 : 0;
        BOOST_TEST(c.raft(id).leader() == 1u);
        BOOST_TEST(c.raft(id).term() == 1u);
    }
    BOOST_TEST(leaders == 1);
}

BOOST_AUTO_TEST_CASE(single_member_cluster_elects_itself_and_commits_on_own_durability) {
    Cluster c(1);
    c.tick(1, 25);
    BOOST_TEST(c.raft(1).role() == Role::kLeader);
    BOOST_TEST(c.raft(1).status().commit == 0u);  // no-op not durable yet
    c.process_all();
    BOOST_TEST(c.raft(1).status().commit == 1u);
    BOOST_TEST(c.raft(1).propose("x").error == ProposeError::kNone);
    c.process_all();  // persist
    c.process_all();  // apply
    BOOST_TEST(datas(c.member(1).applied) == std::vector<std::string>{"x"});
}

BOOST_AUTO_TEST_CASE(leader_appends_noop_on_election) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(2));
    c.tick_all(1);
    for (NodeId id : ids(3)) {
        const Member& m = c.member(id);
        BOOST_REQUIRE_EQUAL(m.applied.size(), 1u);
        BOOST_TEST((m.applied[0].type == EntryType::kNoop));
        BOOST_TEST(m.applied[0].term == c.raft(2).term());
    }
}

BOOST_AUTO_TEST_CASE(figure2_vote_only_once_per_term) {
    MemoryStorage s;
    Raft r(make_config(1, ids(3)), s);
    r.step(msg(2, 1, 5, VoteRequest{false, 0, 0, false}));
    r.step(msg(3, 1, 5, VoteRequest{false, 0, 0, false}));
    const Ready rd = drain(r, s);
    const auto votes = bodies_of<VoteResponse>(rd.messages);
    BOOST_REQUIRE_EQUAL(votes.size(), 2u);
    BOOST_TEST(votes[0].first.to == 2u);
    BOOST_TEST(votes[0].second.granted);
    BOOST_TEST(votes[1].first.to == 3u);
    BOOST_TEST(!votes[1].second.granted);
    BOOST_REQUIRE(rd.hard_state);
    BOOST_TEST(rd.hard_state->vote == 2u);
    BOOST_TEST(rd.hard_state->term == 5u);
    // The vote survives a restart: a repeated request from 3 is still refused.
    Raft again(make_config(1, ids(3)), s);
    again.step(msg(3, 1, 5, VoteRequest{false, 0, 0, false}));
    const auto later = bodies_of<VoteResponse>(drain(again, s).messages);
    BOOST_REQUIRE_EQUAL(later.size(), 1u);
    BOOST_TEST(!later[0].second.granted);
}

BOOST_AUTO_TEST_CASE(figure2_vote_requires_up_to_date_log) {
    MemoryStorage s;
    s.append(entries_with_terms(1, {1, 2, 2}));
    s.set_hard_state(HardState{2, kNoNode, 0});
    struct Case {
        Index last_index;
        Term last_term;
        bool granted;
    };
    // §3.6.1: later last term wins; equal last term needs an equal or longer log.
    for (const Case& k : {Case{10, 1, false}, Case{2, 2, false}, Case{3, 2, true}, Case{4, 2, true},
                          Case{1, 3, true}}) {
        MemoryStorage copy = s;
        Raft r(make_config(1, ids(3)), copy);
        r.step(msg(2, 1, 3, VoteRequest{false, k.last_index, k.last_term, false}));
        const auto votes = bodies_of<VoteResponse>(drain(r, copy).messages);
        BOOST_REQUIRE_EQUAL(votes.size(), 1u);
        BOOST_TEST(votes[0].second.granted == k.granted,
                   "candidate last (" << k.last_index << "," << k.last_term << ")");
    }
}

BOOST_AUTO_TEST_CASE(vote_response_waits_for_persistence) {
    MemoryStorage s;
    Raft r(make_config(1, ids(3)), s);
    r.step(msg(2, 1, 1, VoteRequest{false, 0, 0, false}));
    const Ready rd = r.ready();
    BOOST_TEST(rd.messages_now.empty());  // votes never go out before the fsync
    BOOST_TEST(bodies_of<VoteResponse>(rd.messages).size() == 1u);
    BOOST_TEST(rd.hard_state.has_value());
    r.advance(rd);
}

BOOST_AUTO_TEST_CASE(higher_term_message_makes_leader_step_down) {
    Cluster c(3, [](Config& cfg) { cfg.check_quorum = false; });
    BOOST_REQUIRE(c.elect(1));
    const Term t = c.raft(1).term();
    c.raft(1).step(msg(3, 1, t + 5, AppendResponse{}));
    BOOST_TEST(c.raft(1).role() == Role::kFollower);
    BOOST_TEST(c.raft(1).term() == t + 5);
}

BOOST_AUTO_TEST_CASE(stale_term_append_rejected_with_current_term) {
    MemoryStorage s;
    s.set_hard_state(HardState{7, kNoNode, 0});
    Raft r(make_config(1, ids(3)), s);
    r.step(msg(2, 1, 3, AppendRequest{0, 0, entries_with_terms(1, {3}), 0}));
    const Ready rd = drain(r, s);
    BOOST_TEST(rd.entries.empty());  // nothing from a stale leader is appended
    const auto resp = bodies_of<AppendResponse>(rd.messages);
    BOOST_REQUIRE_EQUAL(resp.size(), 1u);
    BOOST_TEST(!resp[0].second.success);
    BOOST_TEST(resp[0].first.term == 7u);  // tells the stale leader the newer term
    BOOST_TEST(r.term() == 7u);
}

BOOST_AUTO_TEST_CASE(stale_leader_steps_down_on_rejection_with_higher_term) {
    // Without CheckQuorum the old leader does not notice on its own.
    Cluster c(3, [](Config& cfg) { cfg.check_quorum = false; });
    BOOST_REQUIRE(c.elect(1));
    c.isolate(1);
    BOOST_REQUIRE(c.elect(2));  // 2 and 3 move on (1 cannot hear them)
    const Term t2 = c.raft(2).term();
    c.heal();
    BOOST_REQUIRE(c.raft(1).role() == Role::kLeader);  // 1 still believes it leads
    c.raft(1).propose("old");
    c.deliver_all();
    BOOST_TEST(c.raft(1).role() == Role::kFollower);
    BOOST_TEST(c.raft(1).term() == t2);
}

BOOST_AUTO_TEST_CASE(prevote_does_not_change_terms) {
    Cluster c(3);
    c.tick(1, 25);  // 1 pre-campaigns alone: nobody answers
    BOOST_TEST(c.raft(1).role() == Role::kPreCandidate);
    BOOST_TEST(c.raft(1).term() == 0u);
    const auto reqs = bodies_of<VoteRequest>(c.take([](const Message&) { return true; }));
    c.process_all();
    for (const auto& [m, body] : reqs) {
        BOOST_TEST(body.pre_vote);
        BOOST_TEST(m.term == 1u);  // the term it would campaign in
    }
}

BOOST_AUTO_TEST_CASE(prevote_does_not_disrupt_stable_leader) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    const Term t = c.raft(1).term();
    // 3 stops hearing the leader (one-way cut) and keeps timing out; its
    // pre-votes reach 1 and 2, which have a live leader and refuse.
    c.cut(1, 3);
    for (int i = 0; i < 60; ++i) c.tick_all(1);
    BOOST_TEST(c.raft(1).role() == Role::kLeader);
    BOOST_TEST(c.raft(1).term() == t);
    BOOST_TEST(c.raft(2).term() == t);
    BOOST_TEST(c.raft(3).term() == t);  // never raised its term
}

BOOST_AUTO_TEST_CASE(partitioned_node_rejoining_does_not_raise_term) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    const Term t = c.raft(1).term();
    c.isolate(3);
    for (int i = 0; i < 100; ++i) c.tick_all(1);  // 3 times out again and again
    BOOST_TEST(c.raft(3).term() == t);
    c.heal();
    for (int i = 0; i < 5; ++i) c.tick_all(1);
    BOOST_TEST(c.raft(1).role() == Role::kLeader);
    for (NodeId id : ids(3)) BOOST_TEST(c.raft(id).term() == t);
    BOOST_TEST(c.raft(3).leader() == 1u);
}

BOOST_AUTO_TEST_CASE(without_prevote_partitioned_node_raises_term) {
    // The contrast to the test above: proves that test checks PreVote.
    Cluster c(3, [](Config& cfg) { cfg.pre_vote = false; });
    BOOST_REQUIRE(c.elect(1));
    const Term t = c.raft(1).term();
    c.isolate(3);
    for (int i = 0; i < 100; ++i) c.tick_all(1);
    BOOST_TEST(c.raft(3).term() > t);
}

BOOST_AUTO_TEST_CASE(checkquorum_leader_steps_down_without_majority) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.isolate(1);
    int ticks = 0;
    while (c.raft(1).role() == Role::kLeader && ticks < 100) {
        c.tick(1);
        c.drop_all();
        ++ticks;
    }
    BOOST_TEST(c.raft(1).role() == Role::kFollower);
    BOOST_TEST(ticks <= 2 * 10);  // within two election timeouts (§6.2)
}

BOOST_AUTO_TEST_CASE(checkquorum_leader_with_majority_stays) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.isolate(3);
    for (int i = 0; i < 60; ++i) c.tick_all(1);
    BOOST_TEST(c.raft(1).role() == Role::kLeader);
}

BOOST_AUTO_TEST_CASE(leader_stickiness_ignores_vote_request_within_lease) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    const Term t = c.raft(1).term();
    c.raft(2).step(msg(3, 2, t + 1, VoteRequest{false, 100, t, false}));
    c.process_all();
    BOOST_TEST(c.raft(2).term() == t);
    BOOST_TEST(c.take([](const Message& m) { return m.from == 2; }).empty());  // no answer
    // With `transfer` set (§3.10) the same request is considered and granted.
    c.raft(2).step(msg(3, 2, t + 1, VoteRequest{false, 100, t, true}));
    c.process_all();
    BOOST_TEST(c.raft(2).term() == t + 1);
    const auto votes =
        bodies_of<VoteResponse>(c.take([](const Message& m) { return m.from == 2; }));
    BOOST_REQUIRE_EQUAL(votes.size(), 1u);
    BOOST_TEST(votes[0].second.granted);
}

BOOST_AUTO_TEST_CASE(prevote_request_with_higher_term_does_not_change_receivers_term_or_vote) {
    MemoryStorage s;
    s.set_hard_state(HardState{2, kNoNode, 0});
    Raft r(make_config(1, ids(3)), s);  // no leader known: not in a lease
    r.step(msg(2, 1, 5, VoteRequest{true, 0, 0, false}));
    BOOST_TEST(r.term() == 2u);  // §9.6: a pre-vote changes nobody's term
    BOOST_TEST(r.status().vote == kNoNode);
    const Ready rd = drain(r, s);
    BOOST_TEST(!rd.hard_state.has_value());  // nothing to persist
    const auto votes = bodies_of<VoteResponse>(rd.messages);
    BOOST_REQUIRE_EQUAL(votes.size(), 1u);
    BOOST_TEST(votes[0].second.granted);
    BOOST_TEST(votes[0].second.pre_vote);
    BOOST_TEST(votes[0].first.term == 5u);  // answered in the term asked about
    // No vote was recorded: a real candidate of term 5 still gets ours.
    r.step(msg(3, 1, 5, VoteRequest{false, 0, 0, false}));
    const auto real = bodies_of<VoteResponse>(drain(r, s).messages);
    BOOST_REQUIRE_EQUAL(real.size(), 1u);
    BOOST_TEST(real[0].second.granted);
    BOOST_TEST(s.hard_state().vote == 3u);
}

BOOST_AUTO_TEST_CASE(same_term_leader_messages_to_a_leader_mean_two_leaders) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    const Term t = c.raft(1).term();
    BOOST_CHECK_THROW(c.raft(1).step(msg(2, 1, t, AppendRequest{})), std::logic_error);
    BOOST_CHECK_THROW(c.raft(1).step(msg(2, 1, t, Heartbeat{})), std::logic_error);
    BOOST_CHECK_THROW(
        c.raft(1).step(msg(2, 1, t, SnapshotRequest{Snapshot{SnapshotMeta{1, t, Configuration::of_voters(ids(3))}, ""}})),
        std::logic_error);
}

BOOST_AUTO_TEST_CASE(stale_prevote_request_answered_with_current_term) {
    MemoryStorage s;
    s.set_hard_state(HardState{4, kNoNode, 0});
    Raft r(make_config(1, ids(3)), s);
    r.step(msg(2, 1, 3, VoteRequest{true, 0, 0, false}));
    const auto votes = bodies_of<VoteResponse>(drain(r, s).messages);
    BOOST_REQUIRE_EQUAL(votes.size(), 1u);
    BOOST_TEST(!votes[0].second.granted);
    BOOST_TEST(votes[0].first.term == 4u);
}

BOOST_AUTO_TEST_CASE(cluster_id_mismatch_dropped) {
    MemoryStorage s;
    Raft r(make_config(1, ids(3)), s);
    Message m = msg(2, 1, 9, VoteRequest{false, 0, 0, false});
    m.cluster_id = kClusterId + 1;
    r.step(m);
    BOOST_TEST(r.dropped_messages() == 1u);
    BOOST_TEST(r.term() == 0u);  // not even the term was looked at
    BOOST_TEST(!r.has_ready());
    Message from_nobody = msg(kNoNode, 1, 9, VoteRequest{false, 0, 0, false});  // no sender
    r.step(from_nobody);
    Message misrouted = msg(2, 3, 9, VoteRequest{false, 0, 0, false});  // for someone else
    r.step(misrouted);
    BOOST_TEST(r.dropped_messages() == 3u);
    BOOST_TEST(r.term() == 0u);
}

BOOST_AUTO_TEST_CASE(split_votes_resolve_by_randomized_timeouts) {
    Cluster c(5, {}, {}, 99);
    for (int i = 0; i < 100 && c.leader() == kNoNode; ++i) c.tick_all(1);
    BOOST_TEST(c.leader() != kNoNode);
}

BOOST_AUTO_TEST_SUITE_END()
