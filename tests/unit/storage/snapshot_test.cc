// Snapshots: saving and compaction, installing one from the leader, and
// interrupted snapshot writes.
#include <boost/test/unit_test.hpp>
#include <initializer_list>

#include "codec/bytes.h"
#include "storage/crc32c.h"
#include "storage/meta_files.h"
#include "storage/wal.h"
#include "test_dir.h"

namespace pgfence::storage {
namespace {

using namespace test;

raft::Snapshot make_snapshot(raft::Index index, raft::Term term, std::string data) {
    raft::Snapshot snap;
    snap.meta = {index, term, raft::Configuration::of_voters({1, 2, 3})};
    snap.data = std::move(data);
    return snap;
}

StorageOptions small_segments() {
    StorageOptions opt;
    opt.segment_bytes = kMinSegmentBytes;
    return opt;
}

// 120 entries of term 1 in several segments; hard state {1, 3, 100}.
std::vector<raft::Entry> fill(DurableStorage& s) {
    std::vector<raft::Entry> all;
    for (raft::Index i = 1; i <= 120; i += 10) {
        auto batch = make_entries(i, 10, 1);
        s.persist(nullptr, nullptr, batch);
        all.insert(all.end(), batch.begin(), batch.end());
    }
    const raft::HardState hs{1, 3, 100};
    s.persist(&hs, nullptr, {});
    return all;
}

// A version 1 snapshot file, as written before learners: index 7, term 2,
// these voters in this order, data "table".
std::string version_1_file(std::initializer_list<std::uint64_t> voters) {
    std::string out;
    codec::put_u32(out, kSnapshotMagic);
    codec::put_u8(out, 1);
    codec::put_u64(out, 7);
    codec::put_u64(out, 2);
    codec::put_u32(out, static_cast<std::uint32_t>(voters.size()));
    for (std::uint64_t id : voters) codec::put_u64(out, id);
    codec::put_u64(out, 5);
    out.append("table");
    codec::put_u32(out, crc32c(out));
    return out;
}

BOOST_AUTO_TEST_SUITE(snapshots)

// The two-step save (write_snapshot_file, then adopt_snapshot): the file
// alone changes nothing in memory; adopting it drops the log it covers; a
// restart between the steps opens with the new file and the entries after it.
BOOST_AUTO_TEST_CASE(a_snapshot_written_in_two_steps_survives_a_crash_between_them) {
    TempDir dir;
    const auto snap = std::make_shared<const raft::Snapshot>(make_snapshot(100, 1, "table at 100"));
    {
        auto s = open_storage(dir.path(), small_segments());
        fill(*s);
        BOOST_TEST(s->write_snapshot_file(*snap));
        BOOST_TEST(s->first_index() == 1u);  // not adopted: the log is whole
        BOOST_TEST(s->snapshot().meta.index == 0u);
    }  // a crash here: the file is the new one, the log still holds 1..120
    auto s = open_storage(dir.path(), small_segments());
    BOOST_TEST((s->snapshot() == *snap));
    BOOST_TEST(s->first_index() == 101u);
    BOOST_TEST(s->last_index() == 120u);
    // Writing an older or equal one changes nothing (an install came first).
    BOOST_TEST(!s->write_snapshot_file(make_snapshot(90, 1, "older")));
    BOOST_TEST(!s->write_snapshot_file(*snap));
}

BOOST_AUTO_TEST_CASE(adopt_needs_the_file_of_that_very_snapshot_and_ignores_an_older_one) {
    TempDir dir;
    auto s = open_storage(dir.path(), small_segments());
    fill(*s);
    const auto at_100 = std::make_shared<const raft::Snapshot>(make_snapshot(100, 1, "table at 100"));
    const auto at_110 = std::make_shared<const raft::Snapshot>(make_snapshot(110, 1, "table at 110"));
    BOOST_CHECK_THROW(s->adopt_snapshot(at_100), StorageError);  // no file written for it
    BOOST_TEST(s->write_snapshot_file(*at_110));
    BOOST_CHECK_THROW(s->adopt_snapshot(at_100), StorageError);  // the file holds 110
}

BOOST_AUTO_TEST_CASE(adopting_a_written_snapshot_drops_the_log_it_covers) {
    TempDir dir;
    auto s = open_storage(dir.path(), small_segments());
    fill(*s);
    const auto at_100 = std::make_shared<const raft::Snapshot>(make_snapshot(100, 1, "table at 100"));
    BOOST_TEST(s->write_snapshot_file(*at_100));
    s->adopt_snapshot(at_100);
    BOOST_TEST(s->first_index() == 101u);
    BOOST_TEST((s->snapshot() == *at_100));
    s->adopt_snapshot(at_100);  // again: as new as the stored one, nothing to do
    BOOST_TEST(s->first_index() == 101u);
}

BOOST_AUTO_TEST_CASE(snapshot_compaction_and_reopen_keep_entries_hard_state_and_data) {
    TempDir dir;
    const auto snap = make_snapshot(100, 1, "the lock table \x01\x02\x00 bytes");
    std::vector<raft::Entry> all;
    {
        auto s = open_storage(dir.path(), small_segments());
        all = fill(*s);
        const std::size_t segments_before = segment_files(dir.path()).size();
        s->save_snapshot(snap);
        BOOST_TEST(s->first_index() == 101u);
        BOOST_TEST(segment_files(dir.path()).size() < segments_before);  // whole segments dropped
    }
    auto s = open_storage(dir.path(), small_segments());
    BOOST_TEST(s->warnings().empty());
    BOOST_TEST((s->snapshot() == snap));
    BOOST_TEST((s->hard_state() == raft::HardState{1, 3, 100}));
    BOOST_TEST(s->first_index() == 101u);
    BOOST_TEST(s->last_index() == 120u);
    BOOST_TEST((all_entries(*s) == std::vector<raft::Entry>(all.begin() + 100, all.end())));
    s->persist(nullptr, nullptr, make_entries(121, 1, 1));
    BOOST_TEST(s->last_index() == 121u);
}

BOOST_AUTO_TEST_CASE(snapshot_files_keep_learners_and_contexts_and_version_1_files_read_as_voters) {
    raft::Snapshot snap = make_snapshot(7, 2, "table");
    snap.meta.config.members = {{1, true, "a"}, {2, true, "b"}, {4, false, "learner's addresses"}};
    BOOST_TEST((decode_snapshot(encode_snapshot(snap), "snapshot") == snap));
    // Version 1, as written before learners: index, term, the voters, data.
    BOOST_TEST((decode_snapshot(version_1_file({1, 2, 3}), "snapshot") == make_snapshot(7, 2, "table")));
    // A cluster whose members never changed writes version 1, which the
    // release before learners reads; with learners or addresses, version 2.
    BOOST_TEST(static_cast<int>(encode_snapshot(make_snapshot(7, 2, "table"))[4]) == 1);
    BOOST_TEST(static_cast<int>(encode_snapshot(snap)[4]) == 2);
    // Version 1 as the release before wrote it from --peers: voters in any order.
    BOOST_TEST((decode_snapshot(version_1_file({3, 1, 2}), "snapshot").meta.config ==
                raft::Configuration::of_voters({1, 2, 3})));
    // A version from the future is refused, naming it.
    std::string v4 = encode_snapshot(snap);
    v4[4] = 4;
    v4.resize(v4.size() - 4);
    codec::put_u32(v4, crc32c(v4));
    try {
        decode_snapshot(v4, "dir/snapshot");
        BOOST_FAIL("version 4 was accepted");
    } catch (const StorageError& e) {
        BOOST_TEST(std::string(e.what()).find("unsupported format version 4") != std::string::npos, e.what());
    }
}

// A configuration made by a log entry is stored with that entry's index
// (version 3), whatever its members; the first configuration (index 0)
// keeps the versions 1 and 2 that releases before read, and those read
// back with index 0.
BOOST_AUTO_TEST_CASE(snapshot_files_keep_the_index_of_the_configurations_entry) {
    raft::Snapshot removed = make_snapshot(170050, 9, "table");
    removed.meta.config = raft::Configuration::of_voters({1, 2});  // 3 removed at 130034
    removed.meta.config_index = 130034;
    const std::string bytes = encode_snapshot(removed);
    BOOST_TEST(static_cast<int>(bytes[4]) == 3);
    const raft::Snapshot back = decode_snapshot(bytes, "snapshot");
    BOOST_TEST(back.meta.config_index == 130034u);
    BOOST_TEST((back == removed));
    raft::Snapshot learners = removed;
    learners.meta.config.members.push_back({4, false, "addresses"});
    BOOST_TEST((decode_snapshot(encode_snapshot(learners), "snapshot") == learners));
    raft::Snapshot first = make_snapshot(170050, 9, "table");
    BOOST_TEST(static_cast<int>(encode_snapshot(first)[4]) == 1);
    BOOST_TEST(decode_snapshot(encode_snapshot(first), "snapshot").meta.config_index == 0u);
    first.meta.config.members[0].context = "addresses";
    BOOST_TEST(static_cast<int>(encode_snapshot(first)[4]) == 2);
    BOOST_TEST((decode_snapshot(encode_snapshot(first), "snapshot") == first));
    // An index beyond the snapshot's is corruption, named.
    raft::Snapshot beyond = removed;
    beyond.meta.config_index = beyond.meta.index + 1;
    try {
        decode_snapshot(encode_snapshot(beyond), "dir/snapshot");
        BOOST_FAIL("a configuration index beyond the snapshot was accepted");
    } catch (const StorageError& e) {
        BOOST_TEST(std::string(e.what()).find("configuration index 170051 is beyond the snapshot index 170050") !=
                       std::string::npos,
                   e.what());
    }
}

// One encoding: the first configuration is written as version 1 or 2, so a
// version 3 file with configuration index 0 is corruption, named (as the
// peer codec refuses tag 13 with index 0).
BOOST_AUTO_TEST_CASE(a_version_3_snapshot_file_with_configuration_index_0_is_corrupt) {
    raft::Snapshot removed = make_snapshot(170050, 9, "table");
    removed.meta.config = raft::Configuration::of_voters({1, 2});
    removed.meta.config_index = 130034;
    std::string bytes = encode_snapshot(removed);
    BOOST_TEST(static_cast<int>(bytes[4]) == 3);
    // Body at byte 5: index, term, then config_index at 21.
    for (std::size_t i = 21; i < 29; ++i) bytes[i] = 0;
    bytes.resize(bytes.size() - 4);
    codec::put_u32(bytes, crc32c(bytes));
    try {
        decode_snapshot(bytes, "dir/snapshot");
        BOOST_FAIL("a version 3 snapshot with configuration index 0 was accepted");
    } catch (const StorageError& e) {
        const std::string what = e.what();
        BOOST_TEST(what.find("dir/snapshot is corrupt at byte 21") != std::string::npos, what);
        BOOST_TEST(what.find("configuration index 0 in a version 3 snapshot") != std::string::npos, what);
    }
}

BOOST_AUTO_TEST_CASE(compacting_everything_then_reopening_starts_after_the_snapshot) {
    TempDir dir;
    {
        auto s = open_storage(dir.path(), small_segments());
        fill(*s);
        s->save_snapshot(make_snapshot(120, 1, "all"));
        BOOST_TEST(s->first_index() == 121u);
        BOOST_TEST(s->last_index() == 120u);
    }
    auto s = open_storage(dir.path(), small_segments());
    BOOST_TEST(s->first_index() == 121u);
    BOOST_TEST(s->last_index() == 120u);
    s->persist(nullptr, nullptr, make_entries(121, 2, 2));
    s.reset();
    BOOST_TEST(open_storage(dir.path(), small_segments())->last_index() == 122u);
}

BOOST_AUTO_TEST_CASE(interrupted_snapshot_write_is_cleaned_up_and_the_previous_one_used) {
    TempDir dir;
    const auto first = make_snapshot(50, 1, "first");
    {
        auto s = open_storage(dir.path(), small_segments());
        fill(*s);
        s->save_snapshot(first);
    }
    // A crash while writing the next snapshot (and a hard state) leaves temp files.
    write_bytes(dir.file("snapshot.tmp"),
                encode_snapshot(make_snapshot(90, 1, "sec")).substr(0, 20));
    write_bytes(dir.file("hardstate.tmp"), "garbage");
    auto s = open_storage(dir.path(), small_segments());
    BOOST_TEST(s->warnings().size() == 2u);
    BOOST_TEST(!path_exists(dir.file("snapshot.tmp")));
    BOOST_TEST(!path_exists(dir.file("hardstate.tmp")));
    BOOST_TEST((s->snapshot() == first));
    BOOST_TEST(s->first_index() == 51u);
    BOOST_TEST(s->last_index() == 120u);
}

BOOST_AUTO_TEST_CASE(installed_snapshot_matching_the_log_keeps_the_suffix) {
    TempDir dir;
    auto s = open_storage(dir.path());
    s->persist(nullptr, nullptr, make_entries(1, 20, 1));
    const auto snap = make_snapshot(10, 1, "x");
    s->persist(nullptr, &snap, {});
    BOOST_TEST(s->first_index() == 11u);
    BOOST_TEST(s->last_index() == 20u);
    s.reset();
    s = open_storage(dir.path());
    BOOST_TEST(s->first_index() == 11u);
    BOOST_TEST(s->last_index() == 20u);
}

BOOST_AUTO_TEST_CASE(installed_snapshot_conflicting_with_the_log_discards_it) {
    TempDir dir;
    auto s = open_storage(dir.path());
    s->persist(nullptr, nullptr, make_entries(1, 20, 1));
    const auto snap = make_snapshot(10, 2, "x");  // term 2 at index 10: conflict
    const raft::HardState hs{2, 0, 10};
    s->persist(&hs, &snap, make_entries(11, 2, 2));
    BOOST_TEST(s->first_index() == 11u);
    BOOST_TEST(s->last_index() == 12u);
    s.reset();
    s = open_storage(dir.path());
    BOOST_TEST(s->last_index() == 12u);
    BOOST_TEST(s->entries(11, 13).at(1).term == 2u);
    BOOST_TEST(s->hard_state().commit == 10u);
}

BOOST_AUTO_TEST_CASE(installed_snapshot_ahead_of_the_log_discards_it) {
    TempDir dir;
    auto s = open_storage(dir.path());
    s->persist(nullptr, nullptr, make_entries(1, 5, 1));
    const auto snap = make_snapshot(30, 3, "ahead");
    s->persist(nullptr, &snap, {});
    BOOST_TEST(s->first_index() == 31u);
    BOOST_TEST(s->last_index() == 30u);
    s.reset();
    s = open_storage(dir.path());
    BOOST_TEST(s->first_index() == 31u);
    BOOST_TEST(s->last_index() == 30u);
    BOOST_TEST(s->hard_state().commit == 30u);  // raised to the snapshot
}

BOOST_AUTO_TEST_CASE(crash_after_snapshot_install_before_the_log_reset_finishes_it_at_open) {
    TempDir dir;
    open_storage(dir.path())->persist(nullptr, nullptr, make_entries(1, 20, 1));
    // Only the snapshot file made it to disk (its term conflicts with entry 10).
    write_file_atomically(dir.path(), "snapshot", encode_snapshot(make_snapshot(10, 4, "s")));
    auto s = open_storage(dir.path());
    BOOST_TEST(s->warnings().size() == 1u);
    BOOST_TEST(s->first_index() == 11u);
    BOOST_TEST(s->last_index() == 10u);
    s.reset();
    BOOST_TEST(open_storage(dir.path())->last_index() == 10u);
}

BOOST_AUTO_TEST_CASE(corrupt_snapshot_file_is_refused_naming_it) {
    TempDir dir;
    {
        auto s = open_storage(dir.path());
        s->persist(nullptr, nullptr, make_entries(1, 5, 1));
        s->save_snapshot(make_snapshot(3, 1, "data"));
    }
    flip_bit(dir.file("snapshot"), 30, 1);
    try {
        open_storage(dir.path());
        BOOST_TEST(false, "opened with a corrupt snapshot");
    } catch (const StorageError& e) {
        BOOST_TEST(std::string(e.what()).find(dir.file("snapshot") + " is corrupt at byte") !=
                   std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(log_reset_past_a_missing_snapshot_is_refused) {
    TempDir dir;
    {
        auto s = open_storage(dir.path());
        s->persist(nullptr, nullptr, make_entries(1, 5, 1));
        const auto snap = make_snapshot(30, 3, "ahead");
        s->persist(nullptr, &snap, {});  // writes a reset record: the log restarts at 31
    }
    remove_file(dir.file("snapshot"));
    try {
        open_storage(dir.path());
        BOOST_TEST(false, "opened a log that starts after a snapshot that is gone");
    } catch (const StorageError& e) {
        BOOST_TEST(std::string(e.what()).find("starts at index 31 but there is no snapshot") !=
                   std::string::npos);
    }
}

// A crash during compaction can leave segments that were about to be deleted
// (oldest first, directory synced after each): the log must read the same.
BOOST_AUTO_TEST_CASE(interrupted_compaction_leaves_a_log_that_reads_the_same) {
    TempDir dir;
    std::vector<raft::Entry> all;
    std::vector<std::pair<std::string, std::string>> deleted;
    {
        auto s = open_storage(dir.path(), small_segments());
        all = fill(*s);
        std::vector<std::pair<std::string, std::string>> before;
        for (const auto& f : segment_files(dir.path())) before.emplace_back(f, read_bytes(f));
        s->save_snapshot(make_snapshot(100, 1, "s"));
        for (const auto& [f, bytes] : before) {
            if (!path_exists(f)) deleted.emplace_back(f, bytes);
        }
    }
    BOOST_TEST_REQUIRE(deleted.size() >= 2u);
    // Only the newest deleted ones came back, then all of them.
    for (std::size_t keep : {deleted.size() - 1, std::size_t{0}}) {
        for (std::size_t i = keep; i < deleted.size(); ++i) {
            write_bytes(deleted[i].first, deleted[i].second);
        }
        auto s = open_storage(dir.path(), small_segments());
        BOOST_TEST(s->first_index() == 101u);
        BOOST_TEST((all_entries(*s) == std::vector<raft::Entry>(all.begin() + 100, all.end())));
        BOOST_TEST(!path_exists(deleted.back().first));  // compaction finished at open
    }
}

BOOST_AUTO_TEST_CASE(save_snapshot_whose_term_differs_from_the_log_is_refused) {
    TempDir dir;
    auto s = open_storage(dir.path());
    s->persist(nullptr, nullptr, make_entries(1, 5, 1));
    BOOST_CHECK_THROW(s->save_snapshot(make_snapshot(3, 2, "x")), StorageError);
    BOOST_TEST(s->snapshot().empty());
    s->save_snapshot(make_snapshot(3, 1, "x"));  // still usable
    BOOST_TEST(s->first_index() == 4u);
}

BOOST_AUTO_TEST_CASE(snapshot_size_limit_is_enforced) {
    TempDir dir;
    StorageOptions opt;
    opt.max_snapshot_bytes = 1000;
    auto s = open_storage(dir.path(), opt);
    s->persist(nullptr, nullptr, make_entries(1, 5, 1));
    BOOST_CHECK_THROW(s->save_snapshot(make_snapshot(3, 1, std::string(2000, 'x'))), StorageError);
    BOOST_TEST(s->snapshot().empty());
    BOOST_TEST(s->first_index() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::storage
