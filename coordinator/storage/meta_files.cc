#include "storage/meta_files.h"

#include <vector>

#include "codec/bytes.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"

namespace pgfence::storage {
namespace {

constexpr std::uint64_t kMaxSmallFileBytes = 4096;
// 15 members with 1 KiB contexts each fit (raft/types.h limits).
constexpr std::uint64_t kMaxIdentityBytes = 64 * 1024;

std::string begin_file(std::uint32_t magic, std::uint8_t version = kMetaVersion) {
    std::string out;
    codec::put_u32(out, magic);
    codec::put_u8(out, version);
    return out;
}

void end_file(std::string& out) {
    codec::put_u32(out, crc32c(out));
}

[[noreturn]] void corrupt(const std::string& path, std::size_t offset, const std::string& what) {
    throw StorageError(path + " is corrupt at byte " + std::to_string(offset) + ": " + what +
                       ". It is only ever replaced atomically, so this is disk corruption or a "
                       "foreign file: restore the data directory from another member.");
}

// Checks magic, version (from 1 to `newest`) and trailing CRC; returns the
// body between them, and the version in `version`.
std::string_view open_file_body(std::string_view bytes, std::uint32_t magic, const std::string& path,
                                std::uint8_t newest, std::uint8_t& version) {
    if (bytes.size() < 9)
        corrupt(path, bytes.size(), "file is only " + std::to_string(bytes.size()) + " bytes");
    if (codec::peek_u32(bytes, 0) != magic) corrupt(path, 0, "wrong magic number");
    const std::size_t crc_at = bytes.size() - 4;
    if (codec::peek_u32(bytes, crc_at) != crc32c(bytes.substr(0, crc_at))) {
        corrupt(path, crc_at, "CRC mismatch");
    }
    version = static_cast<std::uint8_t>(bytes[4]);
    if (version < 1 || version > newest) {
        corrupt(path, 4, "unsupported format version " + std::to_string(version));
    }
    return bytes.substr(5, crc_at - 5);
}

std::string_view open_file_body(std::string_view bytes, std::uint32_t magic, const std::string& path) {
    std::uint8_t version = 0;
    return open_file_body(bytes, magic, path, kMetaVersion, version);
}

}  // namespace

std::string encode_identity(const Identity& id) {
    // The oldest version that holds it: a release before origins reads a
    // cluster that was not restored.
    const bool origin = id.first_config && id.origin;
    std::string out = begin_file(kIdentityMagic, origin ? kIdentityVersion : id.first_config ? 2 : 1);
    codec::put_u64(out, id.cluster_id);
    codec::put_u64(out, id.member_id);
    if (id.first_config) codec::put_string(out, raft::encode_configuration(*id.first_config));
    if (origin) {
        codec::put_u64(out, id.origin->from_cluster);
        codec::put_u64(out, id.origin->from_index);
        codec::put_u64(out, id.origin->token_floor);
    }
    end_file(out);
    return out;
}

std::string encode_hard_state(const raft::HardState& hs) {
    std::string out = begin_file(kHardStateMagic);
    codec::put_u64(out, hs.term);
    codec::put_u64(out, hs.vote);
    codec::put_u64(out, hs.commit);
    end_file(out);
    return out;
}

std::string encode_snapshot(const raft::Snapshot& snap) {
    // The oldest version that holds it: the first configuration (index 0)
    // goes as version 1 when it is voters without contexts (the release
    // before learners reads it too), else as version 2 (the release before
    // configuration indexes reads it).
    const bool v3 = snap.meta.config_index != 0;
    const bool v1 = !v3 && snap.meta.config.voters_only();
    std::string out = begin_file(kSnapshotMagic, v3 ? 3 : v1 ? 1 : 2);
    codec::put_u64(out, snap.meta.index);
    codec::put_u64(out, snap.meta.term);
    if (v3) codec::put_u64(out, snap.meta.config_index);
    if (v1) {
        codec::put_u32(out, static_cast<std::uint32_t>(snap.meta.config.members.size()));
        for (const raft::ConfigMember& m : snap.meta.config.members) codec::put_u64(out, m.id);
    } else {
        codec::put_string(out, raft::encode_configuration(snap.meta.config));
    }
    codec::put_u64(out, snap.data.size());
    out.append(snap.data);
    end_file(out);
    return out;
}

Identity decode_identity(std::string_view bytes, const std::string& path) {
    std::uint8_t version = 0;
    codec::Reader in(open_file_body(bytes, kIdentityMagic, path, kIdentityVersion, version));
    Identity id;
    id.cluster_id = in.u64();
    id.member_id = in.u64();
    if (version >= 2) {
        const std::size_t at = in.offset();
        const std::string_view config = in.string("configuration", kMaxIdentityBytes);
        if (!in.ok()) corrupt(path, 5 + at, "first configuration cut short");
        id.first_config.emplace();
        if (std::string why = raft::decode_configuration(config, *id.first_config); !why.empty()) {
            corrupt(path, 5 + at, "first configuration: " + why);
        }
    }
    if (version >= 3) {
        Origin o;
        o.from_cluster = in.u64();
        o.from_index = in.u64();
        o.token_floor = in.u64();
        id.origin = o;
    }
    if (!in.ok() || in.remaining() != 0) {
        corrupt(path, 5, "wrong body length");
    }
    if (id.cluster_id == 0 || id.member_id == 0) corrupt(path, 5, "cluster or member ID 0");
    return id;
}

raft::HardState decode_hard_state(std::string_view bytes, const std::string& path) {
    codec::Reader in(open_file_body(bytes, kHardStateMagic, path));
    raft::HardState hs;
    hs.term = in.u64();
    hs.vote = in.u64();
    hs.commit = in.u64();
    if (!in.ok() || in.remaining() != 0) {
        corrupt(path, 5, "wrong body length");
    }
    return hs;
}

raft::Snapshot decode_snapshot(std::string_view bytes, const std::string& path) {
    std::uint8_t version = 0;
    codec::Reader in(open_file_body(bytes, kSnapshotMagic, path, kSnapshotVersion, version));
    raft::Snapshot snap;
    snap.meta.index = in.u64();
    snap.meta.term = in.u64();
    if (version >= 3) {
        // One encoding: the first configuration (index 0) is written as
        // version 1 or 2, never as version 3.
        snap.meta.config_index = in.u64();
        if (in.ok() && snap.meta.config_index == 0) {
            corrupt(path, 5 + 16, "configuration index 0 in a version 3 snapshot (the first configuration is "
                                  "written as version 1 or 2)");
        }
    }
    if (version == 1) {  // voters only
        const std::uint32_t members = in.u32();
        if (!in.ok()) corrupt(path, 5 + in.offset(), "snapshot header cut short");
        if (members > kMaxSnapshotMembers || members > in.remaining() / 8) {
            corrupt(path, 5 + in.offset(), "member count " + std::to_string(members) + " is impossible");
        }
        std::vector<raft::NodeId> ids;
        for (std::uint32_t i = 0; i < members; ++i) ids.push_back(in.u64());
        snap.meta.config = raft::Configuration::of_voters(ids);
    } else {
        const std::size_t at = in.offset();
        const std::string_view config = in.string("configuration", kMaxSmallFileBytes * 16);
        if (!in.ok()) corrupt(path, 5 + at, "snapshot configuration cut short");
        if (std::string why = raft::decode_configuration(config, snap.meta.config); !why.empty()) {
            corrupt(path, 5 + at, "snapshot configuration: " + why);
        }
    }
    const std::uint64_t size = in.u64();
    if (!in.ok() || size != in.remaining()) {
        corrupt(path, 5 + in.offset(), "snapshot data length does not match the file");
    }
    const std::string_view data = in.bytes(size);  // all that remains
    if (snap.meta.index == 0) corrupt(path, 5, "snapshot index 0");
    if (snap.meta.config_index > snap.meta.index) {
        corrupt(path, 5 + 16, "configuration index " + std::to_string(snap.meta.config_index) +
                                  " is beyond the snapshot index " + std::to_string(snap.meta.index));
    }
    snap.data = std::string(data);
    return snap;
}

std::optional<Identity> load_identity(const std::string& dir) {
    const std::string path = join_path(dir, kIdentityFile);
    if (!path_exists(path)) return std::nullopt;
    return decode_identity(read_whole_file(path, kMaxIdentityBytes), path);
}

std::optional<raft::HardState> load_hard_state(const std::string& dir) {
    const std::string path = join_path(dir, kHardStateFile);
    if (!path_exists(path)) return std::nullopt;
    return decode_hard_state(read_whole_file(path, kMaxSmallFileBytes), path);
}

std::optional<raft::Snapshot> load_snapshot(const std::string& dir, std::uint64_t max_bytes) {
    const std::string path = join_path(dir, kSnapshotFile);
    if (!path_exists(path)) return std::nullopt;
    return decode_snapshot(read_whole_file(path, max_bytes), path);
}

}  // namespace pgfence::storage
