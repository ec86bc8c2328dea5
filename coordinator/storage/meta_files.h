// The small whole-file formats of a data directory: identity, hard state and
// snapshot (layout documented in wal.h). Pure encode/decode functions plus
// load helpers; files are always replaced with write_file_atomically().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "raft/types.h"

namespace pgfence::storage {

inline constexpr std::uint8_t kMetaVersion = 1;          // hard state
inline constexpr std::uint8_t kIdentityVersion = 3;      // with an origin; 2: with the first configuration; 1 (wal.h)
inline constexpr std::uint8_t kSnapshotVersion = 3;      // a configuration index; else 2 or 1 (wal.h)
inline constexpr std::uint32_t kIdentityMagic = 0x44494650;   // "PFID"
inline constexpr std::uint32_t kHardStateMagic = 0x53484650;  // "PFHS"
inline constexpr std::uint32_t kSnapshotMagic = 0x4E534650;   // "PFSN"
inline constexpr std::size_t kMaxSnapshotMembers = 1024;

inline constexpr const char* kIdentityFile = "identity";
inline constexpr const char* kHardStateFile = "hardstate";
inline constexpr const char* kSnapshotFile = "snapshot";

// Where a restored cluster's first state came from (--restore: a backup;
// --force-new-cluster: a member's data directory), and the token floor its
// seed chose for it (server/bootstrap.h). A member that has not restored
// the state itself asks the seed for these and compares them with its own
// backup.
struct Origin {
    std::uint64_t from_cluster = 0;  // the cluster the state was taken from
    std::uint64_t from_index = 0;    // the state's log index in that cluster
    std::uint64_t token_floor = 0;   // every token of the new cluster is above it
    bool operator==(const Origin&) const = default;
};

// Who a data directory belongs to, fixed when the member is created.
// first_config: the cluster's configuration at index 0 (the one no log entry
// holds: a new cluster's members, from its flags), recorded so that it is
// never derived from flags again; with no members for a member that joined a
// running cluster (its configurations all come from the log). Absent in a
// version 1 file (written before it was recorded: the flags still give it).
struct Identity {
    std::uint64_t cluster_id = 0;
    std::uint64_t member_id = 0;
    std::optional<raft::Configuration> first_config;
    std::optional<Origin> origin;  // a restored cluster's (version 3; needs first_config)
    bool operator==(const Identity&) const = default;
};

std::string encode_identity(const Identity& id);
std::string encode_hard_state(const raft::HardState& hs);
std::string encode_snapshot(const raft::Snapshot& snap);

// Decoders throw StorageError naming `path` (and the byte offset) on any
// mismatch: these files are only ever replaced atomically, so a bad one is
// corruption, never a torn write.
Identity decode_identity(std::string_view bytes, const std::string& path);
raft::HardState decode_hard_state(std::string_view bytes, const std::string& path);
raft::Snapshot decode_snapshot(std::string_view bytes, const std::string& path);

// Reads and decodes dir/<file> if it exists.
std::optional<Identity> load_identity(const std::string& dir);
std::optional<raft::HardState> load_hard_state(const std::string& dir);
std::optional<raft::Snapshot> load_snapshot(const std::string& dir, std::uint64_t max_bytes);

}  // namespace pgfence::storage
