// ReadIndex (thesis §6.4): a read is confirmed only after the leader has
// committed an entry of its term and a heartbeat round started after the read
// was acknowledged by a majority; reads that cannot be confirmed are dropped.
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

namespace {
bool is_append(const Message& m) {
    return std::holds_alternative<AppendRequest>(m.body);
}
bool is_heartbeat_response(const Message& m) {
    return std::holds_alternative<HeartbeatResponse>(m.body);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(read_index)

BOOST_AUTO_TEST_CASE(read_index_requires_quorum_round) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    const Index commit = c.raft(1).status().commit;
    c.isolate(1);
    BOOST_REQUIRE(c.raft(1).read_index(7));
    c.process_all();
    c.deliver_all();  // heartbeats lost
    BOOST_TEST(c.member(1).reads.empty());
    c.heal();
    c.cut(3, 1);  // one answer (from 2) is enough: 2 of 3 with the leader
    c.tick(1);
    c.deliver_all();
    BOOST_REQUIRE_EQUAL(c.member(1).reads.size(), 1u);
    BOOST_TEST(c.member(1).reads[0].context == 7u);
    BOOST_TEST(c.member(1).reads[0].index == commit);
}

BOOST_AUTO_TEST_CASE(read_index_not_confirmed_by_an_earlier_round) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.tick(1);  // a plain heartbeat round
    const auto old = c.intercept(is_heartbeat_response);
    BOOST_REQUIRE(old.has_value());
    c.drop_all();
    BOOST_REQUIRE(c.raft(1).read_index(8));
    c.process_all();
    c.drop_all();          // the read's own round is lost
    c.raft(1).step(*old);  // an ack of the earlier round arrives late
    c.raft(1).step(*old);  // (twice: duplicates do not count double)
    c.process_all();
    BOOST_TEST(c.member(1).reads.empty());
}

BOOST_AUTO_TEST_CASE(read_index_not_confirmed_by_an_ack_from_an_earlier_term) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    const Term t = c.raft(1).term();
    BOOST_REQUIRE(t >= 1u);
    c.isolate(1);
    BOOST_REQUIRE(c.raft(1).read_index(21));
    c.process_all();
    c.drop_all();  // the read's own round is lost
    // Acks echoing a high round number, but of an earlier term, prove nothing
    // about this leadership.
    c.raft(1).step(msg(2, 1, t - 1, HeartbeatResponse{1000}));
    c.raft(1).step(msg(3, 1, t - 1, HeartbeatResponse{1000}));
    c.process_all();
    BOOST_TEST(c.member(1).reads.empty());
    // The same ack in the current term confirms it (the test is not vacuous).
    c.raft(1).step(msg(2, 1, t, HeartbeatResponse{1000}));
    c.process_all();
    BOOST_REQUIRE_EQUAL(c.member(1).reads.size(), 1u);
    BOOST_TEST(c.member(1).reads[0].context == 21u);
}

BOOST_AUTO_TEST_CASE(read_index_waits_for_commit_in_current_term) {
    Cluster c(3);
    c.tick(1, 25);  // 1 campaigns
    const auto first_append = c.intercept(is_append);
    BOOST_REQUIRE(first_append.has_value());
    BOOST_REQUIRE(c.raft(1).role() == Role::kLeader);
    c.take(is_append);  // its no-op reaches nobody
    BOOST_REQUIRE(c.raft(1).read_index(9));
    // Heartbeat rounds succeed, but no entry of the term is committed: no read.
    for (int i = 0; i < 3; ++i) {
        c.tick(1);
        for (int n = 0; n < 100; ++n) {
            c.process_all();
            c.take(is_append);
            if (!c.deliver_one()) break;
        }
    }
    BOOST_TEST(c.raft(1).status().commit == 0u);
    BOOST_TEST(c.member(1).reads.empty());
    c.tick(1);
    c.deliver_all();  // now the no-op commits, then the read's round runs
    const Status st = c.raft(1).status();
    BOOST_REQUIRE_EQUAL(st.commit, 1u);
    BOOST_REQUIRE_EQUAL(c.member(1).reads.size(), 1u);
    BOOST_TEST(c.member(1).reads[0].index == st.commit);
}

BOOST_AUTO_TEST_CASE(read_index_dropped_on_step_down) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.isolate(1);
    BOOST_REQUIRE(c.raft(1).read_index(11));
    for (int i = 0; i < 25 && c.raft(1).role() == Role::kLeader; ++i) {
        c.tick(1);
        c.deliver_all();
    }
    BOOST_REQUIRE(c.raft(1).role() == Role::kFollower);  // CheckQuorum
    c.process_all();
    BOOST_TEST(c.member(1).reads.empty());
    BOOST_TEST(c.member(1).dropped_reads == std::vector<std::uint64_t>{11});
}

BOOST_AUTO_TEST_CASE(read_index_refused_on_follower_and_during_transfer) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    BOOST_TEST(!c.raft(2).read_index(1));
    c.isolate(2);
    BOOST_REQUIRE(c.raft(1).read_index(2));
    BOOST_REQUIRE(c.raft(1).transfer_leadership(2));
    BOOST_TEST(!c.raft(1).read_index(3));
    c.process_all();
    BOOST_TEST(c.member(1).dropped_reads == std::vector<std::uint64_t>{2});
}

BOOST_AUTO_TEST_CASE(read_index_single_member_confirms_at_once) {
    Cluster c(1);
    c.tick(1, 25);
    c.process_all();
    BOOST_REQUIRE(c.raft(1).read_index(5));
    c.process_all();
    BOOST_REQUIRE_EQUAL(c.member(1).reads.size(), 1u);
    BOOST_TEST(c.member(1).reads[0].index == c.raft(1).status().commit);
}

BOOST_AUTO_TEST_CASE(read_index_many_reads_share_one_round) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    for (std::uint64_t ctx = 100; ctx < 110; ++ctx) BOOST_REQUIRE(c.raft(1).read_index(ctx));
    const std::size_t heartbeats = c.deliver_all_counting(
        [](const Message& m) { return std::holds_alternative<Heartbeat>(m.body); });
    BOOST_TEST(heartbeats == 2u);  // one round: one heartbeat per follower
    BOOST_TEST(c.member(1).reads.size() == 10u);
}

BOOST_AUTO_TEST_SUITE_END()
