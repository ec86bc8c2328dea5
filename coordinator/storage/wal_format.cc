#include "storage/wal_format.h"

#include "codec/bytes.h"
#include "storage/crc32c.h"

namespace pgfence::storage {
namespace {

// Appends [crc][length][type][payload]; the CRC covers length, type and payload.
void seal_record(std::string& out, RecordType type, std::string_view payload) {
    const std::size_t start = out.size();
    codec::put_u32(out, 0);  // CRC, filled below
    codec::put_u32(out, static_cast<std::uint32_t>(payload.size()));
    codec::put_u8(out, static_cast<std::uint8_t>(type));
    out.append(payload);
    std::string_view covered(out.data() + start + 4, out.size() - start - 4);
    codec::poke_u32(out, start, crc32c(covered));
}

enum class Probe : std::uint8_t { kValid, kShort, kBad };

struct ProbeResult {
    Probe probe = Probe::kValid;
    std::uint32_t length = 0;
    std::string problem;
};

// Checks the record starting at `at` (framing and CRC only).
ProbeResult probe_record(std::string_view bytes, std::uint64_t at) {
    const std::uint64_t left = bytes.size() - at;
    if (left < kRecordHeaderBytes) {
        return {Probe::kShort, 0, "record header cut short (" + std::to_string(left) + " bytes)"};
    }
    const std::uint32_t length = codec::peek_u32(bytes, at + 4);
    if (length > kMaxRecordPayloadBytes) {
        return {Probe::kBad, length,
                "record length " + std::to_string(length) + " exceeds the limit of " +
                    std::to_string(kMaxRecordPayloadBytes)};
    }
    if (left - kRecordHeaderBytes < length) {
        return {
            Probe::kShort, length,
            "record of " + std::to_string(length) + " payload bytes runs past the end of the file"};
    }
    const std::uint32_t stored = codec::peek_u32(bytes, at);
    const std::uint32_t actual = crc32c(bytes.substr(at + 4, 5 + length));
    if (stored != actual) return {Probe::kBad, length, "record CRC mismatch"};
    return {Probe::kValid, length, {}};
}

// Could a record this version writes start at p, with this length (which
// fits in `bytes`)? Checks its type and the shape of its payload header, so
// that the CRC, the expensive part, runs only for such candidates: in a
// preallocated segment almost every small integer in the data would otherwise
// read as a length that fits.
bool plausible_record(std::string_view bytes, std::uint64_t p, std::uint32_t length) {
    const auto type = static_cast<std::uint8_t>(bytes[p + 8]);
    if (type == static_cast<std::uint8_t>(RecordType::kReset)) return length == 8;
    if (type != static_cast<std::uint8_t>(RecordType::kEntries)) return false;
    if (length < kEntriesPayloadHeaderBytes + kEntryOverheadBytes) return false;
    const std::uint64_t first_index = codec::peek_u64(bytes, p + kRecordHeaderBytes);
    const std::uint32_t count = codec::peek_u32(bytes, p + kRecordHeaderBytes + 8);
    return first_index >= 1 && first_index <= kMaxEntryIndex && count >= 1 &&
           count <= (length - kEntriesPayloadHeaderBytes) / kEntryOverheadBytes;
}

// Is there a valid record (plausible_record, CRC) starting after `bad` and
// before `starts_end`? If so the bad record was followed by data that was
// written (and synced) later: not a torn tail. Returns kValid (found), kShort
// (none) or kBad (search budget exhausted).
Probe find_later_record(std::string_view bytes, std::uint64_t bad, std::uint64_t starts_end) {
    std::uint64_t budget = kMaxResyncCrcBytes;
    for (std::uint64_t p = bad + 1; p < starts_end && p + kRecordHeaderBytes <= bytes.size(); ++p) {
        const std::uint32_t length = codec::peek_u32(bytes, p + 4);
        if (length > kMaxRecordPayloadBytes || bytes.size() - p - kRecordHeaderBytes < length ||
            !plausible_record(bytes, p, length)) {
            continue;
        }
        if (budget < 5u + length) return Probe::kBad;
        budget -= 5u + length;
        if (codec::peek_u32(bytes, p) == crc32c(bytes.substr(p + 4, 5 + length))) {
            return Probe::kValid;
        }
    }
    return Probe::kShort;
}

bool known_type(std::uint8_t t) {
    return t == static_cast<std::uint8_t>(RecordType::kEntries) ||
           t == static_cast<std::uint8_t>(RecordType::kReset);
}

// Header check; returns false with d.tail/problem set when it is not usable.
bool decode_header(std::string_view bytes, SegmentDecode& d) {
    d.bad_offset = 0;
    if (bytes.size() < kSegmentHeaderBytes) {
        d.tail = SegmentTail::kTorn;
        d.problem = "segment header cut short (" + std::to_string(bytes.size()) + " bytes)";
        return false;
    }
    const bool crc_ok = codec::peek_u32(bytes, 13) == crc32c(bytes.substr(0, 13));
    const bool magic_ok = codec::peek_u32(bytes, 0) == kSegmentMagic;
    if (!crc_ok || !magic_ok) {
        // A header that is the only thing in the file may be a torn creation.
        d.tail = bytes.size() == kSegmentHeaderBytes ? SegmentTail::kTorn : SegmentTail::kCorrupt;
        d.problem =
            magic_ok ? "segment header CRC mismatch" : "not a pgfence WAL segment (bad magic)";
        return false;
    }
    if (static_cast<std::uint8_t>(bytes[4]) != kWalVersion) {
        d.tail = SegmentTail::kCorrupt;
        d.problem =
            "segment format version " + std::to_string(static_cast<unsigned char>(bytes[4])) +
            " is not supported (this build reads version " + std::to_string(kWalVersion) + ")";
        return false;
    }
    d.header_ok = true;
    d.seq = codec::peek_u64(bytes, 5);
    d.valid_bytes = kSegmentHeaderBytes;
    return true;
}

}  // namespace

std::string encode_segment_header(std::uint64_t seq) {
    std::string out;
    codec::put_u32(out, kSegmentMagic);
    codec::put_u8(out, kWalVersion);
    codec::put_u64(out, seq);
    codec::put_u32(out, crc32c(out));
    return out;
}

std::size_t entry_encoded_bytes(const raft::Entry& e) {
    return kEntryOverheadBytes + e.data.size();
}

void encode_entries_record(std::string& out, std::span<const raft::Entry> entries) {
    std::string payload;
    codec::put_u64(payload, entries.front().index);
    codec::put_u32(payload, static_cast<std::uint32_t>(entries.size()));
    for (const raft::Entry& e : entries) {
        codec::put_u64(payload, e.term);
        codec::put_u8(payload, static_cast<std::uint8_t>(e.type));
        codec::put_u32(payload, static_cast<std::uint32_t>(e.data.size()));
        payload.append(e.data);
    }
    seal_record(out, RecordType::kEntries, payload);
}

void encode_reset_record(std::string& out, raft::Index next_index) {
    std::string payload;
    codec::put_u64(payload, next_index);
    seal_record(out, RecordType::kReset, payload);
}

SegmentDecode decode_segment(std::string_view bytes) {
    SegmentDecode d;
    if (!decode_header(bytes, d)) return d;
    // The trailing run of zero bytes: no record starts inside it (a record
    // lying wholly in zeros would have type 0, which does not exist).
    std::uint64_t zeros_from = bytes.size();
    while (zeros_from > kSegmentHeaderBytes && bytes[zeros_from - 1] == '\0') --zeros_from;
    std::uint64_t at = kSegmentHeaderBytes;
    while (at < bytes.size()) {
        if (at >= zeros_from) {  // unused room (preallocated, or never written)
            d.zero_tail_bytes = bytes.size() - at;
            break;
        }
        ProbeResult r = probe_record(bytes, at);
        if (r.probe == Probe::kValid && !known_type(static_cast<std::uint8_t>(bytes[at + 8]))) {
            r = {
                Probe::kBad, r.length,
                "unknown record type " + std::to_string(static_cast<unsigned char>(bytes[at + 8]))};
            d.tail = SegmentTail::kCorrupt;  // a CRC-valid record we cannot read is never torn
            d.bad_offset = at;
            d.problem = r.problem;
            return d;
        }
        if (r.probe != Probe::kValid) {
            const Probe later = find_later_record(bytes, at, zeros_from);
            d.tail = later == Probe::kShort ? SegmentTail::kTorn : SegmentTail::kCorrupt;
            d.bad_offset = at;
            d.problem = r.problem;
            if (later == Probe::kValid) d.problem += ", and valid records follow it";
            if (later == Probe::kBad) d.problem += ", and the bytes after it could not be checked";
            return d;
        }
        d.records.push_back({at, static_cast<RecordType>(bytes[at + 8]),
                             bytes.substr(at + kRecordHeaderBytes, r.length)});
        at += kRecordHeaderBytes + r.length;
        d.valid_bytes = at;
    }
    return d;
}

std::string decode_entries_payload(std::string_view payload, EntriesPayload& header, raft::Index lo,
                                   raft::Index hi, std::vector<raft::Entry>* out) {
    codec::Reader in(payload);
    const raft::Index first_index = in.u64();
    const std::uint32_t count = in.u32();
    if (!in.ok()) return "entries record shorter than its header";
    header.first_index = first_index;
    header.count = count;
    if (header.first_index == 0 || header.count == 0 ||
        header.count > in.remaining() / kEntryOverheadBytes ||
        header.first_index > kMaxEntryIndex) {
        return "entries record with first index " + std::to_string(header.first_index) +
               " and count " + std::to_string(header.count) + " is impossible";
    }
    for (std::uint32_t i = 0; i < header.count; ++i) {
        const std::uint64_t term = in.u64();
        const std::uint8_t type = in.u8();
        const std::uint32_t size = in.u32();
        const std::string_view data = in.bytes(size);
        if (!in.ok()) return "entry " + std::to_string(i) + " of the record is cut short";
        if (type > static_cast<std::uint8_t>(raft::EntryType::kConfig)) {
            return "entry " + std::to_string(i) + " has unknown type " + std::to_string(type);
        }
        if (type == static_cast<std::uint8_t>(raft::EntryType::kConfig)) {
            if (std::string why = raft::check_config_entry(data); !why.empty()) {
                return "entry " + std::to_string(i) + " is a malformed configuration: " + why;
            }
        }
        const raft::Index index = header.first_index + i;
        if (out != nullptr && index >= lo && index < hi) {
            out->push_back({term, index, static_cast<raft::EntryType>(type), std::string(data)});
        }
    }
    if (in.remaining() != 0)
        return "entries record has " + std::to_string(in.remaining()) + " trailing bytes";
    return {};
}

std::string decode_reset_payload(std::string_view payload, raft::Index& next_index) {
    codec::Reader in(payload);
    const raft::Index next = in.u64();
    if (!in.ok() || in.remaining() != 0 || next == 0) return "reset record malformed";
    next_index = next;
    return {};
}

}  // namespace pgfence::storage
