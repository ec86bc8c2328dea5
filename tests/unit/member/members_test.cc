// Membership requests on the member core: add (a learner, with its
// addresses), promote once caught up, remove (a follower; the leader hands
// over first), list; the refusals; the configuration reported to the shell
// on every member; and a removed member told to stop.
#include <boost/test/unit_test.hpp>

#include "harness.h"
#include "member/addresses.h"

using namespace pgfence;
using namespace pgfence::member;
using namespace pgfence::member::test;

namespace {

const MemberView* find(const Members& m, std::uint64_t id) {
    for (const MemberView& v : m.members) {
        if (v.id == id) return &v;
    }
    return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(member_membership)

BOOST_AUTO_TEST_CASE(a_member_is_added_as_a_learner_promoted_once_caught_up_and_listed) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const raft::NodeId n = h.join();
    const Members added = as<Members>(h.answer(l, h.send(l, AddMember{n, "10.0.0.4:7004", "10.0.0.4:8004"})));
    h.advance(Harness::kTick);
    const MemberView* v = find(added, n);
    BOOST_REQUIRE(v != nullptr);
    BOOST_TEST(!v->voter);
    BOOST_TEST(v->peer_addr == "10.0.0.4:7004");
    BOOST_TEST(v->client_addr == "10.0.0.4:8004");
    // Every member reports the new configuration to its shell, the new one too.
    for (raft::NodeId id : {1, 2, 3, 4}) {
        BOOST_REQUIRE(h.node(id).configuration.has_value());
        BOOST_TEST(h.node(id).configuration->contains(n));
    }
    h.advance(Harness::kTick * 4);
    const Members promoted = as<Members>(h.answer(l, h.send(l, PromoteMember{n})));
    BOOST_REQUIRE(find(promoted, n) != nullptr);
    BOOST_TEST(find(promoted, n)->voter);
    const Members listed = as<Members>(h.answer(l, h.send(l, ListMembers{})));
    BOOST_TEST(listed.members.size() == 4u);
    BOOST_TEST(listed.config_index == promoted.config_index);
    BOOST_TEST(find(listed, n)->match == find(listed, l)->match);  // caught up with the leader's log
    // The grown cluster still grants.
    const RequestId g = h.send(l, Acquire{"after-growth", 1000, 0, ""});
    BOOST_TEST(std::holds_alternative<Granted>(*h.answer(l, g)));
}

BOOST_AUTO_TEST_CASE(refusals_say_what_is_wrong) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const raft::NodeId f = l == 1 ? 2 : 1;
    BOOST_TEST(as<Unavailable>(h.answer(f, h.send(f, AddMember{4, "a:1", "a:2"}))).leader == l);
    BOOST_TEST(as<Unavailable>(h.answer(f, h.send(f, ListMembers{}))).leader == l);
    BOOST_TEST(as<UnknownMember>(h.answer(l, h.send(l, PromoteMember{9}))).id == 9u);
    BOOST_TEST(as<UnknownMember>(h.answer(l, h.send(l, RemoveMember{9}))).id == 9u);
    const std::string again = as<ChangeRefused>(h.answer(l, h.send(l, AddMember{f, "a:1", "a:2"}))).message;
    BOOST_TEST(again.find("already a member") != std::string::npos, again);
    const std::string voter = as<ChangeRefused>(h.answer(l, h.send(l, PromoteMember{f}))).message;
    BOOST_TEST(voter.find("not a learner") != std::string::npos, voter);
    // A learner that hears nothing is not caught up.
    const raft::NodeId n = h.join();
    h.isolate(n);
    as<Members>(h.answer(l, h.send(l, AddMember{n, "b:1", "b:2"})));
    h.advance(Harness::kTick * 10);
    const std::string behind = as<ChangeRefused>(h.answer(l, h.send(l, PromoteMember{n}))).message;
    BOOST_TEST(behind.find("not caught up") != std::string::npos, behind);
}

BOOST_AUTO_TEST_CASE(a_removed_follower_is_told_to_stop_and_the_rest_go_on) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const raft::NodeId f = l == 3 ? 2 : 3;
    const Members after = as<Members>(h.answer(l, h.send(l, RemoveMember{f})));
    BOOST_TEST(find(after, f) == nullptr);
    h.advance(Harness::kTick * 10);
    BOOST_TEST(h.node(f).removed == 1);  // told once
    BOOST_TEST(h.logged(f, "removed_from_cluster"));
    for (raft::NodeId id : {1, 2, 3}) {
        if (id != f) BOOST_TEST(h.node(id).removed == 0);
    }
    BOOST_TEST(!h.node(l).configuration->contains(f));
    const RequestId g = h.send(l, Acquire{"two-left", 1000, 0, ""});
    BOOST_TEST(std::holds_alternative<Granted>(*h.answer(l, g)));
}

BOOST_AUTO_TEST_CASE(removing_the_leader_hands_over_first_then_the_new_leader_removes_it) {
    Harness h(3);
    const raft::NodeId old = h.elect();
    const raft::NodeId target = as<Unavailable>(h.answer(old, h.send(old, RemoveMember{old}))).leader;
    BOOST_REQUIRE(target != raft::kNoNode);
    BOOST_TEST(target != old);
    h.advance(Harness::kTick * 2);
    BOOST_REQUIRE_EQUAL(h.leader(), target);
    const Members after = as<Members>(h.answer(target, h.send(target, RemoveMember{old})));
    BOOST_TEST(find(after, old) == nullptr);
    h.advance(Harness::kTick * 3);
    BOOST_TEST(h.node(old).removed == 1);
}

// Of voters as caught up as each other, the leader hands over to one it has
// heard from lately, not to one cut off.
BOOST_AUTO_TEST_CASE(removing_the_leader_hands_over_to_a_voter_heard_from_lately) {
    Harness h(3);
    const raft::NodeId old = h.elect();
    std::vector<raft::NodeId> followers;
    for (raft::NodeId id : {1, 2, 3}) {
        if (id != old) followers.push_back(id);
    }
    h.advance(Harness::kTick * 2);  // both followers have everything
    h.cut(old, followers.front());
    h.advance(Harness::kTick * 30);  // more than an election period without hearing from it
    BOOST_REQUIRE_EQUAL(h.leader(), old);
    const raft::NodeId target = as<Unavailable>(h.answer(old, h.send(old, RemoveMember{old}))).leader;
    BOOST_TEST(target == followers.back());
    h.heal();
}

// Members added later apply the configuration entries from before their own
// add, which never named them: that is no removal.
BOOST_AUTO_TEST_CASE(a_member_added_later_is_not_told_it_was_removed) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const raft::NodeId four = h.join();
    as<Members>(h.answer(l, h.send(l, AddMember{four, "a:1", "a:2"})));
    h.advance(Harness::kTick * 2);
    const raft::NodeId five = h.join();
    as<Members>(h.answer(l, h.send(l, AddMember{five, "b:1", "b:2"})));
    h.advance(Harness::kTick * 4);
    for (raft::NodeId id : {1, 2, 3, 4, 5}) BOOST_TEST(h.node(id).removed == 0, "member " << id);
    BOOST_TEST(h.node(five).configuration->contains(four));
}

BOOST_AUTO_TEST_CASE(the_only_voter_cannot_remove_itself) {
    Harness h(1);
    const raft::NodeId l = h.elect();
    const std::string why = as<ChangeRefused>(h.answer(l, h.send(l, RemoveMember{l}))).message;
    BOOST_TEST(why.find("no other voter") != std::string::npos, why);
}

BOOST_AUTO_TEST_CASE(member_addresses_round_trip_and_refuse_malformed_contexts) {
    const MemberAddresses a{"coord-4.example:7004", "[::1]:8004"};
    MemberAddresses back;
    BOOST_TEST(decode_addresses(encode_addresses(a), back) == "");
    BOOST_TEST((back == a));
    BOOST_TEST(decode_addresses("", back) == "");  // a member of the first configuration: no addresses
    BOOST_TEST(back.peer_addr.empty());
    const std::string bytes = encode_addresses(a);
    for (std::size_t cut = 1; cut < bytes.size(); ++cut) {
        MemberAddresses out;
        BOOST_TEST(decode_addresses(bytes.substr(0, cut), out) != "", "cut at " << cut);
    }
    BOOST_TEST(decode_addresses(bytes + "x", back).find("trailing") != std::string::npos);
    BOOST_TEST(decode_addresses(std::string(1, '\x02') + bytes.substr(1), back).find("version 2") != std::string::npos);
}

// The snapshots every member takes after a change carry the index of the
// change's entry (what a member restoring or installing one reports as
// config_index), not their own index; so does a backup.
BOOST_AUTO_TEST_CASE(snapshots_after_a_change_carry_the_index_of_its_entry) {
    Harness h(3, 50'000, /*snapshot_every=*/5, /*snapshot_log_pct=*/0);
    const raft::NodeId l = h.elect();
    const raft::NodeId n = h.join();
    const Members added = as<Members>(h.answer(l, h.send(l, AddMember{n, "10.0.0.4:7004", "10.0.0.4:8004"})));
    BOOST_REQUIRE(added.config_index > 0);
    for (int i = 0; i < 20; ++i) {
        BOOST_REQUIRE(std::holds_alternative<Granted>(*h.answer(l, h.send(l, Acquire{"k" + std::to_string(i), 60000, 0, ""}))));
    }
    h.advance(Harness::kTick * 2);
    for (raft::NodeId id : {1, 2, 3, 4}) {
        const raft::SnapshotMeta& meta = h.node(id).storage.snapshot().meta;
        BOOST_TEST_MESSAGE("member " << id << ": snapshot at " << meta.index << ", configuration index "
                                     << meta.config_index << ", the entry's " << added.config_index);
        BOOST_TEST(meta.index > added.config_index);
        BOOST_TEST(meta.config_index == added.config_index);
    }
    const Backup backup = as<Backup>(h.answer(l, h.send(l, TakeBackup{})));
    BOOST_TEST(backup.snapshot->meta.config_index == added.config_index);
}

BOOST_AUTO_TEST_SUITE_END()
