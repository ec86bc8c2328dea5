// Raft::take_committed(): committed entries handed out while a Ready is
// outstanding (the server applies a commit learnt from a follower's ack
// without waiting for the leader's own write in flight).
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

BOOST_AUTO_TEST_SUITE(take_committed)

// Applies what take_committed() hands out the way the harness applies a Ready.
static std::vector<Entry> take(Member& m) {
    std::vector<Entry> got = m.raft->take_committed();
    for (const Entry& e : got) {
        BOOST_REQUIRE_EQUAL(e.index, m.applied_index + 1);
        m.applied.push_back(e);
        m.applied_index = e.index;
    }
    return got;
}

BOOST_AUTO_TEST_CASE(hands_only_locally_durable_commits_while_a_ready_is_outstanding) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    BOOST_TEST(c.raft(1).take_committed().empty());  // no Ready outstanding: ready() hands them
    c.raft(1).propose("a");
    c.process(1);                 // "a" durable on the leader, appends queued
    c.member(1).persist = false;  // the leader's next write stays in flight
    c.raft(1).propose("b");
    c.process(1);                 // Ready with "b" outstanding
    c.deliver_all();              // followers store a and b and ack: both committed
    BOOST_TEST(c.raft(1).status().commit == c.raft(1).status().last_index);
    BOOST_TEST(datas(take(c.member(1))) == std::vector<std::string>{"a"});  // "b" not durable here yet
    BOOST_TEST(take(c.member(1)).empty());
    c.check();
    c.member(1).persist = true;
    c.deliver_all();
    c.tick_all(1);
    BOOST_TEST(datas(c.member(1).applied) == (std::vector<std::string>{"a", "b"}));  // each once, in order
}

BOOST_AUTO_TEST_CASE(hands_nothing_while_a_snapshot_is_outstanding_or_pending) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.isolate(3);
    for (int i = 0; i < 5; ++i) c.raft(1).propose("p" + std::to_string(i));
    c.deliver_all();
    c.tick_all(1);
    const Index applied = c.member(1).applied_index;
    c.raft(1).compact(applied, "state", 0);
    c.heal();
    Member& m3 = c.member(3);
    m3.persist = false;
    for (int i = 0; i < 50 && !(m3.pending && m3.pending->snapshot); ++i) {
        if (m3.pending) {  // not the snapshot yet: let that Ready through
            m3.persist = true;
            c.process(3);
            m3.persist = false;
        }
        c.tick(1);
        c.deliver_all();
    }
    BOOST_REQUIRE(m3.pending && m3.pending->snapshot);  // the snapshot's Ready is being written
    BOOST_TEST(c.raft(3).take_committed().empty());
    c.member(3).persist = true;
    c.deliver_all();
    c.tick_all(2);
    BOOST_TEST(c.member(3).applied_index == c.member(1).applied_index);
}

BOOST_AUTO_TEST_SUITE_END()
