// Backup files: a consistent snapshot of a cluster's lock table and token
// sequence, as GET /v1/snapshot answers it, `fencectl snapshot save` writes
// it and `fence-coordinator --restore` reads it. Pure encode/decode (no files
// here: the writers replace files atomically, file_util.h).
//
// Format, little-endian, checked end to end by a CRC:
//   [u32 magic "PFBK"][u8 version = 1]
//   [u64 cluster_id]          the cluster it was taken from
//   [u64 created_unix_ms]     when the leader answered (its wall clock)
//   [u32 length][snapshot]    a snapshot file's bytes (meta_files.h: index,
//                             term, configuration, the lock table; with its own CRC)
//   [u32 CRC32C of everything before it]
// A backup of the largest snapshot a member accepts (raft::kMaxSnapshotBytes)
// fits: the limit is kMaxBackupBytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "raft/types.h"

namespace pgfence::storage {

inline constexpr std::uint32_t kBackupMagic = 0x4B424650;  // "PFBK"
inline constexpr std::uint8_t kBackupVersion = 1;
inline constexpr std::uint64_t kMaxBackupBytes = raft::kMaxSnapshotBytes + 4096;

struct Backup {
    std::uint64_t cluster_id = 0;
    std::uint64_t created_unix_ms = 0;
    raft::Snapshot snapshot;  // index >= 1
    bool operator==(const Backup&) const = default;
};

std::string encode_backup(const Backup& backup);
// "" and `out` set, or what is wrong with `bytes` (not a backup file, cut
// short, CRC mismatch, a bad snapshot inside), naming the byte offset.
std::string decode_backup(std::string_view bytes, Backup& out);

}  // namespace pgfence::storage
