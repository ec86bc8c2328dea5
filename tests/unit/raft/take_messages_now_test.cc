// Raft::take_messages_now(): a leader sends entries proposed while its Ready
// is being written (thesis §10.2.1), and still counts its own log only once
// that write is advance()d.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

BOOST_AUTO_TEST_SUITE(take_messages_now)

// The entries of the AppendRequests in `msgs` to `to`, as their data.
static std::vector<std::string> appended_to(const std::vector<Message>& msgs, NodeId to) {
    std::vector<std::string> out;
    for (const Message& m : msgs) {
        const auto* req = std::get_if<AppendRequest>(&m.body);
        if (req == nullptr || m.to != to) continue;
        for (const std::string& d : datas(req->entries)) out.push_back(d);
    }
    return out;
}

// A 3-member cluster led by 1, up to date, whose leader holds its next
// Ready ("a") unwritten.
static void leader_writing_a(Cluster& c) {
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.member(1).persist = false;
    c.raft(1).propose("a");
    BOOST_REQUIRE(c.process(1));  // Ready with "a" outstanding, its appends queued
    BOOST_REQUIRE(c.member(1).pending);
}

BOOST_AUTO_TEST_CASE(leader_bcast_appends_proposed_while_its_ready_is_written) {
    Cluster c(3);
    leader_writing_a(c);
    c.raft(1).propose("b");
    const std::vector<Message> now = c.raft(1).take_messages_now();
    BOOST_TEST(appended_to(now, 2) == std::vector<std::string>{"b"});
    BOOST_TEST(appended_to(now, 3) == std::vector<std::string>{"b"});
    BOOST_TEST(c.raft(1).take_messages_now().empty());  // nothing new since
    c.check();
    // "b" still comes in the leader's next Ready for its own write.
    c.member(1).persist = true;
    BOOST_REQUIRE(c.process(1));  // writes "a"
    BOOST_REQUIRE(c.raft(1).has_ready());
    const Ready next = c.raft(1).ready();
    BOOST_TEST(datas(next.entries) == std::vector<std::string>{"b"});
    BOOST_TEST(appended_to(next.messages_now, 2).empty());  // sent already
    c.raft(1).advance(next);
    c.check();
}

BOOST_AUTO_TEST_CASE(leader_counts_its_own_log_only_once_advanced) {
    Cluster c(3);
    leader_writing_a(c);
    c.isolate(3);  // the quorum needs the leader's own log
    c.raft(1).propose("b");
    for (Message& m : c.raft(1).take_messages_now()) c.net().push_back(m);
    c.deliver_all();  // 2 stores a and b and acks them
    BOOST_TEST(c.raft(1).status().commit <
               c.raft(1).status().last_index - 1);  // neither counted: 1 has none durable
    c.member(1).persist = true;
    BOOST_REQUIRE(c.process(1));  // "a" durable on 1
    const Index b_index = c.raft(1).status().last_index;
    BOOST_TEST(c.raft(1).status().commit == b_index - 1);  // a committed, b not: durable on 2 only
    c.deliver_all();  // the next Ready writes "b"
    BOOST_TEST(c.raft(1).status().commit == b_index);
    BOOST_TEST(datas(c.member(1).applied).back() == "b");
}

BOOST_AUTO_TEST_CASE(leader_respects_inflight_limits) {
    Cluster c(3, [](Config& cfg) { cfg.max_inflight_appends = 1; });
    leader_writing_a(c);  // the append of "a" to each follower is in flight, not acked
    c.raft(1).propose("b");
    BOOST_TEST(appended_to(c.raft(1).take_messages_now(), 2).empty());
    for (const PeerStatus& p : c.raft(1).status().peers) BOOST_TEST(p.inflight_appends == 1u);
    c.deliver_all();  // acks of "a" free the window
    const std::vector<Message> now = c.raft(1).take_messages_now();
    BOOST_TEST(appended_to(now, 2) == std::vector<std::string>{"b"});
    BOOST_TEST(appended_to(now, 3) == std::vector<std::string>{"b"});
}

BOOST_AUTO_TEST_CASE(nothing_without_an_outstanding_ready_or_leadership) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.raft(1).propose("a");
    BOOST_TEST(c.raft(1).take_messages_now().empty());  // no Ready outstanding: ready() sends it
    BOOST_REQUIRE(c.raft(1).has_ready());
    Ready rd = c.raft(1).ready();
    BOOST_TEST(appended_to(rd.messages_now, 2) == std::vector<std::string>{"a"});
    for (const Message& m : rd.messages_now) c.net().push_back(m);
    c.member(1).pending = std::move(rd);  // written by the next process(1)
    // A follower writing a Ready sends nothing early (its acks wait for it).
    c.member(2).persist = false;
    c.deliver_all();
    BOOST_REQUIRE(c.member(2).pending);
    BOOST_TEST(c.raft(2).take_messages_now().empty());
}

// A configuration entry leaves only once the leader has written it, and so
// does every entry after it; those before it go out.
BOOST_AUTO_TEST_CASE(config_entry_waits_for_the_leaders_write) {
    Cluster c(3);
    leader_writing_a(c);
    c.raft(1).propose("x");
    const ProposeResult config = c.raft(1).propose_config(ConfigChange{ConfigChangeType::kRemove, 3, {}});
    BOOST_REQUIRE(config.error == ProposeError::kNone);
    c.raft(1).propose("b");
    // "x" goes out; the configuration entry and "b" after it do not: the
    // highest entry sent to each follower is the one before the former.
    const std::vector<Message> now = c.raft(1).take_messages_now();
    for (const NodeId to : {NodeId{2}, NodeId{3}}) {
        BOOST_TEST(appended_to(now, to) == std::vector<std::string>{"x"});
        Index highest = 0;
        for (const Message& m : now) {
            const auto* req = std::get_if<AppendRequest>(&m.body);
            if (req != nullptr && m.to == to && !req->entries.empty()) {
                highest = std::max(highest, req->entries.back().index);
            }
        }
        BOOST_TEST(highest == config.index - 1);
    }
}

// A single voter elects itself within one tick: the Ready carrying its new
// term is outstanding, so nothing it proposes leaves before that term is
// durable (raft.cc ready(): the same rule as its first appends).
BOOST_AUTO_TEST_CASE(nothing_while_the_leaders_term_is_not_durable) {
    Cluster c(1);
    c.join(2);
    BOOST_REQUIRE(c.elect(1));
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(ConfigChange{ConfigChangeType::kAddLearner, 2, {}}).error,
                        ProposeError::kNone);
    c.deliver_all();
    c.tick_all(2);  // 2 is a learner, caught up
    c.restart(1);   // a follower again, in the term its disk holds
    c.deliver_all();
    const Term durable = c.raft(1).term();
    c.member(1).persist = false;
    const int ticks = 2 * c.member(1).cfg.election_ticks + 1;
    for (int i = 0; i < ticks && c.raft(1).role() != Role::kLeader; ++i) c.tick(1);
    BOOST_REQUIRE(c.raft(1).role() == Role::kLeader);
    BOOST_REQUIRE(c.process(1));  // the Ready carrying the new term, outstanding
    BOOST_REQUIRE(c.member(1).pending && c.member(1).pending->hard_state);
    BOOST_REQUIRE_EQUAL(c.member(1).pending->hard_state->term, durable + 1);
    BOOST_REQUIRE_EQUAL(c.raft(1).propose("x").error, ProposeError::kNone);
    BOOST_TEST(c.raft(1).take_messages_now().empty());
    c.check();
    // Once the term is written, the next Ready sends it.
    c.member(1).persist = true;
    c.deliver_all();
    c.tick_all(2);
    BOOST_TEST(datas(c.member(2).applied).back() == "x");
}

// A leader whose Ready is outstanding steps down on a higher term: it sends
// nothing more.
BOOST_AUTO_TEST_CASE(nothing_once_a_higher_term_deposes_the_leader) {
    Cluster c(3);
    leader_writing_a(c);
    c.raft(1).propose("b");
    const Term t = c.raft(1).term();
    c.raft(1).step(msg(2, 1, t + 1, AppendResponse{}));
    BOOST_REQUIRE(c.raft(1).role() == Role::kFollower);
    BOOST_TEST(c.raft(1).take_messages_now().empty());
    c.check();
}

BOOST_AUTO_TEST_SUITE_END()
