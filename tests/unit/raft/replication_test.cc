// Log replication and commit: Figure 2 AppendEntries rules, Figure 8 /
// §3.6.2, §10.2.1 (leader's own durability), fast back-off (§5.3),
// pipelining and batching (§10.2.2).
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

namespace {

// A follower (id 1 of 3) whose storage holds entries with `terms`.
struct LoneFollower {
    MemoryStorage s;
    std::unique_ptr<Raft> r;
    explicit LoneFollower(const std::vector<Term>& terms, Term term, Index commit = 0) {
        s.append(entries_with_terms(1, terms));
        s.set_hard_state(HardState{term, kNoNode, commit});
        r = std::make_unique<Raft>(make_config(1, ids(3)), s);
    }
    AppendResponse append(Term term, Index prev, Term prev_term, std::vector<Entry> entries,
                          Index leader_commit) {
        r->step(msg(2, 1, term, AppendRequest{prev, prev_term, std::move(entries), leader_commit}));
        const auto resp = bodies_of<AppendResponse>(drain(*r, s).messages);
        BOOST_REQUIRE_EQUAL(resp.size(), 1u);
        return resp[0].second;
    }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(replication)

BOOST_AUTO_TEST_CASE(replication_commits_and_applies_on_all_members) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    for (int i = 0; i < 5; ++i)
        BOOST_TEST(c.raft(1).propose("cmd" + std::to_string(i)).error == ProposeError::kNone);
    c.deliver_all();
    c.tick_all(1);  // heartbeat carries the final commit index to followers
    const std::vector<std::string> want{"cmd0", "cmd1", "cmd2", "cmd3", "cmd4"};
    for (NodeId id : ids(3)) BOOST_TEST(datas(c.member(id).applied) == want, "member " << id);
}

BOOST_AUTO_TEST_CASE(propose_refused_when_not_leader_too_large_or_backlogged) {
    Cluster c(3, [](Config& cfg) {
        cfg.max_entry_bytes = 10;
        cfg.max_uncommitted_bytes = 25;
    });
    BOOST_TEST(c.raft(2).propose("x").error == ProposeError::kNotLeader);
    BOOST_REQUIRE(c.elect(1));
    BOOST_TEST(c.raft(1).propose(std::string(11, 'a')).error == ProposeError::kTooLarge);
    c.isolate(1);  // nothing commits
    BOOST_TEST(c.raft(1).propose(std::string(10, 'a')).error == ProposeError::kNone);
    BOOST_TEST(c.raft(1).propose(std::string(10, 'b')).error == ProposeError::kNone);
    BOOST_TEST(c.raft(1).propose(std::string(10, 'c')).error == ProposeError::kBacklog);
    c.heal();
    c.deliver_all();
    BOOST_TEST(c.raft(1).propose(std::string(10, 'c')).error == ProposeError::kNone);
}

BOOST_AUTO_TEST_CASE(figure2_reject_append_with_mismatching_prev) {
    LoneFollower f({1, 1, 2}, 2);
    // prev (3, term 3) does not match our (3, term 2): rule 2, reject.
    const AppendResponse resp = f.append(3, 3, 3, entries_with_terms(4, {3}), 0);
    BOOST_TEST(!resp.success);
    BOOST_TEST(resp.reject_index == 3u);
    BOOST_TEST(f.r->status().last_index == 3u);  // nothing appended
    // prev beyond our log: reject too, hint at our last index.
    const AppendResponse far = f.append(3, 7, 3, entries_with_terms(8, {3}), 0);
    BOOST_TEST(!far.success);
    BOOST_TEST(far.reject_hint <= 3u);
}

BOOST_AUTO_TEST_CASE(figure2_truncate_conflicting_suffix) {
    LoneFollower f({1, 1, 2, 2, 2}, 2);
    const AppendResponse resp = f.append(3, 2, 1, entries_with_terms(3, {3, 3}), 0);
    BOOST_TEST(resp.success);
    BOOST_TEST(resp.match_index == 4u);
    BOOST_TEST(f.r->status().last_index == 4u);  // index 5 (term 2) was deleted
    BOOST_TEST(f.s.last_index() == 4u);          // and so was the persisted copy
    BOOST_TEST(f.s.entries(3, 5)[0].term == 3u);
}

BOOST_AUTO_TEST_CASE(figure2_matching_entries_do_not_truncate) {
    LoneFollower f({1, 1, 1, 1}, 1);
    // A delayed, shorter append whose entries we already have must not cut
    // the log (rule 3 truncates only on a conflict).
    const AppendResponse resp = f.append(1, 0, 0, entries_with_terms(1, {1, 1}), 0);
    BOOST_TEST(resp.success);
    BOOST_TEST(resp.match_index == 2u);
    BOOST_TEST(f.r->status().last_index == 4u);
}

BOOST_AUTO_TEST_CASE(figure2_reordered_append_does_not_shorten_log_or_roll_back_commit) {
    LoneFollower f({}, 1);
    BOOST_TEST(f.append(1, 0, 0, entries_with_terms(1, {1, 1, 1, 1}), 3).success);
    BOOST_REQUIRE_EQUAL(f.r->status().commit, 3u);
    // An older, shorter append of the same leader arrives late (reordered).
    const AppendResponse late = f.append(1, 0, 0, entries_with_terms(1, {1}), 1);
    BOOST_TEST(late.success);
    BOOST_TEST(f.r->status().last_index == 4u);  // matching entries are never truncated
    BOOST_TEST(f.r->status().commit == 3u);      // commit never decreases
    // One starting below our commit: answered with the commit, nothing cut.
    const AppendResponse below = f.append(1, 2, 1, entries_with_terms(3, {1}), 0);
    BOOST_TEST(below.success);
    BOOST_TEST(below.match_index == 3u);
    BOOST_TEST(f.r->status().last_index == 4u);
    BOOST_TEST(f.r->status().commit == 3u);
    BOOST_TEST(f.r->check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(figure2_commit_capped_at_last_new_entry) {
    LoneFollower f({1, 1, 1, 1, 1}, 1);  // indexes 3..5 might be a stale suffix
    f.append(1, 1, 1, entries_with_terms(2, {1}), 5);
    BOOST_TEST(f.r->status().commit == 2u);  // rule 5: min(leader_commit, last new)
}

BOOST_AUTO_TEST_CASE(figure8_leader_does_not_commit_previous_term_entry_by_counting) {
    // Figure 8 (c): leader of term 4 holds an uncommitted entry from term 2 at
    // index 2. Even once a majority stores it, it must not be committed by
    // counting; only when the term-4 no-op reaches a majority does it commit.
    MemoryStorage s;
    s.append(entries_with_terms(1, {1, 2}));
    s.set_hard_state(HardState{3, kNoNode, 1});
    Config cfg = make_config(1, ids(5));
    cfg.pre_vote = false;
    Raft r(cfg, s);
    for (int i = 0; i < 25 && r.role() != Role::kCandidate; ++i) r.tick();
    drain(r, s);
    r.step(msg(2, 1, 4, VoteResponse{false, true}));
    r.step(msg(3, 1, 4, VoteResponse{false, true}));
    BOOST_REQUIRE(r.role() == Role::kLeader);
    BOOST_REQUIRE_EQUAL(r.term(), 4u);
    drain(r, s);  // no-op (index 3, term 4) durable on the leader
    r.step(msg(2, 1, 4, AppendResponse{true, 2, 0, 0, 0}));
    r.step(msg(3, 1, 4, AppendResponse{true, 2, 0, 0, 0}));
    BOOST_TEST(r.status().commit == 1u);  // 3 of 5 hold index 2, still not committed
    BOOST_TEST(r.check_invariants() == "");
    r.step(msg(2, 1, 4, AppendResponse{true, 3, 0, 0, 0}));
    BOOST_TEST(r.status().commit == 1u);  // 2 of 5 hold index 3
    r.step(msg(3, 1, 4, AppendResponse{true, 3, 0, 0, 0}));
    BOOST_TEST(r.status().commit == 3u);  // the term-4 entry commits, and index 2 with it
}

BOOST_AUTO_TEST_CASE(leader_counts_itself_only_after_its_log_is_durable) {
    // §10.2.1: with 3 members, one follower ack plus the leader's own copy is
    // a majority — but only once the leader's write is done.
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.member(1).persist = false;  // leader's disk is slow
    c.raft(1).propose("a");
    c.process(1);  // appends go out at once (messages_now)
    BOOST_TEST(c.net().size() == 2u);
    c.member(3).persist = false;                  // 3 never persists either
    c.deliver_all();                              // only 2 acks
    BOOST_TEST(c.raft(1).status().commit == 1u);  // just the no-op
    c.member(1).persist = true;
    c.process(1);  // leader's write done -> advance
    BOOST_TEST(c.raft(1).status().commit == 2u);
}

BOOST_AUTO_TEST_CASE(committed_contains_only_locally_durable_entries) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.member(2).persist = false;  // 2's disk stalls
    c.raft(1).propose("a");
    c.deliver_all();
    c.tick_all(1);  // 1 and 3 commit "a"; heartbeat tells 2
    BOOST_TEST(datas(c.member(1).applied) == std::vector<std::string>{"a"});
    BOOST_TEST(datas(c.member(2).applied).empty());  // commit known, entry not durable
    c.member(2).persist = true;
    c.tick_all(1);
    BOOST_TEST(datas(c.member(2).applied) == std::vector<std::string>{"a"});
}

BOOST_AUTO_TEST_CASE(leader_sends_appends_now_and_acks_after_persistence) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.raft(1).propose("a");
    Ready rd = c.raft(1).ready();
    BOOST_TEST(bodies_of<AppendRequest>(rd.messages_now).size() == 2u);
    BOOST_TEST(rd.messages.empty());
    c.raft(1).advance(rd);
    const Message append = bodies_of<AppendRequest>(rd.messages_now)[0].first;
    c.raft(append.to).step(append);
    Ready frd = c.raft(append.to).ready();
    BOOST_TEST(frd.messages_now.empty());
    BOOST_TEST(bodies_of<AppendResponse>(frd.messages).size() == 1u);
    BOOST_TEST(frd.entries.size() == 1u);  // the ack rides with the entries it acknowledges
    c.raft(append.to).advance(frd);
}

BOOST_AUTO_TEST_CASE(fast_backoff_skips_a_whole_conflicting_term_per_round_trip) {
    // Leader: [1:t1, 2..11: t3]; follower 2: [1:t1, 2..11: t2]. Without hints
    // the leader would walk back one index per round trip (10 rejections).
    const std::vector<Term> leader_terms{1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3};
    const std::vector<Term> stale_terms{1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
    Cluster c(
        3, [](Config& cfg) { cfg.check_quorum = false; },
        [&](NodeId id, MemoryStorage& s) {
            s.append(entries_with_terms(1, id == 2 ? stale_terms : leader_terms));
            s.set_hard_state(HardState{3, kNoNode, 1});
        });
    c.isolate(2);
    BOOST_REQUIRE(c.elect(1));
    c.heal();
    int rejections = 0;
    for (int round = 0; round < 5; ++round) {
        c.tick(1);  // heartbeat -> 2 answers -> leader probes 2
        for (int i = 0; i < 200; ++i) {
            c.process_all();
            if (c.net().empty()) break;
            const Message& m = c.net().front();
            const auto* r = std::get_if<AppendResponse>(&m.body);
            if (r != nullptr && m.from == 2 && !r->success) ++rejections;
            c.deliver_one();
        }
    }
    BOOST_TEST(rejections >= 1);
    BOOST_TEST(rejections <= 2);
    BOOST_TEST(c.raft(1).status().peers.at(0).match == c.raft(1).status().last_index);
    BOOST_TEST(c.member(2).storage.entries(2, 3)[0].term == 3u);  // conflict overwritten
}

BOOST_AUTO_TEST_CASE(fast_backoff_hint_points_below_a_longer_stale_log) {
    // Follower far behind: its hint is its last index, not the leader's prev.
    LoneFollower f({1, 1}, 1);
    const AppendResponse resp = f.append(2, 20, 2, {}, 0);
    BOOST_TEST(!resp.success);
    BOOST_TEST(resp.reject_hint == 2u);
    BOOST_TEST(resp.hint_term == 1u);
}

BOOST_AUTO_TEST_CASE(pipelining_bounded_inflight) {
    Cluster c(3, [](Config& cfg) { cfg.max_inflight_appends = 3; });
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);  // followers in replicate state
    for (const PeerStatus& p : c.raft(1).status().peers) {
        BOOST_TEST(p.state == ReplicationState::kReplicate);
    }
    std::size_t appends_to_2 = 0;
    for (int i = 0; i < 10; ++i) {
        c.raft(1).propose("e" + std::to_string(i));
        c.process(1);  // each ready() sends what the window allows; no acks delivered
        for (const PeerStatus& p : c.raft(1).status().peers) BOOST_TEST(p.inflight_appends <= 3u);
    }
    for (const Message& m : c.net())
        appends_to_2 += (m.to == 2 && std::holds_alternative<AppendRequest>(m.body)) ? 1 : 0;
    BOOST_TEST(appends_to_2 == 3u);  // several in flight at once, but no more than the bound
    c.deliver_all();
    c.tick_all(2);
    BOOST_TEST(datas(c.member(2).applied).size() == 10u);
}

BOOST_AUTO_TEST_CASE(pipelining_bounded_inflight_bytes) {
    Cluster c(3, [](Config& cfg) {
        cfg.max_inflight_bytes = 100;
        cfg.max_append_bytes = 40;
    });
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    for (int i = 0; i < 10; ++i) c.raft(1).propose(std::string(30, 'x'));
    c.process(1);
    std::size_t bytes_to_2 = 0;
    for (const auto& [m, a] : bodies_of<AppendRequest>({c.net().begin(), c.net().end()})) {
        if (m.to != 2) continue;
        BOOST_TEST(a.entries.size() == 1u);  // 40-byte cap: one 30-byte entry per request
        for (const Entry& e : a.entries) bytes_to_2 += e.data.size();
    }
    BOOST_TEST(bytes_to_2 >= 100u);
    BOOST_TEST(bytes_to_2 < 100u + 40u);
    c.deliver_all();
    c.tick_all(2);
    BOOST_TEST(datas(c.member(3).applied).size() == 10u);
}

BOOST_AUTO_TEST_CASE(proposals_between_readies_are_batched_into_one_append) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    for (int i = 0; i < 20; ++i) c.raft(1).propose("b" + std::to_string(i));
    c.process(1);
    const auto appends = bodies_of<AppendRequest>({c.net().begin(), c.net().end()});
    BOOST_REQUIRE_EQUAL(appends.size(), 2u);  // one per follower
    BOOST_TEST(appends[0].second.entries.size() == 20u);
}

BOOST_AUTO_TEST_CASE(lost_appends_are_recovered_by_heartbeats) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.raft(1).propose("lost");
    c.process(1);
    c.take([](const Message& m) { return m.to == 3; });  // the append to 3 is lost
    c.deliver_all();
    for (int i = 0; i < 3; ++i) c.tick_all(1);
    BOOST_TEST(datas(c.member(3).applied) == std::vector<std::string>{"lost"});
}

BOOST_AUTO_TEST_CASE(heartbeat_commit_capped_at_follower_match) {
    // A follower whose log holds an unverified stale suffix must not commit
    // it from a heartbeat: the leader caps the heartbeat's commit at match.
    Cluster c(
        3, [](Config& cfg) { cfg.check_quorum = false; },
        [](NodeId id, MemoryStorage& s) {
            if (id == 3) {
                s.append(entries_with_terms(1, {1, 1, 1}));
                s.set_hard_state(HardState{1, kNoNode, 0});
            }
        });
    c.isolate(3);
    BOOST_REQUIRE(c.elect(1));
    for (int i = 0; i < 5; ++i) c.raft(1).propose("p");
    c.deliver_all();
    c.tick_all(1);
    BOOST_REQUIRE(c.raft(1).status().commit >= 3u);
    c.heal();
    c.tick(1);  // heartbeat to 3 while its match is still 0
    const auto hb = c.intercept(
        [](const Message& m) { return m.to == 3 && std::holds_alternative<Heartbeat>(m.body); });
    BOOST_REQUIRE(hb.has_value());
    BOOST_TEST(std::get<Heartbeat>(hb->body).commit == 0u);
    c.raft(3).step(*hb);
    BOOST_TEST(c.raft(3).status().commit == 0u);  // its stale entries stay uncommitted
}

BOOST_AUTO_TEST_CASE(replication_state_probe_then_replicate_then_probe_on_reject) {
    Cluster c(3);
    c.tick(1, 25);  // 1 campaigns; stop at the first append (the no-op)
    const auto noop =
        c.intercept([](const Message& m) { return std::holds_alternative<AppendRequest>(m.body); });
    BOOST_REQUIRE(noop.has_value());
    BOOST_REQUIRE(c.raft(1).role() == Role::kLeader);
    // Right after the election the followers' match is unknown: probe.
    BOOST_TEST(c.raft(1).status().peers.at(0).state == ReplicationState::kProbe);
    c.net().push_front(*noop);
    c.deliver_all();
    BOOST_TEST(c.raft(1).status().peers.at(0).state == ReplicationState::kReplicate);
    // Two pipelined appends to 2 ...
    c.raft(1).propose("b");
    c.process(1);
    c.raft(1).propose("c");
    c.process(1);
    const Status st = c.raft(1).status();
    BOOST_REQUIRE_EQUAL(st.peers.at(0).inflight_appends, 2u);
    // ... a stale rejection (prev at or below match) is ignored ...
    AppendResponse reject;
    reject.reject_index = st.peers.at(0).match;
    reject.reject_hint = 1;
    reject.hint_term = 1;
    c.raft(1).step(msg(2, 1, st.term, reject));
    BOOST_TEST(c.raft(1).status().peers.at(0).state == ReplicationState::kReplicate);
    // ... but a rejection of the second append sends 2 back to probe at match+1.
    reject.reject_index = st.peers.at(0).match + 1;
    c.raft(1).step(msg(2, 1, st.term, reject));
    BOOST_TEST(c.raft(1).status().peers.at(0).state == ReplicationState::kProbe);
    BOOST_TEST(c.raft(1).status().peers.at(0).next == st.peers.at(0).match + 1);
    BOOST_TEST(c.raft(1).status().peers.at(0).inflight_appends == 0u);
    c.deliver_all();
    c.tick_all(2);
    BOOST_TEST(datas(c.member(2).applied) == (std::vector<std::string>{"b", "c"}));
}

BOOST_AUTO_TEST_SUITE_END()
