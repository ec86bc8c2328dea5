// Crash recovery of the WAL: torn tails are cut, corruption is refused.
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <optional>

#include "storage/wal.h"
#include "storage/wal_format.h"
#include "test_dir.h"

namespace pgfence::storage {
namespace {

using namespace test;

// Most cases here cut and flip bytes by file offset, so their files end where
// the data ends (no preallocation); the preallocated cases say so.
StorageOptions exact(StorageOptions o = {}) {
    o.preallocate = false;
    return o;
}

struct Written {
    std::vector<raft::Entry> entries;  // everything written
    std::vector<std::uint64_t> ends;   // segment size after each batch
    std::string segment;               // path of the (single) segment
};

// Persists entries [first, first + count) of `term` as one batch and keeps
// them in `kept` (what a reopen must give back).
void persist_kept(DurableStorage& s, std::vector<raft::Entry>& kept, raft::Index first,
                  std::size_t count, raft::Term term, std::size_t data_bytes = 100) {
    auto batch = make_entries(first, count, term, data_bytes);
    s.persist(nullptr, nullptr, batch);
    kept.insert(kept.end(), batch.begin(), batch.end());
}

// Writes batches of the given sizes (each one record) into a fresh directory.
// Without preallocation, so that the file ends where the data ends (the
// record framing cases below cut and flip bytes by file offset); the
// preallocated cases are further down.
Written write_batches(const std::string& dir, const std::vector<std::size_t>& sizes) {
    Written w;
    auto s = open_storage(dir, exact());
    raft::Index next = 1;
    w.segment = segment_files(dir).at(0);
    for (std::size_t n : sizes) {
        persist_kept(*s, w.entries, next, n, 1);
        w.ends.push_back(size_of(w.segment));
        next += n;
    }
    return w;
}

// The log goes on after recovery: an entry appended now is there after a reopen.
void check_appends_continue(const std::string& dir, const StorageOptions& opt, raft::Index index,
                            raft::Term term) {
    auto s = open_storage(dir, opt);
    s->persist(nullptr, nullptr, make_entries(index, 1, term));
    s.reset();
    s = open_storage(dir, opt);
    BOOST_TEST(s->last_index() == index);
    BOOST_TEST(s->entries(index, index + 1).at(0).term == term);
}

std::vector<raft::Entry> prefix(const std::vector<raft::Entry>& v, std::size_t n) {
    return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)};
}

BOOST_AUTO_TEST_SUITE(recovery)

BOOST_AUTO_TEST_CASE(crash_at_every_byte_of_the_last_record_recovers_the_written_prefix) {
    TempDir dir;
    const Written w = write_batches(dir.path(), {1, 3, 2, 2});
    const std::string full = read_bytes(w.segment);
    const std::uint64_t last_start = w.ends[2];
    const std::size_t kept = 6;
    for (std::uint64_t cut = last_start; cut < full.size(); ++cut) {
        write_bytes(w.segment, full.substr(0, cut));
        auto s = open_storage(dir.path(), exact());
        BOOST_TEST_INFO("cut at byte " << cut);
        BOOST_TEST(s->last_index() == kept);
        BOOST_TEST((all_entries(*s) == prefix(w.entries, kept)));
        BOOST_TEST(s->warnings().size() == (cut == last_start ? 0u : 1u));
        BOOST_TEST(size_of(w.segment) == last_start);
    }
    // And the log goes on from the cut: a new batch lands after the prefix.
    auto s = open_storage(dir.path(), exact());
    s->persist(nullptr, nullptr, make_entries(7, 1, 2));
    s.reset();
    s = open_storage(dir.path(), exact());
    BOOST_TEST(s->last_index() == 7u);
    BOOST_TEST(s->entries(7, 8).at(0).term == 2u);
}

BOOST_AUTO_TEST_CASE(every_bit_flip_in_an_earlier_record_is_refused_naming_file_and_offset) {
    TempDir dir;
    const Written w = write_batches(dir.path(), {2, 1, 2});
    const std::string full = read_bytes(w.segment);
    const std::uint64_t start = w.ends[0];
    const std::uint64_t end = w.ends[1];
    for (std::uint64_t at = start; at < end; ++at) {
        for (int bit = 0; bit < 8; ++bit) {
            write_bytes(w.segment, full);
            flip_bit(w.segment, at, bit);
            BOOST_TEST_INFO("flipped byte " << at << " bit " << bit);
            try {
                open_storage(dir.path(), exact());
                BOOST_TEST(false, "open accepted a corrupt earlier record");
            } catch (const StorageError& e) {
                const std::string msg = e.what();
                BOOST_TEST(msg.find(w.segment) != std::string::npos);
                BOOST_TEST(msg.find("at byte " + std::to_string(start) + ":") != std::string::npos);
            }
            BOOST_TEST(read_bytes(w.segment).size() == full.size());  // nothing truncated
        }
    }
}

BOOST_AUTO_TEST_CASE(every_bit_flip_in_the_last_record_is_a_torn_tail) {
    TempDir dir;
    const Written w = write_batches(dir.path(), {2, 1, 2});
    const std::string full = read_bytes(w.segment);
    for (std::uint64_t at = w.ends[1]; at < full.size(); ++at) {
        for (int bit = 0; bit < 8; ++bit) {
            write_bytes(w.segment, full);
            flip_bit(w.segment, at, bit);
            BOOST_TEST_INFO("flipped byte " << at << " bit " << bit);
            auto s = open_storage(dir.path(), exact());
            BOOST_TEST(s->last_index() == 3u);
            BOOST_TEST((all_entries(*s) == prefix(w.entries, 3)));
            BOOST_TEST(s->warnings().size() == 1u);
        }
    }
}

BOOST_AUTO_TEST_CASE(zero_filled_tail_is_unused_room_not_a_torn_write) {
    TempDir dir;
    const Written w = write_batches(dir.path(), {2, 2});
    write_bytes(w.segment, read_bytes(w.segment) + std::string(4096, '\0'));
    {
        auto s = open_storage(dir.path(), exact());
        BOOST_TEST(s->last_index() == 4u);
        BOOST_TEST(s->warnings().empty());
        BOOST_TEST(size_of(w.segment) == w.ends[1] + 4096);   // nothing cut
        s->persist(nullptr, nullptr, make_entries(5, 1, 1));  // lands at the data end, in the room
        BOOST_TEST(size_of(w.segment) == w.ends[1] + 4096);
    }
    auto s = open_storage(dir.path(), exact());
    BOOST_TEST(s->warnings().empty());
    BOOST_TEST((all_entries(*s) == make_entries(1, 5, 1)));
}

// Batches of 10 entries into kMinSegmentBytes segments until `segments`
// exist (the last batch is the first in the newest one), or 120 entries.
std::vector<raft::Entry> write_rotated(const std::string& dir, bool preallocate = false,
                                       std::size_t segments = 0) {
    StorageOptions opt;
    opt.segment_bytes = kMinSegmentBytes;
    opt.preallocate = preallocate;
    auto s = open_storage(dir, opt);
    std::vector<raft::Entry> all;
    for (raft::Index i = 1; segments ? segment_files(dir).size() < segments : i <= 120; i += 10) {
        persist_kept(*s, all, i, 10, 1);
    }
    BOOST_TEST_REQUIRE(segment_files(dir).size() >= (segments ? segments : 3u));
    return all;
}

// ---- preallocated segments (the default) ----

BOOST_AUTO_TEST_CASE(new_segments_are_preallocated_and_appends_fill_them) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = 1u << 20;
    std::vector<raft::Entry> all;
    {
        auto s = open_storage(dir.path(), opt);
        const std::string seg = segment_files(dir.path()).at(0);
        BOOST_TEST(size_of(seg) == opt.segment_bytes);
        for (raft::Index i = 1; i <= 30; i += 3) {
            persist_kept(*s, all, i, 3, 1);
            BOOST_TEST(size_of(seg) == opt.segment_bytes);  // the size never changes
        }
    }
    {
        auto s = open_storage(dir.path(), opt);
        BOOST_TEST(s->warnings().empty());
        BOOST_TEST((all_entries(*s) == all));
    }
    check_appends_continue(dir.path(), opt, 31, 1);  // after the data, not after the room
}

// The file's extents as [begin, end) byte ranges flagged unwritten (allocated
// by fallocate, never written); nullopt where the file system cannot say.
std::optional<std::vector<std::pair<std::uint64_t, std::uint64_t>>> unwritten_ranges(
    const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return std::nullopt;
    constexpr unsigned kMaxExtents = 512;
    std::vector<char> buf(sizeof(fiemap) + kMaxExtents * sizeof(fiemap_extent));
    auto* fm = reinterpret_cast<fiemap*>(buf.data());
    fm->fm_start = 0;
    fm->fm_length = FIEMAP_MAX_OFFSET;
    fm->fm_flags = FIEMAP_FLAG_SYNC;
    fm->fm_extent_count = kMaxExtents;
    const int rc = ::ioctl(fd, FS_IOC_FIEMAP, fm);
    ::close(fd);
    if (rc != 0) return std::nullopt;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    for (unsigned i = 0; i < fm->fm_mapped_extents; ++i) {
        const fiemap_extent& e = fm->fm_extents[i];
        if (e.fe_flags & FIEMAP_EXTENT_UNWRITTEN)
            out.emplace_back(e.fe_logical, e.fe_logical + e.fe_length);
    }
    return out;
}

bool overlaps(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges, std::uint64_t lo,
              std::uint64_t hi) {
    for (const auto& [b, e] : ranges) {
        if (b < hi && lo < e) return true;
    }
    return false;
}

// Appends land in blocks already written with zeros: from the start of the
// file to at least kZeroAheadMinBytes past the data nothing is left
// "unwritten", while the far end of the room still is (zeros go ahead in
// chunks, not all at once), and the file never grows past its room.
BOOST_AUTO_TEST_CASE(zeros_are_written_ahead_of_the_data_in_a_preallocated_segment) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = 4u << 20;
    auto s = open_storage(dir.path(), opt);
    const std::string seg = segment_files(dir.path()).at(0);
    const auto fresh = unwritten_ranges(seg);
    if (!fresh || fresh->empty()) {
        BOOST_TEST_MESSAGE("the file system of "
                           << dir.path()
                           << " reports no unwritten extents after fallocate; nothing to check");
        return;
    }
    raft::Index next = 1;
    // After each durable batch: nothing "unwritten" from the start of the file
    // to kZeroAheadMinBytes past the data (the entry data is letters, so the
    // data ends at the last non-zero byte), the far end still unwritten, the
    // size unchanged. 1 KiB entries, 40 per batch: the data passes several
    // zero chunks; then the same after a reopen (zeros resume from the data).
    auto check = [&](const char* when) {
        const std::string bytes = read_bytes(seg);
        const std::uint64_t data_end = bytes.find_last_not_of('\0') + 1;
        const auto ranges = unwritten_ranges(seg);
        BOOST_REQUIRE(ranges.has_value());
        BOOST_TEST_INFO(when << ", after index " << next - 1 << ", data ends at " << data_end);
        BOOST_TEST(!overlaps(*ranges, 0, data_end + storage::kZeroAheadMinBytes));
        BOOST_TEST(overlaps(*ranges, opt.segment_bytes - 4096, opt.segment_bytes));
        BOOST_TEST(size_of(seg) == opt.segment_bytes);
        return data_end;
    };
    while (check("first open") < 3 * storage::kZeroAheadChunkBytes) {
        s->persist(nullptr, nullptr, make_entries(next, 40, 1, 1024));
        next += 40;
    }
    s.reset();
    s = open_storage(dir.path(), opt);
    BOOST_TEST(s->warnings().empty());
    BOOST_TEST(s->last_index() == next - 1);
    const std::uint64_t reopened_at = check("reopened");
    while (check("after the reopen") < reopened_at + 2 * storage::kZeroAheadChunkBytes) {
        s->persist(nullptr, nullptr, make_entries(next, 40, 1, 1024));
        next += 40;
    }
}

// Reopened with a smaller segment_bytes than the open segment's data already
// holds: no zeros are written (the room is past the data), the file keeps its
// size and data, and the next append closes it and starts a new segment.
BOOST_AUTO_TEST_CASE(reopening_with_a_smaller_segment_size_writes_no_zeros_over_data) {
    TempDir dir;
    StorageOptions big;
    big.segment_bytes = 1u << 20;
    std::vector<raft::Entry> all;
    {
        auto s = open_storage(dir.path(), big);
        for (raft::Index i = 1; i <= 400; i += 40) {
            persist_kept(*s, all, i, 40, 1, 1024);  // about 400 KiB in all
        }
    }
    const std::string seg = segment_files(dir.path()).at(0);
    const std::string before = read_bytes(seg);
    StorageOptions small;
    small.segment_bytes = 64u << 10;
    auto s = open_storage(dir.path(), small);
    BOOST_TEST(s->warnings().empty());
    BOOST_TEST((read_bytes(seg) == before));  // not a byte changed, size included
    BOOST_TEST((all_entries(*s) == all));
    persist_kept(*s, all, 401, 1, 1);
    s.reset();
    BOOST_TEST(segment_files(dir.path()).size() == 2u);
    BOOST_TEST(read_bytes(seg).back() != '\0');  // closed: cut to its records
    s = open_storage(dir.path(), small);
    BOOST_TEST(s->warnings().empty());
    BOOST_TEST((all_entries(*s) == all));
}

// In a preallocated file a crash leaves zeros (not a shorter file) where an
// unsynced append did not reach the disk.
BOOST_AUTO_TEST_CASE(crash_at_every_byte_of_the_last_record_in_a_preallocated_segment) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = 64u << 10;
    std::vector<raft::Entry> all;
    std::vector<std::uint64_t> data_ends;  // where each batch's record ends
    std::string seg;
    {
        auto s = open_storage(dir.path(), opt);
        seg = segment_files(dir.path()).at(0);
        for (std::size_t n : {2u, 1u, 2u}) {
            persist_kept(*s, all, all.size() + 1, n, 1);
            const std::string bytes = read_bytes(seg);
            data_ends.push_back(bytes.find_last_not_of('\0') + 1);
        }
    }
    const std::string full = read_bytes(seg);
    const std::uint64_t last_start = data_ends[1];
    for (std::uint64_t cut = last_start; cut < data_ends[2]; ++cut) {
        std::string crashed = full;
        std::fill(crashed.begin() + static_cast<std::ptrdiff_t>(cut), crashed.end(), '\0');
        write_bytes(seg, crashed);
        const bool partial =
            full.substr(last_start, cut - last_start).find_first_not_of('\0') != std::string::npos;
        auto s = open_storage(dir.path(), opt);
        BOOST_TEST_INFO("zeroed from byte " << cut);
        BOOST_TEST((all_entries(*s) == prefix(all, 3)));
        BOOST_TEST(s->warnings().size() ==
                   (partial ? 1u : 0u));                // a partial record is a torn write
        BOOST_TEST(size_of(seg) == opt.segment_bytes);  // room again after a cut
        s.reset();
        check_appends_continue(dir.path(), opt, 4, 2);
    }
}

BOOST_AUTO_TEST_CASE(every_bit_flip_in_the_last_record_of_a_preallocated_segment_is_a_torn_tail) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = 16u << 10;
    std::uint64_t last_start = 0, last_end = 0;
    std::string seg;
    {
        auto s = open_storage(dir.path(), opt);
        seg = segment_files(dir.path()).at(0);
        s->persist(nullptr, nullptr, make_entries(1, 2, 1));
        last_start = read_bytes(seg).find_last_not_of('\0') + 1;
        s->persist(nullptr, nullptr, make_entries(3, 1, 1, 20));
        last_end = read_bytes(seg).find_last_not_of('\0') + 1;
    }
    const std::string full = read_bytes(seg);
    for (std::uint64_t at = last_start; at < last_end; ++at) {
        for (int bit = 0; bit < 8; ++bit) {
            std::string flipped = full;
            flipped[at] = static_cast<char>(flipped[at] ^ (1 << bit));
            write_bytes(seg, flipped);
            BOOST_TEST_INFO("flipped byte " << at << " bit " << bit);
            auto s = open_storage(dir.path(), opt);
            BOOST_TEST(s->last_index() == 2u);
            BOOST_TEST(s->warnings().size() == 1u);
        }
    }
}

BOOST_AUTO_TEST_CASE(torn_header_after_a_preallocated_segment_was_closed) {
    // The crash came while creating the next segment: the previous one is
    // already cut to its records; the torn new one is removed, and the next
    // append creates it again.
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = kMinSegmentBytes;
    std::vector<raft::Entry> all = write_rotated(dir.path(), true, 2);
    // The batch that made the second segment went into it. Crash instead
    // while its header was being written: no second segment, no such batch.
    auto segs = segment_files(dir.path());
    BOOST_TEST_REQUIRE(segs.size() == 2u);
    all.resize(all.size() - 10);
    write_bytes(segs.back(), encode_segment_header(2).substr(0, 9));
    {
        auto s = open_storage(dir.path(), opt);
        BOOST_TEST(s->warnings().size() == 1u);
        BOOST_TEST((all_entries(*s) == all));
    }
    check_appends_continue(dir.path(), opt, all.size() + 1, 2);
}

BOOST_AUTO_TEST_CASE(closed_segments_hold_exactly_their_records) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = kMinSegmentBytes;
    write_rotated(dir.path(), true);
    const auto segs = segment_files(dir.path());
    BOOST_TEST_REQUIRE(segs.size() >= 3u);
    for (std::size_t i = 0; i + 1 < segs.size(); ++i) {
        const std::string bytes = read_bytes(segs[i]);
        BOOST_TEST_INFO(segs[i]);
        BOOST_TEST(bytes.back() != '\0');  // no room left behind (entry data is letters)
    }
    // A closed segment with zeros after its records is corruption, not room.
    write_bytes(segs[0], read_bytes(segs[0]) + std::string(100, '\0'));
    try {
        open_storage(dir.path(), opt);
        BOOST_TEST(false, "open accepted zeros after an older segment's records");
    } catch (const StorageError& e) {
        BOOST_TEST(std::string(e.what()).find(segs[0]) != std::string::npos);
        BOOST_TEST(std::string(e.what()).find("not the newest segment") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(garbage_after_the_header_of_a_new_log_is_cut) {
    TempDir dir;
    const Written w = write_batches(dir.path(), {});
    write_bytes(w.segment, read_bytes(w.segment) + "\x05\x00\x00");
    auto s = open_storage(dir.path(), exact());
    BOOST_TEST(s->last_index() == 0u);
    BOOST_TEST(s->first_index() == 1u);
}

BOOST_AUTO_TEST_CASE(torn_tail_in_an_older_segment_is_corruption) {
    TempDir dir;
    write_rotated(dir.path());
    const std::string first = segment_files(dir.path()).at(0);
    truncate_to(first, size_of(first) - 3);
    try {
        open_storage(dir.path(), exact());
        BOOST_TEST(false, "open accepted a cut older segment");
    } catch (const StorageError& e) {
        BOOST_TEST(std::string(e.what()).find(first) != std::string::npos);
        BOOST_TEST(std::string(e.what()).find("not the newest segment") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(missing_middle_segment_is_corruption) {
    TempDir dir;
    write_rotated(dir.path());
    remove_file(segment_files(dir.path()).at(1));
    BOOST_CHECK_THROW(open_storage(dir.path(), exact()), StorageError);
}

BOOST_AUTO_TEST_CASE(torn_header_of_a_new_segment_is_removed_and_appends_continue) {
    TempDir dir;
    const auto all = write_rotated(dir.path());
    const auto segs = segment_files(dir.path());
    std::uint64_t seq = 0;
    parse_segment_file_name(segs.back().substr(segs.back().rfind('/') + 1), seq);
    const std::string torn = dir.file(segment_file_name(seq + 1));
    write_bytes(torn, encode_segment_header(seq + 1).substr(0, 7));
    auto s = open_storage(dir.path(), exact());
    BOOST_TEST(s->warnings().size() == 1u);
    BOOST_TEST(!path_exists(torn));
    BOOST_TEST((all_entries(*s) == all));
    s->persist(nullptr, nullptr, make_entries(121, 1, 1));
    BOOST_TEST(s->last_index() == 121u);
}

BOOST_AUTO_TEST_CASE(rotation_keeps_every_entry_across_reopen) {
    TempDir dir;
    const auto all = write_rotated(dir.path());
    auto s = open_storage(dir.path(), exact());
    BOOST_TEST(s->warnings().empty());
    BOOST_TEST((all_entries(*s) == all));
    BOOST_TEST(
        (s->entries(35, 57) == std::vector<raft::Entry>(all.begin() + 34, all.begin() + 56)));
    for (const auto& seg : segment_files(dir.path())) {
        BOOST_TEST(size_of(seg) <= kMinSegmentBytes + 10 * 113 + 30);
    }
}

// The last record sits in a segment created by rotation: every cut inside it
// recovers exactly the entries written before it.
BOOST_AUTO_TEST_CASE(crash_at_every_byte_of_the_last_record_after_rotation) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = kMinSegmentBytes;
    std::vector<raft::Entry> all;
    std::uint64_t last_start = 0;
    {
        auto s = open_storage(dir.path(), exact(opt));
        for (raft::Index i = 1; segment_files(dir.path()).size() < 2; i += 10) {
            persist_kept(*s, all, i, 10, 1);
        }
        last_start = size_of(segment_files(dir.path()).back());
        persist_kept(*s, all, all.size() + 1, 3, 2);
    }
    const std::string newest = segment_files(dir.path()).back();
    const std::string full = read_bytes(newest);
    BOOST_TEST_REQUIRE(last_start < full.size());
    for (std::uint64_t cut = last_start; cut < full.size(); ++cut) {
        write_bytes(newest, full.substr(0, cut));
        auto s = open_storage(dir.path(), exact(opt));
        BOOST_TEST_INFO("cut at byte " << cut);
        BOOST_TEST((all_entries(*s) == prefix(all, all.size() - 3)));
        BOOST_TEST(size_of(newest) == last_start);
    }
}

BOOST_AUTO_TEST_CASE(bit_flip_in_an_older_segment_header_is_refused_naming_the_file) {
    TempDir dir;
    write_rotated(dir.path());
    const std::string first = segment_files(dir.path()).at(0);
    flip_bit(first, 9, 3);  // inside the seq field
    try {
        open_storage(dir.path(), exact());
        BOOST_TEST(false, "open accepted a corrupt segment header");
    } catch (const StorageError& e) {
        BOOST_TEST(std::string(e.what()).find(first + " is corrupt at byte 0") !=
                   std::string::npos);
    }
}

// An I/O failure part-way through an append (here: the next segment cannot be
// created) leaves memory and files disagreeing, so the WAL refuses every
// further call; reopening recovers a prefix of what was written.
BOOST_AUTO_TEST_CASE(failed_write_makes_the_storage_refuse_further_calls) {
    TempDir dir;
    StorageOptions opt;
    opt.segment_bytes = kMinSegmentBytes;
    std::vector<raft::Entry> all;
    std::string blocker;
    {
        auto s = open_storage(dir.path(), exact(opt));
        for (raft::Index i = 1; i <= 40; i += 10) {  // the segment is now full
            persist_kept(*s, all, i, 10, 1);
        }
        BOOST_TEST_REQUIRE(segment_files(dir.path()).size() == 1u);
        BOOST_TEST_REQUIRE(size_of(segment_files(dir.path()).at(0)) >= kMinSegmentBytes);
        blocker = dir.file(segment_file_name(2));
        write_bytes(blocker, "");  // O_EXCL creation of segment 2 will fail
        BOOST_CHECK_THROW(s->persist(nullptr, nullptr, make_entries(41, 10, 1)), StorageError);
        try {
            s->persist(nullptr, nullptr, make_entries(s->last_index() + 1, 1, 1));
            BOOST_TEST(false, "storage accepted a write after a failed one");
        } catch (const StorageError& e) {
            BOOST_TEST(std::string(e.what()).find("unusable") != std::string::npos);
        }
        BOOST_CHECK_THROW(s->entries(1, 2), StorageError);
        const raft::HardState hs{1, 1, 0};
        BOOST_CHECK_THROW(s->persist(&hs, nullptr, {}), StorageError);
    }
    remove_file(blocker);
    auto s = open_storage(dir.path(), exact(opt));
    BOOST_TEST((all_entries(*s) == all));
    BOOST_TEST(s->hard_state().term == 0u);  // the refused hard state never reached disk
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::storage
