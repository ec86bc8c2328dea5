// Encoding and decoding of write-ahead log segments and records. Pure
// functions over bytes (no I/O), so the decoder can be fuzzed. The layout is
// documented in wal.h; the constants here are its single source of truth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "raft/types.h"

namespace pgfence::storage {

inline constexpr std::uint8_t kWalVersion = 1;
inline constexpr std::uint32_t kSegmentMagic = 0x4C574650;  // "PFWL" as little-endian bytes
inline constexpr std::size_t kSegmentHeaderBytes = 17;      // magic, version, seq, crc
inline constexpr std::size_t kRecordHeaderBytes = 9;        // crc, length, type

// Largest record payload a writer produces or a reader accepts. A batch whose
// encoding is larger is split over several records.
inline constexpr std::uint32_t kMaxRecordPayloadBytes = 8u << 20;
inline constexpr std::size_t kEntriesPayloadHeaderBytes = 12;  // first index, count
inline constexpr std::size_t kEntryOverheadBytes = 13;         // term, type, data length
// Largest Entry::data the log stores (so that one entry always fits a record).
inline constexpr std::size_t kMaxEntryDataBytes =
    kMaxRecordPayloadBytes - kEntriesPayloadHeaderBytes - kEntryOverheadBytes;
// Largest first index of an entries record (the decoder refuses more, so
// first_index + count can never overflow); the writer refuses it too.
inline constexpr std::uint64_t kMaxEntryIndex = std::uint64_t{1} << 62;
// Bound on the CRC work spent deciding whether a bad record is a torn tail.
inline constexpr std::uint64_t kMaxResyncCrcBytes = 64u << 20;

enum class RecordType : std::uint8_t {
    kEntries = 1,  // contiguous entries; discards stored entries >= its first index
    kReset = 2,    // discards every stored entry; the log restarts at next_index
};

// ---- encoding --------------------------------------------------------------

std::string encode_segment_header(std::uint64_t seq);

// Encoded size of one entry inside a kEntries payload.
std::size_t entry_encoded_bytes(const raft::Entry& e);

// Appends one kEntries record holding `entries` (non-empty, contiguous indexes,
// total payload <= kMaxRecordPayloadBytes) to `out`.
void encode_entries_record(std::string& out, std::span<const raft::Entry> entries);

// Appends one kReset record to `out`.
void encode_reset_record(std::string& out, raft::Index next_index);

// ---- decoding ---------------------------------------------------------------

struct RecordView {
    std::uint64_t offset = 0;  // of the record header within the segment
    RecordType type = RecordType::kEntries;
    std::string_view payload;  // points into the decoded bytes
};

enum class SegmentTail : std::uint8_t {
    kClean,    // every byte belongs to the header, a valid record or the zero tail
    kTorn,     // a bad record at bad_offset, and no valid record anywhere after it
    kCorrupt,  // a bad record (or header) followed by data that is not a torn write
};

struct SegmentDecode {
    bool header_ok = false;
    std::uint64_t seq = 0;              // from the header, when header_ok
    std::vector<RecordView> records;    // the valid records before any bad one
    std::uint64_t valid_bytes = 0;      // header + valid records: where a torn tail is cut
    std::uint64_t zero_tail_bytes = 0;  // zero bytes from valid_bytes to the end (kClean only)
    SegmentTail tail = SegmentTail::kClean;
    std::uint64_t bad_offset = 0;  // first bad byte, when tail != kClean
    std::string problem;           // what was wrong there, when tail != kClean
};

// Splits a whole segment file into records, checking lengths, CRCs and types.
// Never reads outside `bytes` and never allocates in proportion to a length
// field. Whether a kTorn tail may be cut is the caller's decision (only in the
// newest segment).
SegmentDecode decode_segment(std::string_view bytes);

struct EntriesPayload {
    raft::Index first_index = 0;
    std::uint32_t count = 0;
};

// Validates a kEntries payload; fills `header` once the payload's header is
// read (so also when a later check fails) and, on success, if `out` is not
// null, appends the entries with index in [lo, hi) to *out. Returns an empty
// string on success, else what is wrong.
std::string decode_entries_payload(std::string_view payload, EntriesPayload& header, raft::Index lo,
                                   raft::Index hi, std::vector<raft::Entry>* out);

// Validates a kReset payload. Returns an empty string on success.
std::string decode_reset_payload(std::string_view payload, raft::Index& next_index);

}  // namespace pgfence::storage
