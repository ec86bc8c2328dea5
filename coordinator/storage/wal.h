// The segmented write-ahead log of one member, and the on-disk format of its
// whole data directory.
//
// ==== Data directory ==========================================================
//   LOCK                      flock()ed while a process has the directory open
//   identity                  cluster ID, member ID and the first configuration,
//                             written at creation (version 1 files: rewritten once
//                             as version 2 when the first configuration is known)
//   hardstate                 term, vote, commit (absent until the first vote/term)
//   snapshot                  latest snapshot (absent until the first one)
//   wal-<seq:016x>.seg        log segments, seq = 1, 2, 3 ... with no gaps
//   *.tmp                     leftovers of an interrupted atomic write: removed at open
//
// identity, hardstate and snapshot are replaced atomically: written to
// <name>.tmp, fdatasynced, renamed over <name>, directory fsynced. Each is
//   [u32 magic][u8 version][body][u32 CRC32C of everything before it]
//   identity  magic "PFID"  version 3 (a restored cluster's, else 2)  body:
//                           u64 cluster_id, u64 member_id,
//                           u32 config_length, configuration (raft::encode_configuration:
//                           the configuration at index 0; no members: joined a cluster),
//                           u64 from_cluster, u64 from_index, u64 token_floor
//                           (storage::Origin: where the restored state came from)
//             version 2: version 3 without the origin
//             version 1: u64 cluster_id, u64 member_id
//   hardstate magic "PFHS"  version 1  body: u64 term, u64 vote, u64 commit
//   snapshot  magic "PFSN"  version 3 (when the configuration was made by a log
//                           entry, config_index > 0)  body: u64 index, u64 term,
//                           u64 config_index (1..index: the entry that made the
//                           configuration; 0 is corruption), u32 config_length, configuration
//                           (raft::encode_configuration: voters, learners and
//                           their contexts, in force at index),
//                           u64 data_length, data  (max: Options)
//             version 2 (the first configuration, with learners or contexts):
//                           version 3 without config_index
//             version 1 (the first configuration, voters without contexts):
//                           u64 index, u64 term, u32 n, n x u64 member
//                           (n voters, no learners), u64 data_length, data
//             Versions 1 and 2 read with config_index 0 (the first
//             configuration; raft::SnapshotMeta says how the Raft core takes
//             a file of a release that did not record the index).
// All integers are little-endian. A bad metadata file is corruption (it is
// never torn: the rename is atomic).
//
// ==== Segments ================================================================
// A segment file is a header followed by records, appended to and never
// rewritten (except that a torn tail is cut off at open), and then, in the
// newest segment only, zero bytes: unused room.
//   header  [u32 magic "PFWL"][u8 version=1][u64 seq][u32 CRC32C of the 13 bytes]
//   record  [u32 CRC32C of the next 5+length bytes][u32 length][u8 type][payload]
// The CRC covers the length and type too, so a flipped length is detected.
// length <= kMaxRecordPayloadBytes (8 MiB). Record types:
//   1 entries  payload: u64 first_index, u32 count,
//              count x (u64 term, u8 entry type, u32 data_length, data)
//              1 <= first_index <= 2^62 (kMaxEntryIndex), count >= 1,
//              entry type 0 normal / 1 no-op / 2 configuration (data:
//              raft::encode_configuration, the whole member list in force
//              from that index on), no trailing bytes.
//              Meaning: discard every stored entry with index >= first_index,
//              then append these. This is how a conflicting suffix is truncated:
//              by appending, so nothing durable is ever overwritten in place.
//   2 reset    payload: u64 next_index (>= 1). Discard every stored entry; the next
//              entry will have next_index (an installed snapshot that
//              conflicts with the log).
// The log is the replay of all records of all segments in seq order. The
// highest seq is the open segment, the one appended to; once it holds at least
// segment_bytes, its unused room is cut off, it is fdatasynced, and a new one
// is created (header written, fdatasynced, directory fsynced) before anything
// is appended there. So every segment but the newest was complete, exact and
// durable before the next existed.
//
// Preallocation (WalOptions::preallocate): once its header is durable, a new
// segment is extended to segment_bytes with fallocate(2) (zeros), and records
// are written with pwrite at the end of the data. An append then does not
// change the file's size (what fdatasync must still record is up to the file
// system); on this project's ext4 test machine an append + fdatasync took
// about a third less time. If the file system cannot preallocate, appends
// simply extend the file (one warning through WalOptions::on_warning).
// fallocate leaves the room "unwritten" (ext4, XFS): the first write into each
// block changes the file's extent map, and the fdatasync after it must write
// that metadata too. So zeros are also written ahead of the data, in chunks
// of kZeroAheadChunkBytes: when the open segment is created or opened, and
// after an fdatasync that leaves fewer than kZeroAheadMinBytes of them (their
// writeback started at once with sync_file_range). The batch that does so
// still pays for copying the chunk into the page cache and starting its
// writeback, but its fdatasync does not write it. Appends of up to
// kZeroAheadMinBytes per batch then land in blocks already written (larger
// ones partly in unwritten blocks, as without zeros), and the metadata change
// happens once per chunk. Zeros are never written past the preallocated size,
// so the file does not grow; the WAL's bytes within it are written about
// twice (zeros, then data).
//
// One persist() batch is normally one record (it is split only when it is
// larger than kMaxRecordPayloadBytes), written with one pwrite() and made
// durable with one fdatasync (group commit).
//
// Compaction deletes whole segments from the oldest, up to (not including) the
// segment holding the first entry after the snapshot, only after the snapshot
// and everything written are durable. Each removal is followed by a directory
// fsync, so a crash leaves a contiguous run of segments (never a gap in seq);
// the oldest remaining segment's first record then defines where the log
// starts (any run starting earlier replays to the same suffix).
//
// ==== Recovery ===============================================================
// Zero bytes running from a record boundary to the end of the newest segment
// are its unused room: the log ends there, nothing is cut, no warning (no
// record is all zeros: record type 0 does not exist). A bad record (short
// header, length over the limit, running past the end of the file, CRC
// mismatch) is a torn tail only if it is in the newest segment AND no valid
// record starts anywhere after it before the trailing zero run (checked by
// scanning every such offset for a record of a known type whose payload
// header is possible and whose CRC matches, spending at most
// kMaxResyncCrcBytes of CRC work; if that is not enough to decide, it is
// treated as corruption): that is what an interrupted, unsynced append
// leaves. It is cut off (ftruncate + fdatasync) with a warning. A newest
// segment whose header is cut short, or is exactly one header long with a bad
// CRC or magic, is an interrupted creation: it is removed (directory fsynced)
// with a warning. Anything else — a bad record or header in an older segment,
// zero bytes after the records of an older segment, a bad record with valid
// data after it, a CRC-valid record of unknown type or malformed content, a
// gap in seq or in indexes — is corruption: open fails with the file and byte
// offset, and nothing is truncated.
// Consequences: a bit flip in the very last record is indistinguishable from
// a torn write and is cut (the torn-tail rule above); an unsynced write that
// reached the disk out of order (a later page without an earlier one) makes the
// member refuse to start rather than guess. Either way nothing durable *and* followed
// by later durable data is ever dropped silently.
//
// Failures: after any I/O error while writing (write, fdatasync, creating or
// removing a segment) the Wal refuses every further call (the in-memory index
// and the files may disagree, and a failed fsync must not be retried): the
// member must restart and recover from the files.
//
// Threading: not thread-safe; one thread owns a Wal.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "raft/types.h"
#include "storage/file_util.h"

namespace pgfence::storage {

inline constexpr std::uint64_t kMinSegmentBytes = 4096;
inline constexpr std::uint64_t kMaxSegmentBytes = 256u << 20;    // largest segment_bytes option
inline constexpr std::uint64_t kMaxSegmentFileBytes = 1u << 30;  // largest segment file read
inline constexpr std::size_t kMaxSegments = 65536;
inline constexpr std::uint64_t kZeroAheadChunkBytes = 256u << 10;  // see "Preallocation"
inline constexpr std::uint64_t kZeroAheadMinBytes = 64u << 10;

struct WalOptions {
    std::uint64_t segment_bytes = 8u << 20;  // rotate once the open segment holds this much
    bool preallocate = true;                 // fallocate each new segment to segment_bytes
    // Warnings: torn tails cut and torn segment headers removed at open, a
    // failed preallocation (once). Called on the thread calling the Wal.
    std::function<void(const std::string&)> on_warning;
};

class Wal {
  public:
    // Opens the log in `dir` (creating the first segment if there is none),
    // replaying every segment. Torn tails are cut and reported through
    // options.on_warning. Throws StorageError on corruption or I/O failure.
    static std::unique_ptr<Wal> open(const std::string& dir, const WalOptions& options);

    // The stored entries are [first_index(), last_index()]; empty when
    // last_index() + 1 == first_index().
    raft::Index first_index() const { return first_; }
    raft::Index last_index() const { return next_ - 1; }

    // Throws StorageError (changing nothing) unless append(batch) is allowed:
    // contiguous indexes, first_index() <= batch[0].index <= last_index() + 1,
    // no entry data over kMaxEntryDataBytes.
    void check_append(const std::vector<raft::Entry>& batch) const;

    // Writes `batch` (see check_append), discarding stored entries from
    // batch[0].index on. Not durable until sync().
    void append(const std::vector<raft::Entry>& batch);

    // Discards every entry; the next one appended has next_index. Not durable
    // until sync().
    void reset(raft::Index next_index);

    // Sets where an empty log starts (after recovery with a snapshot), without
    // writing anything: an empty log's start is derived from the snapshot.
    void set_empty_start(raft::Index next_index);

    // Makes everything written durable (one fdatasync if anything was written),
    // then deletes segments that hold no needed entry.
    void sync();

    // Forgets entries <= index (they are in a durable snapshot); segments are
    // deleted by the next sync().
    void drop_prefix(raft::Index index);

    // Entries in [lo, hi), first_index() <= lo <= hi <= last_index() + 1, read
    // from the segment files (CRC checked again).
    std::vector<raft::Entry> read(raft::Index lo, raft::Index hi) const;

    std::uint64_t sync_count() const { return sync_count_; }  // fdatasyncs so far
    std::uint64_t bytes_written() const { return bytes_written_; }  // record bytes written so far
    std::size_t segment_count() const { return segments_.size(); }

  private:
    struct Segment {
        std::uint64_t seq = 0;
        std::string path;
        std::uint64_t bytes = 0;  // header + records: where the next record goes
    };
    // Where the entries [first, first + count) are: a record's payload.
    struct RecordLoc {
        raft::Index first = 0;
        std::uint32_t count = 0;
        std::uint32_t length = 0;
        std::uint64_t seq = 0;
        std::uint64_t offset = 0;  // of the record header
    };

    Wal(std::string dir, const WalOptions& options);
    void replay_segment(const Segment& seg, std::string_view bytes, bool newest);
    void warn(const std::string& message) const;
    void replay_record(const Segment& seg, std::uint64_t offset, int type,
                       std::string_view payload);
    void forget_from(raft::Index index);
    void create_segment(std::uint64_t seq);
    void prepare_room();
    void zero_ahead();
    void rotate_if_full();
    void write_pending(const std::string& bytes);
    void delete_unneeded_segments();
    const Segment& segment(std::uint64_t seq) const;
    void require_usable() const;

    std::string dir_;
    WalOptions options_;
    std::deque<Segment> segments_;   // by seq; back() is the open segment
    std::deque<RecordLoc> records_;  // live entries, by index (and by position)
    raft::Index first_ = 1;
    raft::Index next_ = 1;
    bool anchored_ = false;  // replay: has a record fixed where the log is?
    Fd open_fd_;             // the open segment (written with pwrite at its data end)
    bool unsynced_ = false;
    bool broken_ = false;  // an I/O error happened while writing: refuse everything
    bool preallocate_warned_ = false;
    std::uint64_t room_end_ = 0;   // the open segment is preallocated up to here (0: not)
    std::uint64_t zeroed_to_ = 0;  // ... and zeros are written up to here
    std::uint64_t sync_count_ = 0;
    std::uint64_t bytes_written_ = 0;
};

// Segment file name for seq ("wal-000000000000002a.seg"), and its inverse
// (false for any other name).
std::string segment_file_name(std::uint64_t seq);
bool parse_segment_file_name(const std::string& name, std::uint64_t& seq);

}  // namespace pgfence::storage
