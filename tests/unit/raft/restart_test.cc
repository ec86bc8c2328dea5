// Crash/restart: the core rebuilt from Storage (hard state, snapshot, entries)
// continues correctly, whatever had not been persisted is simply gone
// (Figure 2 "persistent state"; thesis §3.8 / §11 on persistence).
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

BOOST_AUTO_TEST_SUITE(restart)

BOOST_AUTO_TEST_CASE(restart_from_storage_keeps_term_vote_and_log) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    for (int i = 0; i < 3; ++i) c.raft(1).propose("r" + std::to_string(i));
    c.deliver_all();
    c.tick_all(1);
    const Status before = c.raft(2).status();
    c.restart(2);
    const Status after = c.raft(2).status();
    BOOST_TEST(after.term == before.term);
    BOOST_TEST(after.vote == before.vote);
    BOOST_TEST(after.last_index == before.last_index);
    BOOST_TEST(after.commit == before.commit);
    BOOST_TEST(after.role == Role::kFollower);
}

BOOST_AUTO_TEST_CASE(restart_from_storage_reapplies_committed_entries) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    for (int i = 0; i < 3; ++i) c.raft(1).propose("r" + std::to_string(i));
    c.deliver_all();
    c.tick_all(1);
    const std::vector<Entry> before = c.member(3).applied;
    c.restart(3);
    BOOST_TEST(c.raft(3).status().applied == 0u);
    c.process_all();  // the durable commit index lets it re-apply without the leader
    BOOST_TEST(c.member(3).applied == before);
}

BOOST_AUTO_TEST_CASE(restart_from_storage_follower_crash_before_persist_loses_unacked_entries) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.member(2).persist = false;
    c.raft(1).propose("x");
    c.deliver_all();  // 2 appended in memory; its ack waits for the write
    const Index match_2 = c.raft(1).status().peers.at(0).match;
    c.restart(2);  // crash: the unwritten entry and the ack are gone
    BOOST_TEST(c.member(2).storage.last_index() < c.raft(1).status().last_index);
    BOOST_TEST(c.raft(1).status().peers.at(0).match == match_2);  // never counted
    for (int i = 0; i < 3; ++i) c.tick_all(1);
    BOOST_TEST(datas(c.member(2).applied) == std::vector<std::string>{"x"});
}

BOOST_AUTO_TEST_CASE(restart_from_storage_leader_crash_loses_only_uncommitted_entries) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.raft(1).propose("committed");
    c.deliver_all();
    c.tick_all(1);
    c.member(1).persist = false;
    c.isolate(1);
    c.raft(1).propose("lost");
    c.process_all();
    c.drop_all();
    c.restart(1);  // leader crashes before its write; nobody got "lost"
    c.heal();
    for (int i = 0; i < 60 && c.leader() == kNoNode; ++i) c.tick_all(1);
    BOOST_REQUIRE(c.leader() != kNoNode);
    c.raft(c.leader()).propose("after");
    c.deliver_all();
    c.tick_all(2);
    for (NodeId id : ids(3)) {
        BOOST_TEST(datas(c.member(id).applied) == (std::vector<std::string>{"committed", "after"}),
                   "member " << id);
    }
}

BOOST_AUTO_TEST_CASE(restart_from_storage_whole_cluster_continues) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(2));
    for (int i = 0; i < 4; ++i) c.raft(2).propose("w" + std::to_string(i));
    c.deliver_all();
    c.tick_all(1);
    const Term t = c.raft(2).term();
    for (NodeId id : ids(3)) c.restart(id);
    c.drop_all();
    for (int i = 0; i < 60 && c.leader() == kNoNode; ++i) c.tick_all(1);
    BOOST_REQUIRE(c.leader() != kNoNode);
    BOOST_TEST(c.raft(c.leader()).term() > t);
    c.raft(c.leader()).propose("w4");
    c.deliver_all();
    c.tick_all(1);
    for (NodeId id : ids(3)) {
        BOOST_TEST(datas(c.member(id).applied) ==
                   (std::vector<std::string>{"w0", "w1", "w2", "w3", "w4"}));
    }
}

BOOST_AUTO_TEST_CASE(restart_from_storage_single_member_continues) {
    Cluster c(1);
    c.tick(1, 25);
    c.process_all();
    c.raft(1).propose("a");
    c.process_all();
    c.process_all();
    c.restart(1);
    c.process_all();
    BOOST_TEST(datas(c.member(1).applied) == std::vector<std::string>{"a"});
    c.tick(1, 25);
    BOOST_REQUIRE(c.raft(1).role() == Role::kLeader);
    c.raft(1).propose("b");
    c.process_all();
    c.process_all();
    BOOST_TEST(datas(c.member(1).applied) == (std::vector<std::string>{"a", "b"}));
}

BOOST_AUTO_TEST_CASE(restart_from_storage_clamps_commit_to_stored_log) {
    // A torn write may leave a commit index beyond the stored entries.
    MemoryStorage s;
    s.append(entries_with_terms(1, {1, 1, 1}));
    s.set_hard_state(HardState{1, kNoNode, 10});
    Raft r(make_config(1, ids(3)), s);
    BOOST_TEST(r.status().commit == 3u);
    BOOST_TEST(r.check_invariants() == "");
    const Ready rd = drain(r, s);
    BOOST_TEST(rd.committed.size() == 3u);
    BOOST_REQUIRE(rd.hard_state);
    BOOST_TEST(rd.hard_state->commit == 3u);  // the clamped value is persisted again
}

BOOST_AUTO_TEST_CASE(hard_state_commit_never_points_past_entries_durable_before_the_batch) {
    // Stored: index 3 holds a stale, uncommitted entry of term 3. The leader of
    // term 6 overwrites it and tells us index 4 is committed, in one append.
    MemoryStorage s;
    s.append(entries_with_terms(1, {1, 1, 3}));
    s.set_hard_state(HardState{3, kNoNode, 2});
    Raft r(make_config(1, ids(3)), s);
    r.step(msg(2, 1, 6, AppendRequest{2, 1, entries_with_terms(3, {6, 6}), 4}));
    const Ready rd = r.ready();
    BOOST_REQUIRE(rd.hard_state.has_value());
    BOOST_TEST(rd.hard_state->term == 6u);
    // The commit index persisted with this batch covers only entries durable
    // before it: a storage that writes the hard state first and crashes before
    // the entries must not restart with commit 4 over the stale index 3.
    BOOST_TEST(rd.hard_state->commit == 2u);
    MemoryStorage torn = s;
    torn.set_hard_state(*rd.hard_state);  // hard state written, entries lost
    Raft restarted(make_config(1, ids(3)), torn);
    const Ready after = drain(restarted, torn);
    for (const Entry& e : after.committed) BOOST_TEST(e.index <= 2u);
    // The whole batch written: the next Ready persists the new commit index.
    s.append(rd.entries);
    s.set_hard_state(*rd.hard_state);
    r.advance(rd);
    BOOST_REQUIRE(r.has_ready());
    const Ready next = drain(r, s);
    BOOST_REQUIRE(next.hard_state.has_value());
    BOOST_TEST(next.hard_state->commit == 4u);
    BOOST_TEST(r.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(restart_from_storage_entries_newer_than_hard_state_term) {
    // Torn write: entries of term 4 reached the disk, their hard state did not.
    MemoryStorage s;
    s.append(entries_with_terms(1, {1, 4}));
    s.set_hard_state(HardState{2, 3, 0});
    Raft r(make_config(1, ids(3)), s);
    BOOST_TEST(r.term() == 4u);
    BOOST_TEST(r.status().vote == kNoNode);  // no vote was sent in term 4
    BOOST_TEST(r.check_invariants() == "");
    const Ready rd = drain(r, s);
    BOOST_REQUIRE(rd.hard_state);
    BOOST_TEST(rd.hard_state->term == 4u);
}

BOOST_AUTO_TEST_CASE(restart_from_storage_rejects_gap_after_snapshot) {
    struct Gappy final : Storage {
        HardState hard_state() const override { return {}; }
        Snapshot snapshot() const override { return {}; }
        Index first_index() const override { return 5; }
        Index last_index() const override { return 6; }
        std::vector<Entry> entries(Index, Index) const override { return {}; }
    } gappy;
    BOOST_CHECK_THROW(Raft(make_config(1, ids(3)), gappy), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(config_errors_name_the_field) {
    MemoryStorage s;
    Config c = make_config(4, ids(3));
    try {
        Raft r(c, s);
        BOOST_FAIL("expected invalid_argument");
    } catch (const std::invalid_argument& e) {
        BOOST_TEST(std::string(e.what()).find("id 4 is not in members") != std::string::npos);
    }
    c = make_config(1, ids(3));
    c.election_ticks = 1;
    BOOST_CHECK_THROW(Raft(c, s), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
