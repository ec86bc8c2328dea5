// libFuzzer target for the storage decoders (coordinator/storage).
//
// The first input byte picks how the rest is read:
//   0: a whole segment file, as is;
//   1: records after a valid segment header (reaches the record loop at once);
//   2: a kEntries record payload;
//   3: a metadata file (identity, hard state, snapshot decoders) and a
//      backup file (storage/backup.h).
// Properties (a violation calls __builtin_trap(), reported as a crash):
//   - decode_segment never reads outside its input: records lie inside it, in
//     order and back to back; valid_bytes ends the last one; a bad tail is
//     reported at valid_bytes; a clean segment has only zero bytes (its
//     unused room, zero_tail_bytes of them) after valid_bytes;
//   - an entries payload that decodes re-encodes to exactly its record (the
//     encoding is canonical), and partial reads agree with the full read;
//   - metadata decoders either succeed and re-encode to the input, or throw
//     StorageError (never anything else); a snapshot re-encodes to a file
//     that decodes to the same snapshot (its encoding is not canonical: a
//     version 1 file may list voters in any order, and a version 2 file of
//     voters only is written back as version 1); a backup either decodes,
//     and then re-encodes to a file that decodes to the same backup, or is
//     refused with a reason (never a throw).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "storage/backup.h"
#include "storage/file_util.h"
#include "storage/meta_files.h"
#include "storage/wal_format.h"

namespace {

using namespace pgfence;
using namespace pgfence::storage;

void require(bool property) {
    if (!property) __builtin_trap();
}

void check_entries_payload(std::string_view payload) {
    EntriesPayload h;
    std::vector<raft::Entry> all;
    if (!decode_entries_payload(payload, h, 0, ~0ull, &all).empty()) return;
    require(all.size() == h.count);
    std::string record;
    encode_entries_record(record, all);
    require(std::string_view(record).substr(kRecordHeaderBytes) == payload);
    std::vector<raft::Entry> part;
    const raft::Index lo = h.first_index + h.count / 2;
    require(decode_entries_payload(payload, h, lo, lo + 1, &part).empty());
    require(part.size() == 1 && part[0] == all[h.count / 2]);
}

void check_segment(std::string_view bytes) {
    const SegmentDecode d = decode_segment(bytes);
    require(d.valid_bytes <= bytes.size());
    std::uint64_t at = kSegmentHeaderBytes;
    for (const RecordView& r : d.records) {
        require(r.offset == at);
        require(r.payload.data() == bytes.data() + r.offset + kRecordHeaderBytes);
        at += kRecordHeaderBytes + r.payload.size();
        require(at <= bytes.size());
        if (r.type == RecordType::kEntries) check_entries_payload(r.payload);
    }
    if (!d.header_ok) {
        require(d.records.empty() && d.tail != SegmentTail::kClean);
        return;
    }
    require(d.valid_bytes == at);
    if (d.tail != SegmentTail::kClean) {
        require(d.bad_offset == at && d.zero_tail_bytes == 0);
        return;
    }
    // Clean: the records, then only zero bytes (unused room) to the end.
    require(at + d.zero_tail_bytes == bytes.size());
    require(bytes.substr(at).find_first_not_of('\0') == std::string_view::npos);
}

template <typename Decode, typename Encode>
void check_meta(std::string_view bytes, Decode decode, Encode encode) {
    try {
        const auto value = decode(bytes, "fuzz");
        require(encode(value) == bytes);
    } catch (const StorageError&) {
    }
}

void check_snapshot(std::string_view bytes) {
    try {
        const raft::Snapshot snap = decode_snapshot(bytes, "fuzz");
        require(decode_snapshot(encode_snapshot(snap), "fuzz") == snap);
    } catch (const StorageError&) {
    }
}

void check_backup(std::string_view bytes) {
    Backup b;
    if (!decode_backup(bytes, b).empty()) return;
    Backup again;
    require(decode_backup(encode_backup(b), again).empty() && again == b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 4) {
        case 0:
            check_segment(rest);
            break;
        case 1:
            check_segment(encode_segment_header(7) + std::string(rest));
            break;
        case 2:
            check_entries_payload(rest);
            break;
        default:
            check_meta(rest, decode_identity, encode_identity);
            check_meta(rest, decode_hard_state, encode_hard_state);
            check_snapshot(rest);
            check_backup(rest);
            break;
    }
    return 0;
}
