// An owner is bound to the user that made it, and a retry never shortens a
// lease (lock/table.h regrants(), "Grant, held"): on the leader that answers,
// and on a leader elected after it.
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence;
using namespace pgfence::member;
using namespace pgfence::member::test;

namespace {

Acquire acq_as(std::string user, std::string owner, std::uint64_t lease_ms, std::uint64_t wait_ms = 0) {
    return Acquire{"k", lease_ms, wait_ms, std::move(owner), std::move(user)};
}

// The Grants in `id`'s log, with the command version byte each was written in.
std::vector<std::pair<lock::Grant, std::uint8_t>> logged_grants(Harness& h, raft::NodeId id) {
    const raft::MemoryStorage& s = h.node(id).storage;
    std::vector<std::pair<lock::Grant, std::uint8_t>> out;
    for (const raft::Entry& e : s.entries(s.first_index(), s.last_index() + 1)) {
        if (e.type != raft::EntryType::kNormal || e.data.empty()) continue;
        auto decoded = lock::decode_command(e.data);
        const auto* cmd = std::get_if<lock::Command>(&decoded);
        if (cmd == nullptr) continue;
        if (const auto* g = std::get_if<lock::Grant>(cmd)) {
            out.emplace_back(*g, static_cast<std::uint8_t>(e.data.front()));
        }
    }
    return out;
}

Harness with_binding(bool on) {
    return Harness(3, 50'000, 10000, 100, lock::kMaxTableBytes, lock::kMaxExpireMany, kDefaultExpiryWave, on);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(owner_binding)

// Config::owner_binding off (a rolling upgrade from a release before owner
// binding): the Grant is proposed without the user, in command version 1,
// and the owner alone re-acquires, as without authentication. On (the
// default), the same acquire is logged in version 2 with the user.
BOOST_AUTO_TEST_CASE(with_binding_off_grants_carry_no_user_and_are_version_1) {
    Harness off = with_binding(false);
    const raft::NodeId l = off.elect();
    const Granted ua = as<Granted>(off.answer(l, off.send(l, acq_as("ua", "w", 30'000))));
    const auto grants = logged_grants(off, l);
    BOOST_REQUIRE(grants.size() == 1u);
    BOOST_TEST(grants[0].first.user == "");
    BOOST_TEST(grants[0].first.owner == "w");
    BOOST_TEST(grants[0].second == 1u);
    BOOST_TEST(lock::encode(grants[0].first).front() == '\x01');
    BOOST_TEST(off.core(l).table().find("k")->user == "");
    // Another user naming the owner re-acquires, queued or not (the binding is off).
    BOOST_TEST(as<Granted>(off.answer(l, off.send(l, acq_as("uc", "w", 30'000)))).token == ua.token);
    BOOST_TEST(as<Granted>(off.answer(l, off.send(l, acq_as("uc", "w", 30'000, 10'000)))).token == ua.token);
    BOOST_TEST(off.core(l).waiter_count() == 0u);

    Harness on = with_binding(true);
    const raft::NodeId m = on.elect();
    as<Granted>(on.answer(m, on.send(m, acq_as("ua", "w", 30'000))));
    const auto bound = logged_grants(on, m);
    BOOST_REQUIRE(bound.size() == 1u);
    BOOST_TEST(bound[0].first.user == "ua");
    BOOST_TEST(bound[0].second == 2u);
}

// The attack: uc names ua's owner with a 1 s lease. It is a contender like
// any other: no token, and ua's 30 s lease is untouched, still held 2 s later.
BOOST_AUTO_TEST_CASE(another_user_naming_a_held_owner_gets_no_token_and_leaves_the_lease_alone) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted ua = as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 30'000))));
    const Time deadline = h.core(l).lease("k")->deadline;
    const Held refused = as<Held>(h.answer(l, h.send(l, acq_as("uc", "w", 1'000))));
    BOOST_TEST(refused.message == "key is held with token " + std::to_string(ua.token));
    BOOST_TEST(h.core(l).lease("k")->lease_ms == 30'000u);
    BOOST_TEST((h.core(l).lease("k")->deadline == deadline));
    BOOST_TEST(h.core(l).table().find("k")->user == "ua");
    h.advance(milliseconds(2000));
    const lock::Lock* held = h.core(l).table().find("k");
    BOOST_REQUIRE(held != nullptr);
    BOOST_TEST(held->token == ua.token);
    BOOST_TEST(h.core(l).ttl_ms("k", h.now()) == 28'000u);
    BOOST_TEST(h.core(l).counters().grants == 1u);
}

// A waiting acquire by another user naming the owner queues behind the
// holder, and is granted a new token of its own once the key is free.
BOOST_AUTO_TEST_CASE(another_user_naming_a_held_owner_waits_its_turn) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted ua = as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 30'000))));
    const RequestId uc = h.send(l, acq_as("uc", "w", 1'000, 10'000));
    BOOST_TEST(h.core(l).waiter_count() == 1u);
    BOOST_TEST(!h.answer(l, uc).has_value());
    as<Released>(h.answer(l, h.send(l, Release{"k", ua.token})));
    const Granted got = as<Granted>(h.answer(l, uc));
    BOOST_TEST(got.token > ua.token);
    BOOST_TEST(h.core(l).table().find("k")->user == "uc");
}

// A retry of the holder asking a shorter lease gets its token back with the
// lease in force (the longer), restarted now: its deadline never moves earlier.
BOOST_AUTO_TEST_CASE(a_retry_asking_a_shorter_lease_keeps_the_longer) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted first = as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 30'000))));
    h.advance(milliseconds(1000));
    const Time deadline = h.core(l).lease("k")->deadline;
    const Granted retry = as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 1'000))));
    BOOST_TEST(retry.token == first.token);
    BOOST_TEST(retry.lease_ms == 30'000u);
    BOOST_TEST(h.core(l).lease("k")->lease_ms == 30'000u);
    BOOST_TEST((h.core(l).lease("k")->deadline >= deadline));
    BOOST_TEST(h.core(l).table().find("k")->lease_ms == 30'000u);
    h.advance(milliseconds(2000));
    BOOST_TEST(h.core(l).table().find("k") != nullptr);
    BOOST_TEST(h.core(l).ttl_ms("k", h.now()) > 27'000u);
    // A longer retry lengthens it.
    const Granted longer = as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 60'000))));
    BOOST_TEST(longer.lease_ms == 60'000u);
    BOOST_TEST(h.core(l).table().find("k")->lease_ms == 60'000u);
}

// The binding and the lease are replicated state: a new leader decides alike.
BOOST_AUTO_TEST_CASE(the_binding_and_the_longer_lease_hold_on_a_new_leader) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted ua = as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 30'000))));
    as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 1'000))));
    const raft::NodeId target = l == 1 ? 2 : 1;
    BOOST_REQUIRE(h.core(l).transfer_leadership(target));
    h.settle();
    for (int i = 0; i < 100 && h.leader() != target; ++i) h.advance(Harness::kTick);
    BOOST_REQUIRE(h.leader() == target);
    BOOST_TEST(h.core(target).lease("k")->lease_ms == 30'000u);
    as<Held>(h.answer(target, h.send(target, acq_as("uc", "w", 1'000))));
    as<Held>(h.answer(target, h.send(target, acq_as("", "w", 1'000))));
    BOOST_TEST(as<Granted>(h.answer(target, h.send(target, acq_as("ua", "w", 1'000)))).token == ua.token);
    BOOST_TEST(h.core(target).lease("k")->lease_ms == 30'000u);
}

// A retry proposed in one term and applied in a later one is not answered
// Granted: behind it in the log may come an Expire of the lock (here its own
// leader's, proposed when the old lease ran out while the retry was in
// flight), which the leases of the later term know nothing of. The leader
// proposes the retry and the Expire, loses its term before either commits,
// leads again and commits both: the retry is answered Unavailable (retry;
// the retry then gets a new token), never a token the next entry expires.
BOOST_AUTO_TEST_CASE(a_retry_from_an_earlier_term_is_not_answered_granted) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const raft::NodeId a = l == 1 ? 2 : 1;
    const raft::NodeId b = l == 3 ? 2 : 3;
    const Granted first = as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 400))));
    const raft::Term term = h.core(l).leader_term();
    // The leader's appends are lost; its heartbeats are not: it keeps leading
    // and confirms the round its expiry asks for, but commits nothing.
    h.drop = [l](const raft::Message& m) { return m.from == l && std::holds_alternative<raft::AppendRequest>(m.body); };
    const RequestId retry = h.send(l, acq_as("ua", "w", 800));
    h.advance(milliseconds(1000));
    BOOST_REQUIRE(h.core(l).leader_term() == term);
    BOOST_REQUIRE(h.core(l).lease("k") != nullptr);
    BOOST_REQUIRE(h.core(l).lease("k")->expiring());  // its Expire is behind the retry
    BOOST_REQUIRE(!h.answer(l, retry).has_value());
    // Everyone cut off: the leader steps down, nobody else can win.
    h.drop = nullptr;
    h.isolate(l);
    h.cut(a, b);
    for (int i = 0; i < 200 && h.core(l).leader_term() != 0; ++i) h.advance(Harness::kTick);
    BOOST_REQUIRE(h.core(l).leader_term() == 0);
    // Healed but for a-b: only l, whose log is the longest, can win.
    h.heal();
    h.cut(a, b);
    for (int i = 0; i < 400 && h.leader() != l; ++i) h.advance(Harness::kTick);
    BOOST_REQUIRE(h.leader() == l);
    BOOST_REQUIRE(h.core(l).leader_term() > term);
    BOOST_TEST(h.core(l).table().find("k") == nullptr);  // the Expire applied
    const std::optional<Response> told = h.answer(l, retry);
    BOOST_REQUIRE(told.has_value());
    BOOST_TEST(!std::holds_alternative<Granted>(*told),
               "the retry was answered Granted token " << first.token << " though the next entry expired it");
    as<Unavailable>(told);
    // The client's retry in this term gets a new token.
    BOOST_TEST(as<Granted>(h.answer(l, h.send(l, acq_as("ua", "w", 800)))).token > first.token);
}

// Without authentication (user "") the owner is all there is: anyone naming
// it gets the token back.
BOOST_AUTO_TEST_CASE(without_authentication_the_owner_alone_re_acquires) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted first = as<Granted>(h.answer(l, h.send(l, acq_as("", "w", 30'000))));
    BOOST_TEST(as<Granted>(h.answer(l, h.send(l, acq_as("", "w", 30'000)))).token == first.token);
    as<Held>(h.answer(l, h.send(l, acq_as("ua", "w", 30'000))));
}

BOOST_AUTO_TEST_SUITE_END()
