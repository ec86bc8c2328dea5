// Each token's life as a member applied it (member/token_history.h): its
// bounds and the oldest token it answers for, every way a token ends, the
// next token on a key, a restore; and what the core records as entries apply,
// the same on every member but for what only the leader saw.
#include <boost/test/unit_test.hpp>

#include "harness.h"
#include "lock/commands.h"
#include "member/token_history.h"

using namespace pgfence;
using namespace pgfence::member;
using namespace pgfence::member::test;

namespace {

constexpr std::uint64_t kWall = 1'796'000'000'000;

void grant(TokenHistory& h, lock::Token token, std::string key = "k", std::optional<std::uint64_t> wall = kWall) {
    h.granted(token, wall, token, {std::move(key)}, "o", 1000);  // the token is its entry's index (floor 0)
}

const TokenRecord& record(const TokenHistory& h, lock::Token token) {
    const TokenRecord* r = h.lookup(token).record;
    BOOST_REQUIRE_MESSAGE(r != nullptr, "token " << token << " is not kept");
    return *r;
}

std::vector<lock::Token> tokens_of(const TokenHistory& h, std::string_view key, std::size_t limit = 100) {
    std::vector<lock::Token> out;
    for (const TokenRecord* r : h.of_key(key, limit)) out.push_back(r->token);
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(token_history)

BOOST_AUTO_TEST_CASE(a_token_is_granted_ended_and_followed_on_its_key) {
    TokenHistory h(100, 1u << 20);
    grant(h, 3);
    h.keepalive_ok(3, kWall + 10);
    h.ended(3, TokenEnd::kReleased, 4, kWall + 20);
    grant(h, 5);
    h.ended(5, TokenEnd::kExpired, 7, kWall + 30);
    grant(h, 8);
    grant(h, 9, "other", std::nullopt);  // an entry without the leader's wall clock
    const TokenRecord& a = record(h, 3);
    BOOST_TEST(a.key() == "k");
    BOOST_TEST(a.granted_index == 3u);
    BOOST_TEST(a.granted_wall_ms.value_or(0) == kWall);
    BOOST_TEST(std::string(to_string(a.end)) == "released");
    BOOST_TEST(a.ended_index == 4u);
    BOOST_TEST(a.ended_wall_ms.value_or(0) == kWall + 20);
    BOOST_TEST(a.next_token == 5u);
    BOOST_TEST(std::string(to_string(record(h, 5).end)) == "expired");
    BOOST_TEST(record(h, 5).next_token == 8u);
    BOOST_TEST(std::string(to_string(record(h, 8).end)) == "held");
    BOOST_TEST(record(h, 8).next_token == 0u);
    BOOST_TEST(!record(h, 9).granted_wall_ms.has_value());
    BOOST_TEST((tokens_of(h, "k") == std::vector<lock::Token>{8, 5, 3}));
    BOOST_TEST((tokens_of(h, "k", 2) == std::vector<lock::Token>{8, 5}));
    BOOST_TEST(tokens_of(h, "none").empty());
    BOOST_REQUIRE(h.keepalives(3) != nullptr);
    BOOST_TEST(h.keepalives(3)->ok == 1u);
    BOOST_TEST(h.keepalives(5) == nullptr);
    // Never issued: not kept and not below the oldest token.
    BOOST_TEST(h.lookup(4).record == nullptr);
    BOOST_TEST(!h.lookup(4).compacted);
    BOOST_TEST(!h.lookup(1000).compacted);
    BOOST_CHECK_THROW(grant(h, 9), std::logic_error);  // an index applied before
}

BOOST_AUTO_TEST_CASE(an_end_is_recorded_once_and_a_grant_over_a_held_token_supersedes_it) {
    TokenHistory h(100, 1u << 20);
    h.granted(2, kWall, 2, {"a", "b"}, "s", 500);  // a set
    h.ended(2, TokenEnd::kExpired, 3, kWall + 1);  // an ExpireMany: once per key
    BOOST_TEST(std::string(to_string(record(h, 2).end)) == "held");
    h.ended(2, TokenEnd::kExpired, 3, kWall + 1);
    h.ended(2, TokenEnd::kReleased, 4, kWall + 2);  // too late: ended already
    BOOST_TEST(std::string(to_string(record(h, 2).end)) == "expired");
    BOOST_TEST(record(h, 2).ended_index == 3u);
    grant(h, 5, "b");
    BOOST_TEST(record(h, 2).next_token == 5u);
    grant(h, 6, "c");
    grant(h, 7, "c");  // 6's end was never applied here
    BOOST_TEST(std::string(to_string(record(h, 6).end)) == "superseded");
    BOOST_TEST(record(h, 6).next_token == 7u);
    h.regranted(7, 9000);  // an idempotent re-grant: the lease in force
    BOOST_TEST(record(h, 7).lease_ms == 9000u);
    BOOST_CHECK_THROW(h.ended(7, TokenEnd::kRestore, 8, std::nullopt), std::logic_error);
    // A set whose keys expire in two entries ends at the second; a key of it
    // granted again meanwhile does not supersede it.
    h.granted(10, kWall, 10, {"x", "y", "z"}, "s", 500);
    h.ended(10, TokenEnd::kExpired, 11, kWall + 1);
    BOOST_TEST(std::string(to_string(record(h, 10).end)) == "held");
    BOOST_TEST(record(h, 10).keys_held == 2u);
    h.granted(12, kWall, 12, {"x"}, "o", 500);
    BOOST_TEST(std::string(to_string(record(h, 10).end)) == "held");
    BOOST_TEST(record(h, 10).next_token == 12u);
    h.ended(10, TokenEnd::kExpired, 13, kWall + 2, 2);
    BOOST_TEST(std::string(to_string(record(h, 10).end)) == "expired");
    BOOST_TEST(record(h, 10).ended_index == 13u);
    BOOST_TEST(record(h, 10).keys_held == 0u);
}

// What the leader saw: a grant nobody received ends `phantom` when its
// Expire applies; an answered re-grant or keepalive makes it no phantom.
BOOST_AUTO_TEST_CASE(a_phantom_grant_ends_as_phantom_and_keepalives_are_counted) {
    TokenHistory h(100, 1u << 20);
    grant(h, 1, "p");
    h.phantom(1);
    h.ended(1, TokenEnd::kExpired, 2, kWall);
    BOOST_TEST(std::string(to_string(record(h, 1).end)) == "phantom");
    grant(h, 3, "q");
    h.phantom(3);
    h.regranted(3, 1000);  // a retry got it
    h.ended(3, TokenEnd::kExpired, 4, kWall);
    BOOST_TEST(std::string(to_string(record(h, 3).end)) == "expired");
    TokenRecord as_elsewhere = record(h, 1);
    as_elsewhere.end = TokenEnd::kExpired;
    as_elsewhere.phantom = false;
    BOOST_TEST(record(h, 1).same_derived(as_elsewhere));  // the log says expired on every member
    grant(h, 5, "r");
    h.keepalive_ok(5, kWall + 1);
    h.keepalive_ok(5, kWall + 2);
    h.keepalive_refused(5, kWall + 3, "expiring");
    h.keepalive_refused(999, kWall, "not_held");  // a token not kept: nothing
    const TokenKeepalives* k = h.keepalives(5);
    BOOST_REQUIRE(k != nullptr);
    BOOST_TEST(k->ok == 2u);
    BOOST_TEST(k->last_ok_wall_ms.value_or(0) == kWall + 2);
    BOOST_TEST(k->refused == 1u);
    BOOST_TEST(k->last_refused_wall_ms.value_or(0) == kWall + 3);
    BOOST_TEST(k->last_refused_reason == "expiring");
    BOOST_TEST(h.keepalives(999) == nullptr);
}

// Leaderships are ranges of applied entries: a token held during one was
// held while this member led.
BOOST_AUTO_TEST_CASE(whether_this_member_led_while_a_token_was_held) {
    TokenHistory h(100, 1u << 20);
    grant(h, 2);
    h.ended(2, TokenEnd::kReleased, 3, kWall);
    h.leading_from(5);  // leads from entry 6
    grant(h, 7);
    h.led_until(9);
    grant(h, 12, "x");
    h.leading_from(20);
    h.led_until(20);  // nothing applied while leading
    BOOST_TEST(!h.led_while_held(record(h, 2)));
    BOOST_TEST(h.led_while_held(record(h, 7)));
    BOOST_TEST(!h.led_while_held(record(h, 12)));
    h.leading_from(30);
    BOOST_TEST(h.led_while_held(record(h, 12)));  // still held: this member leads now
}

BOOST_AUTO_TEST_CASE(the_token_bound_drops_the_oldest_and_raises_the_oldest_token) {
    TokenHistory h(3, 1u << 20);
    for (lock::Token t = 1; t <= 5; ++t) grant(h, t * 2, t % 2 == 0 ? "even" : "odd");
    BOOST_TEST(h.size() == 3u);
    BOOST_TEST(h.dropped() == 2u);
    BOOST_TEST(h.oldest_token() == 5u);  // 4 dropped: every token from 5 on is kept or never issued
    BOOST_TEST(h.lookup(2).compacted);
    BOOST_TEST(h.lookup(4).compacted);
    BOOST_TEST(!h.lookup(5).compacted);
    BOOST_TEST(h.lookup(6).record != nullptr);
    BOOST_TEST((tokens_of(h, "odd") == std::vector<lock::Token>{10, 6}));
    BOOST_TEST((tokens_of(h, "even") == std::vector<lock::Token>{8}));
    h.keepalive_ok(6, kWall);
    grant(h, 12, "odd");
    BOOST_TEST(h.keepalives(6) == nullptr);  // dropped with its token
    BOOST_TEST((tokens_of(h, "odd") == std::vector<lock::Token>{12, 10}));
    // Many tokens of one key, dropped one by one: the key's index stays in step.
    TokenHistory one(10, 1u << 20);
    for (lock::Token t = 1; t <= 1000; ++t) grant(one, t);
    BOOST_TEST((tokens_of(one, "k", 3) == std::vector<lock::Token>{1000, 999, 998}));
    BOOST_TEST(tokens_of(one, "k").size() == 10u);
    BOOST_TEST(one.oldest_token() == 991u);
}

BOOST_AUTO_TEST_CASE(the_byte_bound_drops_the_oldest) {
    TokenRecord probe;
    probe.keys = {std::string(100, 'k')};
    probe.owner = "o";
    // Each token has a key of its own: the key's index entry is charged too.
    const std::uint64_t each = token_bytes(probe) + key_index_bytes(probe.keys[0]);
    TokenHistory h(1000, 3 * each);
    for (lock::Token t = 1; t <= 5; ++t) grant(h, t, std::string(99, 'k') + std::to_string(t % 10));
    BOOST_TEST(h.size() == 3u);
    BOOST_TEST(h.bytes() == 3 * each);
    BOOST_TEST(h.oldest_token() == 3u);
    // Tokens of one key share its entry: charged once, credited when its last token goes.
    TokenHistory shared(1000, 1u << 20);
    grant(shared, 1, std::string(100, 's'));
    grant(shared, 2, std::string(100, 's'));
    BOOST_TEST(shared.bytes() == 2 * token_bytes(probe) + key_index_bytes(probe.keys[0]));
    // Keepalives are charged (their reason too) and credited with their token.
    const std::uint64_t before = shared.bytes();
    shared.keepalive_ok(1, kWall);
    TokenKeepalives k;
    BOOST_TEST(shared.bytes() == before + keepalive_bytes(k));
    const std::string reason(40, 'r');  // beyond a string's inline buffer
    shared.keepalive_refused(1, kWall, reason);
    k.last_refused_reason = reason;
    BOOST_TEST(keepalive_bytes(k) > keepalive_bytes(TokenKeepalives{}));
    BOOST_TEST(shared.bytes() == before + keepalive_bytes(k));
    TokenHistory two(2, 1u << 20);
    grant(two, 1, "a");
    two.keepalive_refused(1, kWall, reason);
    grant(two, 2, "b");
    grant(two, 3, "c");  // drops 1, its key and its keepalives
    TokenHistory fresh(2, 1u << 20);
    grant(fresh, 2, "b");
    grant(fresh, 3, "c");
    BOOST_TEST(two.bytes() == fresh.bytes());
    // A record larger than the bound alone is dropped at once.
    TokenHistory tiny(1000, 10);
    grant(tiny, 1);
    BOOST_TEST(tiny.size() == 0u);
    BOOST_TEST(tiny.lookup(1).compacted);
    BOOST_CHECK_THROW(TokenHistory(0, 1), std::invalid_argument);
    BOOST_CHECK_THROW(TokenHistory(1, 0), std::invalid_argument);
}

// A restored snapshot: held tokens it does not hold end `restore`, the
// locks it holds become tokens without a granted index, tokens up to the
// snapshot's index + floor not kept answer compacted, and a token that
// ended before keeps no next token (the skipped entries may hold it).
BOOST_AUTO_TEST_CASE(a_restore_ends_what_it_did_not_see_and_adds_what_it_holds) {
    TokenHistory h(100, 1u << 20);
    grant(h, 2, "gone");
    grant(h, 3, "kept");
    grant(h, 4, "done");
    h.ended(4, TokenEnd::kReleased, 5, kWall);
    lock::LockTable table;  // what the member that took the snapshot applied
    BOOST_TEST(std::get<lock::Granted>(table.apply(3, lock::Grant{"kept", 1000, "o"})).token == 3u);
    table.apply(40, lock::Grant{"kept", 4000, "o"});  // a re-grant this member skips: the longer lease
    const lock::Result set = table.apply(50, lock::GrantMany{{"s2", "s1"}, 700, "w"});
    const lock::Token set_token = std::get<lock::Granted>(set).token;
    BOOST_TEST(set_token == 50u);
    BOOST_TEST_REQUIRE(std::holds_alternative<lock::FloorSet>(table.apply(55, lock::SetTokenFloor{100})));
    h.restored(60, table);
    BOOST_TEST(std::string(to_string(record(h, 2).end)) == "restore");
    BOOST_TEST(record(h, 2).ended_index == 0u);
    BOOST_TEST(std::string(to_string(record(h, 3).end)) == "held");
    BOOST_TEST(record(h, 3).lease_ms == 4000u);
    BOOST_TEST(record(h, 4).next_unknown);
    const TokenRecord& s = record(h, set_token);
    BOOST_TEST(s.granted_index == 0u);
    BOOST_TEST((s.keys == std::vector<std::string>{"s1", "s2"}));
    BOOST_TEST(s.owner == "w");
    BOOST_TEST(s.lease_ms == 700u);
    BOOST_TEST(h.oldest_token() == 161u);
    BOOST_TEST(h.lookup(120).compacted);
    BOOST_TEST(!h.lookup(161).compacted);
    h.granted(61, kWall, 161, {"done"}, "o", 1000);
    BOOST_TEST(record(h, 4).next_token == 0u);  // not 161: a token between may be in the skipped entries
    h.granted(62, kWall, 162, {"kept"}, "o", 1000);
    BOOST_TEST(record(h, 3).next_token == 162u);  // held across the restore: 162 follows it
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(token_history_core)

// Every member records the same life of each token from the log; the
// keepalives, and a refused one's reason, only on the leader. An entry
// proposed before the leader knew a wall clock carries none.
BOOST_AUTO_TEST_CASE(every_member_derives_the_same_lives_and_only_the_leader_counts_keepalives) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const lock::Token t0 = as<Granted>(h.answer(l, h.send(l, Acquire{"k", 1000, 0, "a"}))).token;
    as<Released>(h.answer(l, h.send(l, Release{"k", t0})));
    h.core(l).wall_clock(kWall);
    const lock::Token t1 = as<Granted>(h.answer(l, h.send(l, Acquire{"k", 1000, 0, "a"}))).token;
    h.core(l).wall_clock(kWall + 5);
    as<KeptAlive>(h.answer(l, h.send(l, KeepAlive{"k", t1})));
    h.core(l).wall_clock(kWall + 9);
    as<Released>(h.answer(l, h.send(l, Release{"k", t1})));
    as<NotHeld>(h.answer(l, h.send(l, KeepAlive{"k", t1})));
    const lock::Token t2 = as<Granted>(h.answer(l, h.send(l, Acquire{"k", 500, 0, "b"}))).token;
    h.advance(milliseconds(2000));  // its lease runs out: Expire
    h.settle();
    const TokenHistory& lh = h.core(l).token_history();
    BOOST_TEST(!record(lh, t0).granted_wall_ms.has_value());
    BOOST_TEST(record(lh, t0).next_token == t1);
    BOOST_TEST(record(lh, t1).granted_wall_ms.value_or(0) == kWall);
    BOOST_TEST(record(lh, t1).ended_wall_ms.value_or(0) == kWall + 9);
    BOOST_TEST(std::string(to_string(record(lh, t1).end)) == "released");
    BOOST_TEST(record(lh, t1).next_token == t2);
    BOOST_TEST(std::string(to_string(record(lh, t2).end)) == "expired");
    BOOST_TEST(record(lh, t2).ended_index > t2);
    BOOST_REQUIRE(lh.keepalives(t1) != nullptr);
    BOOST_TEST(lh.keepalives(t1)->ok == 1u);
    BOOST_TEST(lh.keepalives(t1)->last_ok_wall_ms.value_or(0) == kWall + 5);
    BOOST_TEST(lh.keepalives(t1)->refused == 1u);
    BOOST_TEST(lh.keepalives(t1)->last_refused_reason == "not_held");
    BOOST_TEST(lh.led_while_held(record(lh, t1)));
    for (raft::NodeId id : {raft::NodeId{1}, raft::NodeId{2}, raft::NodeId{3}}) {
        const TokenHistory& other = h.core(id).token_history();
        BOOST_TEST(other.size() == lh.size());
        for (lock::Token t : {t0, t1, t2}) BOOST_TEST(record(other, t).same_derived(record(lh, t)), "member " << id << " token " << t);
        if (id == l) continue;
        BOOST_TEST(other.keepalives(t1) == nullptr);
        BOOST_TEST(!other.led_while_held(record(other, t1)));
    }
}

BOOST_AUTO_TEST_CASE(a_grant_that_could_not_be_written_ends_as_phantom_on_the_leader) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    h.auto_written = false;
    const RequestId id = h.send(l, Acquire{"p", 5000, 0, "w"});
    const lock::Token t = as<Granted>(h.answer(l, id)).token;
    h.core(l).response_written(id, false, h.now());
    h.settle();
    BOOST_TEST(std::string(to_string(record(h.core(l).token_history(), t).end)) == "phantom");
    for (raft::NodeId other : {raft::NodeId{1}, raft::NodeId{2}, raft::NodeId{3}}) {
        if (other == l) continue;
        BOOST_TEST(std::string(to_string(record(h.core(other).token_history(), t).end)) == "expired");
    }
}

BOOST_AUTO_TEST_SUITE_END()
