#include "storage/backup.h"

#include "codec/bytes.h"
#include "storage/crc32c.h"
#include "storage/file_util.h"
#include "storage/meta_files.h"

namespace pgfence::storage {

std::string encode_backup(const Backup& backup) {
    std::string out;
    codec::put_u32(out, kBackupMagic);
    codec::put_u8(out, kBackupVersion);
    codec::put_u64(out, backup.cluster_id);
    codec::put_u64(out, backup.created_unix_ms);
    codec::put_string(out, encode_snapshot(backup.snapshot));
    codec::put_u32(out, crc32c(out));
    return out;
}

std::string decode_backup(std::string_view bytes, Backup& out) {
    constexpr std::size_t kHeader = 4 + 1 + 8 + 8 + 4;
    if (bytes.size() < kHeader + 4) {
        return "only " + std::to_string(bytes.size()) + " bytes: not a pgfence backup file";
    }
    if (codec::peek_u32(bytes, 0) != kBackupMagic) return "byte 0: not a pgfence backup file (wrong magic number)";
    if (static_cast<std::uint8_t>(bytes[4]) != kBackupVersion) {
        return "byte 4: backup format version " + std::to_string(static_cast<std::uint8_t>(bytes[4])) +
               " is not one this release reads (" + std::to_string(kBackupVersion) + ")";
    }
    const std::size_t crc_at = bytes.size() - 4;
    if (codec::peek_u32(bytes, crc_at) != crc32c(bytes.substr(0, crc_at))) {
        return "byte " + std::to_string(crc_at) + ": CRC mismatch (the file is damaged or cut short)";
    }
    codec::Reader in(bytes.substr(5, crc_at - 5));
    Backup b;
    b.cluster_id = in.u64();
    b.created_unix_ms = in.u64();
    const std::string_view snapshot = in.string("snapshot", kMaxBackupBytes);
    if (!in.ok() || in.remaining() != 0) return "byte 21: the snapshot's length does not match the file";
    try {
        b.snapshot = decode_snapshot(snapshot, "the backup's snapshot");
    } catch (const StorageError& e) {
        return e.what();
    }
    if (b.cluster_id == 0) return "byte 5: cluster ID 0";
    out = std::move(b);
    return {};
}

}  // namespace pgfence::storage
