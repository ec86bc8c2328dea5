// LockTable::snapshot / restore. Format (version 1), little-endian:
//
//   [version u8 = 1][applied_index u64][token_floor u64][last_token u64][count u32]
//   count x { key: u32 length + bytes, token u64, lease_ms u64, owner: u32 length + bytes }
//
// Locks are in strictly ascending key order (byte-wise), so a key appears once.
// restore() rejects: unknown version, a count larger than the remaining bytes
// could hold, any length over its limit or past the end, keys out of order or
// repeated, trailing bytes, and any table that fails check_invariants().
#include <limits>
#include <optional>
#include <stdexcept>

#include "codec/bytes.h"
#include "lock/table.h"

namespace pgfence::lock {

namespace {

constexpr std::uint8_t kSnapshotVersion = 1;
// Smallest possible encoded lock: the shortest key, no owner.
constexpr std::uint64_t kMinLockBytes = lock_bytes(kMinKeyBytes, std::size_t{0});

std::optional<Lock> read_lock(codec::Reader& in) {
    const std::string_view key = in.string("lock key", kMaxKeyBytes);
    const std::uint64_t token = in.u64("lock token");
    const std::uint64_t lease_ms = in.u64("lock lease_ms");
    const std::string_view owner = in.string("lock owner", kMaxOwnerBytes);
    if (!in.ok()) return std::nullopt;
    return Lock{std::string(key), token, lease_ms, std::string(owner)};
}

}  // namespace

std::string LockTable::snapshot() const {
    std::string out;
    codec::put_u8(out, kSnapshotVersion);
    codec::put_u64(out, applied_index_);
    codec::put_u64(out, token_floor_);
    codec::put_u64(out, last_token_);
    if (locks_.size() > std::numeric_limits<std::uint32_t>::max()) {
        throw std::length_error("snapshot: " + std::to_string(locks_.size()) +
                                " locks do not fit the u32 lock count");
    }
    codec::put_u32(out, static_cast<std::uint32_t>(locks_.size()));
    for (const auto& [key, lock] : locks_) {
        codec::put_string(out, key, kMaxKeyBytes, "lock key");
        codec::put_u64(out, lock.token);
        codec::put_u64(out, lock.lease_ms);
        codec::put_string(out, lock.owner, kMaxOwnerBytes, "lock owner");
    }
    return out;
}

std::variant<LockTable, DecodeError> LockTable::restore(std::string_view bytes, std::uint64_t max_bytes) {
    codec::Reader in(bytes, read_error, "snapshot");
    LockTable table(max_bytes);
    const std::uint8_t version = in.u8("version");
    if (in.ok() && version != kSnapshotVersion) {
        in.fail_at(0, "unknown snapshot version " + std::to_string(version) +
                          " (known: " + std::to_string(kSnapshotVersion) + ")");
    }
    const std::uint64_t applied = in.u64("applied_index");
    const std::uint64_t floor = in.u64("token_floor");
    const std::uint64_t last = in.u64("last_token");
    const std::size_t count_offset = in.offset();
    const std::uint32_t count = in.u32("lock count");
    if (!in.ok()) return DecodeError{in.error()};
    if (count > in.remaining() / kMinLockBytes) {
        in.fail_at(count_offset, "lock count " + std::to_string(count) + " cannot fit in the " +
                                     std::to_string(in.remaining()) + " bytes remaining");
        return DecodeError{in.error()};
    }
    table.applied_index_ = applied;
    table.token_floor_ = floor;
    table.last_token_ = last;
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::size_t lock_offset = in.offset();
        auto lock = read_lock(in);
        if (!lock) return DecodeError{in.error()};
        if (!table.locks_.empty() && !(table.locks_.rbegin()->first < lock->key)) {
            in.fail_at(lock_offset, "lock " + std::to_string(i) +
                                        " key is not after the previous key (repeated or out "
                                        "of order)");
            return DecodeError{in.error()};
        }
        table.bytes_ += lock_bytes(lock->key, lock->owner);
        std::string key = lock->key;
        table.locks_.emplace_hint(table.locks_.end(), std::move(key), std::move(*lock));
    }
    if (!in.expect_end("the end")) return DecodeError{in.error()};
    if (auto problem = table.check_invariants(); !problem.empty()) {
        return DecodeError{"snapshot: " + problem};
    }
    return table;
}

}  // namespace pgfence::lock
