// The lock table on DurableStorage: lock commands persisted as entries, a lock
// snapshot saved and the log compacted, then a reopen rebuilds exactly the
// same table (and so the same future tokens) from snapshot + remaining log.
#include <boost/test/unit_test.hpp>

#include "lock/commands.h"
#include "lock/table.h"
#include "test_dir.h"

namespace pgfence::storage {
namespace {

using namespace test;

constexpr std::uint64_t kLeaseMs = 5000;
constexpr raft::Index kEntries = 150;
constexpr raft::Index kSnapshotAt = 100;

// Deterministic mix of grants, releases and expiries over a few keys.
lock::Command command_for(raft::Index index, const lock::LockTable& table) {
    const std::string key = "key-" + std::to_string(index % 7);
    const lock::Lock* held = table.find(key);
    if (index % 5 == 0) return lock::SetTokenFloor{index * 10};
    if (held != nullptr && index % 3 == 0) return lock::Release{key, held->token};
    if (held != nullptr && index % 4 == 0) return lock::Expire{key, held->token};
    return lock::Grant{key, kLeaseMs, "owner-" + std::to_string(index % 2)};
}

void apply_entries(lock::LockTable& table, const std::vector<raft::Entry>& entries) {
    for (const raft::Entry& e : entries) {
        auto decoded = lock::decode_command(e.data);
        BOOST_TEST_REQUIRE(std::holds_alternative<lock::Command>(decoded));
        table.apply(e.index, std::get<lock::Command>(decoded));
    }
}

BOOST_AUTO_TEST_SUITE(lock_state)

BOOST_AUTO_TEST_CASE(snapshot_compaction_and_reopen_rebuild_the_same_lock_table) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = kMinSegmentBytes;
    lock::LockTable live;
    {
        auto s = open_storage(dir.path(), opt);
        for (raft::Index i = 1; i <= kEntries; ++i) {
            const lock::Command cmd = command_for(i, live);
            s->persist(nullptr, nullptr, {{1, i, raft::EntryType::kNormal, lock::encode(cmd)}});
            live.apply(i, cmd);
            if (i == kSnapshotAt) {
                raft::Snapshot snap;
                snap.meta = {i, 1, raft::Configuration::of_voters({kMember})};
                snap.data = live.snapshot();
                s->save_snapshot(snap);
            }
        }
        const raft::HardState hs{1, kMember, kEntries};
        s->persist(&hs, nullptr, {});
    }
    auto s = open_storage(dir.path(), opt);
    BOOST_TEST(s->first_index() == kSnapshotAt + 1);
    BOOST_TEST((s->hard_state() == raft::HardState{1, kMember, kEntries}));
    auto restored = lock::LockTable::restore(s->snapshot().data);
    BOOST_TEST_REQUIRE(std::holds_alternative<lock::LockTable>(restored));
    lock::LockTable rebuilt = std::get<lock::LockTable>(restored);
    BOOST_TEST(rebuilt.applied_index() == kSnapshotAt);
    apply_entries(rebuilt, all_entries(*s));
    BOOST_TEST((rebuilt == live));
    BOOST_TEST(rebuilt.check_invariants() == "");
    const lock::Grant next{"fresh-key", kLeaseMs, ""};
    BOOST_TEST((rebuilt.apply(kEntries + 1, next) == live.apply(kEntries + 1, next)));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::storage
