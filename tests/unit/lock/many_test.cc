// Sets of keys (GrantMany / ReleaseMany, commands.h): encoding, validate(),
// every apply outcome of table.h, invariants and snapshots with sets.
#include <boost/test/unit_test.hpp>

#include "lock/table.h"
#include "test_support.h"

using namespace pgfence::lock;
using pgfence::lock::test::Bytes;

namespace many_test {

constexpr std::uint64_t kManyLeaseMs = 10'000;

std::string many_decode_error(std::string_view bytes) {
    auto decoded = decode_command(bytes);
    if (auto* error = std::get_if<DecodeError>(&decoded)) return error->message;
    return {};
}

// A table holding "a" alone (token 1) and the set {"c", "b"} (token 2).
LockTable table_with_a_set() {
    LockTable table;
    BOOST_TEST_REQUIRE((table.apply(1, Grant{"a", kManyLeaseMs, "w1"}) == Result{Granted{1, true, kManyLeaseMs}}));
    BOOST_TEST_REQUIRE((table.apply(2, GrantMany{{"c", "b"}, kManyLeaseMs, "w2", "u2"}) ==
                        Result{Granted{2, true, kManyLeaseMs}}));
    return table;
}

}  // namespace many_test
using many_test::many_decode_error;
using many_test::kManyLeaseMs;
using many_test::table_with_a_set;



BOOST_AUTO_TEST_SUITE(many)

BOOST_AUTO_TEST_CASE(grant_many_and_release_many_follow_the_documented_layout) {
    BOOST_TEST(encode(GrantMany{{"k1", "k"}, 7, "o", ""}) ==
               Bytes().u8(1).u8(6).u32(2).str("k1").str("k").u64(7).str("o").str("").get());
    BOOST_TEST(encode(GrantMany{{"k1", "k"}, 7, "", "u"}) ==
               Bytes().u8(1).u8(6).u32(2).str("k1").str("k").u64(7).str("").str("u").get());
    BOOST_TEST(encode(ReleaseMany{{"x", "y"}, 9}) == Bytes().u8(1).u8(7).u32(2).str("x").str("y").u64(9).get());
    const GrantMany many{{"k1", "k"}, 7, "o", "u"};
    BOOST_TEST(encoded_bytes(many) == encode(many).size());
    const ReleaseMany release{{"x", "yy", "zzz"}, 9};
    BOOST_TEST(encoded_bytes(release) == encode(release).size());
}

// Hostile counts are refused before anything is allocated for them; a
// version 2 GrantMany (only a Grant is version 2) is refused.
BOOST_AUTO_TEST_CASE(hostile_counts_and_versions_are_refused) {
    for (std::uint32_t count : {0u, 1u, 65u, 0xffffffffu}) {
        const std::string grant = many_decode_error(Bytes().u8(1).u8(6).u32(count).get());
        BOOST_TEST(grant.find("grant_many count " + std::to_string(count) + " is not in 2..64") != std::string::npos,
                   grant);
        const std::string release = many_decode_error(Bytes().u8(1).u8(7).u32(count).get());
        BOOST_TEST(release.find("release_many count") != std::string::npos, release);
    }
    // A count promising keys that are not there.
    BOOST_TEST(many_decode_error(Bytes().u8(1).u8(6).u32(3).str("a").str("b").get()).find("grant_many key") !=
               std::string::npos);
    BOOST_TEST(!many_decode_error(Bytes().u8(2).u8(6).u32(2).str("a").str("b").u64(1).str("").str("u").get()).empty());
    // Trailing bytes after a whole ReleaseMany.
    BOOST_TEST(!many_decode_error(Bytes().u8(1).u8(7).u32(2).str("a").str("b").u64(1).u8(0).get()).empty());
    // Every prefix of a valid GrantMany is refused, never read past its end.
    const std::string valid = encode(GrantMany{{"alpha", "beta", "gamma"}, 5, "o", "u"});
    for (std::size_t n = 0; n < valid.size(); ++n) BOOST_TEST(!many_decode_error(valid.substr(0, n)).empty(), n);
}

BOOST_AUTO_TEST_CASE(validate_refuses_duplicates_counts_sizes_and_bad_keys) {
    BOOST_TEST(validate(Command{GrantMany{{"a", "b"}, kManyLeaseMs, "o"}}) == "");
    BOOST_TEST(validate(Command{GrantMany{{"a", "b", "a"}, kManyLeaseMs, "o"}}).find("key 2 repeats key 0") !=
               std::string::npos);
    BOOST_TEST(validate(Command{GrantMany{{"a"}, kManyLeaseMs, "o"}}).find("names 1 keys") != std::string::npos);
    BOOST_TEST(validate(Command{GrantMany{{}, kManyLeaseMs, "o"}}).find("names 0 keys") != std::string::npos);
    GrantMany too_many{{}, kManyLeaseMs, "o"};
    for (std::size_t i = 0; i <= kMaxGrantManyKeys; ++i) too_many.keys.push_back("k" + std::to_string(i));
    BOOST_TEST(validate(Command{too_many}).find("names 65 keys") != std::string::npos);
    too_many.keys.pop_back();
    BOOST_TEST(validate(Command{too_many}) == "");
    // 64 keys of 512 bytes: over 32 KiB encoded.
    GrantMany too_big{{}, kManyLeaseMs, "o"};
    for (std::size_t i = 0; i < kMaxGrantManyKeys; ++i) {
        too_big.keys.push_back(std::to_string(i) + std::string(kMaxKeyBytes - 2, 'k'));
    }
    BOOST_TEST(validate(Command{too_big}).find("bytes encoded; the limit is 32768") != std::string::npos);
    BOOST_TEST(validate(Command{GrantMany{{"a", "b\x01"}, kManyLeaseMs, "o"}}).find("key 1") != std::string::npos);
    BOOST_TEST(validate(Command{GrantMany{{"a", "b"}, 0, "o"}}).find("lease_ms 0") != std::string::npos);
    BOOST_TEST(validate(Command{ReleaseMany{{"a", "a"}, 3}}).find("repeats") != std::string::npos);
    BOOST_TEST(validate(Command{ReleaseMany{{"a", "b"}, 3}}) == "");
}

BOOST_AUTO_TEST_CASE(grant_many_on_free_keys_makes_one_set_with_one_token) {
    LockTable table = table_with_a_set();
    for (const char* key : {"b", "c"}) {
        const Lock* lock = table.find(key);
        BOOST_TEST_REQUIRE(lock != nullptr);
        BOOST_TEST((*lock == Lock{key, 2, kManyLeaseMs, "w2", "u2"}));
    }
    BOOST_TEST(table.set_size(2) == 2u);
    BOOST_TEST(table.set_size(1) == 0u);  // a lock alone is not a set
    BOOST_TEST((table.set_keys(2) == std::vector<std::string>{"b", "c"}));
    BOOST_TEST(table.sets() == 1u);
    BOOST_TEST(table.last_token() == 2u);
    BOOST_TEST(table.check_invariants() == "");
}

// All or nothing: one held key refuses the whole set, naming the first held
// key in the order asked, and nothing is granted.
BOOST_AUTO_TEST_CASE(grant_many_with_a_held_key_grants_nothing_and_names_the_first_held_key) {
    LockTable table = table_with_a_set();
    const LockTable before = table;
    const Result r = table.apply(3, GrantMany{{"z", "c", "a"}, kManyLeaseMs, "w3"});
    BOOST_TEST((r == Result{GrantRejected{2, "c"}}));
    BOOST_TEST(table.find("z") == nullptr);
    BOOST_TEST(table.size() == before.size());
    BOOST_TEST(table.list() == before.list());
    BOOST_TEST(table.last_token() == 2u);
    BOOST_TEST((table.apply(4, GrantMany{{"a", "z"}, kManyLeaseMs, "w3"}) == Result{GrantRejected{1, "a"}}));
    // Invalid (a repeated key): refused whole with 0.
    BOOST_TEST((table.apply(5, GrantMany{{"y", "y"}, kManyLeaseMs, "w3"}) == Result{GrantRejected{0}}));
    BOOST_TEST(table.find("y") == nullptr);
}

BOOST_AUTO_TEST_CASE(grant_many_past_the_table_limit_is_table_full_and_grants_nothing) {
    // Room for exactly two one-byte-key locks without an owner.
    LockTable table(2 * lock_bytes("a", ""));
    BOOST_TEST((table.apply(1, Grant{"a", kManyLeaseMs, ""}) == Result{Granted{1, true, kManyLeaseMs}}));
    BOOST_TEST((table.apply(2, GrantMany{{"b", "c"}, kManyLeaseMs, ""}) == Result{TableFull{lock_bytes("a", "")}}));
    BOOST_TEST(table.size() == 1u);
    BOOST_TEST((table.apply(3, Release{"a", 1}) == Result{Released{}}));
    BOOST_TEST((table.apply(4, GrantMany{{"b", "c"}, kManyLeaseMs, ""}) == Result{Granted{4, true, kManyLeaseMs}}));
}

// The same owner and user asking again for exactly the set get its token
// back, with the longer lease; a part, a superset or another user is refused.
BOOST_AUTO_TEST_CASE(the_same_owner_retrying_exactly_the_set_gets_its_token_back) {
    LockTable table = table_with_a_set();
    BOOST_TEST((table.apply(3, GrantMany{{"b", "c"}, 5, "w2", "u2"}) == Result{Granted{2, false, kManyLeaseMs}}));
    BOOST_TEST((table.apply(4, GrantMany{{"c", "b"}, 2 * kManyLeaseMs, "w2", "u2"}) ==
                Result{Granted{2, false, 2 * kManyLeaseMs}}));
    BOOST_TEST(table.find("b")->lease_ms == 2 * kManyLeaseMs);
    BOOST_TEST(table.find("c")->lease_ms == 2 * kManyLeaseMs);
    BOOST_TEST((table.apply(5, GrantMany{{"b", "c"}, kManyLeaseMs, "w2", "other"}) == Result{GrantRejected{2, "b"}}));
    BOOST_TEST((table.apply(6, GrantMany{{"b", "c", "d"}, kManyLeaseMs, "w2", "u2"}) == Result{GrantRejected{2, "b"}}));
    BOOST_TEST(table.find("d") == nullptr);
    BOOST_TEST(table.check_invariants() == "");
}

// A set is addressed whole: one key's Release, a ReleaseMany of part of it,
// or its owner's Grant of one key is PartOfSet and changes nothing.
BOOST_AUTO_TEST_CASE(a_key_of_a_set_alone_is_part_of_set) {
    LockTable table = table_with_a_set();
    BOOST_TEST((table.apply(3, Release{"b", 2}) == Result{PartOfSet{"b", 2, 2}}));
    BOOST_TEST((table.apply(4, Grant{"c", kManyLeaseMs, "w2", "u2"}) == Result{PartOfSet{"c", 2, 2}}));
    BOOST_TEST((table.apply(5, Grant{"c", kManyLeaseMs, "w9"}) == Result{GrantRejected{2}}));
    BOOST_TEST((table.apply(6, GrantMany{{"x", "y", "z"}, kManyLeaseMs, "w4"}) == Result{Granted{6, true, kManyLeaseMs}}));
    BOOST_TEST((table.apply(7, ReleaseMany{{"z", "x"}, 6}) == Result{PartOfSet{"z", 6, 3}}));
    BOOST_TEST(table.size() == 6u);
    // A wrong token, or a key not held with it: NotFound, nothing released.
    BOOST_TEST((table.apply(8, ReleaseMany{{"b", "c"}, 6}) == Result{NotFound{}}));
    BOOST_TEST((table.apply(9, ReleaseMany{{"b", "a"}, 2}) == Result{NotFound{}}));
    BOOST_TEST(table.size() == 6u);
    BOOST_TEST((table.apply(10, ReleaseMany{{"c", "b"}, 2}) == Result{Released{}}));
    BOOST_TEST(table.find("b") == nullptr);
    BOOST_TEST(table.find("c") == nullptr);
    BOOST_TEST(table.set_size(2) == 0u);
    BOOST_TEST(table.sets() == 1u);
    BOOST_TEST(table.check_invariants() == "");
}

// Expire removes one key of a set (an expiry batch may end inside a set):
// what is left is a set of fewer keys, and one key left is a plain lock.
BOOST_AUTO_TEST_CASE(expire_of_keys_of_a_set_shrinks_it_to_a_plain_lock) {
    LockTable table;
    BOOST_TEST((table.apply(1, GrantMany{{"a", "b", "c"}, kManyLeaseMs, "w"}) == Result{Granted{1, true, kManyLeaseMs}}));
    BOOST_TEST((table.apply(2, ExpireMany{{Expire{"a", 1}}}) == Result{ExpiredMany{1}}));
    BOOST_TEST(table.set_size(1) == 2u);
    BOOST_TEST((table.apply(3, Expire{"b", 1}) == Result{Expired{true}}));
    BOOST_TEST(table.set_size(1) == 0u);
    BOOST_TEST(table.sets() == 0u);
    BOOST_TEST(table.check_invariants() == "");
    BOOST_TEST((table.apply(4, Release{"c", 1}) == Result{Released{}}));
    BOOST_TEST(table.size() == 0u);
}

// A set survives a snapshot (its locks keep their one token) and restore()
// counts it again; sliced snapshots agree.
BOOST_AUTO_TEST_CASE(sets_survive_a_snapshot) {
    LockTable table = table_with_a_set();
    table.apply(3, GrantMany{{"x", "y", "z"}, kManyLeaseMs, ""});
    auto restored = LockTable::restore(table.snapshot());
    BOOST_TEST_REQUIRE(std::holds_alternative<LockTable>(restored));
    LockTable& copy = std::get<LockTable>(restored);
    BOOST_TEST((copy == table));
    BOOST_TEST(copy.set_size(2) == 2u);
    BOOST_TEST(copy.set_size(3) == 3u);
    BOOST_TEST(copy.sets() == 2u);
    BOOST_TEST((copy.apply(4, Release{"y", 3}) == Result{PartOfSet{"y", 3, 3}}));
    BOOST_TEST((copy.apply(5, ReleaseMany{{"x", "y", "z"}, 3}) == Result{Released{}}));
}

// A snapshot in which two locks share a token but differ (owner, user or
// lease) is not one set: refused.
BOOST_AUTO_TEST_CASE(a_snapshot_whose_shared_token_is_not_one_set_is_refused) {
    for (const Lock& second : {Lock{"b", 9, 5, "o"}, Lock{"b", 9, 6, ""}}) {
        Bytes bytes = Bytes().u8(1).u64(10).u64(0).u64(10).u32(2);
        test::put_lock(bytes, Lock{"a", 9, 5, ""});
        test::put_lock(bytes, second);
        auto restored = LockTable::restore(bytes.get());
        BOOST_TEST_REQUIRE(std::holds_alternative<DecodeError>(restored));
        BOOST_TEST(std::get<DecodeError>(restored).message.find("not one set") != std::string::npos);
    }
    Bytes good = Bytes().u8(1).u64(10).u64(0).u64(10).u32(2);
    test::put_lock(good, Lock{"a", 9, 5, "o"});
    test::put_lock(good, Lock{"b", 9, 5, "o"});
    auto restored = LockTable::restore(good.get());
    BOOST_TEST_REQUIRE(std::holds_alternative<LockTable>(restored));
    BOOST_TEST(std::get<LockTable>(restored).set_size(9) == 2u);
}

BOOST_AUTO_TEST_CASE(describe_names_sets) {
    BOOST_TEST(describe(Command{GrantMany{{"a", "b"}, 5, "o", "u"}}) ==
               "grant_many count=2 first_key=\"a\" lease_ms=5 owner=\"o\" user=\"u\"");
    BOOST_TEST(describe(Command{ReleaseMany{{"a", "b"}, 7}}) == "release_many count=2 first_key=\"a\" token=7");
    BOOST_TEST(describe(Result{GrantRejected{3, "k"}}) == "grant_rejected holder_token=3 key=\"k\"");
    BOOST_TEST(describe(Result{PartOfSet{"k", 3, 4}}) == "part_of_set key=\"k\" token=3 keys=4");
}

BOOST_AUTO_TEST_SUITE_END()
