// The pure record/segment codec: round trips, CRC, and hostile input.
#include "storage/wal_format.h"

#include <boost/test/unit_test.hpp>

#include "lock/commands.h"
#include "codec/bytes.h"
#include "storage/crc32c.h"
#include "storage/wal.h"
#include "test_dir.h"

namespace pgfence::storage {
namespace {

using test::make_entries;

std::string segment_with(const std::vector<std::vector<raft::Entry>>& batches) {
    std::string bytes = encode_segment_header(1);
    for (const auto& b : batches) encode_entries_record(bytes, b);
    return bytes;
}

// A record whose CRC is valid over whatever length/type/payload it claims.
std::string raw_record(std::uint32_t length, std::uint8_t type, const std::string& payload) {
    std::string body;
    codec::put_u32(body, length);
    codec::put_u8(body, type);
    body += payload;
    std::string out;
    codec::put_u32(out, crc32c(body));
    return out + body;
}

BOOST_AUTO_TEST_SUITE(wal_format)

BOOST_AUTO_TEST_CASE(crc32c_matches_the_standard_check_value) {
    BOOST_TEST(crc32c("123456789") == 0xE3069283u);
    BOOST_TEST(crc32c("") == 0u);
}

BOOST_AUTO_TEST_CASE(entries_and_reset_records_round_trip) {
    std::string bytes = segment_with({make_entries(1, 3, 1), make_entries(4, 1, 2, 0)});
    encode_reset_record(bytes, 10);
    const SegmentDecode d = decode_segment(bytes);
    BOOST_TEST(d.header_ok);
    BOOST_TEST(d.seq == 1u);
    BOOST_TEST((d.tail == SegmentTail::kClean));
    BOOST_TEST(d.valid_bytes == bytes.size());
    BOOST_REQUIRE(d.records.size() == 3u);
    EntriesPayload h;
    std::vector<raft::Entry> out;
    BOOST_TEST(decode_entries_payload(d.records[0].payload, h, 1, 4, &out).empty());
    BOOST_TEST(h.first_index == 1u);
    BOOST_TEST(h.count == 3u);
    BOOST_TEST((out == make_entries(1, 3, 1)));
    raft::Index next = 0;
    BOOST_TEST((d.records[2].type == RecordType::kReset));
    BOOST_TEST(decode_reset_payload(d.records[2].payload, next).empty());
    BOOST_TEST(next == 10u);
}

BOOST_AUTO_TEST_CASE(noop_entry_type_survives) {
    std::vector<raft::Entry> batch = {{5, 9, raft::EntryType::kNoop, ""}};
    const std::string bytes = segment_with({batch});  // the decode points into it
    const SegmentDecode d = decode_segment(bytes);
    EntriesPayload h;
    std::vector<raft::Entry> out;
    BOOST_TEST(decode_entries_payload(d.records.at(0).payload, h, 9, 10, &out).empty());
    BOOST_TEST((out == batch));
}

BOOST_AUTO_TEST_CASE(huge_length_at_the_end_is_torn_without_allocating) {
    std::string bytes = segment_with({make_entries(1, 2, 1)});
    const std::size_t good = bytes.size();
    bytes += raw_record(0xFFFFFFF0u, 1, "abc").substr(0, 12);
    const SegmentDecode d = decode_segment(bytes);
    BOOST_TEST(d.records.size() == 1u);
    BOOST_TEST((d.tail == SegmentTail::kTorn));
    BOOST_TEST(d.bad_offset == good);
    BOOST_TEST(d.valid_bytes == good);
}

BOOST_AUTO_TEST_CASE(huge_length_followed_by_a_valid_record_is_corruption) {
    std::string bytes = segment_with({make_entries(1, 1, 1)});
    const std::size_t bad = bytes.size();
    bytes += raw_record(0x7FFFFFFFu, 1, "xyz");
    encode_entries_record(bytes, make_entries(2, 1, 1));
    const SegmentDecode d = decode_segment(bytes);
    BOOST_TEST((d.tail == SegmentTail::kCorrupt));
    BOOST_TEST(d.bad_offset == bad);
}

BOOST_AUTO_TEST_CASE(huge_entry_count_is_rejected_without_allocating) {
    std::string payload;
    codec::put_u64(payload, 1);
    codec::put_u32(payload, 0xFFFFFFFFu);
    payload += std::string(40, 'x');
    EntriesPayload h;
    std::vector<raft::Entry> out;
    BOOST_TEST(!decode_entries_payload(payload, h, 0, ~0ull, &out).empty());
    BOOST_TEST(out.empty());
}

BOOST_AUTO_TEST_CASE(entry_data_length_past_the_payload_is_rejected) {
    std::string payload;
    codec::put_u64(payload, 1);
    codec::put_u32(payload, 1);
    codec::put_u64(payload, 1);
    codec::put_u8(payload, 0);
    codec::put_u32(payload, 0xFFFFFFFFu);
    payload += "short";
    EntriesPayload h;
    BOOST_TEST(!decode_entries_payload(payload, h, 0, ~0ull, nullptr).empty());
}

BOOST_AUTO_TEST_CASE(zero_filled_tail_is_unused_room) {
    std::string bytes = segment_with({make_entries(1, 2, 1)});
    const std::size_t good = bytes.size();
    bytes += std::string(5000, '\0');
    const SegmentDecode d = decode_segment(bytes);
    BOOST_TEST((d.tail == SegmentTail::kClean));
    BOOST_TEST(d.records.size() == 1u);
    BOOST_TEST(d.valid_bytes == good);
    BOOST_TEST(d.zero_tail_bytes == 5000u);
}

BOOST_AUTO_TEST_CASE(torn_record_before_a_large_zero_tail_is_torn_without_scanning_the_zeros) {
    // Scanning every offset of 64 MiB of zeros would spend more than
    // kMaxResyncCrcBytes (and call it corruption); the zeros are not scanned.
    std::string bytes = segment_with({make_entries(1, 2, 1)});
    const std::size_t good = bytes.size();
    std::string torn = segment_with({make_entries(3, 1, 1)}).substr(kSegmentHeaderBytes);
    bytes += torn.substr(0, torn.size() / 2);
    bytes += std::string(64u << 20, '\0');
    const SegmentDecode d = decode_segment(bytes);
    BOOST_TEST((d.tail == SegmentTail::kTorn));
    BOOST_TEST(d.valid_bytes == good);
}

// Real lock commands (small integers: lease_ms, tokens, lengths) in a
// default-size preallocated segment, its last record torn at every byte: the
// resync scan must decide "torn" within its budget every time, not give up
// and call the segment corrupt (candidate lengths that fit in 8 MiB of room
// are everywhere; only plausible record headers are checksummed).
BOOST_AUTO_TEST_CASE(torn_last_record_of_lock_commands_in_a_preallocated_segment_is_torn) {
    std::vector<raft::Entry> batch;
    auto add = [&](const lock::Command& c) {
        batch.push_back({7, 1 + batch.size(), raft::EntryType::kNormal, lock::encode(c)});
    };
    for (int i = 0; i < 16; ++i) {
        const std::string key = "bench-4242-" + std::to_string(i);
        add(lock::Grant{key, 10'000, i % 2 ? "worker-" + std::to_string(i) : ""});
        add(lock::Release{key, 1'000'000u + static_cast<std::uint64_t>(i)});
    }
    const std::string head =
        segment_with({std::vector<raft::Entry>(batch.begin(), batch.begin() + 16)});
    std::vector<raft::Entry> last(batch.begin() + 16, batch.end());
    std::string record;
    encode_entries_record(record, last);
    const std::size_t room = WalOptions{}.segment_bytes;
    for (std::size_t cut = 1; cut < record.size(); ++cut) {
        std::string bytes = head + record.substr(0, cut);
        bytes.resize(room, '\0');
        const SegmentDecode d = decode_segment(bytes);
        BOOST_TEST_INFO("record cut after " << cut << " of " << record.size() << " bytes");
        // Cutting only zero bytes off its end leaves the record whole (the room is zeros).
        const bool whole = record.find_first_not_of('\0', cut) == std::string::npos;
        BOOST_TEST((d.tail == (whole ? SegmentTail::kClean : SegmentTail::kTorn)));
        BOOST_TEST(d.valid_bytes == head.size() + (whole ? record.size() : 0));
        BOOST_TEST(d.records.size() == (whole ? 2u : 1u));
    }
}

BOOST_AUTO_TEST_CASE(crc_valid_record_of_unknown_type_is_corruption) {
    std::string bytes = segment_with({make_entries(1, 1, 1)});
    bytes += raw_record(2, 99, "hi");
    const SegmentDecode d = decode_segment(bytes);
    BOOST_TEST((d.tail == SegmentTail::kCorrupt));
}

BOOST_AUTO_TEST_CASE(header_problems) {
    BOOST_TEST((decode_segment("").tail == SegmentTail::kTorn));
    BOOST_TEST((decode_segment("PFW").tail == SegmentTail::kTorn));
    std::string bytes = segment_with({make_entries(1, 1, 1)});
    std::string other_version = bytes;
    other_version[4] = 2;  // CRC now fails too: not a readable header, with records after it
    BOOST_TEST((decode_segment(other_version).tail == SegmentTail::kCorrupt));
    std::string foreign = std::string(100, 'z');
    BOOST_TEST((decode_segment(foreign).tail == SegmentTail::kCorrupt));
}

BOOST_AUTO_TEST_CASE(arbitrary_bytes_never_crash_the_decoder) {
    std::uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 2000; ++round) {
        std::string bytes = encode_segment_header(1);
        const int n = round % 300;
        for (int i = 0; i < n; ++i) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.push_back(static_cast<char>(x & 0xFF));
        }
        const SegmentDecode d = decode_segment(bytes);
        BOOST_TEST(d.valid_bytes <= bytes.size());
    }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::storage
