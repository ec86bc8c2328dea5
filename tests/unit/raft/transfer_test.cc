// Leadership transfer (thesis §3.10): TimeoutNow once the target is up to
// date; proposals refused meanwhile; abort after an election timeout.
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

BOOST_AUTO_TEST_SUITE(transfer)

BOOST_AUTO_TEST_CASE(leadership_transfer_to_up_to_date_follower) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    const Term t = c.raft(1).term();
    BOOST_REQUIRE(c.raft(1).transfer_leadership(2));
    c.deliver_all();  // no ticks needed: TimeoutNow, then a vote past leader stickiness
    BOOST_TEST(c.raft(2).role() == Role::kLeader);
    BOOST_TEST(c.raft(2).term() == t + 1);
    BOOST_TEST(c.raft(1).role() == Role::kFollower);
    BOOST_TEST(c.raft(1).leader() == 2u);
}

BOOST_AUTO_TEST_CASE(leadership_transfer_catches_up_lagging_target_first) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.isolate(3);
    for (int i = 0; i < 4; ++i) c.raft(1).propose("p" + std::to_string(i));
    c.deliver_all();
    c.tick_all(1);
    c.heal();
    BOOST_REQUIRE(c.raft(1).transfer_leadership(3));
    BOOST_TEST(c.raft(1).propose("refused").error == ProposeError::kTransferring);
    for (int i = 0; i < 5 && c.raft(3).role() != Role::kLeader; ++i) c.tick_all(1);
    BOOST_TEST(c.raft(3).role() == Role::kLeader);
    c.raft(3).propose("new");
    c.deliver_all();
    c.tick_all(1);
    BOOST_TEST(datas(c.member(1).applied) ==
               (std::vector<std::string>{"p0", "p1", "p2", "p3", "new"}));
}

BOOST_AUTO_TEST_CASE(leadership_transfer_aborts_after_election_timeout) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.isolate(2);
    BOOST_REQUIRE(c.raft(1).transfer_leadership(2));
    BOOST_TEST(c.raft(1).status().transfer_target == 2u);
    BOOST_TEST(c.raft(1).propose("x").error == ProposeError::kTransferring);
    int ticks = 0;
    while (c.raft(1).status().transfer_target != kNoNode && ticks < 50) {
        c.tick_all(1);
        ++ticks;
    }
    BOOST_TEST(ticks == 10);  // exactly one election timeout
    BOOST_TEST(c.raft(1).role() == Role::kLeader);
    BOOST_TEST(c.raft(1).propose("x").error == ProposeError::kNone);
}

BOOST_AUTO_TEST_CASE(leadership_transfer_refused_for_non_member_self_or_follower) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    BOOST_TEST(!c.raft(1).transfer_leadership(1));
    BOOST_TEST(!c.raft(1).transfer_leadership(9));
    BOOST_TEST(!c.raft(2).transfer_leadership(3));
}

BOOST_AUTO_TEST_CASE(leadership_transfer_timeout_now_skips_prevote) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    BOOST_REQUIRE(c.raft(1).transfer_leadership(2));
    const auto tn =
        c.intercept([](const Message& m) { return std::holds_alternative<TimeoutNow>(m.body); });
    BOOST_REQUIRE(tn.has_value());
    c.raft(2).step(*tn);
    BOOST_TEST(c.raft(2).role() == Role::kCandidate);  // not a pre-candidate
    c.process_all();
    const auto reqs = bodies_of<VoteRequest>({c.net().begin(), c.net().end()});
    BOOST_REQUIRE_EQUAL(reqs.size(), 2u);
    BOOST_TEST(reqs[0].second.transfer);
    BOOST_TEST(!reqs[0].second.pre_vote);
}

BOOST_AUTO_TEST_SUITE_END()
