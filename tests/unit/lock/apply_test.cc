// LockTable::apply: every command/result path of docs/design.md "Replicated commands".
#include <boost/test/unit_test.hpp>
#include <stdexcept>

#include "lock/table.h"
#include "test_support.h"

using namespace pgfence::lock;

namespace {

constexpr std::uint64_t kLeaseMs = 10'000;

Token granted_token(const Result& r) {
    BOOST_TEST_REQUIRE(std::holds_alternative<Granted>(r), "expected Granted, got " << describe(r));
    return std::get<Granted>(r).token;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(apply)

BOOST_AUTO_TEST_CASE(grant_on_free_key_holds_it_with_token_equal_to_entry_index) {
    LockTable table;
    const Result r = table.apply(5, Grant{"report:7", kLeaseMs, "worker-a"});
    BOOST_TEST(granted_token(r) == 5u);
    const Lock* lock = table.find("report:7");
    BOOST_TEST_REQUIRE(lock != nullptr);
    BOOST_TEST((*lock == Lock{"report:7", 5, kLeaseMs, "worker-a"}));
    BOOST_TEST(table.last_token() == 5u);
    BOOST_TEST(table.applied_index() == 5u);
}

BOOST_AUTO_TEST_CASE(grant_token_is_entry_index_plus_token_floor) {
    LockTable table;
    BOOST_TEST((table.apply(1, SetTokenFloor{1000}) == Result{FloorSet{1000}}));
    BOOST_TEST(granted_token(table.apply(2, Grant{"k", kLeaseMs, ""})) == 2u + 1000u);
    BOOST_TEST(grant_token(2, 1000) == 2u + 1000u);
}

// grant_token() is the rule the table assigns with: 0 (refused) past kMaxToken.
BOOST_AUTO_TEST_CASE(grant_token_is_zero_beyond_the_largest_token) {
    BOOST_TEST(grant_token(1, 0) == 1u);
    BOOST_TEST(grant_token(kMaxToken - 5, 5) == kMaxToken);
    BOOST_TEST(grant_token(kMaxToken - 4, 5) == 0u);
    BOOST_TEST(grant_token(1, kMaxToken) == 0u);
    BOOST_TEST(grant_token(1, kMaxToken + 1) == 0u);
    BOOST_TEST(grant_token(~0ull, ~0ull) == 0u);
}

// The table reports whether a Grant created the lock or re-granted it.
BOOST_AUTO_TEST_CASE(granted_says_whether_the_grant_created_the_lock) {
    LockTable table;
    BOOST_TEST((table.apply(1, Grant{"k", kLeaseMs, "worker-a"}) == Result{Granted{1, true, kLeaseMs}}));
    BOOST_TEST((table.apply(2, Grant{"k", kLeaseMs, "worker-a"}) == Result{Granted{1, false, kLeaseMs}}));
    BOOST_TEST((table.apply(3, Release{"k", 1}) == Result{Released{}}));
    BOOST_TEST((table.apply(4, Grant{"k", kLeaseMs, "worker-a"}) == Result{Granted{4, true, kLeaseMs}}));
}

BOOST_AUTO_TEST_CASE(grant_on_key_held_by_another_owner_is_rejected_with_holder_token) {
    LockTable table;
    const Token holder = granted_token(table.apply(1, Grant{"k", kLeaseMs, "worker-a"}));
    BOOST_TEST((table.apply(2, Grant{"k", kLeaseMs, "worker-b"}) == Result{GrantRejected{holder}}));
    BOOST_TEST((table.apply(3, Grant{"k", kLeaseMs, ""}) == Result{GrantRejected{holder}}));
    BOOST_TEST(table.find("k")->owner == "worker-a");
    BOOST_TEST(table.last_token() == holder);
}

BOOST_AUTO_TEST_CASE(regrant_by_same_owner_returns_existing_token_and_takes_a_longer_lease) {
    LockTable table;
    const Token first = granted_token(table.apply(1, Grant{"k", kLeaseMs, "worker-a"}));
    const Result again = table.apply(2, Grant{"k", 2 * kLeaseMs, "worker-a"});
    BOOST_TEST(granted_token(again) == first);
    BOOST_TEST((again == Result{Granted{first, false, 2 * kLeaseMs}}));  // the lease in force
    BOOST_TEST(table.find("k")->token == first);
    BOOST_TEST(table.find("k")->lease_ms == 2 * kLeaseMs);
    BOOST_TEST(table.last_token() == first);  // no new token was issued
    BOOST_TEST(table.size() == 1u);
}

// A retry never shortens the lease: the lock keeps the longer lease_ms
// (a new leader restarts the lease at it), and the retry gets its token.
BOOST_AUTO_TEST_CASE(regrant_by_same_owner_asking_a_shorter_lease_keeps_the_longer) {
    LockTable table;
    const Token first = granted_token(table.apply(1, Grant{"k", 30'000, "worker-a", "ua"}));
    BOOST_TEST((table.apply(2, Grant{"k", 1'000, "worker-a", "ua"}) == Result{Granted{first, false, 30'000}}));
    BOOST_TEST(table.find("k")->lease_ms == 30'000u);
    BOOST_TEST((table.apply(3, Grant{"k", 30'000, "worker-a", "ua"}) == Result{Granted{first, false, 30'000}}));
    BOOST_TEST(table.find("k")->lease_ms == 30'000u);
    BOOST_TEST(table.check_invariants() == "");
}

// With authentication, an owner is bound to the user that made it: another
// user naming it is a contender (GrantRejected{holder}), and the lock, its
// lease_ms and its user are untouched. Without authentication (user "") the
// owner is all there is: anyone naming it re-acquires.
BOOST_AUTO_TEST_CASE(an_owner_is_regranted_only_to_the_user_that_made_it) {
    LockTable table;
    const Token held = granted_token(table.apply(1, Grant{"k", 30'000, "worker-a", "ua"}));
    BOOST_TEST((table.apply(2, Grant{"k", 1'000, "worker-a", "uc"}) == Result{GrantRejected{held}}));
    BOOST_TEST((table.apply(3, Grant{"k", 1'000, "worker-a", ""}) == Result{GrantRejected{held}}));
    BOOST_TEST((*table.find("k") == Lock{"k", held, 30'000, "worker-a", "ua"}));
    BOOST_TEST((table.apply(4, Grant{"k", 30'000, "worker-a", "ua"}) == Result{Granted{held, false, 30'000}}));

    const Token anonymous = granted_token(table.apply(5, Grant{"n", 30'000, "worker-n"}));
    BOOST_TEST((table.apply(6, Grant{"n", 30'000, "worker-n", "ua"}) == Result{GrantRejected{anonymous}}));
    BOOST_TEST((table.apply(7, Grant{"n", 30'000, "worker-n"}) == Result{Granted{anonymous, false, 30'000}}));
    BOOST_TEST(table.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(regrants_is_the_same_non_empty_owner_and_the_same_user) {
    const Lock by_ua{"k", 1, kLeaseMs, "w", "ua"};
    BOOST_TEST(regrants(by_ua, "w", "ua"));
    BOOST_TEST(!regrants(by_ua, "w", "uc"));
    BOOST_TEST(!regrants(by_ua, "w", ""));
    BOOST_TEST(!regrants(by_ua, "x", "ua"));
    const Lock anonymous{"k", 1, kLeaseMs, "w"};
    BOOST_TEST(regrants(anonymous, "w", ""));
    BOOST_TEST(!regrants(anonymous, "w", "ua"));
    BOOST_TEST(!regrants(Lock{"k", 1, kLeaseMs, "", "ua"}, "", "ua"));
}

// A lock's user is part of its record: counted in bytes() and locks_with_user().
BOOST_AUTO_TEST_CASE(a_locks_user_is_counted_in_the_table_bytes) {
    LockTable table;
    table.apply(1, Grant{"k", kLeaseMs, "w", "ua"});
    table.apply(2, Grant{"n", kLeaseMs, "w"});
    BOOST_TEST(table.bytes() == lock_bytes("k", "w", "ua") + lock_bytes("n", "w"));
    BOOST_TEST(lock_bytes("k", "w", "ua") == lock_bytes("k", "w") + 4 + 2);
    BOOST_TEST(table.locks_with_user() == 1u);
    table.apply(3, Release{"k", 1});
    BOOST_TEST(table.bytes() == lock_bytes("n", "w"));
    BOOST_TEST(table.locks_with_user() == 0u);
    BOOST_TEST(table.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(regrant_with_empty_owner_is_not_idempotent) {
    LockTable table;
    const Token first = granted_token(table.apply(1, Grant{"k", kLeaseMs, ""}));
    BOOST_TEST((table.apply(2, Grant{"k", kLeaseMs, ""}) == Result{GrantRejected{first}}));
}

BOOST_AUTO_TEST_CASE(release_with_holder_token_frees_the_key) {
    LockTable table;
    const Token t = granted_token(table.apply(1, Grant{"k", kLeaseMs, ""}));
    BOOST_TEST((table.apply(2, Release{"k", t}) == Result{Released{}}));
    BOOST_TEST(table.find("k") == nullptr);
    BOOST_TEST(granted_token(table.apply(3, Grant{"k", kLeaseMs, ""})) > t);
}

BOOST_AUTO_TEST_CASE(release_of_unknown_key_or_wrong_token_is_not_found) {
    LockTable table;
    const Token t = granted_token(table.apply(1, Grant{"k", kLeaseMs, ""}));
    BOOST_TEST((table.apply(2, Release{"other", t}) == Result{NotFound{}}));
    BOOST_TEST((table.apply(3, Release{"k", t + 1}) == Result{NotFound{}}));
    BOOST_TEST((table.apply(4, Release{"k", 0}) == Result{NotFound{}}));
    BOOST_TEST(table.find("k") != nullptr);
}

BOOST_AUTO_TEST_CASE(a_grant_publishes_its_value_and_a_regrant_keeps_the_locks_own) {
    LockTable table;
    const Token t = granted_token(table.apply(1, Grant{"election/e", kLeaseMs, "a", "", "http://a"}));
    BOOST_TEST(table.find("election/e")->value == "http://a");
    BOOST_TEST(table.bytes() == lock_bytes("election/e", "a", "", "http://a"));
    BOOST_TEST(granted_token(table.apply(2, Grant{"election/e", kLeaseMs, "a", "", "other"})) == t);
    BOOST_TEST(table.find("election/e")->value == "http://a");
    BOOST_TEST(table.check_invariants().empty(), table.check_invariants());
}

BOOST_AUTO_TEST_CASE(proclaim_sets_the_value_of_the_lock_held_with_its_token_only) {
    LockTable table;
    const Token t = granted_token(table.apply(1, Grant{"election/e", kLeaseMs, "a", "", "v1"}));
    BOOST_TEST((table.apply(2, Proclaim{"election/e", t, "v2"}) == Result{Proclaimed{}}));
    BOOST_TEST(table.find("election/e")->value == "v2");
    BOOST_TEST(table.bytes() == lock_bytes("election/e", "a", "", "v2"));
    BOOST_TEST((table.apply(3, Proclaim{"election/e", t + 1, "stale"}) == Result{NotFound{}}));
    BOOST_TEST((table.apply(4, Proclaim{"nobody", t, "x"}) == Result{NotFound{}}));
    BOOST_TEST((table.apply(5, Proclaim{"election/e", t, std::string("bad\x01")}) == Result{NotFound{}}));
    BOOST_TEST(table.find("election/e")->value == "v2");
    // An empty value: the lock publishes none (and counts no value bytes).
    BOOST_TEST((table.apply(6, Proclaim{"election/e", t, ""}) == Result{Proclaimed{}}));
    BOOST_TEST(table.find("election/e")->value.empty());
    BOOST_TEST(table.bytes() == lock_bytes("election/e", "a"));
    BOOST_TEST(table.locks_extended() == 0u);
    BOOST_TEST(table.check_invariants().empty(), table.check_invariants());
    // Released, the key takes no Proclaim of its old token.
    BOOST_TEST((table.apply(7, Release{"election/e", t}) == Result{Released{}}));
    BOOST_TEST((table.apply(8, Proclaim{"election/e", t, "late"}) == Result{NotFound{}}));
    BOOST_TEST(table.find("election/e") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_proclaim_that_would_take_the_table_past_its_limit_is_refused) {
    const std::uint64_t limit = lock_bytes("e", "", "", std::string(10, 'v'));
    LockTable table(limit);
    const Token t = granted_token(table.apply(1, Grant{"e", kLeaseMs, "", "", std::string(10, 'v')}));
    BOOST_TEST((table.apply(2, Proclaim{"e", t, std::string(11, 'v')}) == Result{TableFull{limit}}));
    BOOST_TEST(table.find("e")->value == std::string(10, 'v'));
    BOOST_TEST((table.apply(3, Proclaim{"e", t, std::string(9, 'w')}) == Result{Proclaimed{}}));
    BOOST_TEST(table.bytes() == limit - 1);
    BOOST_TEST(table.check_invariants().empty(), table.check_invariants());
}

BOOST_AUTO_TEST_CASE(expire_with_holder_token_removes_and_reports_existed) {
    LockTable table;
    const Token t = granted_token(table.apply(1, Grant{"k", kLeaseMs, ""}));
    BOOST_TEST((table.apply(2, Expire{"k", t}) == Result{Expired{true}}));
    BOOST_TEST(table.find("k") == nullptr);
    BOOST_TEST((table.apply(3, Expire{"k", t}) == Result{Expired{false}}));  // duplicate
    BOOST_TEST((table.apply(4, Expire{"never", 1}) == Result{Expired{false}}));
}

BOOST_AUTO_TEST_CASE(expire_many_removes_each_lock_held_with_its_token_like_expires_in_order) {
    LockTable table;
    const Token a = granted_token(table.apply(1, Grant{"a", kLeaseMs, ""}));
    const Token b = granted_token(table.apply(2, Grant{"b", kLeaseMs, "w"}));
    const Token c = granted_token(table.apply(3, Grant{"c", kLeaseMs, ""}));
    // a: held with its token; b: a stale token (kept); a again: gone by then; never: not held.
    const ExpireMany many{{Expire{"a", a}, Expire{"b", b + 100}, Expire{"a", a}, Expire{"never", 1}}};
    BOOST_TEST((table.apply(4, many) == Result{ExpiredMany{1}}));
    BOOST_TEST(table.find("a") == nullptr);
    BOOST_TEST_REQUIRE(table.find("b") != nullptr);
    BOOST_TEST(table.find("b")->token == b);
    BOOST_TEST((table.apply(5, ExpireMany{{Expire{"b", b}, Expire{"c", c}}}) == Result{ExpiredMany{2}}));
    BOOST_TEST(table.size() == 0u);
    BOOST_TEST(table.bytes() == 0u);
    BOOST_TEST(table.applied_index() == 5u);
    BOOST_TEST(table.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(an_expire_many_over_the_limits_removes_nothing) {
    LockTable table;
    const Token a = granted_token(table.apply(1, Grant{"a", kLeaseMs, ""}));
    ExpireMany too_many;
    for (std::size_t i = 0; i <= kMaxExpireMany; ++i) too_many.locks.push_back(Expire{"a", a});
    BOOST_TEST(!validate(Command{too_many}).empty());
    BOOST_TEST((table.apply(2, too_many) == Result{ExpiredMany{0}}));
    const std::string big_key(kMaxKeyBytes, 'k');
    ExpireMany too_big{{Expire{"a", a}}};
    for (std::size_t bytes = expire_many_bytes(1); bytes <= kMaxExpireManyBytes;
         bytes += expire_many_bytes(big_key.size())) {
        too_big.locks.push_back(Expire{big_key, 1});
    }
    BOOST_TEST(validate(too_big).find("bytes") != std::string::npos, validate(too_big));
    BOOST_TEST((table.apply(3, too_big) == Result{ExpiredMany{0}}));
    BOOST_TEST((table.apply(4, ExpireMany{{Expire{"a", a}, Expire{"\x01", 1}}}) == Result{ExpiredMany{0}}));
    BOOST_TEST((table.apply(5, ExpireMany{}) == Result{ExpiredMany{0}}));
    BOOST_TEST_REQUIRE(table.find("a") != nullptr);  // every batch above was refused whole
    BOOST_TEST((table.apply(6, ExpireMany{{Expire{"a", a}}}) == Result{ExpiredMany{1}}));
}

BOOST_AUTO_TEST_CASE(list_page_gives_the_prefixs_keys_after_the_cursor_up_to_the_limit) {
    LockTable table;
    std::uint64_t index = 0;
    for (const char* key : {"a", "job/1", "job/2", "job/3", "jobs", "z"}) table.apply(++index, Grant{key, kLeaseMs, ""});
    auto keys = [](const std::vector<Lock>& locks) {
        std::vector<std::string> out;
        for (const Lock& l : locks) out.push_back(l.key);
        return out;
    };
    using P = std::vector<std::string>;
    bool more = false;
    BOOST_TEST((keys(table.list_page(P{"job/"}, "", 2, more)) == std::vector<std::string>{"job/1", "job/2"}));
    BOOST_TEST(more);
    BOOST_TEST((keys(table.list_page(P{"job/"}, "job/2", 2, more)) == std::vector<std::string>{"job/3"}));
    BOOST_TEST(!more);  // "jobs" follows, but not with the prefix
    BOOST_TEST((keys(table.list_page(P{"job/"}, "job/3", 2, more)).empty()));
    BOOST_TEST(!more);
    // A cursor before the prefix starts at the prefix; no prefix: every key.
    BOOST_TEST((keys(table.list_page(P{"job/"}, "b", 10, more)).size() == 3u));
    BOOST_TEST((keys(table.list_page(P{""}, "", 10, more)).size() == 6u));
    BOOST_TEST(!more);
    BOOST_TEST((keys(table.list_page(P{""}, "jobs", 10, more)) == std::vector<std::string>{"z"}));
    BOOST_TEST((keys(table.list_page(P{""}, "", 6, more)).size() == 6u));
    BOOST_TEST(!more);  // exactly the limit, nothing after
    // Several ranges, in key order, paged across them; keys between them are never seen.
    BOOST_TEST((keys(table.list_page(P{"a", "job/3", "z"}, "", 2, more)) == std::vector<std::string>{"a", "job/3"}));
    BOOST_TEST(more);
    BOOST_TEST((keys(table.list_page(P{"a", "job/3", "z"}, "job/3", 2, more)) == std::vector<std::string>{"z"}));
    BOOST_TEST(!more);
    BOOST_CHECK_THROW(table.list_page(P{""}, "", 0, more), std::invalid_argument);
}

// The seed scenario: A's late Expire/Release must not remove B's newer grant.
BOOST_AUTO_TEST_CASE(stale_release_and_expire_never_remove_a_newer_grant) {
    LockTable table;
    const Token a = granted_token(table.apply(1, Grant{"report:7", kLeaseMs, "A"}));
    BOOST_TEST((table.apply(2, Expire{"report:7", a}) == Result{Expired{true}}));
    const Token b = granted_token(table.apply(3, Grant{"report:7", kLeaseMs, "B"}));
    BOOST_TEST(b > a);
    BOOST_TEST((table.apply(4, Expire{"report:7", a}) == Result{Expired{false}}));
    BOOST_TEST((table.apply(5, Release{"report:7", a}) == Result{NotFound{}}));
    BOOST_TEST_REQUIRE(table.find("report:7") != nullptr);
    BOOST_TEST(table.find("report:7")->token == b);
    BOOST_TEST(table.find("report:7")->owner == "B");
}

BOOST_AUTO_TEST_CASE(token_floor_only_grows) {
    LockTable table;
    BOOST_TEST((table.apply(1, SetTokenFloor{500}) == Result{FloorSet{500}}));
    BOOST_TEST((table.apply(2, SetTokenFloor{100}) == Result{FloorSet{500}}));
    BOOST_TEST(table.token_floor() == 500u);
    BOOST_TEST((table.apply(3, SetTokenFloor{kMaxToken}) == Result{FloorSet{kMaxToken}}));
}

BOOST_AUTO_TEST_CASE(token_floor_above_max_token_is_ignored) {
    LockTable table;
    table.apply(1, SetTokenFloor{7});
    BOOST_TEST((table.apply(2, SetTokenFloor{kMaxToken + 1}) == Result{FloorSet{7}}));
    BOOST_TEST(table.token_floor() == 7u);
}

BOOST_AUTO_TEST_CASE(raising_the_floor_lifts_tokens_above_every_earlier_token) {
    LockTable table;
    const Token before = granted_token(table.apply(1, Grant{"a", kLeaseMs, ""}));
    table.apply(2, SetTokenFloor{1'000'000});
    const Token after = granted_token(table.apply(3, Grant{"b", kLeaseMs, ""}));
    BOOST_TEST(after == 3u + 1'000'000u);
    BOOST_TEST(after > before);
    BOOST_TEST(table.last_token() == after);
}

BOOST_AUTO_TEST_CASE(grant_whose_token_would_exceed_max_token_is_rejected_with_zero) {
    LockTable table;
    table.apply(1, SetTokenFloor{kMaxToken - 3});
    BOOST_TEST(granted_token(table.apply(3, Grant{"a", kLeaseMs, ""})) == kMaxToken);
    BOOST_TEST((table.apply(4, Grant{"b", kLeaseMs, ""}) == Result{GrantRejected{0}}));
    BOOST_TEST(table.find("b") == nullptr);
    BOOST_TEST(table.last_token() == kMaxToken);
    BOOST_TEST(table.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(invalid_grant_in_a_committed_entry_is_rejected_with_zero_and_changes_nothing) {
    const std::vector<Grant> invalid = {
        {"", kLeaseMs, ""},                                     // empty key
        {std::string(kMaxKeyBytes + 1, 'k'), kLeaseMs, ""},     // key too long
        {"bad\xff", kLeaseMs, ""},                              // invalid UTF-8
        {"tab\there", kLeaseMs, ""},                            // control character
        {"k", 0, ""},                                           // lease_ms 0
        {"k", kMaxLeaseMs + 1, ""},                             // lease_ms over the ceiling
        {"k", (1ull << 32) + 5'000, ""},                        // over it, 5000 in 32 bits
        {"k", kLeaseMs, std::string(kMaxOwnerBytes + 1, 'o')},  // owner too long
        {"k", kLeaseMs, "own\ner"},                             // owner with a control character
    };
    std::uint64_t index = 0;
    for (const Grant& grant : invalid) {
        LockTable table;
        table.apply(++index, Grant{"held", kLeaseMs, "a"});
        const LockTable before = table;
        BOOST_TEST((table.apply(++index, grant) == Result{GrantRejected{0}}), describe(grant));
        BOOST_TEST(table.list() == before.list());
        BOOST_TEST(table.last_token() == before.last_token());
        BOOST_TEST(table.applied_index() == index);
    }
}

BOOST_AUTO_TEST_CASE(invalid_regrant_by_holder_is_rejected_with_zero_and_keeps_the_lease) {
    LockTable table;
    table.apply(1, Grant{"k", kLeaseMs, "a"});
    BOOST_TEST((table.apply(2, Grant{"k", 0, "a"}) == Result{GrantRejected{0}}));
    BOOST_TEST(table.find("k")->lease_ms == kLeaseMs);
}

BOOST_AUTO_TEST_CASE(apply_noop_returns_noop_and_advances_applied_index) {
    LockTable table;
    table.apply(1, Grant{"k", kLeaseMs, ""});
    BOOST_TEST((table.apply_noop(4) == Result{Noop{}}));
    BOOST_TEST(table.applied_index() == 4u);
    BOOST_TEST(table.size() == 1u);
    BOOST_TEST(granted_token(table.apply(5, Grant{"j", kLeaseMs, ""})) == 5u);
}

BOOST_AUTO_TEST_CASE(index_that_does_not_increase_is_a_logic_error_and_changes_nothing) {
    LockTable table;
    BOOST_CHECK_THROW(table.apply(0, Grant{"k", kLeaseMs, ""}), std::logic_error);
    BOOST_CHECK_THROW(table.apply_noop(0), std::logic_error);
    table.apply(3, Grant{"k", kLeaseMs, ""});
    const LockTable before = table;
    BOOST_CHECK_THROW(table.apply(3, Grant{"j", kLeaseMs, ""}), std::logic_error);
    BOOST_CHECK_THROW(table.apply(2, Release{"k", 3}), std::logic_error);
    BOOST_CHECK_THROW(table.apply_noop(3), std::logic_error);
    BOOST_TEST((table == before));
}

BOOST_AUTO_TEST_CASE(list_is_sorted_by_key_and_find_sees_every_lock) {
    LockTable table;
    std::uint64_t index = 0;
    for (const char* key : {"m", "b", "z", "a"}) table.apply(++index, Grant{key, kLeaseMs, ""});
    const auto locks = table.list();
    BOOST_TEST_REQUIRE(locks.size() == 4u);
    for (std::size_t i = 1; i < locks.size(); ++i) BOOST_TEST(locks[i - 1].key < locks[i].key);
    for (const Lock& lock : locks) BOOST_TEST((*table.find(lock.key) == lock));
    BOOST_TEST(table.find("absent") == nullptr);
}

// Random sequences: tokens strictly increase, last_token is the largest ever
// granted, at most one holder per key, invariants hold after every step.
BOOST_AUTO_TEST_CASE(random_sequences_keep_tokens_increasing_and_invariants_true) {
    const auto keys = test::key_pool();
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        std::mt19937_64 rng(seed);
        LockTable table;
        Token largest = 0;
        std::uint64_t index = 0;
        for (int step = 0; step < 400; ++step) {
            index += 1 + rng() % 3;  // gaps: entries that are not lock commands
            const Command cmd = test::random_command(rng, keys, table);
            const Token before = table.last_token();
            const Result r = table.apply(index, cmd);
            if (const auto* g = std::get_if<Granted>(&r); g && g->token > before) {
                BOOST_TEST_REQUIRE(g->token > largest, "seed " << seed << " step " << step);
                largest = g->token;
            }
            BOOST_TEST_REQUIRE(table.last_token() == largest, "seed " << seed);
            BOOST_TEST_REQUIRE(table.check_invariants() == "", "seed " << seed << " step " << step);
        }
    }
}

BOOST_AUTO_TEST_CASE(describe_names_every_result) {
    BOOST_TEST(describe(Result{Granted{42, true, 5'000}}) == "granted token=42 created=true lease_ms=5000");
    BOOST_TEST(describe(Result{Granted{42, false, 5'000}}) == "granted token=42 created=false lease_ms=5000");
    BOOST_TEST(describe(Result{GrantRejected{41}}) == "grant_rejected holder_token=41");
    BOOST_TEST(describe(Result{Released{}}) == "released");
    BOOST_TEST(describe(Result{NotFound{}}) == "not_found");
    BOOST_TEST(describe(Result{Expired{true}}) == "expired existed=true");
    BOOST_TEST(describe(Result{Noop{}}) == "noop");
    BOOST_TEST(describe(Result{FloorSet{9}}) == "floor_set floor=9");
    BOOST_TEST(describe(Result{Proclaimed{}}) == "proclaimed");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(table_size_limit)

// Keys of 32 bytes (each unique by a 7-digit prefix) and owners of 16 make
// every lock 72 bytes; the limit, 1000 bytes, falls between two grants.
constexpr std::uint64_t kLimit = 1000;
std::string key_of(std::uint64_t i) {
    std::string n = std::to_string(i);
    return std::string(7 - n.size(), '0') + n + std::string(25, 'k');
}
const std::string kOwner(16, 'o');

// Fills `table` with locks from index 1 until a Grant is refused; returns
// the index of the refused Grant.
std::uint64_t fill(LockTable& table) {
    const std::uint64_t most = table.max_bytes() / lock_bytes(key_of(1), kOwner) + 1;
    for (std::uint64_t i = 1; i <= most; ++i) {
        const Result r = table.apply(i, Grant{key_of(i), kLeaseMs, kOwner});
        if (!std::holds_alternative<Granted>(r)) {
            BOOST_TEST_REQUIRE(std::holds_alternative<TableFull>(r), "expected TableFull, got " << describe(r));
            return i;
        }
    }
    BOOST_FAIL(most << " locks granted: the table has no size limit");
    return 0;
}

BOOST_AUTO_TEST_CASE(the_default_limit_is_the_constant_every_member_uses) {
    BOOST_TEST(LockTable().max_bytes() == kMaxTableBytes);
    BOOST_TEST(std::get<LockTable>(LockTable::restore(LockTable().snapshot())).max_bytes() == kMaxTableBytes);
    BOOST_TEST(lock_bytes(std::string(kMaxKeyBytes, 'k'), std::string(kMaxOwnerBytes, 'o')) == 792u);
}

BOOST_AUTO_TEST_CASE(grant_past_the_size_limit_is_refused_until_a_release_makes_room) {
    LockTable table(kLimit);
    const std::uint64_t per_lock = lock_bytes(key_of(1), kOwner);
    BOOST_TEST_REQUIRE(per_lock == 72u);
    const std::uint64_t refused_at = fill(table);
    BOOST_TEST(table.size() == kLimit / per_lock);
    BOOST_TEST(refused_at == table.size() + 1);
    BOOST_TEST(table.bytes() == table.size() * per_lock);
    BOOST_TEST((table.apply(refused_at + 1, Grant{key_of(0), kLeaseMs, kOwner}) == Result{TableFull{table.bytes()}}));
    BOOST_TEST(table.find(key_of(refused_at)) == nullptr);
    BOOST_TEST(table.last_token() == refused_at - 1);  // the refused Grants took no token
    BOOST_TEST(table.applied_index() == refused_at + 1);
    // A small lock that still fits is granted; the same owner's retry of a
    // held key takes no room and is granted too.
    std::uint64_t index = refused_at + 1;
    BOOST_TEST_REQUIRE(kLimit - table.bytes() >= lock_bytes("s", ""));
    BOOST_TEST(granted_token(table.apply(++index, Grant{"s", kLeaseMs, ""})) == index);
    BOOST_TEST(granted_token(table.apply(++index, Grant{key_of(1), kLeaseMs, kOwner})) == 1u);
    // A release makes room for one more lock, and no more.
    BOOST_TEST((table.apply(++index, Release{key_of(1), 1}) == Result{Released{}}));
    BOOST_TEST(granted_token(table.apply(++index, Grant{key_of(refused_at), kLeaseMs, kOwner})) == index);
    BOOST_TEST(std::holds_alternative<TableFull>(table.apply(++index, Grant{key_of(0), kLeaseMs, kOwner})));
    BOOST_TEST(table.check_invariants().empty(), table.check_invariants());
    // Restore counts the bytes again and takes the limit it is given; a
    // table restored over its limit keeps its locks and refuses new ones.
    auto same = LockTable::restore(table.snapshot(), kLimit);
    BOOST_TEST_REQUIRE(std::holds_alternative<LockTable>(same));
    BOOST_TEST(std::get<LockTable>(same).bytes() == table.bytes());
    BOOST_TEST((std::get<LockTable>(same) == table));
    auto smaller = LockTable::restore(table.snapshot(), kLimit / 2);
    BOOST_TEST_REQUIRE(std::holds_alternative<LockTable>(smaller));
    LockTable& over = std::get<LockTable>(smaller);
    BOOST_TEST(over.size() == table.size());
    BOOST_TEST(std::holds_alternative<TableFull>(over.apply(++index, Grant{"t", kLeaseMs, ""})));
}

// Checkpoint: each lock held with its token gets its remaining_ms (0
// clears it); a wrong token, a remaining time above the lock's lease or an
// unheld key changes nothing and is not counted.
BOOST_AUTO_TEST_CASE(checkpoint_sets_the_remaining_time_of_locks_held_with_their_token) {
    LockTable table;
    const Token a = granted_token(table.apply(1, Grant{"a", kLeaseMs, ""}));
    const Token b = granted_token(table.apply(2, Grant{"b", kLeaseMs, ""}));
    const std::uint64_t bytes = table.bytes();
    const Checkpoint cp{{LeaseCheckpoint{"a", a, 4000}, LeaseCheckpoint{"b", b + 1, 4000},
                         LeaseCheckpoint{"b", b, kLeaseMs + 1}, LeaseCheckpoint{"never", 1, 10}}};
    BOOST_TEST((table.apply(3, cp) == Result{Checkpointed{1}}));
    BOOST_TEST(table.find("a")->remaining_ms == 4000u);
    BOOST_TEST(table.find("b")->remaining_ms == 0u);
    BOOST_TEST(table.bytes() == bytes + 8);
    BOOST_TEST(table.locks_extended() == 1u);
    BOOST_TEST(table.applied_index() == 3u);
    BOOST_TEST(table.check_invariants() == "");
    // A later checkpoint replaces it; 0 clears it.
    BOOST_TEST((table.apply(4, Checkpoint{{LeaseCheckpoint{"a", a, 2000}, LeaseCheckpoint{"b", b, kLeaseMs}}}) ==
                Result{Checkpointed{2}}));
    BOOST_TEST(table.find("a")->remaining_ms == 2000u);
    BOOST_TEST(table.find("b")->remaining_ms == kLeaseMs);
    BOOST_TEST((table.apply(5, Checkpoint{{LeaseCheckpoint{"a", a, 0}}}) == Result{Checkpointed{1}}));
    BOOST_TEST(table.find("a")->remaining_ms == 0u);
    BOOST_TEST(table.bytes() == bytes + 8);
    BOOST_TEST(table.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(an_invalid_checkpoint_changes_nothing) {
    LockTable table;
    const Token a = granted_token(table.apply(1, Grant{"a", kLeaseMs, ""}));
    const LockTable before = table;
    BOOST_TEST((table.apply(2, Checkpoint{}) == Result{Checkpointed{0}}));
    BOOST_TEST((table.apply(3, Checkpoint{{LeaseCheckpoint{"a", a, 10}, LeaseCheckpoint{"\x01", 1, 1}}}) ==
                Result{Checkpointed{0}}));
    BOOST_TEST((table.apply(4, Checkpoint{{LeaseCheckpoint{"a", a, kMaxLeaseMs + 1}}}) == Result{Checkpointed{0}}));
    Checkpoint too_many;
    for (std::size_t i = 0; i <= kMaxCheckpoints; ++i) too_many.locks.push_back(LeaseCheckpoint{"a", a, 1});
    BOOST_TEST((table.apply(5, too_many) == Result{Checkpointed{0}}));
    Checkpoint too_big;
    for (std::size_t i = 0; i < 70; ++i) too_big.locks.push_back(LeaseCheckpoint{std::string(kMaxKeyBytes, 'k'), 1, 1});
    BOOST_TEST(validate(too_big).find("the limit is") != std::string::npos, validate(too_big));
    BOOST_TEST((table.apply(6, too_big) == Result{Checkpointed{0}}));
    BOOST_TEST(table.find("a")->remaining_ms == 0u);
    BOOST_TEST(table.locks_extended() == 0u);
    BOOST_TEST(validate(Command{Checkpoint{{LeaseCheckpoint{"a", a, kMaxLeaseMs}}}}) == "");
}

// A same-owner re-grant restarts the lease at full length: its checkpoint goes.
BOOST_AUTO_TEST_CASE(a_same_owner_regrant_clears_the_checkpoint) {
    LockTable table;
    const Token a = granted_token(table.apply(1, Grant{"a", kLeaseMs, "w"}));
    BOOST_TEST((table.apply(2, Checkpoint{{LeaseCheckpoint{"a", a, 3000}}}) == Result{Checkpointed{1}}));
    BOOST_TEST((table.apply(3, Grant{"a", kLeaseMs - 1, "w"}) == Result{Granted{a, false, kLeaseMs}}));
    BOOST_TEST(table.find("a")->remaining_ms == 0u);
    BOOST_TEST(table.locks_extended() == 0u);
    BOOST_TEST(table.check_invariants() == "");
    // Another owner's grant leaves it.
    BOOST_TEST((table.apply(4, Checkpoint{{LeaseCheckpoint{"a", a, 3000}}}) == Result{Checkpointed{1}}));
    BOOST_TEST((table.apply(5, Grant{"a", kLeaseMs, "x"}) == Result{GrantRejected{a}}));
    BOOST_TEST(table.find("a")->remaining_ms == 3000u);
}

// A first checkpoint adds 8 bytes to the table: past max_bytes() it is left out.
BOOST_AUTO_TEST_CASE(a_checkpoint_that_would_overfill_the_table_is_left_out) {
    LockTable table(lock_bytes("a", "") + 8 + lock_bytes("b", ""));
    const Token a = granted_token(table.apply(1, Grant{"a", kLeaseMs, ""}));
    const Token b = granted_token(table.apply(2, Grant{"b", kLeaseMs, ""}));
    BOOST_TEST((table.apply(3, Checkpoint{{LeaseCheckpoint{"a", a, 10}, LeaseCheckpoint{"b", b, 10}}}) ==
                Result{Checkpointed{1}}));
    BOOST_TEST(table.find("a")->remaining_ms == 10u);
    BOOST_TEST(table.find("b")->remaining_ms == 0u);
    BOOST_TEST(table.bytes() == table.max_bytes());
    // Changing or clearing one in place adds nothing and is applied.
    BOOST_TEST((table.apply(4, Checkpoint{{LeaseCheckpoint{"a", a, 5}}}) == Result{Checkpointed{1}}));
    BOOST_TEST((table.apply(5, Checkpoint{{LeaseCheckpoint{"a", a, 0}}}) == Result{Checkpointed{1}}));
    BOOST_TEST(table.check_invariants() == "");
}

BOOST_AUTO_TEST_SUITE_END()
