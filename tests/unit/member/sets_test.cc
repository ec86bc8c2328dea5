// Sets of keys under one lease in the member core (core.h "Waiters", "A
// set"): one grant, one keepalive, one release, one expiry for the set;
// part_of_set for a key alone; waiting sets FIFO with the other waiters,
// without barging, deadlock or starvation.
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence;
using namespace pgfence::member;
using namespace pgfence::member::test;

namespace sets_test {

Acquire one(std::string key, std::string owner, std::uint64_t wait_ms = 0, std::uint64_t lease_ms = 5000) {
    return Acquire{std::move(key), lease_ms, wait_ms, std::move(owner)};
}

Acquire set(std::vector<std::string> keys, std::string owner, std::uint64_t wait_ms = 0,
            std::uint64_t lease_ms = 5000) {
    Acquire a{{}, lease_ms, wait_ms, std::move(owner)};
    a.keys = std::move(keys);
    return a;
}

}  // namespace sets_test

using sets_test::one;
using sets_test::set;

BOOST_AUTO_TEST_SUITE(member_sets)

BOOST_AUTO_TEST_CASE(a_set_is_granted_whole_with_one_token_and_one_lease_per_key) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, set({"b", "a"}, "w"))));
    BOOST_TEST((g.keys == std::vector<std::string>{"b", "a"}));  // in the order asked
    BOOST_TEST(g.key.empty());
    for (const char* key : {"a", "b"}) {
        BOOST_TEST(h.core(l).table().find(key)->token == g.token);
        BOOST_REQUIRE(h.core(l).lease(key) != nullptr);
        BOOST_TEST((h.core(l).lease(key)->deadline == h.now() + milliseconds(5000)));
    }
    BOOST_TEST(h.core(l).counters().grants_many == 1u);
    // A held key: nothing granted, the held key named.
    const Granted c = as<Granted>(h.answer(l, h.send(l, one("c", "x"))));
    const Held held = as<Held>(h.answer(l, h.send(l, set({"d", "c"}, "y"))));
    BOOST_TEST(held.message == "key c is held with token " + std::to_string(c.token));
    BOOST_TEST(h.core(l).table().find("d") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_set_is_kept_alive_and_released_only_whole) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, set({"a", "b", "c"}, "w", 0, 1000))));
    h.advance(milliseconds(600));
    const std::string part = "key b is part of a set of 3 keys granted with token " + std::to_string(g.token);
    BOOST_TEST(as<PartOfSet>(h.answer(l, h.send(l, KeepAlive{"b", g.token}))).message.starts_with(part));
    BOOST_TEST(as<PartOfSet>(h.answer(l, h.send(l, Release{"b", g.token}))).message.starts_with(part));
    const std::string first = "key a is part of a set of 3 keys";
    BOOST_TEST(as<PartOfSet>(h.answer(l, h.send(l, KeepAlive{{}, g.token, {"a", "b"}}))).message.starts_with(first));
    BOOST_TEST(as<PartOfSet>(h.answer(l, h.send(l, Release{{}, g.token, {"a", "c"}}))).message.starts_with(first));
    as<NotHeld>(h.answer(l, h.send(l, KeepAlive{{}, g.token + 1, {"a", "b", "c"}})));
    const KeptAlive k = as<KeptAlive>(h.answer(l, h.send(l, KeepAlive{{}, g.token, {"c", "a", "b"}})));
    BOOST_TEST(k.ttl_ms == 1000u);
    for (const char* key : {"a", "b", "c"}) {
        BOOST_TEST((h.core(l).lease(key)->deadline == h.now() + milliseconds(1000)));
    }
    h.advance(milliseconds(600));  // alive thanks to the keepalive
    BOOST_TEST(h.core(l).table().size() == 3u);
    as<Released>(h.answer(l, h.send(l, Release{{}, g.token, {"b", "c", "a"}})));
    BOOST_TEST(h.core(l).table().size() == 0u);
    BOOST_TEST(h.core(l).check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(a_set_expires_as_one_expire_many) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    as<Granted>(h.answer(l, h.send(l, set({"a", "b", "c"}, "w", 0, 1000))));
    h.advance(milliseconds(1200));
    BOOST_TEST(h.core(l).table().size() == 0u);
    BOOST_TEST(h.core(l).counters().expires_proposed == 3u);
    BOOST_TEST(h.core(l).counters().expire_batches == 1u);
    BOOST_TEST(h.core(l).counters().expiries_existed == 3u);
}

// A waiting set is not jumped by a later single-key waiter on a key that is
// free: it waits behind the set; the set goes once all its keys are free.
BOOST_AUTO_TEST_CASE(a_waiting_set_is_not_jumped_by_a_later_waiter) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted a = as<Granted>(h.answer(l, h.send(l, one("a", "holder", 0, 60000))));
    const RequestId s = h.send(l, set({"a", "b"}, "set", 10000));
    BOOST_TEST(!h.answer(l, s).has_value());
    const RequestId later = h.send(l, one("b", "later", 10000));  // "b" is free, but the set is first on it
    BOOST_TEST(!h.answer(l, later).has_value());
    BOOST_TEST(h.core(l).table().find("b") == nullptr);
    BOOST_TEST(h.core(l).waiter_count() == 2u);
    BOOST_TEST(h.core(l).check_invariants() == "");
    as<Released>(h.answer(l, h.send(l, Release{"a", a.token})));
    const Granted gs = as<Granted>(h.answer(l, s));
    BOOST_TEST((gs.keys == std::vector<std::string>{"a", "b"}));
    BOOST_TEST(!h.answer(l, later).has_value());
    as<Released>(h.answer(l, h.send(l, Release{{}, gs.token, {"a", "b"}})));
    BOOST_TEST(as<Granted>(h.answer(l, later)).owner == "later");
}

// Acquires that never wait do not barge either: while a set waits on a
// free key (its other key held), one on the free key is refused at once, so
// they cannot keep the set from its keys; the set goes once the other is free.
BOOST_AUTO_TEST_CASE(acquires_without_a_wait_cannot_starve_a_waiting_set) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted a = as<Granted>(h.answer(l, h.send(l, one("a", "holder", 0, 60000))));
    const RequestId s = h.send(l, set({"a", "b"}, "set", 10000));
    BOOST_TEST(!h.answer(l, s).has_value());
    const Held refused = as<Held>(h.answer(l, h.send(l, one("b", "eager"))));
    BOOST_TEST(refused.message == "key b has waiting acquires ahead of this one");
    BOOST_TEST(h.core(l).table().find("b") == nullptr);
    as<Released>(h.answer(l, h.send(l, Release{"a", a.token})));
    const Granted gs = as<Granted>(h.answer(l, s));
    BOOST_TEST((gs.keys == std::vector<std::string>{"a", "b"}));
}

// An earlier single-key waiter is served before a set that came later, and
// the set then goes: FIFO on every key, no deadlock.
BOOST_AUTO_TEST_CASE(an_earlier_waiter_goes_before_a_set_and_the_set_follows) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted b = as<Granted>(h.answer(l, h.send(l, one("b", "holder", 0, 60000))));
    const RequestId first = h.send(l, one("b", "first", 10000));
    const RequestId s = h.send(l, set({"a", "b"}, "set", 10000));
    BOOST_TEST(!h.answer(l, s).has_value());
    BOOST_TEST(h.core(l).table().find("a") == nullptr);  // free, but the set waits for "b"
    as<Released>(h.answer(l, h.send(l, Release{"b", b.token})));
    const Granted gf = as<Granted>(h.answer(l, first));
    BOOST_TEST(!h.answer(l, s).has_value());
    as<Released>(h.answer(l, h.send(l, Release{"b", gf.token})));
    BOOST_TEST((as<Granted>(h.answer(l, s)).keys == std::vector<std::string>{"a", "b"}));
    BOOST_TEST(h.core(l).waiter_count() == 0u);
}

// A set's waiter that times out or whose client goes leaves every queue it
// was in, and the keys it held up are served at once.
BOOST_AUTO_TEST_CASE(a_set_waiter_that_leaves_frees_the_keys_it_held_up) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    as<Granted>(h.answer(l, h.send(l, one("a", "holder", 0, 60000))));
    const RequestId s = h.send(l, set({"a", "b"}, "set", 10000));
    const RequestId later = h.send(l, one("b", "later", 10000));
    BOOST_TEST(!h.answer(l, later).has_value());
    h.core(l).client_gone(s, h.now());
    h.settle();
    BOOST_TEST(as<Granted>(h.answer(l, later)).owner == "later");
    BOOST_TEST(h.core(l).waiter_count() == 0u);
    const RequestId t = h.send(l, set({"a", "c"}, "set2", 500));
    const RequestId after = h.send(l, one("c", "after", 10000));
    h.advance(milliseconds(600));
    BOOST_TEST(as<Held>(h.answer(l, t)).message == "wait timed out");
    BOOST_TEST(as<Granted>(h.answer(l, after)).owner == "after");
    BOOST_TEST(h.core(l).check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(the_same_owner_retrying_a_set_gets_its_token_and_one_key_alone_is_part_of_set) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, set({"a", "b"}, "w"))));
    BOOST_TEST(as<Granted>(h.answer(l, h.send(l, set({"a", "b"}, "w")))).token == g.token);
    BOOST_TEST(as<PartOfSet>(h.answer(l, h.send(l, one("a", "w")))).message.starts_with("key a is part of a set"));
}

BOOST_AUTO_TEST_SUITE_END()
