#include "storage/wal.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>

#include "codec/bytes.h"
#include "storage/crc32c.h"
#include "storage/wal_format.h"

namespace pgfence::storage {
namespace {

[[noreturn]] void corrupt(const std::string& path, std::uint64_t offset, const std::string& what) {
    throw StorageError(path + " is corrupt at byte " + std::to_string(offset) + ": " + what +
                       ". This is not a torn write from a crash, so the member refuses to start "
                       "rather than drop data it may have acknowledged. Restore this member from "
                       "another one (remove its data directory and add it back to the cluster).");
}

}  // namespace

std::string segment_file_name(std::uint64_t seq) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "wal-%016" PRIx64 ".seg", seq);
    return buf;
}

bool parse_segment_file_name(const std::string& name, std::uint64_t& seq) {
    if (name.size() != 24 || name.compare(0, 4, "wal-") != 0 || name.compare(20, 4, ".seg") != 0) {
        return false;
    }
    seq = 0;
    for (std::size_t i = 4; i < 20; ++i) {
        const char c = name[i];
        const int digit = (c >= '0' && c <= '9')   ? c - '0'
                          : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                                   : -1;
        if (digit < 0) return false;
        seq = seq * 16 + static_cast<std::uint64_t>(digit);
    }
    return seq != 0;
}

Wal::Wal(std::string dir, const WalOptions& options) : dir_(std::move(dir)), options_(options) {}

std::unique_ptr<Wal> Wal::open(const std::string& dir, const WalOptions& options) {
    if (options.segment_bytes < kMinSegmentBytes || options.segment_bytes > kMaxSegmentBytes) {
        throw StorageError("segment_bytes " + std::to_string(options.segment_bytes) +
                           " is outside [" + std::to_string(kMinSegmentBytes) + ", " +
                           std::to_string(kMaxSegmentBytes) + "]");
    }
    std::unique_ptr<Wal> wal(new Wal(dir, options));
    std::vector<std::uint64_t> seqs;
    for (const std::string& name : list_dir(dir)) {
        std::uint64_t seq = 0;
        if (parse_segment_file_name(name, seq)) seqs.push_back(seq);
    }
    if (seqs.size() > kMaxSegments) {
        throw StorageError(dir + " holds " + std::to_string(seqs.size()) +
                           " WAL segments, more than the limit of " + std::to_string(kMaxSegments));
    }
    for (std::size_t i = 0; i < seqs.size(); ++i) {
        Segment seg{seqs[i], join_path(dir, segment_file_name(seqs[i])), 0};
        if (i > 0 && seqs[i] != seqs[i - 1] + 1) {
            corrupt(seg.path, 0,
                    "segment " + std::to_string(seqs[i - 1] + 1) +
                        " before it is missing (segments must be contiguous)");
        }
        const std::string bytes = read_whole_file(seg.path, kMaxSegmentFileBytes);
        wal->replay_segment(seg, bytes, i + 1 == seqs.size());
    }
    if (wal->segments_.empty()) {
        wal->create_segment(seqs.empty() ? 1 : seqs.back());
    } else {
        const Segment& last = wal->segments_.back();
        wal->open_fd_ = open_file(last.path, O_WRONLY);
        // Again, if a torn tail was cut with it. What lies after the data
        // (zeros, written or not) gets written zeros again from the data on.
        wal->prepare_room();
    }
    return wal;
}

void Wal::warn(const std::string& message) const {
    if (options_.on_warning) options_.on_warning(message);
}

// Decodes one segment and replays its records. A torn tail of the newest
// segment is cut off (or the whole segment dropped if its header is torn).
void Wal::replay_segment(const Segment& seg_in, std::string_view bytes, bool newest) {
    Segment seg = seg_in;
    const SegmentDecode d = decode_segment(bytes);
    if (d.tail == SegmentTail::kCorrupt || (d.tail == SegmentTail::kTorn && !newest)) {
        corrupt(seg.path, d.bad_offset, d.problem + (newest ? "" : " (not the newest segment)"));
    }
    if (!d.header_ok) {
        // Interrupted creation of the newest segment: nothing was ever in it.
        warn(seg.path + ": torn segment header (" + d.problem +
             "); removing the segment, which held no records");
        remove_file(seg.path);
        sync_dir(dir_);
        return;
    }
    if (!newest && d.zero_tail_bytes > 0) {
        corrupt(seg.path, d.valid_bytes,
                std::to_string(d.zero_tail_bytes) +
                    " zero bytes after the records (unused room is cut when a segment is closed; "
                    "this is not the newest segment)");
    }
    if (d.seq != seg.seq) {
        corrupt(seg.path, 5,
                "header says seq " + std::to_string(d.seq) + " but the file name says " +
                    std::to_string(seg.seq));
    }
    segments_.push_back(seg);
    for (const RecordView& r : d.records) {
        replay_record(seg, r.offset, static_cast<int>(r.type), r.payload);
    }
    segments_.back().bytes = d.valid_bytes;
    if (d.tail == SegmentTail::kTorn) {
        const std::size_t data_end = bytes.find_last_not_of('\0') + 1;  // > bad_offset: it is bad
        warn(seg.path + ": torn write at byte " + std::to_string(d.bad_offset) + " (" + d.problem +
             "); cutting the file there: " + std::to_string(data_end - d.valid_bytes) +
             " bytes of an append that was never made durable" +
             (bytes.size() > data_end
                  ? " and " + std::to_string(bytes.size() - data_end) + " zero bytes after it"
                  : std::string()));
        Fd fd = open_file(seg.path, O_WRONLY);
        truncate_file(fd.get(), d.valid_bytes, seg.path);
        sync_data(fd.get(), seg.path);
        ++sync_count_;
    }
}

void Wal::replay_record(const Segment& seg, std::uint64_t offset, int type,
                        std::string_view payload) {
    if (type == static_cast<int>(RecordType::kReset)) {
        raft::Index next = 0;
        std::string problem = decode_reset_payload(payload, next);
        if (!problem.empty()) corrupt(seg.path, offset, problem);
        records_.clear();
        first_ = next_ = next;
        anchored_ = true;
        return;
    }
    EntriesPayload h;
    std::string problem = decode_entries_payload(payload, h, 0, 0, nullptr);
    if (!problem.empty()) corrupt(seg.path, offset, problem);
    if (anchored_ && h.first_index > next_) {
        corrupt(seg.path, offset,
                "entries start at index " + std::to_string(h.first_index) +
                    " but the log ends at " + std::to_string(next_ - 1));
    }
    if (!anchored_ || h.first_index < first_) {
        records_.clear();
        first_ = h.first_index;
    } else {
        forget_from(h.first_index);
    }
    anchored_ = true;
    records_.push_back(
        {h.first_index, h.count, static_cast<std::uint32_t>(payload.size()), seg.seq, offset});
    next_ = h.first_index + h.count;
}

// Forgets (in memory) the stored entries with index >= index.
void Wal::forget_from(raft::Index index) {
    while (!records_.empty() && records_.back().first >= index) records_.pop_back();
    if (!records_.empty()) {
        RecordLoc& last = records_.back();
        if (last.first + last.count > index)
            last.count = static_cast<std::uint32_t>(index - last.first);
    }
    next_ = std::max(index, first_);
}

void Wal::create_segment(std::uint64_t seq) {
    const std::string path = join_path(dir_, segment_file_name(seq));
    Fd fd = open_file(path, O_WRONLY | O_CREAT | O_EXCL);
    const std::string header = encode_segment_header(seq);
    pwrite_all(fd.get(), header, 0, path);
    sync_data(fd.get(), path);
    sync_dir(dir_);
    sync_count_ += 2;
    // Only now, with the header durable: a crash cannot leave a torn header
    // followed by preallocated zeros (recovery removes a torn header only
    // when it is all the file holds).
    segments_.push_back({seq, path, header.size()});
    open_fd_ = std::move(fd);
    prepare_room();
}

// Preallocates the open segment to segment_bytes and writes the first zeros
// after its data (room_end_, zeroed_to_). Best effort: a file system that
// cannot preallocate, or is full, leaves the file as it is (appends then
// extend it; the first failure is reported through on_warning). Whatever
// size it ends with, the bytes past the data are zeros: recovery reads them
// as unused room. The new size becomes durable with the next append's
// fdatasync.
void Wal::prepare_room() {
    room_end_ = 0;
    zeroed_to_ = segments_.back().bytes;
    if (!options_.preallocate) return;
    if (::fallocate(open_fd_.get(), 0, 0, static_cast<off_t>(options_.segment_bytes)) == 0) {
        room_end_ = options_.segment_bytes;
        zero_ahead();
        return;
    }
    const int err = errno;
    if (preallocate_warned_) return;
    preallocate_warned_ = true;
    warn("cannot preallocate WAL segments in " + dir_ + " (fallocate: " + std::strerror(err) +
         "); appends will extend the files" +
         (err == ENOSPC ? " - the disk is full or nearly so" : ""));
}

// Keeps at least kZeroAheadMinBytes of written zeros after the data of a
// preallocated open segment (see "Preallocation" in wal.h), within its room.
// Called right after an fdatasync; the chunk's writeback is started at once
// (sync_file_range), so that the next batch's fdatasync rarely waits for it.
void Wal::zero_ahead() {
    const Segment& open = segments_.back();
    zeroed_to_ = std::max(zeroed_to_, open.bytes);
    if (zeroed_to_ >= room_end_ || zeroed_to_ - open.bytes >= kZeroAheadMinBytes) return;
    static const std::string zeros(kZeroAheadChunkBytes, '\0');
    const std::uint64_t n = std::min(kZeroAheadChunkBytes, room_end_ - zeroed_to_);
    pwrite_all(open_fd_.get(), std::string_view(zeros).substr(0, n), zeroed_to_, open.path);
    // Best effort: without it the zeros are written by the next fdatasync.
    // Only SYNC_FILE_RANGE_WRITE, never a WAIT flag: waiting here could
    // consume a writeback error that the next fdatasync must report.
    (void)::sync_file_range(open_fd_.get(), static_cast<off_t>(zeroed_to_), static_cast<off_t>(n),
                            SYNC_FILE_RANGE_WRITE);
    zeroed_to_ += n;
}

// Starts a new segment when the open one is full (and holds a record). The
// old one is made durable first, so only the newest segment can be torn.
void Wal::rotate_if_full() {
    const Segment& open = segments_.back();
    if (open.bytes < options_.segment_bytes || open.bytes <= kSegmentHeaderBytes) return;
    // Closed segments hold exactly their records: cut the unused room (a
    // no-op when there is none), then make the data and the size durable.
    truncate_file(open_fd_.get(), open.bytes, open.path);
    sync_data(open_fd_.get(), open.path);
    ++sync_count_;
    unsynced_ = false;
    create_segment(open.seq + 1);
}

void Wal::write_pending(const std::string& bytes) {
    if (bytes.empty()) return;
    Segment& open = segments_.back();
    pwrite_all(open_fd_.get(), bytes, open.bytes, open.path);
    open.bytes += bytes.size();
    bytes_written_ += bytes.size();
    unsynced_ = true;
}

void Wal::require_usable() const {
    if (broken_) {
        throw StorageError("WAL in " + dir_ +
                           " is unusable after an earlier I/O error; restart the member so it "
                           "recovers from what is on disk");
    }
}

void Wal::check_append(const std::vector<raft::Entry>& batch) const {
    require_usable();
    if (batch.empty()) return;
    const raft::Index lo = batch.front().index;
    if (lo < first_ || lo > next_ || lo > kMaxEntryIndex) {
        throw StorageError("WAL append at index " + std::to_string(lo) + " to a log holding [" +
                           std::to_string(first_) + ", " + std::to_string(next_ - 1) +
                           "]: would leave a gap or rewrite compacted entries (caller bug)");
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
        if (batch[i].index != lo + i || batch[i].data.size() > kMaxEntryDataBytes) {
            throw StorageError("WAL append: entry " + std::to_string(batch[i].index) +
                               " is out of order or larger than " +
                               std::to_string(kMaxEntryDataBytes) + " bytes (caller bug)");
        }
    }
}

void Wal::append(const std::vector<raft::Entry>& batch) {
    check_append(batch);
    if (batch.empty()) return;
    const raft::Index lo = batch.front().index;
    BreakOnThrow guard(broken_);
    forget_from(lo);
    std::string pending;
    std::size_t begin = 0;
    while (begin < batch.size()) {
        std::size_t end = begin;
        std::size_t payload = kEntriesPayloadHeaderBytes;
        while (end < batch.size() &&
               payload + entry_encoded_bytes(batch[end]) <= kMaxRecordPayloadBytes) {
            payload += entry_encoded_bytes(batch[end++]);
        }
        if (segments_.back().bytes + pending.size() >= options_.segment_bytes) {
            write_pending(pending);
            pending.clear();
            rotate_if_full();
        }
        const std::uint64_t offset = segments_.back().bytes + pending.size();
        encode_entries_record(pending, std::span(batch).subspan(begin, end - begin));
        records_.push_back({batch[begin].index, static_cast<std::uint32_t>(end - begin),
                            static_cast<std::uint32_t>(payload), segments_.back().seq, offset});
        begin = end;
    }
    write_pending(pending);
    next_ = lo + batch.size();
}

void Wal::reset(raft::Index next_index) {
    require_usable();
    if (next_index == 0) throw StorageError("WAL reset to index 0 (caller bug)");
    BreakOnThrow guard(broken_);
    rotate_if_full();
    std::string pending;
    encode_reset_record(pending, next_index);
    write_pending(pending);
    records_.clear();
    first_ = next_ = next_index;
}

void Wal::set_empty_start(raft::Index next_index) {
    if (next_ != first_) throw StorageError("WAL set_empty_start on a non-empty log (caller bug)");
    first_ = next_ = next_index;
}

void Wal::sync() {
    require_usable();
    BreakOnThrow guard(broken_);
    if (unsynced_) {
        sync_data(open_fd_.get(), segments_.back().path);
        ++sync_count_;
        unsynced_ = false;
        zero_ahead();  // after the fdatasync, which so does not write the zeros
    }
    delete_unneeded_segments();
}

void Wal::drop_prefix(raft::Index index) {
    require_usable();
    if (index < first_) return;
    if (index >= next_) {
        throw StorageError("WAL drop_prefix(" + std::to_string(index) + ") past the last entry " +
                           std::to_string(next_ - 1) + ": use reset() (caller bug)");
    }
    while (!records_.empty() && records_.front().first + records_.front().count <= index + 1) {
        records_.pop_front();
    }
    first_ = index + 1;
    next_ = std::max(next_, first_);
}

// Deletes segments older than the one holding the first live entry, oldest
// first, fsyncing the directory after each removal: POSIX does not order
// unlinks, so without that a crash could keep an older segment but lose a
// newer one, and the next open would see a gap in seq and refuse to start.
// Called only when everything written (and the snapshot) is durable.
void Wal::delete_unneeded_segments() {
    const std::uint64_t keep_from = records_.empty() ? segments_.back().seq : records_.front().seq;
    while (segments_.size() > 1 && segments_.front().seq < keep_from) {
        remove_file(segments_.front().path);
        sync_dir(dir_);
        ++sync_count_;
        segments_.pop_front();
    }
}

const Wal::Segment& Wal::segment(std::uint64_t seq) const {
    return segments_[static_cast<std::size_t>(seq - segments_.front().seq)];
}

std::vector<raft::Entry> Wal::read(raft::Index lo, raft::Index hi) const {
    require_usable();
    if (lo < first_ || hi > next_ || lo > hi) {
        throw StorageError("WAL read of [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           ") outside the stored [" + std::to_string(first_) + ", " +
                           std::to_string(next_) + ") (caller bug)");
    }
    std::vector<raft::Entry> out;
    out.reserve(static_cast<std::size_t>(hi - lo));
    auto it = std::upper_bound(records_.begin(), records_.end(), lo,
                               [](raft::Index i, const RecordLoc& r) { return i < r.first; });
    if (it != records_.begin()) --it;
    std::map<std::uint64_t, Fd> fds;
    for (; it != records_.end() && it->first < hi; ++it) {
        const Segment& seg = segment(it->seq);
        auto [fd_it, inserted] = fds.try_emplace(it->seq);
        if (inserted) fd_it->second = open_file(seg.path, O_RDONLY);
        const std::string rec =
            pread_exact(fd_it->second.get(), it->offset, kRecordHeaderBytes + it->length, seg.path);
        if (codec::peek_u32(rec, 0) != crc32c(std::string_view(rec).substr(4))) {
            corrupt(seg.path, it->offset, "record CRC mismatch on read (the file changed on disk)");
        }
        EntriesPayload h;
        const raft::Index end = std::min(hi, it->first + it->count);
        std::string problem = decode_entries_payload(
            std::string_view(rec).substr(kRecordHeaderBytes), h, lo, end, &out);
        if (!problem.empty()) corrupt(seg.path, it->offset, problem);
    }
    if (out.size() != hi - lo)
        throw StorageError("WAL read: index bookkeeping is inconsistent (bug)");
    return out;
}

}  // namespace pgfence::storage
