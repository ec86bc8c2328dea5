// Raft::take_messages_now(): the leader replicates entries proposed while its
// own Ready is being written, instead of after that write (thesis §10.2.1).
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

BOOST_AUTO_TEST_SUITE(take_messages_now)

namespace {

// Entry data carried by the AppendRequests in `msgs` to `to`.
std::vector<std::string> appended_to(const std::vector<Message>& msgs, NodeId to) {
    std::vector<std::string> out;
    for (const Message& m : msgs) {
        const auto* a = std::get_if<AppendRequest>(&m.body);
        if (a == nullptr || m.to != to) continue;
        for (const Entry& e : a->entries) out.push_back(e.data);
    }
    return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(followers_commit_entries_proposed_during_the_leaders_write) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    BOOST_TEST(c.raft(1).take_messages_now().empty());  // no Ready outstanding: ready() sends
    c.member(1).persist = false;                       // the leader's write stays in flight
    c.raft(1).propose("a");
    BOOST_REQUIRE(c.process(1));  // Ready with "a" outstanding; its appends queued
    c.raft(1).propose("b");
    BOOST_TEST(!c.raft(1).has_ready());
    const std::vector<Message> now = c.raft(1).take_messages_now();
    BOOST_TEST(appended_to(now, 2) == std::vector<std::string>{"b"});
    BOOST_TEST(appended_to(now, 3) == std::vector<std::string>{"b"});
    BOOST_TEST(c.raft(1).take_messages_now().empty());  // nothing new since
    for (const Message& m : now) c.net().push_back(m);
    c.deliver_all();  // followers store a and b and ack: they are a quorum
    const Index b_index = c.raft(1).status().last_index;
    BOOST_TEST(c.raft(1).status().commit == b_index);
    BOOST_TEST(c.raft(1).status().stable_index < b_index);  // the leader's own copy is not durable yet
    BOOST_TEST(c.raft(1).take_committed().empty());  // and is not applied before it is
    c.member(1).persist = true;
    c.deliver_all();
    c.tick_all(1);
    for (NodeId id : {1, 2, 3}) BOOST_TEST(datas(c.member(id).applied) == (std::vector<std::string>{"a", "b"}));
}

BOOST_AUTO_TEST_CASE(follower_and_stepped_down_leader_hand_nothing_new) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.member(2).persist = false;
    c.raft(1).propose("a");
    c.deliver_all();  // member 2 holds a Ready (with "a") un-advanced
    BOOST_REQUIRE(c.member(2).pending.has_value());
    BOOST_TEST(c.raft(2).take_messages_now().empty());  // a follower's acks wait for its write
    c.member(2).persist = true;
    c.deliver_all();
    // A leader that learns of a higher term while its write is in flight
    // sends nothing more as leader.
    c.member(1).persist = false;
    c.raft(1).propose("b");
    BOOST_REQUIRE(c.process(1));
    c.raft(1).step(msg(3, 1, c.raft(1).term() + 1, AppendResponse{}));
    BOOST_TEST(c.raft(1).role() == Role::kFollower);
    c.raft(1).propose("c");
    BOOST_TEST(c.raft(1).take_messages_now().empty());
    c.member(1).persist = true;
    c.deliver_all();
    c.check();
}

BOOST_AUTO_TEST_SUITE_END()
