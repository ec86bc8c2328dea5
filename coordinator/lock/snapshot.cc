// LockTable::snapshot / restore. Format, little-endian:
//
//   [version u8][applied_index u64][token_floor u64][last_token u64][count u32]
//   count x { key: u32 length + bytes, token u64, lease_ms u64, owner: u32 length + bytes
//             [version 2: user: u32 length + bytes]
//             [version 3: flags u8 (bit 0 user, bit 1 value, bit 2 remaining_ms),
//                         then, each only when its bit is set: user: u32 length + bytes,
//                         value: u32 length + bytes, remaining_ms u64] }
//
// The lowest version that holds the table is written: 3 when some lock has a
// value or a checkpoint (LockTable::locks_extended()), else 2 when some lock
// has a user (locks_with_user()), else 1, so a table that needs no newer
// field is read by the releases before it. One encoding per table: a snapshot
// in a higher version than it needs is refused, and so is, in version 3, an
// unknown flag bit or a field flagged present that is empty (or 0).
// Locks are in strictly ascending key order (byte-wise), so a key appears once.
// A set (GrantMany) is its locks with one token: it survives a snapshot as
// they do, and restore() counts the sets again.
// restore() rejects: unknown version, a count larger than the remaining bytes
// could hold, any length over its limit or past the end, lease_ms or
// remaining_ms over kMaxLeaseMs, keys out of order or repeated, trailing
// bytes, and any table that fails check_invariants().
#include <limits>
#include <optional>
#include <stdexcept>

#include "codec/bytes.h"
#include "lock/table.h"

namespace pgfence::lock {

namespace {

constexpr std::uint8_t kSnapshotVersion = 1;
constexpr std::uint8_t kUserSnapshotVersion = 2;  // locks carry their user
constexpr std::uint8_t kFlagsSnapshotVersion = 3;  // locks carry flags, then their user, value, remaining_ms
constexpr std::uint8_t kHasUser = 1;
constexpr std::uint8_t kHasValue = 2;
constexpr std::uint8_t kHasRemaining = 4;
// Smallest possible encoded lock: the shortest key, no owner (and no user).
constexpr std::uint64_t kMinLockBytes = lock_bytes(kMinKeyBytes, std::size_t{0});

std::optional<Lock> read_lock(codec::Reader& in, std::uint8_t version) {
    const std::string_view key = in.string("lock key", kMaxKeyBytes);
    const std::uint64_t token = in.u64("lock token");
    const std::size_t lease_offset = in.offset();
    const std::uint64_t lease_ms = in.u64("lock lease_ms");
    // Checked here, before the Lock keeps it in 32 bits (its constructor
    // throws past kMaxLeaseMs); check_lock() sees only the Lock's value.
    if (in.ok() && lease_ms > kMaxLeaseMs) {
        in.fail_at(lease_offset, "lock lease_ms " + std::to_string(lease_ms) + " is over the largest lease, " +
                                     std::to_string(kMaxLeaseMs) + " ms");
    }
    const std::string_view owner = in.string("lock owner", kMaxOwnerBytes);
    std::string_view user;
    std::string_view value;
    std::uint64_t remaining_ms = 0;
    if (version == kUserSnapshotVersion) user = in.string("lock user", kMaxUserBytes);
    if (version == kFlagsSnapshotVersion) {
        const std::size_t flags_offset = in.offset();
        const std::uint8_t flags = in.u8("lock flags");
        if (in.ok() && (flags & ~(kHasUser | kHasValue | kHasRemaining)) != 0) {
            in.fail_at(flags_offset, "lock flags " + std::to_string(flags) + " has unknown bits (known: 1 user, " +
                                         "2 value, 4 remaining_ms)");
        }
        const std::size_t fields_offset = in.offset();
        if (flags & kHasUser) user = in.string("lock user", kMaxUserBytes);
        if (flags & kHasValue) value = in.string("lock value", kMaxValueBytes);
        const std::size_t remaining_offset = in.offset();
        if (flags & kHasRemaining) remaining_ms = in.u64("lock remaining_ms");
        if (in.ok() && remaining_ms > kMaxLeaseMs) {  // likewise (check_lock() compares it with lease_ms)
            in.fail_at(remaining_offset, "lock remaining_ms " + std::to_string(remaining_ms) +
                                             " is over the largest lease, " + std::to_string(kMaxLeaseMs) + " ms");
        }
        const bool empty_present = ((flags & kHasUser) && user.empty()) || ((flags & kHasValue) && value.empty()) ||
                                   ((flags & kHasRemaining) && remaining_ms == 0);
        if (in.ok() && empty_present) {
            in.fail_at(fields_offset, "lock flags " + std::to_string(flags) +
                                          " mark a field present that is empty (an absent field is not flagged)");
        }
    }
    if (!in.ok()) return std::nullopt;
    return Lock{std::string(key), token, lease_ms, owner, user, value, remaining_ms};
}

void put_header(std::string& out, std::uint8_t version, std::uint64_t applied, Token floor, Token last,
                std::size_t count) {
    if (count > std::numeric_limits<std::uint32_t>::max()) {
        throw std::length_error("snapshot: " + std::to_string(count) + " locks do not fit the u32 lock count");
    }
    codec::put_u8(out, version);
    codec::put_u64(out, applied);
    codec::put_u64(out, floor);
    codec::put_u64(out, last);
    codec::put_u32(out, static_cast<std::uint32_t>(count));
}

void put_lock(std::string& out, std::uint8_t version, const Lock& lock) {
    codec::put_string(out, lock.key, kMaxKeyBytes, "lock key");
    codec::put_u64(out, lock.token);
    codec::put_u64(out, lock.lease_ms);
    codec::put_string(out, lock.owner, kMaxOwnerBytes, "lock owner");
    if (version == kUserSnapshotVersion) codec::put_string(out, lock.user, kMaxUserBytes, "lock user");
    if (version == kFlagsSnapshotVersion) {
        const std::uint8_t flags = (lock.user.empty() ? 0 : kHasUser) | (lock.value.empty() ? 0 : kHasValue) |
                                   (lock.remaining_ms == 0 ? 0 : kHasRemaining);
        codec::put_u8(out, flags);
        if (flags & kHasUser) codec::put_string(out, lock.user, kMaxUserBytes, "lock user");
        if (flags & kHasValue) codec::put_string(out, lock.value, kMaxValueBytes, "lock value");
        if (flags & kHasRemaining) codec::put_u64(out, lock.remaining_ms);
    }
}

std::uint8_t version_for(std::size_t locks_with_user, std::size_t locks_extended) {
    if (locks_extended > 0) return kFlagsSnapshotVersion;
    return locks_with_user > 0 ? kUserSnapshotVersion : kSnapshotVersion;
}

}  // namespace

std::string LockTable::snapshot() const {
    std::string out;
    const std::uint8_t version = version_for(with_user_, extended_);
    put_header(out, version, applied_index_, token_floor_, last_token_, locks_.size());
    for (const Lock& lock : locks_) put_lock(out, version, lock);
    return out;
}

void LockTable::begin_snapshot() {
    if (build_) throw std::logic_error("LockTable::begin_snapshot: a snapshot is being built already");
    Build b;
    b.version = version_for(with_user_, extended_);
    put_header(b.bytes, b.version, applied_index_, token_floor_, last_token_, locks_.size());
    b.count = static_cast<std::uint32_t>(locks_.size());
    b.bytes.reserve(b.bytes.size() + bytes_);
    build_ = std::move(b);
}

void LockTable::before_change(std::string_view key) {
    if (!build_ || (build_->started && key <= build_->cursor)) return;
    if (build_->before.find(key) != build_->before.end()) return;  // its state at the beginning is kept already
    auto held = locks_.find(key);
    build_->before.emplace(std::string(key), held == locks_.end() ? std::nullopt : std::optional<Lock>(*held));
}

// Walks the table and the kept states together in key order from the
// cursor: a key with a kept state is encoded as it was (or skipped: it was
// not held), every other key as it is (unchanged since the beginning).
bool LockTable::continue_snapshot(std::size_t max_locks) {
    if (!build_) throw std::logic_error("LockTable::continue_snapshot: no snapshot is being built");
    Build& b = *build_;
    auto now = b.started ? locks_.upper_bound(b.cursor) : locks_.begin();
    auto kept = b.before.begin();  // the kept states behind the cursor are erased as it passes them
    for (std::size_t steps = 0; steps < max_locks; ++steps) {
        const bool more_now = now != locks_.end();
        const bool more_kept = kept != b.before.end();
        if (!more_now && !more_kept) break;
        if (more_kept && (!more_now || kept->first <= now->key)) {
            if (more_now && kept->first == now->key) ++now;
            if (kept->second) {
                put_lock(b.bytes, b.version, *kept->second);
                ++b.encoded;
            }
            b.cursor = kept->first;
            kept = b.before.erase(kept);
        } else {
            put_lock(b.bytes, b.version, *now);
            ++b.encoded;
            b.cursor = now->key;
            ++now;
        }
        b.started = true;
    }
    const bool done = now == locks_.end() && kept == b.before.end();
    if (done && b.encoded != b.count) {
        throw std::logic_error("LockTable::continue_snapshot: encoded " + std::to_string(b.encoded) +
                               " locks of the " + std::to_string(b.count) + " held at its beginning");
    }
    return done;
}

std::string LockTable::take_snapshot() {
    if (!build_ || !continue_snapshot(0)) {
        throw std::logic_error("LockTable::take_snapshot: no snapshot is built to the end");
    }
    std::string out = std::move(build_->bytes);
    build_.reset();
    return out;
}

bool LockTable::operator==(const LockTable& other) const {
    return locks_ == other.locks_ && applied_index_ == other.applied_index_ && bytes_ == other.bytes_ &&
           with_user_ == other.with_user_ && extended_ == other.extended_ && sets_ == other.sets_ &&
           max_bytes_ == other.max_bytes_ && token_floor_ == other.token_floor_ && last_token_ == other.last_token_;
}

std::variant<LockTable, DecodeError> LockTable::restore(std::string_view bytes, std::uint64_t max_bytes) {
    codec::Reader in(bytes, read_error, "snapshot");
    LockTable table(max_bytes);
    const std::uint8_t version = in.u8("version");
    if (in.ok() && version != kSnapshotVersion && version != kUserSnapshotVersion && version != kFlagsSnapshotVersion) {
        in.fail_at(0, "unknown snapshot version " + std::to_string(version) + " (known: 1, 2, 3)");
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
        auto lock = read_lock(in, version);
        if (!lock) return DecodeError{in.error()};
        if (!table.locks_.empty() && !(table.locks_.rbegin()->key < lock->key)) {
            in.fail_at(lock_offset, "lock " + std::to_string(i) +
                                        " key is not after the previous key (repeated or out "
                                        "of order)");
            return DecodeError{in.error()};
        }
        table.account(*lock, true);
        table.locks_.emplace_hint(table.locks_.end(), std::move(*lock));
    }
    if (!in.expect_end("the end")) return DecodeError{in.error()};
    table.count_sets();
    if (version_for(table.with_user_, table.extended_) != version) {
        return DecodeError{"snapshot: version " + std::to_string(version) + " with " +
                           std::to_string(table.with_user_) + " locks that have a user and " +
                           std::to_string(table.extended_) + " that have a value or a checkpoint (version 3 is " +
                           "written when some lock has a value or a checkpoint, else version 2 when some lock " +
                           "has a user, else version 1)"};
    }
    if (auto problem = table.check_invariants(); !problem.empty()) {
        return DecodeError{"snapshot: " + problem};
    }
    return table;
}

}  // namespace pgfence::lock
