// DurableStorage: identity, hard state, group commit, suffix truncation, limits.
#include <boost/test/unit_test.hpp>

#include "codec/bytes.h"
#include "storage/crc32c.h"
#include "storage/durable_storage.h"
#include "storage/meta_files.h"
#include "storage/wal.h"
#include "storage/wal_format.h"
#include "test_dir.h"

namespace pgfence::storage {
namespace {

using namespace test;

bool message_has(const StorageError& e, const std::string& part) {
    return std::string(e.what()).find(part) != std::string::npos;
}

BOOST_AUTO_TEST_SUITE(durable_storage)

BOOST_AUTO_TEST_CASE(missing_directory_becomes_a_new_member) {
    TempDir dir;
    auto s = open_storage(dir.path());
    BOOST_TEST(s->first_index() == 1u);
    BOOST_TEST(s->last_index() == 0u);
    BOOST_TEST((s->hard_state() == raft::HardState{}));
    BOOST_TEST(s->snapshot().empty());
    BOOST_TEST(s->entries(1, 1).empty());
    BOOST_TEST(s->warnings().empty());
    BOOST_TEST((load_identity(dir.path()) == Identity{kCluster, kMember, std::nullopt, std::nullopt}));
}

BOOST_AUTO_TEST_CASE(empty_existing_directory_becomes_a_new_member) {
    TempDir dir;
    make_dir(dir.path());
    auto s = open_storage(dir.path());
    BOOST_TEST(s->last_index() == 0u);
    BOOST_TEST(path_exists(dir.file("identity")));
}

BOOST_AUTO_TEST_CASE(another_cluster_or_member_is_refused) {
    TempDir dir;
    open_storage(dir.path())->persist(nullptr, nullptr, make_entries(1, 2, 1));
    try {
        DurableStorage::open(dir.path(), kCluster + 1, kMember);
        BOOST_TEST(false, "opened another cluster's directory");
    } catch (const StorageError& e) {
        BOOST_TEST(message_has(e, "belongs to cluster 77 member 3, not cluster 78 member 3"));
    }
    BOOST_CHECK_THROW(DurableStorage::open(dir.path(), kCluster, kMember + 1), StorageError);
    BOOST_TEST(open_storage(dir.path())->last_index() == 2u);  // untouched
}

raft::Configuration three_voters_with_addresses() {
    raft::Configuration c = raft::Configuration::of_voters({1, 2, 3});
    for (raft::ConfigMember& m : c.members) m.context = "peer-of-" + std::to_string(m.id);
    return c;
}

BOOST_AUTO_TEST_CASE(identity_records_the_first_configuration) {
    TempDir dir;
    const Identity id{kCluster, kMember, three_voters_with_addresses(), std::nullopt};
    DurableStorage::open(dir.path(), id);
    BOOST_TEST((load_identity(dir.path()) == id));
    // Read back by an open that names only cluster and member.
    BOOST_TEST((open_storage(dir.path())->identity() == id));
    // A joined member's first configuration has no members.
    TempDir joined;
    DurableStorage::open(joined.path(), Identity{kCluster, kMember, raft::Configuration{}, std::nullopt});
    const std::optional<Identity> back = load_identity(joined.path());
    BOOST_TEST((back && back->first_config && back->first_config->members.empty()));
}

BOOST_AUTO_TEST_CASE(a_restored_clusters_identity_records_its_origin_in_version_3) {
    TempDir dir;
    const Identity id{kCluster, kMember, three_voters_with_addresses(),
                      Origin{555, 10, 1'700'000'000'001'010ull}};
    DurableStorage::open(dir.path(), id);
    BOOST_TEST(static_cast<int>(read_whole_file(dir.file("identity"), 4096)[4]) == 3);
    BOOST_TEST((load_identity(dir.path()) == id));
    BOOST_TEST((open_storage(dir.path())->identity() == id));
    // A cluster that was not restored keeps writing version 2 (older releases read it).
    TempDir plain;
    DurableStorage::open(plain.path(), Identity{kCluster, kMember, three_voters_with_addresses(), std::nullopt});
    BOOST_TEST(static_cast<int>(read_whole_file(plain.file("identity"), 4096)[4]) == 2);
    // An origin cut short is corruption.
    std::string bytes = encode_identity(id);
    bytes.resize(bytes.size() - 4 - 8);
    codec::put_u32(bytes, crc32c(bytes));
    write_file_atomically(plain.path(), "identity", bytes);
    try {
        load_identity(plain.path());
        BOOST_TEST(false, "loaded an origin cut short");
    } catch (const StorageError& e) {
        BOOST_TEST(message_has(e, "wrong body length"));
    }
}

BOOST_AUTO_TEST_CASE(version_1_identity_is_upgraded_once_and_a_different_first_configuration_refused) {
    TempDir dir;
    open_storage(dir.path())->persist(nullptr, nullptr, make_entries(1, 2, 1));  // version 1: no configuration
    BOOST_TEST(static_cast<int>(read_whole_file(dir.file("identity"), 4096)[4]) == 1);
    const Identity id{kCluster, kMember, raft::Configuration::of_voters({1, 2, 3}), std::nullopt};
    auto s = DurableStorage::open(dir.path(), id);
    BOOST_TEST((s->identity() == id));
    BOOST_TEST(s->last_index() == 2u);  // the log is kept
    BOOST_TEST(s->warnings().size() == 1u);
    s.reset();
    BOOST_TEST(static_cast<int>(read_whole_file(dir.file("identity"), 4096)[4]) == 2);
    try {
        DurableStorage::open(dir.path(), Identity{kCluster, kMember, three_voters_with_addresses(), std::nullopt});
        BOOST_TEST(false, "opened with another first configuration");
    } catch (const StorageError& e) {
        BOOST_TEST(message_has(e, "another first configuration"));
    }
    BOOST_TEST((load_identity(dir.path()) == id));  // untouched
}

BOOST_AUTO_TEST_CASE(identity_with_a_bad_first_configuration_is_refused) {
    TempDir dir;
    make_dir(dir.path());
    // A well-formed file (its CRC matches) whose configuration does not decode:
    // its version byte (after magic, version, two ids and the length) is 7.
    std::string bytes = encode_identity(Identity{kCluster, kMember, three_voters_with_addresses(), std::nullopt});
    bytes[5 + 16 + 4] = 7;
    bytes.resize(bytes.size() - 4);
    codec::put_u32(bytes, crc32c(bytes));
    write_file_atomically(dir.path(), "identity", bytes);
    try {
        load_identity(dir.path());
        BOOST_TEST(false, "loaded a bad first configuration");
    } catch (const StorageError& e) {
        BOOST_TEST(message_has(e, "first configuration"));
    }
}

BOOST_AUTO_TEST_CASE(persist_commit_writes_a_commit_that_persist_leaves_alone) {
    TempDir dir;
    {
        auto s = open_storage(dir.path());
        const raft::HardState hs{2, 1, 0};
        s->persist(&hs, nullptr, make_entries(1, 5, 2));
        const raft::HardState only_commit{2, 1, 4};
        s->persist(&only_commit, nullptr, {});  // term and vote unchanged: not written
    }
    BOOST_TEST(load_hard_state(dir.path())->commit == 0u);
    {
        auto s = open_storage(dir.path());
        s->persist_commit(raft::HardState{2, 1, 4});
        BOOST_CHECK_THROW(s->persist_commit(raft::HardState{2, 1, 9}), StorageError);  // past the log
        BOOST_CHECK_THROW(s->persist_commit(raft::HardState{1, 1, 4}), StorageError);  // an older term
    }
    BOOST_TEST(load_hard_state(dir.path())->commit == 4u);
    BOOST_TEST(open_storage(dir.path())->hard_state().commit == 4u);
}

BOOST_AUTO_TEST_CASE(directory_with_log_but_no_identity_is_refused) {
    TempDir dir;
    open_storage(dir.path());
    remove_file(dir.file("identity"));
    try {
        open_storage(dir.path());
        BOOST_TEST(false, "opened a directory without identity");
    } catch (const StorageError& e) {
        BOOST_TEST(message_has(e, "no identity file"));
    }
}

BOOST_AUTO_TEST_CASE(a_second_open_of_the_same_directory_is_refused) {
    TempDir dir;
    auto s = open_storage(dir.path());
    try {
        open_storage(dir.path());
        BOOST_TEST(false, "two processes share a data directory");
    } catch (const StorageError& e) {
        BOOST_TEST(message_has(e, "in use by another process"));
    }
}

BOOST_AUTO_TEST_CASE(unknown_files_are_reported_not_touched) {
    TempDir dir;
    open_storage(dir.path());
    write_bytes(dir.file("notes.txt"), "hello");
    auto s = open_storage(dir.path());
    BOOST_TEST(s->warnings().size() == 1u);
    BOOST_TEST(read_bytes(dir.file("notes.txt")) == "hello");
}

BOOST_AUTO_TEST_CASE(hard_state_survives_reopen_and_commit_alone_is_not_synced) {
    TempDir dir;
    {
        auto s = open_storage(dir.path());
        const raft::HardState vote{5, 2, 0};
        s->persist(&vote, nullptr, make_entries(1, 3, 5));
        const std::uint64_t before = s->sync_count();
        const raft::HardState commit{5, 2, 3};
        s->persist(&commit, nullptr, {});
        BOOST_TEST(s->sync_count() == before);  // commit-only: nothing to sync
        BOOST_TEST((s->hard_state() == commit));
    }
    auto s = open_storage(dir.path());
    BOOST_TEST(s->hard_state().term == 5u);
    BOOST_TEST(s->hard_state().vote == 2u);
    BOOST_TEST(s->hard_state().commit == 0u);  // lags: it was never synced
}

BOOST_AUTO_TEST_CASE(term_change_writes_hard_state_with_its_commit) {
    TempDir dir;
    {
        auto s = open_storage(dir.path());
        s->persist(nullptr, nullptr, make_entries(1, 4, 1));
        const raft::HardState hs{2, 0, 4};
        s->persist(&hs, nullptr, {});
    }
    BOOST_TEST((open_storage(dir.path())->hard_state() == raft::HardState{2, 0, 4}));
}

BOOST_AUTO_TEST_CASE(commit_is_capped_at_the_durable_log) {
    TempDir dir;
    {
        auto s = open_storage(dir.path());
        const raft::HardState hs{2, 1, 9};  // entries after 3 never made it
        s->persist(&hs, nullptr, make_entries(1, 3, 2));
    }
    BOOST_TEST(open_storage(dir.path())->hard_state().commit == 3u);
}

BOOST_AUTO_TEST_CASE(one_fdatasync_per_batch) {
    TempDir dir;
    auto s = open_storage(dir.path());
    for (std::size_t n : {1u, 16u, 256u}) {
        const std::uint64_t before = s->sync_count();
        s->persist(nullptr, nullptr, make_entries(s->last_index() + 1, n, 1));
        BOOST_TEST(s->sync_count() == before + 1);
    }
}

// last_persist(): the bytes of the record the batch wrote (more than its
// entries' data: the framing), none for a batch without entries.
BOOST_AUTO_TEST_CASE(last_persist_reports_the_batch_bytes) {
    TempDir dir;
    auto s = open_storage(dir.path());
    const auto entries = make_entries(1, 16, 1);
    std::size_t data = 0;
    for (const auto& e : entries) data += e.data.size();
    s->persist(nullptr, nullptr, entries);
    BOOST_TEST(s->last_persist().bytes > data);
    s->persist(nullptr, nullptr, {});
    BOOST_TEST(s->last_persist().bytes == 0u);
}

BOOST_AUTO_TEST_CASE(conflicting_suffix_is_truncated_and_stays_truncated) {
    TempDir dir;
    {
        auto s = open_storage(dir.path());
        s->persist(nullptr, nullptr, make_entries(1, 10, 1));
        s->persist(nullptr, nullptr, make_entries(6, 3, 2));
        BOOST_TEST(s->last_index() == 8u);
    }
    auto s = open_storage(dir.path());
    BOOST_TEST(s->last_index() == 8u);
    auto expected = make_entries(1, 5, 1);
    for (auto& e : make_entries(6, 3, 2)) expected.push_back(e);
    BOOST_TEST((all_entries(*s) == expected));
}

BOOST_AUTO_TEST_CASE(truncation_into_an_older_segment_survives_reopen) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = kMinSegmentBytes;
    {
        auto s = open_storage(dir.path(), opt);
        for (raft::Index i = 1; i <= 120; i += 10)
            s->persist(nullptr, nullptr, make_entries(i, 10, 1));
        s->persist(nullptr, nullptr, make_entries(15, 3, 2));
    }
    auto s = open_storage(dir.path(), opt);
    BOOST_TEST(s->last_index() == 17u);
    BOOST_TEST(s->entries(14, 15).at(0).term == 1u);
    BOOST_TEST(s->entries(15, 18).at(2).term == 2u);
    s->persist(nullptr, nullptr, make_entries(18, 1, 2));
    BOOST_TEST(s->last_index() == 18u);
}

BOOST_AUTO_TEST_CASE(bad_appends_are_refused_before_writing) {
    TempDir dir;
    auto s = open_storage(dir.path());
    s->persist(nullptr, nullptr, make_entries(1, 2, 1));
    BOOST_CHECK_THROW(s->persist(nullptr, nullptr, make_entries(5, 1, 1)), StorageError);  // gap
    std::vector<raft::Entry> huge = {make_entry(3, 1, kMaxEntryDataBytes + 1)};
    BOOST_CHECK_THROW(s->persist(nullptr, nullptr, huge), StorageError);
    BOOST_TEST(s->last_index() == 2u);
    BOOST_CHECK_THROW(s->entries(1, 4), StorageError);  // past the end
}

BOOST_AUTO_TEST_CASE(large_batch_is_split_into_records_and_read_back) {
    TempDir dir;
    std::vector<raft::Entry> batch = make_entries(1, 3, 1, 3u << 20);  // 9 MiB > one record
    {
        auto s = open_storage(dir.path());
        const std::uint64_t before = s->sync_count();
        s->persist(nullptr, nullptr, batch);
        BOOST_TEST(s->sync_count() == before + 1);
    }
    BOOST_TEST((all_entries(*open_storage(dir.path())) == batch));
}

BOOST_AUTO_TEST_CASE(hard_state_that_would_undo_a_durable_term_or_vote_is_refused_before_writing) {
    TempDir dir;
    auto s = open_storage(dir.path());
    const raft::HardState voted{5, 2, 0};
    s->persist(&voted, nullptr, {});
    const raft::HardState older_term{4, 0, 0};
    const raft::HardState other_vote{5, 3, 0};
    BOOST_CHECK_THROW(s->persist(&older_term, nullptr, {}), StorageError);
    BOOST_CHECK_THROW(s->persist(&other_vote, nullptr, {}), StorageError);
    BOOST_TEST((load_hard_state(dir.path()) == voted));
    // Refused before writing, so the storage is still usable.
    const raft::HardState next_term{6, 0, 0};
    s->persist(&next_term, nullptr, make_entries(1, 1, 6));
    BOOST_TEST((load_hard_state(dir.path()) == next_term));
}

BOOST_AUTO_TEST_CASE(foreign_directory_is_refused_untouched) {
    TempDir dir;
    open_storage(dir.path());
    write_bytes(dir.file("hardstate.tmp"), "left by a crash");
    BOOST_CHECK_THROW(DurableStorage::open(dir.path(), kCluster, kMember + 1), StorageError);
    BOOST_TEST(path_exists(dir.file("hardstate.tmp")));
    auto s = open_storage(dir.path());  // the owner cleans it up
    BOOST_TEST(!path_exists(dir.file("hardstate.tmp")));
}

BOOST_AUTO_TEST_CASE(bad_options_are_refused) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = 10;
    BOOST_CHECK_THROW(open_storage(dir.path(), opt), StorageError);
    BOOST_CHECK_THROW(DurableStorage::open(dir.path(), 0, kMember), StorageError);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::storage
