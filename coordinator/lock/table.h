// The lock table: the replicated state machine every member applies in log order.
//
// Deterministic: the same entries applied in the same order give the same
// table and the same results on every member. Pure: std only, no clock (lease
// deadlines are the server's, leader-local; here a lock lives until a
// committed Release or Expire removes it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "lock/commands.h"

namespace pgfence::lock {

// The largest lock table, counted as its snapshot's lock records (the
// 24 fixed bytes of each lock plus its key and owner; lock_bytes()). A Grant
// that would take the table past it is refused (TableFull) by every member
// alike, so the table's snapshot always fits the 256 MiB a member stores,
// sends and accepts (raft::kMaxSnapshotBytes; member/core.cc asserts it): 192 MiB leaves
// the snapshot's header, the configuration and the member's own framing
// room. At 20-byte keys without owners that is about 4.5 million locks.
// A constant, not a flag: members that disagreed on it would diverge.
constexpr std::uint64_t kMaxTableBytes = 192ull << 20;

struct Lock {
    std::string key;
    Token token = 0;
    std::uint64_t lease_ms = 0;
    std::string owner;
    bool operator==(const Lock&) const = default;
};

// One lock's record in the snapshot (see snapshot()): key and owner with
// their u32 lengths, token and lease_ms.
constexpr std::uint64_t lock_bytes(std::size_t key_bytes, std::size_t owner_bytes) {
    return 4 + key_bytes + 8 + 8 + 4 + owner_bytes;
}
constexpr std::uint64_t lock_bytes(std::string_view key, std::string_view owner) {
    return lock_bytes(key.size(), owner.size());
}

class LockTable {
  public:
    // `max_bytes`: the size limit (TableFull). Every member of a cluster must
    // use the same: production code keeps kMaxTableBytes; tests lower it.
    explicit LockTable(std::uint64_t max_bytes = kMaxTableBytes) : max_bytes_(max_bytes) {}

    // Applies one committed command found at log `index` (> applied_index();
    // otherwise std::logic_error and the table is unchanged).
    // Grant's token is index + token_floor(). Outcomes:
    //   Grant failing validate()                  -> GrantRejected{0}, table unchanged
    //   Grant, key free, index + floor <= kMaxToken -> Granted{index + floor}
    //   Grant, key free, index + floor > kMaxToken  -> GrantRejected{0}
    //   Grant, key free, bytes() + lock_bytes(grant) > max_bytes()
    //                                             -> TableFull{bytes()}, table unchanged
    //   Grant, held by the same non-empty owner   -> Granted{existing token}; the lock's
    //                                                lease_ms becomes the new one
    //   Grant, held otherwise                     -> GrantRejected{holder token}
    //   Release / Expire with the holder's token  -> Released / Expired{true}
    //   Release / Expire otherwise                -> NotFound / Expired{false}
    //   SetTokenFloor{f}                          -> FloorSet{max(floor, f)}; f > kMaxToken
    //                                                is ignored
    // A held key's token is never 0, so GrantRejected{0} always means "invalid".
    Result apply(std::uint64_t index, const Command& cmd);

    // A committed entry that is not a command (the leader's no-op) or that
    // failed to decode still advances applied_index(); returns Noop.
    Result apply_noop(std::uint64_t index);

    const Lock* find(std::string_view key) const;
    std::vector<Lock> list() const;  // sorted by key
    std::size_t size() const { return locks_.size(); }
    // The locks' share of the snapshot: the sum of lock_bytes() over the locks.
    std::uint64_t bytes() const { return bytes_; }
    std::uint64_t max_bytes() const { return max_bytes_; }
    std::uint64_t applied_index() const { return applied_index_; }
    Token token_floor() const { return token_floor_; }
    Token last_token() const { return last_token_; }  // largest token ever granted (0: none)

    // Snapshot encoding: [version u8 = 1][applied u64][floor u64][last_token u64]
    // [count u32] then per lock key, token, lease_ms, owner. restore() checks
    // every bound and fails with DecodeError on anything malformed.
    std::string snapshot() const;
    // A restored table over `max_bytes` keeps every lock; it only refuses
    // new ones until it is back under the limit.
    static std::variant<LockTable, DecodeError> restore(std::string_view bytes,
                                                        std::uint64_t max_bytes = kMaxTableBytes);

    // Checks the table's invariants (every lock valid, tokens unique and in
    // 1..last_token, last_token <= applied_index + token_floor, ...). Returns
    // an empty string when they hold, else the first one broken. restore()
    // uses it; tests and the simulation call it after every step.
    std::string check_invariants() const;

    bool operator==(const LockTable&) const = default;

  private:
    void require_next_index(std::uint64_t index) const;
    Result apply_one(std::uint64_t index, const Grant& grant);
    Result apply_one(std::uint64_t index, const Release& release);
    Result apply_one(std::uint64_t index, const Expire& expire);
    Result apply_one(std::uint64_t index, const SetTokenFloor& set);
    bool remove_if_held(std::string_view key, Token token);
    std::string check_lock(std::string_view key, const Lock& lock) const;

    std::map<std::string, Lock, std::less<>> locks_;
    std::uint64_t applied_index_ = 0;
    std::uint64_t bytes_ = 0;  // bytes(): kept with every insert and erase
    std::uint64_t max_bytes_ = kMaxTableBytes;
    Token token_floor_ = 0;
    Token last_token_ = 0;
};

}  // namespace pgfence::lock
