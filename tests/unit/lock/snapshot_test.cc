// LockTable::snapshot / restore: round trips, identical futures after restore,
// and hostile snapshots rejected.
#include <boost/test/unit_test.hpp>

#include "lock/table.h"
#include "test_support.h"

using namespace pgfence::lock;
using pgfence::lock::test::Bytes;

namespace {

constexpr std::uint8_t kSnapshotVersion = 1;
constexpr std::uint64_t kSnapshotLeaseMs = 5'000;

std::string restore_error(std::string_view bytes) {
    auto restored = LockTable::restore(bytes);
    if (auto* error = std::get_if<DecodeError>(&restored)) return error->message;
    return {};
}

LockTable restored(std::string_view bytes) {
    auto r = LockTable::restore(bytes);
    if (auto* error = std::get_if<DecodeError>(&r)) BOOST_FAIL(error->message);
    return std::get<LockTable>(r);
}

// A header for a table with applied index 10, floor 0, last token 10.
Bytes header(std::uint32_t count) {
    return Bytes().u8(kSnapshotVersion).u64(10).u64(0).u64(10).u32(count);
}

LockTable sample_table() {
    LockTable table;
    table.apply(1, SetTokenFloor{100});
    table.apply(2, Grant{"report:7", kSnapshotLeaseMs, "worker-a"});
    table.apply(3, Grant{"ключ", kSnapshotLeaseMs, ""});
    table.apply(4, Grant{"a", kSnapshotLeaseMs, "b"});
    table.apply(5, Release{"a", 104});
    return table;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(snapshot)

BOOST_AUTO_TEST_CASE(snapshot_follows_the_documented_layout) {
    LockTable table;
    table.apply(3, Grant{"k", kSnapshotLeaseMs, "o"});
    Bytes expected = Bytes().u8(kSnapshotVersion).u64(3).u64(0).u64(3).u32(1);
    test::put_lock(expected, Lock{"k", 3, kSnapshotLeaseMs, "o"});
    BOOST_TEST(table.snapshot() == expected.get());
}

// A lock with a user makes the snapshot version 2: every lock then carries its user.
BOOST_AUTO_TEST_CASE(a_table_with_a_user_is_written_in_version_2) {
    LockTable table;
    table.apply(3, Grant{"k", kSnapshotLeaseMs, "o", "ua"});
    table.apply(4, Grant{"n", kSnapshotLeaseMs, "o"});
    Bytes expected = Bytes().u8(2).u64(4).u64(0).u64(4).u32(2);
    test::put_lock(expected, Lock{"k", 3, kSnapshotLeaseMs, "o", "ua"}, 2);
    test::put_lock(expected, Lock{"n", 4, kSnapshotLeaseMs, "o"}, 2);
    BOOST_TEST(table.snapshot() == expected.get());
    table.apply(5, Release{"k", 3});
    BOOST_TEST(table.snapshot()[0] == 1);  // no user left: version 1, as releases before users write
}

// The binding of owner to user, and the longer lease, survive a snapshot
// (a new leader or a member that installs it decides alike).
BOOST_AUTO_TEST_CASE(owner_binding_and_lease_survive_a_snapshot_round_trip) {
    LockTable table;
    table.apply(1, Grant{"k", 30'000, "worker-a", "ua"});
    LockTable copy = restored(table.snapshot());
    BOOST_TEST((copy == table));
    BOOST_TEST((*copy.find("k") == Lock{"k", 1, 30'000, "worker-a", "ua"}));
    BOOST_TEST((copy.apply(2, Grant{"k", 1'000, "worker-a", "uc"}) == Result{GrantRejected{1}}));
    BOOST_TEST((copy.apply(3, Grant{"k", 1'000, "worker-a", "ua"}) == Result{Granted{1, false, 30'000}}));
    BOOST_TEST(copy.find("k")->lease_ms == 30'000u);
    BOOST_TEST(copy.locks_with_user() == 1u);
}

// One encoding per table: a version 2 snapshot without a user is what
// version 1 writes, and is refused; a version 1 snapshot reads as users "".
BOOST_AUTO_TEST_CASE(version_2_without_a_user_is_refused_and_version_1_reads_without_users) {
    Bytes v2 = Bytes().u8(2).u64(10).u64(0).u64(10).u32(1);
    test::put_lock(v2, Lock{"a", 9, kSnapshotLeaseMs, "w"}, 2);
    const std::string error = restore_error(v2.get());
    BOOST_TEST(error.find("version 2 with 0 locks that have a user") != std::string::npos, error);
    Bytes v1 = header(1);
    test::put_lock(v1, Lock{"a", 9, kSnapshotLeaseMs, "w"});
    const LockTable table = restored(v1.get());
    BOOST_TEST(table.find("a")->user == "");
    BOOST_TEST(table.snapshot() == v1.get());
}

// A snapshot begun with a user keeps version 2 even when the last user's lock
// goes before it is taken.
BOOST_AUTO_TEST_CASE(a_snapshot_in_slices_keeps_the_version_of_its_beginning) {
    LockTable table;
    table.apply(1, Grant{"a", kSnapshotLeaseMs, "w", "ua"});
    table.apply(2, Grant{"b", kSnapshotLeaseMs, "w"});
    const std::string expected = table.snapshot();
    table.begin_snapshot();
    table.apply(3, Release{"a", 1});
    while (!table.continue_snapshot(1)) {
    }
    BOOST_TEST(table.take_snapshot() == expected);
    BOOST_TEST(restored(expected).locks_with_user() == 1u);
}

// A value or a checkpoint makes the snapshot version 3, a flags byte per lock and only the
// fields present; it round-trips, counts into bytes() and survives a
// snapshot taken in slices.
BOOST_AUTO_TEST_CASE(a_table_with_a_value_or_a_checkpoint_is_written_in_version_3) {
    const Lock plain{"a", 7, kSnapshotLeaseMs, "w"};
    const Lock valued{"b", 8, kSnapshotLeaseMs, "w", "", "node-1:8080"};
    const Lock checkpointed{"c", 9, kSnapshotLeaseMs, "", "ua", "", 1'234};
    Bytes v3 = Bytes().u8(3).u64(10).u64(0).u64(10).u32(3);
    for (const Lock& lock : {plain, valued, checkpointed}) test::put_lock(v3, lock, 3);
    LockTable table = restored(v3.get());
    BOOST_TEST((*table.find("b") == valued));
    BOOST_TEST((*table.find("c") == checkpointed));
    BOOST_TEST(table.locks_extended() == 2u);
    BOOST_TEST(table.locks_with_user() == 1u);
    BOOST_TEST(table.bytes() == lock_bytes(plain) + lock_bytes(valued) + lock_bytes(checkpointed));
    BOOST_TEST(lock_bytes(valued) == lock_bytes(plain) + 4 + valued.value.size());
    BOOST_TEST(lock_bytes(checkpointed) == lock_bytes("c", "", "ua") + 8);
    BOOST_TEST(table.snapshot() == v3.get());
    table.begin_snapshot();
    table.apply(11, Release{"b", 8});
    table.apply(12, Release{"c", 9});
    while (!table.continue_snapshot(1)) {
    }
    BOOST_TEST(table.take_snapshot() == v3.get());
    BOOST_TEST(table.locks_extended() == 0u);
    BOOST_TEST(table.snapshot()[0] == 1);  // nothing extended, no user: version 1 again
}

// A set's re-grant by its owner restarts every key at full length: the
// checkpoints its keys had (restored here from a snapshot) are cleared.
BOOST_AUTO_TEST_CASE(a_sets_regrant_clears_the_checkpoints_of_its_keys) {
    Bytes v3 = Bytes().u8(3).u64(10).u64(0).u64(10).u32(2);
    test::put_lock(v3, Lock{"a", 9, kSnapshotLeaseMs, "w", "", "", 1'000}, 3);
    test::put_lock(v3, Lock{"b", 9, kSnapshotLeaseMs, "w", "", "", 2'000}, 3);
    LockTable table = restored(v3.get());
    BOOST_TEST(table.locks_extended() == 2u);
    BOOST_TEST((table.apply(11, GrantMany{{"b", "a"}, 1'000, "w"}) == Result{Granted{9, false, kSnapshotLeaseMs}}));
    BOOST_TEST(table.find("a")->remaining_ms == 0u);
    BOOST_TEST(table.find("b")->remaining_ms == 0u);
    BOOST_TEST(table.locks_extended() == 0u);
    BOOST_TEST(table.check_invariants() == "");
}

// One encoding per table in version 3: not needed, an unknown flag bit, a
// field flagged present but empty, a checkpoint longer than its lease;
// in any version, a lease or checkpoint past kMaxLeaseMs.
BOOST_AUTO_TEST_CASE(non_canonical_version_3_snapshots_are_refused) {
    const auto one = [](const Lock& lock, std::uint8_t flags_override = 0) {
        Bytes b = Bytes().u8(3).u64(10).u64(0).u64(10).u32(1);
        if (flags_override == 0) {
            test::put_lock(b, lock, 3);
        } else {
            b.str(lock.key).u64(lock.token).u64(lock.lease_ms).str(lock.owner.str()).u8(flags_override);
            if (flags_override & 1) b.str(lock.user.str());
            if (flags_override & 2) b.str(lock.value.str());
            if (flags_override & 4) b.u64(lock.remaining_ms);
        }
        return restore_error(b.get());
    };
    std::string error = one(Lock{"a", 9, kSnapshotLeaseMs, "w", "ua"});
    BOOST_TEST(error.find("version 3 with 1 locks that have a user and 0 that have a value") != std::string::npos,
               error);
    error = one(Lock{"a", 9, kSnapshotLeaseMs, "w", "", "v"}, 2 | 8);
    BOOST_TEST(error.find("lock flags 10 has unknown bits") != std::string::npos, error);
    error = one(Lock{"a", 9, kSnapshotLeaseMs, "w", "", "v"}, 2 | 1);
    BOOST_TEST(error.find("mark a field present that is empty") != std::string::npos, error);
    error = one(Lock{"a", 9, kSnapshotLeaseMs, "w", "", "", 0}, 4);
    BOOST_TEST(error.find("mark a field present that is empty") != std::string::npos, error);
    error = one(Lock{"a", 9, kSnapshotLeaseMs, "w", "", "", kSnapshotLeaseMs + 1});
    BOOST_TEST(error.find("more than its lease of 5000 ms") != std::string::npos, error);
    // Past kMaxLeaseMs (a Lock keeps both in 32 bits): refused as read, never
    // truncated, also where the low 32 bits would be a valid lease.
    {
        Bytes b = Bytes().u8(1).u64(10).u64(0).u64(10).u32(1);
        b.str("a").u64(9).u64(kMaxLeaseMs + 1).str("w");
        error = restore_error(b.get());
        BOOST_TEST(error.find("lock lease_ms 86400001 is over the largest lease") != std::string::npos, error);
        constexpr std::uint64_t kWraps = (1ull << 32) + kSnapshotLeaseMs;  // 5000 in 32 bits
        Bytes v1 = Bytes().u8(1).u64(10).u64(0).u64(10).u32(1);
        v1.str("a").u64(9).u64(kWraps).str("w");
        error = restore_error(v1.get());
        BOOST_TEST(error.find("lock lease_ms 4294972296 is over the largest lease") != std::string::npos, error);
        Bytes v3 = Bytes().u8(3).u64(10).u64(0).u64(10).u32(1);
        v3.str("a").u64(9).u64(kWraps).str("w").u8(4).u64(kSnapshotLeaseMs);
        error = restore_error(v3.get());
        BOOST_TEST(error.find("lock lease_ms 4294972296 is over the largest lease") != std::string::npos, error);
        Bytes r = Bytes().u8(3).u64(10).u64(0).u64(10).u32(1);
        r.str("a").u64(9).u64(kSnapshotLeaseMs).str("w").u8(4).u64((1ull << 32) + 1);
        error = restore_error(r.get());
        BOOST_TEST(error.find("lock remaining_ms 4294967297 is over the largest lease") != std::string::npos, error);
    }
    error = one(Lock{"a", 9, kSnapshotLeaseMs, "w", "", std::string("bad\x01")});
    BOOST_TEST(error.find("value") != std::string::npos, error);
    error = one(Lock{"a", 9, kSnapshotLeaseMs, "w", "", std::string(kMaxValueBytes + 1, 'v')});
    BOOST_TEST(error.find("lock value length 4097 exceeds the limit of 4096 bytes") != std::string::npos, error);
}

// A lease and a checkpoint of kMaxLeaseMs, the most a Lock keeps, survive a
// round trip whole.
BOOST_AUTO_TEST_CASE(a_lock_at_the_largest_lease_round_trips) {
    Bytes b = Bytes().u8(3).u64(10).u64(0).u64(10).u32(1);
    const Lock largest{"a", 9, kMaxLeaseMs, "w", "", "", kMaxLeaseMs};
    test::put_lock(b, largest, 3);
    const LockTable table = restored(b.get());
    BOOST_TEST_REQUIRE(table.find("a") != nullptr);
    BOOST_TEST((*table.find("a") == largest));
    BOOST_TEST(table.find("a")->lease_ms == kMaxLeaseMs);
    BOOST_TEST(table.find("a")->remaining_ms == kMaxLeaseMs);
    const LockTable again = restored(table.snapshot());
    BOOST_TEST_REQUIRE(again.find("a") != nullptr);
    BOOST_TEST((*again.find("a") == largest));
}

BOOST_AUTO_TEST_CASE(empty_and_populated_tables_round_trip_identically) {
    for (const LockTable& table : {LockTable{}, sample_table()}) {
        const LockTable copy = restored(table.snapshot());
        BOOST_TEST((copy == table));
        BOOST_TEST(copy.snapshot() == table.snapshot());
        BOOST_TEST(copy.check_invariants() == "");
    }
}

// After restore, the same future commands give the same results, tables and tokens.
BOOST_AUTO_TEST_CASE(restored_table_issues_the_same_future_tokens) {
    const auto keys = test::key_pool();
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
        std::mt19937_64 rng(seed);
        LockTable original;
        std::uint64_t index = 0;
        const int snapshot_step = 50 + static_cast<int>(rng() % 200);
        std::optional<LockTable> copy;
        for (int step = 0; step < 400; ++step) {
            if (step == snapshot_step) copy = restored(original.snapshot());
            index += 1 + rng() % 2;
            const bool noop = rng() % 10 == 0;
            const Command cmd = test::random_command(rng, keys, original);
            const Result expected = noop ? original.apply_noop(index) : original.apply(index, cmd);
            if (!copy) continue;
            const Result got = noop ? copy->apply_noop(index) : copy->apply(index, cmd);
            BOOST_TEST_REQUIRE((got == expected), "seed " << seed << " step " << step);
            BOOST_TEST_REQUIRE((*copy == original), "seed " << seed << " step " << step);
        }
        BOOST_TEST(copy->last_token() == original.last_token());
    }
}

// A snapshot built in slices while random commands apply is, byte for
// byte, the snapshot of the table at its beginning, whatever the slice size
// and whichever keys change ahead of its cursor, behind it, or both.
BOOST_AUTO_TEST_CASE(a_snapshot_built_in_slices_while_commands_apply_is_the_table_at_its_beginning) {
    const auto keys = test::key_pool();
    for (std::uint64_t seed = 1; seed <= 200; ++seed) {
        std::mt19937_64 rng(seed);
        LockTable table;
        std::uint64_t index = 0;
        int built = 0;
        std::string expected;
        for (int step = 0; step < 600; ++step) {
            if (!table.snapshotting() && rng() % 40 == 0) {
                expected = table.snapshot();
                table.begin_snapshot();
            } else if (table.snapshotting() && rng() % 3 == 0) {
                if (table.continue_snapshot(rng() % 4)) {
                    const std::string got = table.take_snapshot();
                    BOOST_TEST_REQUIRE((got == expected), "seed " << seed << " step " << step);
                    BOOST_TEST(!table.snapshotting());
                    ++built;
                }
            }
            index += 1 + rng() % 2;
            table.apply(index, test::random_command(rng, keys, table));
            BOOST_TEST_REQUIRE(table.check_invariants() == "", "seed " << seed);
        }
        BOOST_TEST(built > 0, "seed " << seed);
    }
}

BOOST_AUTO_TEST_CASE(one_snapshot_is_built_at_a_time_and_taken_only_when_complete) {
    LockTable table = sample_table();
    BOOST_CHECK_THROW(table.continue_snapshot(1), std::logic_error);
    BOOST_CHECK_THROW(table.take_snapshot(), std::logic_error);
    const std::string expected = table.snapshot();
    table.begin_snapshot();
    BOOST_CHECK_THROW(table.begin_snapshot(), std::logic_error);
    BOOST_TEST(!table.continue_snapshot(1));
    BOOST_CHECK_THROW(table.take_snapshot(), std::logic_error);  // one of two locks is in
    // A built snapshot does not make tables differ: only the replicated state counts.
    BOOST_TEST((table == sample_table()));
    BOOST_TEST(table.continue_snapshot(1));
    BOOST_TEST(table.take_snapshot() == expected);
    BOOST_TEST(restored(expected).size() == 2u);
}

BOOST_AUTO_TEST_CASE(every_truncation_of_a_valid_snapshot_is_rejected) {
    const std::string bytes = sample_table().snapshot();
    for (std::size_t length = 0; length < bytes.size(); ++length) {
        BOOST_TEST_REQUIRE(!restore_error(bytes.substr(0, length)).empty(), length);
    }
}

BOOST_AUTO_TEST_CASE(trailing_bytes_and_unknown_version_are_rejected) {
    const std::string bytes = sample_table().snapshot();
    BOOST_TEST(restore_error(bytes + "x").find("trailing") != std::string::npos);
    std::string versioned = bytes;
    versioned[0] = 4;
    BOOST_TEST(restore_error(versioned).find("unknown snapshot version 4") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(count_larger_than_the_remaining_bytes_is_rejected_before_allocating) {
    const std::string error = restore_error(header(0xffffffff).get());
    BOOST_TEST(error.find("lock count 4294967295") != std::string::npos, error);
    BOOST_TEST(error.find("offset 25") != std::string::npos, error);
    Bytes two = header(2);
    test::put_lock(two, Lock{"a", 9, kSnapshotLeaseMs, ""});
    BOOST_TEST(!restore_error(two.get()).empty());
}

BOOST_AUTO_TEST_CASE(duplicate_or_out_of_order_keys_are_rejected) {
    Bytes duplicate = header(2);
    test::put_lock(duplicate, Lock{"a", 9, kSnapshotLeaseMs, ""});
    test::put_lock(duplicate, Lock{"a", 10, kSnapshotLeaseMs, ""});
    BOOST_TEST(restore_error(duplicate.get()).find("not after the previous") != std::string::npos);
    Bytes unordered = header(2);
    test::put_lock(unordered, Lock{"b", 9, kSnapshotLeaseMs, ""});
    test::put_lock(unordered, Lock{"a", 10, kSnapshotLeaseMs, ""});
    BOOST_TEST(restore_error(unordered.get()).find("not after the previous") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(locks_breaking_the_table_invariants_are_rejected) {
    const std::vector<Lock> bad = {
        {"tab\t", 9, kSnapshotLeaseMs, ""},     // control character in key
        {"\xc0\xaf", 9, kSnapshotLeaseMs, ""},  // overlong UTF-8
        {"k", 9, 0, ""},  // lease_ms 0 (one over the ceiling: non_canonical_version_3_snapshots_are_refused)
        {"k", 9, kSnapshotLeaseMs, "\x7f"},     // control character in owner
        {"k", 0, kSnapshotLeaseMs, ""},         // token 0 is never granted
        {"k", 11, kSnapshotLeaseMs, ""},        // token above last_token
    };
    for (const Lock& lock : bad) {
        Bytes bytes = header(1);
        test::put_lock(bytes, lock);
        BOOST_TEST(!restore_error(bytes.get()).empty(), lock);
    }
    Bytes key_over_limit = header(1);
    test::put_lock(key_over_limit, Lock{std::string(kMaxKeyBytes + 1, 'k'), 9, kSnapshotLeaseMs, ""});
    BOOST_TEST(restore_error(key_over_limit.get()).find("length 513") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(inconsistent_headers_are_rejected) {
    Bytes same_token = header(2);
    test::put_lock(same_token, Lock{"a", 9, kSnapshotLeaseMs, ""});
    test::put_lock(same_token, Lock{"b", 9, kSnapshotLeaseMs, "other-owner"});
    BOOST_TEST(restore_error(same_token.get()).find("not one set") != std::string::npos);
    // last_token 50 cannot come from index <= 10 with floor 0.
    BOOST_TEST(!restore_error(Bytes().u8(kSnapshotVersion).u64(10).u64(0).u64(50).u32(0).get()).empty());
    // applied index 0 means nothing was applied.
    BOOST_TEST(!restore_error(Bytes().u8(kSnapshotVersion).u64(0).u64(5).u64(0).u32(0).get()).empty());
    // floor above kMaxToken can never be set.
    BOOST_TEST(
        !restore_error(Bytes().u8(kSnapshotVersion).u64(1).u64(kMaxToken + 1).u64(0).u32(0).get()).empty());
}

// Random and mutated snapshots never crash; whatever restores satisfies the
// invariants and re-encodes to the same bytes.
BOOST_AUTO_TEST_CASE(random_and_mutated_snapshots_never_crash) {
    std::mt19937_64 rng(777);
    const std::string valid = sample_table().snapshot();
    int restored_count = 0;
    for (int i = 0; i < 100'000; ++i) {
        const std::string bytes =
            i % 4 == 0 ? test::random_bytes(rng, 128) : test::mutate(rng, valid);
        auto r = LockTable::restore(bytes);
        if (auto* table = std::get_if<LockTable>(&r)) {
            ++restored_count;
            BOOST_TEST_REQUIRE(table->check_invariants() == "", "iteration " << i);
            BOOST_TEST_REQUIRE(table->snapshot() == bytes, "iteration " << i);
        }
    }
    BOOST_TEST(restored_count > 0);
}

BOOST_AUTO_TEST_SUITE_END()
