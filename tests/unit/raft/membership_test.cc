// Membership changes (thesis chapter 4, raft.h "Membership changes"): a
// learner catches up and counts in no quorum until promoted, and only once
// caught up; one change at a time, and not before the leader has committed an
// entry of its term; a configuration is in force once appended and is undone
// with its entry; a removed member learns its removal and never campaigns;
// the leader does not remove itself; configurations survive restarts and
// travel in snapshots.
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

namespace {

ConfigChange add(NodeId id, std::string context = {}) {
    return ConfigChange{ConfigChangeType::kAddLearner, id, std::move(context)};
}
ConfigChange promote(NodeId id) { return ConfigChange{ConfigChangeType::kPromote, id, {}}; }
ConfigChange remove(NodeId id) { return ConfigChange{ConfigChangeType::kRemove, id, {}}; }

// A 3-member cluster with 1 leading and its no-op committed everywhere.
Cluster three_with_leader() {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    return c;
}

// The ids of `config` that are voters, and that are learners.
std::vector<NodeId> voters(const Configuration& config) { return config.voters(); }
std::vector<NodeId> learners(const Configuration& config) {
    std::vector<NodeId> out;
    for (const ConfigMember& m : config.members) {
        if (!m.voter) out.push_back(m.id);
    }
    return out;
}

bool caught_up(Raft& leader, NodeId id) {
    for (const PeerStatus& p : leader.status().peers) {
        if (p.id == id) return p.caught_up;
    }
    return false;
}

// Ticks everyone until a leader other than `not_this` is elected.
NodeId new_leader(Cluster& c, NodeId not_this = kNoNode) {
    for (int i = 0; i < 100; ++i) {
        const NodeId l = c.leader();
        if (l != kNoNode && l != not_this) return l;
        c.tick_all(1);
    }
    BOOST_FAIL("no new leader within 100 ticks");
    return kNoNode;
}

// Adds 4 as a learner of `c` (led by 1) and lets it catch up.
void add_learner_4(Cluster& c) {
    c.join(4);
    const ProposeResult r = c.raft(1).propose_config(add(4, "addr-4"));
    BOOST_REQUIRE_EQUAL(r.error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(2);
}

// Each of `members` snapshots its applied state, as the member core does
// (the configuration in force there and the index of its entry), and
// compacts its whole log.
void compact_all(Cluster& c, std::initializer_list<NodeId> members) {
    for (NodeId id : members) {
        const Index applied = c.raft(id).status().applied;
        MemoryStorage& disk = c.member(id).storage;
        const Term t = disk.entries(applied, applied + 1)[0].term;
        disk.compact(Snapshot{SnapshotMeta{applied, t, c.raft(id).configuration_at(applied),
                                           c.raft(id).configuration_index_at(applied)},
                              "s"});
        c.raft(id).compact(applied, "s", 0);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(membership)

BOOST_AUTO_TEST_CASE(a_learner_catches_up_and_counts_in_no_quorum_until_promoted) {
    Cluster c = three_with_leader();
    for (int i = 0; i < 3; ++i) c.raft(1).propose("before-" + std::to_string(i));
    c.deliver_all();
    add_learner_4(c);
    // The learner holds the whole log and knows the configuration with itself in it.
    BOOST_TEST(datas(c.member(4).applied) == (std::vector<std::string>{"before-0", "before-1", "before-2"}));
    BOOST_TEST(voters(c.raft(4).configuration()) == (std::vector<NodeId>{1, 2, 3}));
    BOOST_TEST(learners(c.raft(4).configuration()) == (std::vector<NodeId>{4}));
    BOOST_TEST(c.raft(4).configuration().find(4)->context == "addr-4");
    // It never campaigns, however long it hears nothing.
    c.isolate(4);
    c.tick(4, 100);
    BOOST_TEST(c.raft(4).role() == Role::kFollower);
    // With 4 cut off, 2 of the 3 voters still commit: the learner is not needed.
    c.raft(1).propose("without-4");
    c.deliver_all();
    BOOST_TEST(datas(c.member(2).applied).back() == "without-4");
    // Nor is it enough: with 2 and 3 cut off, 1 and the learner commit nothing.
    c.heal();
    c.deliver_all();
    c.tick_all(2);
    c.isolate(2);
    c.isolate(3);
    const Index before = c.raft(1).status().commit;
    c.raft(1).propose("needs-a-voter");
    c.deliver_all();
    BOOST_TEST(c.raft(1).status().commit == before);
}

BOOST_AUTO_TEST_CASE(a_learner_is_promoted_only_once_caught_up_and_then_counts) {
    Cluster c = three_with_leader();
    c.join(4);
    c.isolate(4);  // it hears nothing yet
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(add(4)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(3);
    BOOST_TEST(!caught_up(c.raft(1), 4));
    BOOST_TEST(c.raft(1).propose_config(promote(4)).error == ProposeError::kNotCaughtUp);
    c.heal();
    c.deliver_all();
    c.tick_all(3);
    BOOST_TEST(caught_up(c.raft(1), 4));
    const ProposeResult r = c.raft(1).propose_config(promote(4));
    BOOST_REQUIRE_EQUAL(r.error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(1);
    for (NodeId id : {1, 2, 3, 4}) {
        BOOST_TEST(voters(c.raft(id).configuration()) == (std::vector<NodeId>{1, 2, 3, 4}));
        BOOST_TEST(c.raft(id).configuration_index() == r.index);
    }
    // Four voters: a quorum is 3, so 1 and 2 alone commit nothing.
    c.isolate(3);
    c.isolate(4);
    const Index before = c.raft(1).status().commit;
    c.raft(1).propose("needs-three");
    c.deliver_all();
    BOOST_TEST(c.raft(1).status().commit == before);
    // And the promoted member can lead.
    c.heal();
    c.deliver_all();
    c.tick_all(1);
    BOOST_REQUIRE(c.raft(1).transfer_leadership(4));
    c.deliver_all();
    BOOST_TEST(c.raft(4).role() == Role::kLeader);
}

BOOST_AUTO_TEST_CASE(a_learner_that_stops_answering_is_no_longer_caught_up) {
    Cluster c = three_with_leader();
    add_learner_4(c);
    BOOST_REQUIRE(caught_up(c.raft(1), 4));
    c.isolate(4);
    c.raft(1).propose("x");
    c.deliver_all();
    c.tick_all(12);  // more than an election timeout of the round under way
    BOOST_TEST(!caught_up(c.raft(1), 4));
    BOOST_TEST(c.raft(1).propose_config(promote(4)).error == ProposeError::kNotCaughtUp);
}

BOOST_AUTO_TEST_CASE(one_change_at_a_time_and_only_after_the_leaders_own_entry_commits) {
    Cluster c(3);
    // Elected, but its no-op not committed yet: hold its first appends back.
    for (int i = 0; i < 21 && c.raft(1).role() == Role::kFollower; ++i) c.tick(1);
    std::optional<Message> first =
        c.intercept([](const Message& m) { return std::holds_alternative<AppendRequest>(m.body); });
    BOOST_REQUIRE(first.has_value());
    std::vector<Message> held = c.take([](const Message&) { return true; });
    held.push_back(*first);
    BOOST_REQUIRE(c.raft(1).role() == Role::kLeader);
    BOOST_TEST(c.raft(1).propose_config(add(4)).error == ProposeError::kNotReady);
    for (Message& m : held) c.net().push_back(std::move(m));
    c.deliver_all();
    c.tick_all(1);
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(add(4)).error, ProposeError::kNone);
    // The first change is not committed: a second waits.
    BOOST_TEST(c.raft(1).propose_config(add(5)).error == ProposeError::kConfigPending);
    c.deliver_all();
    c.tick_all(1);
    BOOST_TEST(c.raft(1).propose_config(add(5)).error == ProposeError::kNone);
}

BOOST_AUTO_TEST_CASE(changes_that_make_no_sense_are_refused_naming_why) {
    Cluster c = three_with_leader();
    BOOST_TEST(c.raft(2).propose_config(add(4)).error == ProposeError::kNotLeader);
    BOOST_TEST(c.raft(1).propose_config(add(3)).error == ProposeError::kAlreadyMember);
    BOOST_TEST(c.raft(1).propose_config(promote(9)).error == ProposeError::kUnknownMember);
    BOOST_TEST(c.raft(1).propose_config(remove(9)).error == ProposeError::kUnknownMember);
    BOOST_TEST(c.raft(1).propose_config(promote(2)).error == ProposeError::kNotLearner);
    BOOST_TEST(c.raft(1).propose_config(remove(1)).error == ProposeError::kRemoveLeader);
    BOOST_TEST(c.raft(1).propose_config(add(0)).error == ProposeError::kInvalid);
    BOOST_TEST(c.raft(1).propose_config(add(4, std::string(kMaxMemberContextBytes + 1, 'x'))).error ==
               ProposeError::kInvalid);
    BOOST_TEST(c.raft(1).configuration_index() == 0u);  // nothing was appended
}

BOOST_AUTO_TEST_CASE(the_leader_hands_over_then_the_new_leader_removes_it) {
    Cluster c = three_with_leader();
    BOOST_REQUIRE(c.raft(1).transfer_leadership(2));
    c.deliver_all();
    BOOST_REQUIRE(c.raft(2).role() == Role::kLeader);
    c.tick_all(1);
    const ProposeResult r = c.raft(2).propose_config(remove(1));
    BOOST_REQUIRE_EQUAL(r.error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(2);
    BOOST_TEST(voters(c.raft(2).configuration()) == (std::vector<NodeId>{2, 3}));
    // The removed member learnt it: its applied log holds the change.
    BOOST_TEST(c.member(1).applied_index >= r.index);
    BOOST_TEST(!c.raft(1).configuration().contains(1));
    // Two voters left: both are needed, and they commit.
    c.raft(2).propose("after");
    c.deliver_all();
    BOOST_TEST(datas(c.member(3).applied).back() == "after");
}

BOOST_AUTO_TEST_CASE(a_removed_member_is_told_then_forgotten_and_cannot_disrupt) {
    Cluster c = three_with_leader();
    const ProposeResult r = c.raft(1).propose_config(remove(3));
    BOOST_REQUIRE_EQUAL(r.error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(3);
    // 3 has applied its own removal, and the leader has stopped tracking it.
    BOOST_TEST(c.member(3).applied_index >= r.index);
    BOOST_TEST(!c.raft(3).configuration().contains(3));
    for (const PeerStatus& p : c.raft(1).status().peers) BOOST_TEST(p.id != 3u);
    // However long it waits it never campaigns.
    const Term term = c.raft(1).term();
    c.tick(3, 100);
    BOOST_TEST(c.raft(3).role() == Role::kFollower);
    c.deliver_all();
    // A vote request it might still send (had it never learnt its removal) deposes
    // nobody: the leader and a follower that hears it ignore it (leader
    // stickiness), and its answers are ignored by a leader that forgot it.
    c.raft(1).step(msg(3, 1, term + 5, VoteRequest{false, 100, term + 5, false}));
    c.raft(2).step(msg(3, 2, term + 5, VoteRequest{false, 100, term + 5, false}));
    c.raft(1).step(msg(3, 1, term, AppendResponse{true, 100, 0, 0, 0}));
    c.raft(1).step(msg(3, 1, term, HeartbeatResponse{1000}));
    c.deliver_all();
    BOOST_TEST(c.raft(1).role() == Role::kLeader);
    BOOST_TEST(c.raft(1).term() == term);
    BOOST_TEST(c.raft(2).term() == term);
    for (const PeerStatus& p : c.raft(1).status().peers) BOOST_TEST(p.id != 3u);
}

BOOST_AUTO_TEST_CASE(a_removed_member_that_never_answers_is_forgotten_after_two_election_timeouts) {
    Cluster c = three_with_leader();
    c.isolate(3);
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(remove(3)).error, ProposeError::kNone);
    c.deliver_all();  // 1 and 2 commit it without 3
    bool still_tracked = false;
    for (const PeerStatus& p : c.raft(1).status().peers) still_tracked = still_tracked || (p.id == 3 && p.leaving);
    BOOST_TEST(still_tracked);
    c.tick_all(21);
    for (const PeerStatus& p : c.raft(1).status().peers) BOOST_TEST(p.id != 3u);
}

BOOST_AUTO_TEST_CASE(a_removed_member_behind_the_snapshot_leaves_the_leader_nothing_to_send) {
    // A removed member whose next entry was compacted gets no snapshot: the
    // leader, having nothing to send it, must not report a Ready (the shell
    // turns while has_ready() holds, so a promise never kept spins it).
    Cluster c = three_with_leader();
    c.isolate(3);
    c.raft(1).propose("a");
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(remove(3)).error, ProposeError::kNone);
    c.deliver_all();
    c.raft(1).propose("b");
    c.deliver_all();  // 1 and 2 commit all of it; 3 is still told of its removal
    Index match_3 = 0;
    for (const PeerStatus& p : c.raft(1).status().peers) {
        if (p.id == 3) match_3 = p.match;
    }
    const Status st = c.raft(1).status();
    BOOST_REQUIRE(st.applied > match_3 + 1);
    MemoryStorage& disk = c.member(1).storage;
    const Term t = disk.entries(st.applied, st.applied + 1)[0].term;
    disk.compact(Snapshot{SnapshotMeta{st.applied, t, c.raft(1).configuration_at(st.applied)}, "s"});
    c.raft(1).compact(st.applied, "s", 0);
    // 3 rejects an append (it answers late): the leader probes it from
    // match + 1, an index it no longer holds.
    c.raft(1).step(msg(3, 1, st.term, AppendResponse{false, 0, st.last_index, match_3, 0}));
    c.raft(1).propose("c");  // the commit index moves past what 3 was told
    c.deliver_all();         // fails ("never quiesced") if a Ready is promised forever
    BOOST_TEST(!c.raft(1).has_ready());
    BOOST_TEST(c.raft(1).status().commit == st.last_index + 1);
}

BOOST_AUTO_TEST_CASE(a_removal_that_leaves_no_live_quorum_is_refused) {
    Cluster c = three_with_leader();
    c.isolate(3);
    c.tick_all(25);  // more than two election periods without hearing from 3
    BOOST_REQUIRE(c.raft(1).role() == Role::kLeader);
    // Removing 2 would leave {1, 3}, whose quorum needs the dead 3.
    BOOST_TEST(c.raft(1).propose_config(remove(2)).error == ProposeError::kNoQuorumLeft);
    // Removing the dead member itself leaves {1, 2}: both alive.
    BOOST_TEST(c.raft(1).propose_config(remove(3)).error == ProposeError::kNone);
}

BOOST_AUTO_TEST_CASE(a_removed_member_that_missed_its_removal_is_told_when_it_campaigns) {
    Cluster c = three_with_leader();
    c.isolate(3);
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(remove(3)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(21);  // the leader forgets it
    BOOST_TEST(c.raft(3).configuration().contains(3));  // it never heard
    BOOST_TEST(!c.raft(3).told_removed());
    c.heal();
    // It campaigns; the leader answers Removed, a follower does not.
    const Term term = c.raft(1).term();
    c.raft(2).step(msg(3, 2, term + 1, VoteRequest{true, 100, term, false}));
    c.raft(1).step(msg(3, 1, term + 1, VoteRequest{true, 100, term, false}));
    c.process_all();
    std::size_t removed = 0;
    for (const Message& m : c.take([](const Message& m) { return std::holds_alternative<Removed>(m.body); })) {
        BOOST_TEST(m.from == 1u);
        BOOST_TEST(m.to == 3u);
        c.raft(3).step(m);
        ++removed;
    }
    BOOST_TEST(removed == 1u);
    BOOST_TEST(c.raft(3).told_removed());
    // Nobody's term moved, and a member (2) that campaigns is never told.
    BOOST_TEST(c.raft(1).term() == term);
    c.raft(1).step(msg(2, 1, term + 1, VoteRequest{true, 100, term, false}));
    c.process_all();
    BOOST_TEST(c.take([](const Message& m) { return std::holds_alternative<Removed>(m.body); }).empty());
}

BOOST_AUTO_TEST_CASE(a_configuration_is_in_force_once_appended_and_undone_with_its_entry) {
    Cluster c = three_with_leader();
    c.isolate(1);
    c.join(4);
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(add(4)).error, ProposeError::kNone);
    c.deliver_all();
    // In force on 1 at once, though nobody else has it.
    BOOST_TEST(c.raft(1).configuration().contains(4));
    BOOST_TEST(!c.raft(2).configuration().contains(4));
    // 2 or 3 leads a new term and overwrites it; 1 comes back and its configuration reverts.
    const NodeId l = new_leader(c, 1);
    c.raft(l).propose("new-term");
    c.deliver_all();
    c.heal();
    c.tick_all(3);
    BOOST_TEST(c.raft(1).role() == Role::kFollower);
    BOOST_TEST(!c.raft(1).configuration().contains(4));
    BOOST_TEST(c.raft(1).configuration_index() == 0u);
    BOOST_TEST(datas(c.member(1).applied).back() == "new-term");
}

BOOST_AUTO_TEST_CASE(configurations_survive_a_restart_and_travel_in_snapshots) {
    Cluster c = three_with_leader();
    add_learner_4(c);
    const Configuration expected = c.raft(1).configuration();
    const Index at = c.raft(1).configuration_index();
    BOOST_REQUIRE(at > 0);
    // From the log.
    c.restart(2);
    BOOST_TEST((c.raft(2).configuration() == expected));
    BOOST_TEST(c.raft(2).configuration_index() == at);
    // From a snapshot taken after the change (the entry itself compacted away).
    c.raft(1).propose("after");
    c.deliver_all();
    c.tick_all(1);
    for (NodeId id : {1, 2, 3}) {  // every voter compacts: whoever leads next sends a snapshot
        const Status st = c.raft(id).status();
        MemoryStorage& disk = c.member(id).storage;
        const Term t = disk.entries(st.applied, st.applied + 1)[0].term;
        BOOST_TEST((c.raft(id).configuration_at(st.applied) == expected));
        BOOST_TEST(c.raft(id).configuration_at(at - 1).contains(4) == false);
        disk.compact(Snapshot{SnapshotMeta{st.applied, t, c.raft(id).configuration_at(st.applied)}, "s"});
        c.raft(id).compact(st.applied, "s", 0);
    }
    c.restart(1);
    BOOST_TEST((c.raft(1).configuration() == expected));
    // A member that joins now learns it from the snapshot.
    const NodeId l = new_leader(c);
    c.tick_all(1);
    c.join(5);
    BOOST_REQUIRE_EQUAL(c.raft(l).propose_config(add(5)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(2);
    BOOST_TEST(c.raft(5).configuration().contains(4));
    BOOST_TEST(c.raft(5).configuration().contains(5));
    BOOST_TEST(c.member(5).restored.has_value());
}

// Every member reports the index of the entry that made the configuration
// in force, whether it has that entry, restored a snapshot taken after it at
// a restart, or installed one from the leader; the first configuration
// (Config::members) is 0 on every member, from a snapshot too.
BOOST_AUTO_TEST_CASE(every_member_reports_the_configurations_own_index_after_restarts_and_snapshots) {
    {
        Cluster c = three_with_leader();
        c.isolate(3);
        for (int i = 0; i < 3; ++i) c.raft(1).propose("first" + std::to_string(i));
        c.deliver_all();
        c.tick_all(1);
        compact_all(c, {1, 2});
        c.heal();
        c.tick_all(3);
        BOOST_REQUIRE(c.member(3).restored.has_value());  // 3 caught up by the snapshot
        for (NodeId id : {1, 2, 3}) c.restart(id);
        for (NodeId id : {1, 2, 3}) {
            BOOST_TEST_MESSAGE("first configuration: member " << id << " config_index "
                                                               << c.raft(id).configuration_index());
            BOOST_TEST(c.raft(id).configuration_index() == 0u);
        }
    }
    Cluster c = three_with_leader();
    c.isolate(3);
    add_learner_4(c);
    const Index at = c.raft(1).configuration_index();
    BOOST_REQUIRE(at > 0);
    c.raft(1).propose("after");
    c.deliver_all();
    c.tick_all(1);
    compact_all(c, {1, 2, 4});
    for (NodeId id : {1, 2, 4}) {
        BOOST_REQUIRE(c.member(id).storage.snapshot().meta.index > at);  // the entry itself is compacted away
        c.restart(id);
        BOOST_TEST_MESSAGE("restarted member " << id << ": config_index " << c.raft(id).configuration_index()
                                               << ", the entry's " << at);
        BOOST_TEST(c.raft(id).configuration_index() == at);
    }
    const NodeId l = new_leader(c);
    c.tick_all(1);
    c.heal();  // 3 is behind the change, and its entry is in no log: it gets the snapshot
    c.tick_all(3);
    BOOST_REQUIRE(c.member(3).restored.has_value());
    BOOST_TEST(c.raft(3).configuration().contains(4));
    BOOST_TEST_MESSAGE("member 3 installed the snapshot of " << l << ": config_index "
                                                             << c.raft(3).configuration_index() << ", the entry's "
                                                             << at);
    BOOST_TEST(c.raft(3).configuration_index() == at);
    c.restart(3);
    BOOST_TEST(c.raft(3).configuration_index() == at);
    BOOST_TEST(c.raft(3).status().config_index == at);
}

// Replacing a member: 3 is cut off while 4 joins, is
// promoted, takes over and removes 1; 3 comes back behind all of it, led by
// a member its own log has never heard of, and catches up.
BOOST_AUTO_TEST_CASE(a_follower_behind_the_change_that_added_its_leader_follows_it) {
    Cluster c = three_with_leader();
    c.join(4);
    c.isolate(3);
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(add(4)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(2);
    BOOST_REQUIRE(caught_up(c.raft(1), 4));
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(promote(4)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(1);
    BOOST_REQUIRE(c.raft(1).transfer_leadership(4));
    c.deliver_all();
    BOOST_REQUIRE(c.raft(4).role() == Role::kLeader);
    c.tick_all(1);
    BOOST_REQUIRE_EQUAL(c.raft(4).propose_config(remove(1)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(2);
    BOOST_REQUIRE(!c.raft(3).configuration().contains(4));  // 3 knows nothing of it
    c.heal();
    c.isolate(1);
    c.tick_all(3);
    BOOST_TEST(c.raft(3).leader() == 4u);
    BOOST_TEST(voters(c.raft(3).configuration()) == (std::vector<NodeId>{2, 3, 4}));
    // 3 and 4 are a majority of {2, 3, 4}: without 2 they still commit.
    c.isolate(2);
    c.raft(4).propose("two-of-three");
    c.deliver_all();
    BOOST_TEST(datas(c.member(3).applied).back() == "two-of-three");
}

BOOST_AUTO_TEST_CASE(a_learners_answers_keep_no_leader_in_office_and_confirm_no_read) {
    Cluster c = three_with_leader();
    add_learner_4(c);
    c.isolate(2);
    c.isolate(3);
    BOOST_REQUIRE(c.raft(1).read_index(7));
    c.tick_all(3);
    BOOST_TEST(c.member(1).reads.empty());  // 4's heartbeat acks confirm nothing
    c.tick_all(21);                        // a whole election timeout with only the learner answering
    BOOST_TEST(c.raft(1).role() != Role::kLeader);
    BOOST_TEST(c.member(1).reads.empty());
    BOOST_TEST(c.member(1).dropped_reads == (std::vector<std::uint64_t>{7}));
}

// A single voter elects itself within one tick, so its new term and its first
// appends (to a learner, or to a removed member being told) come in one Ready.
// Those appends carry the new term: they wait for it to be durable, like any
// message but a leader's of a term already written. Sent with the write, a
// crash before it completes lets the member lead that same term again with
// other entries, and the learner, holding the first ones under the same index
// and term, applies an entry the leader never had (Log Matching broken).
BOOST_AUTO_TEST_CASE(a_single_voters_first_appends_of_a_new_term_wait_for_the_term_to_be_durable) {
    Cluster c(1);
    c.join(2);
    BOOST_REQUIRE(c.elect(1));
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(add(2)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(2);
    c.restart(1);  // a follower again, in the term its disk holds
    c.deliver_all();
    const Term durable = c.raft(1).term();
    auto lead_again = [&c]() {
        for (int i = 0; i < 2 * c.member(1).cfg.election_ticks + 1 && c.raft(1).role() != Role::kLeader; ++i) {
            c.tick(1);
        }
        BOOST_REQUIRE(c.raft(1).role() == Role::kLeader);
    };
    c.member(1).persist = false;  // the write of the new term will never complete
    lead_again();
    BOOST_REQUIRE_EQUAL(c.raft(1).term(), durable + 1);
    BOOST_REQUIRE_EQUAL(c.raft(1).propose("lost").error, ProposeError::kNone);
    c.deliver_all();  // the Ready is taken; only what may go out before its write does
    c.restart(1);     // the crash: the term and "lost" were never written
    c.drop_all();
    lead_again();
    BOOST_REQUIRE_EQUAL(c.raft(1).term(), durable + 1);  // the same term again: nothing of the first got out
    BOOST_REQUIRE_EQUAL(c.raft(1).propose("kept").error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(3);
    const std::vector<Entry>& leader = c.member(1).applied;
    const std::vector<Entry>& learner = c.member(2).applied;
    BOOST_REQUIRE(!learner.empty());
    BOOST_TEST(datas(learner).back() == "kept");
    for (const Entry& e : learner) {
        BOOST_REQUIRE(e.index >= 1 && e.index <= leader.size());
        BOOST_TEST((e == leader[e.index - 1]), "the learner applied index " << e.index << " term " << e.term
                                                   << " \"" << e.data << "\", the leader has \""
                                                   << leader[e.index - 1].data << "\"");
    }
}

// A configuration entry leaves the leader only once it is durable there.
// Sent in parallel with the leader's own write (as other entries are), a
// crash before that write completes leaves the entry only on members it
// makes non-voters: here 1 removes 2 from {1, 2}, 2 and the learner 3 get
// the removal, 1 loses it. 1 is back in {1, 2} and needs 2's vote, which 2,
// whose log is longer, refuses; 2 never campaigns, its own log saying it was
// removed: no leader ever again.
BOOST_AUTO_TEST_CASE(a_configuration_entry_is_sent_only_once_durable_on_the_leader) {
    Cluster c(2);
    c.join(3);
    BOOST_REQUIRE(c.elect(1));
    BOOST_REQUIRE_EQUAL(c.raft(1).propose_config(add(3)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(2);
    c.member(1).persist = false;  // its write of the removal will never complete
    const ProposeResult r = c.raft(1).propose_config(remove(2));
    BOOST_REQUIRE_EQUAL(r.error, ProposeError::kNone);
    c.deliver_all();  // what may go out before the write does
    BOOST_TEST(c.raft(2).configuration().contains(2), "the removal reached 2 before it was durable on 1");
    c.restart(1);  // the crash: the removal was never written
    for (int i = 0; i < 100 && c.leader() == kNoNode; ++i) c.tick_all(1);
    const NodeId l = c.leader();
    BOOST_REQUIRE(l != kNoNode);
    // And the cluster goes on: the new leader can shrink it to itself.
    c.tick_all(2);
    const NodeId other = l == 1 ? 2 : 1;
    BOOST_REQUIRE_EQUAL(c.raft(l).propose_config(remove(other)).error, ProposeError::kNone);
    c.deliver_all();
    c.tick_all(3);
    BOOST_TEST(c.raft(l).role() == Role::kLeader);
    BOOST_TEST((voters(c.raft(l).configuration()) == std::vector<NodeId>{l}));
}

BOOST_AUTO_TEST_CASE(configurations_encode_and_decode_and_refuse_malformed_bytes) {
    Configuration cfg;
    cfg.members = {{1, true, "a:1"}, {3, false, ""}, {7, true, std::string(kMaxMemberContextBytes, 'c')}};
    Configuration back;
    BOOST_TEST(decode_configuration(encode_configuration(cfg), back) == "");
    BOOST_TEST((back == cfg));
    Configuration none;
    BOOST_TEST(decode_configuration(encode_configuration(Configuration{}), none) == "");  // unknown: empty
    BOOST_TEST(none.members.empty());
    const std::string bytes = encode_configuration(cfg);
    for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
        Configuration out;
        BOOST_TEST(decode_configuration(bytes.substr(0, cut), out) != "", "truncated at " << cut);
    }
    BOOST_TEST(decode_configuration(bytes + "x", back).find("trailing") != std::string::npos);
    Configuration unsorted;
    unsorted.members = {{3, true, ""}, {1, true, ""}};
    BOOST_TEST(decode_configuration(encode_configuration(unsorted), back).find("sorted") != std::string::npos);
    Configuration learners_only;
    learners_only.members = {{2, false, ""}};
    BOOST_TEST(decode_configuration(encode_configuration(learners_only), back) == "no voter");
}

BOOST_AUTO_TEST_CASE(the_first_configuration_carries_the_contexts_it_is_given) {
    MemoryStorage storage;
    Config cfg = make_config(1, {1, 2, 3});
    cfg.contexts = {{1, "one"}, {3, "three"}};
    Raft r(cfg, storage);
    const Configuration& c = r.configuration();
    BOOST_TEST(r.configuration_index() == 0u);
    BOOST_TEST(c.find(1)->context == "one");
    BOOST_TEST(c.find(2)->context.empty());
    BOOST_TEST(c.find(3)->context == "three");
    BOOST_TEST(!c.voters_only());  // what snapshots of it will be written as: version 2
    Config stray = make_config(1, {1, 2, 3});
    stray.contexts = {{4, "not a member"}};
    BOOST_CHECK_THROW(Raft(stray, storage), std::invalid_argument);
    Config long_context = make_config(1, {1, 2, 3});
    long_context.contexts = {{2, std::string(kMaxMemberContextBytes + 1, 'x')}};
    BOOST_CHECK_THROW(Raft(long_context, storage), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
