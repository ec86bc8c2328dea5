// The replicated lock commands and their results (docs/design.md
// "Replicated commands"), with their versioned binary encoding.
//
// Pure: std only. Decoding never trusts its input: hostile bytes yield a
// DecodeError, never a crash, an over-read or an unbounded allocation.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pgfence::codec {
struct ReadFailure;
}  // namespace pgfence::codec

namespace pgfence::lock {

using Token = std::uint64_t;

constexpr std::size_t kMinKeyBytes = 1;
constexpr std::size_t kMaxKeyBytes = 512;
constexpr std::size_t kMaxOwnerBytes = 256;
// A user name as the shell's authentication knows it (auth/policy.h: 1..128
// bytes); "" without authentication.
constexpr std::size_t kMaxUserBytes = 128;
// A value a lock publishes (an election's leader value): 0..4096 bytes, the
// owner's text rule; "" = none.
constexpr std::size_t kMaxValueBytes = 4096;
constexpr std::uint64_t kMaxLeaseMs = 24ull * 3600 * 1000;  // hard ceiling; servers configure less
// `ms` (a lease or its time left) in the 32 bits a Lock and a Lease keep
// it in: std::logic_error past kMaxLeaseMs, a broken invariant (validate()
// and restore() refuse such a value before it gets here).
inline std::uint32_t lease_ms_u32(std::uint64_t ms, const char* what) {
    static_assert(kMaxLeaseMs <= UINT32_MAX);
    if (ms > kMaxLeaseMs) {
        throw std::logic_error(std::string(what) + " " + std::to_string(ms) + " ms is over the largest lease, " +
                               std::to_string(kMaxLeaseMs) + " ms");
    }
    return static_cast<std::uint32_t>(ms);
}
// Tokens are stored by pg_fence in a PostgreSQL bigint (signed 64-bit), so no
// token, and no token floor, may exceed INT64_MAX. A Grant whose token would
// be larger is rejected (GrantRejected{0}); a larger floor is ignored.
constexpr std::uint64_t kMaxToken = 0x7fff'ffff'ffff'ffffull;

// The token a Grant applied at log `index` gives a lock it creates, under
// token floor `floor`: index + floor; 0 (no token) when that would exceed
// kMaxToken, or the floor does, and the Grant is refused. The one place the
// rule is written: the table assigns with it, and a leader predicts with it
// the tokens of Grants it has proposed but not applied yet (their proofs are
// signed meanwhile, server/proof_signer.h).
constexpr Token grant_token(std::uint64_t index, Token floor) {
    if (floor > kMaxToken || index > kMaxToken - floor) return 0;
    return index + floor;
}

// Acquire `key` for `lease_ms`. The token is not in the command: every member
// computes it on apply (grant_token() of the entry's index and the table's
// token floor), so all agree. `user` is who asked, as the leader authenticated it
// ("" when the cluster runs without authentication): an owner is bound to
// the user that made it (table.h, regrants()).
struct Grant {
    std::string key;
    std::uint64_t lease_ms = 0;
    std::string owner;  // optional; the same non-empty owner and user re-acquiring get their token back
    std::string user{};  // "" without authentication; else 1..kMaxUserBytes
    // What a lock it creates publishes (an election's leader value,
    // 0..kMaxValueBytes, validate_value()); a re-grant keeps the lock's own.
    std::string value{};
    bool operator==(const Grant&) const = default;
};

// Release `key` only if it is held with `token`.
struct Release {
    std::string key;
    Token token = 0;
    bool operator==(const Release&) const = default;
};

// Leader-initiated expiry: removes `key` only if it is held with `token`.
struct Expire {
    std::string key;
    Token token = 0;
    bool operator==(const Expire&) const = default;
};

// Leader-initiated expiry of many locks in one entry: each Expire in order,
// exactly as if each were an entry of its own (a lock removed only if held
// with its token). A leader expiring many leases at once (an expiry storm:
// leases granted together, or every lease restarted by a new leader) so
// commits one entry per batch instead of one per lock.
// Bounds: 1..kMaxExpireMany locks, encoded in at most kMaxExpireManyBytes
// (validate(); decode enforces the count). expire_many_bytes() says what one
// lock adds, so a leader can fill a batch up to the limit.
constexpr std::size_t kMaxExpireMany = 1024;
constexpr std::size_t kMaxExpireManyBytes = 32u << 10;  // half of raft's largest entry (64 KiB)
struct ExpireMany {
    std::vector<Expire> locks;
    bool operator==(const ExpireMany&) const = default;
};
// The encoded size of one lock of an ExpireMany (key with its u32 length, token).
constexpr std::size_t expire_many_bytes(std::size_t key_bytes) {
    return 4 + key_bytes + 8;
}

// Leader-initiated checkpoints of leases' remaining time, many locks in one
// entry: for each lock in order, if `key` is held with `token`, its
// remaining_ms becomes `remaining_ms` (0 clears the checkpoint: a new leader
// restarts the lease at its full lease_ms); otherwise nothing. A new leader
// restarts a lease from its lock's remaining_ms (docs/guarantees.md
// "Checkpoints" says why that never ends a lease before its holder's deadline).
// Bounds: 1..kMaxCheckpoints locks, encoded in at most kMaxCheckpointBytes
// (validate(); decode enforces the count), each remaining_ms <= kMaxLeaseMs.
// checkpoint_bytes() says what one lock adds.
constexpr std::size_t kMaxCheckpoints = 1024;
constexpr std::size_t kMaxCheckpointBytes = 32u << 10;  // as kMaxExpireManyBytes
struct LeaseCheckpoint {
    std::string key;
    Token token = 0;
    std::uint64_t remaining_ms = 0;  // 0: clear
    bool operator==(const LeaseCheckpoint&) const = default;
};
struct Checkpoint {
    std::vector<LeaseCheckpoint> locks;
    bool operator==(const Checkpoint&) const = default;
};
// The encoded size of one lock of a Checkpoint (key with its u32 length, token, remaining_ms).
constexpr std::size_t checkpoint_bytes(std::size_t key_bytes) {
    return 4 + key_bytes + 8 + 8;
}

// Bootstrap: raise the token floor so that tokens start above `floor`
// (a cluster rebuilt from nothing must not undercut fences in databases).
// The floor never decreases.
struct SetTokenFloor {
    Token floor = 0;
    bool operator==(const SetTokenFloor&) const = default;
};

// Acquire every one of `keys` all-or-nothing under one lease (a set,
// docs/design.md "Sets of keys"): each key becomes a lock with the one token
// grant_token(index, floor) of the entry, and the locks that share a token
// are the set. Keys are distinct and kept in the order asked (the order the
// answer lists them in; a rejection names the first held key in that order).
// Bounds: kMinGrantManyKeys..kMaxGrantManyKeys keys, and the command encoded
// in at most kMaxGrantManyBytes (validate(); decode enforces the count).
constexpr std::size_t kMinGrantManyKeys = 2;
constexpr std::size_t kMaxGrantManyKeys = 64;
constexpr std::size_t kMaxGrantManyBytes = 32u << 10;
struct GrantMany {
    std::vector<std::string> keys;
    std::uint64_t lease_ms = 0;
    std::string owner;
    std::string user{};
    bool operator==(const GrantMany&) const = default;
};

// Release a whole set: only if every one of `keys` is held with `token` and
// the set holds no other key (same bounds as GrantMany's keys).
struct ReleaseMany {
    std::vector<std::string> keys;
    Token token = 0;
    bool operator==(const ReleaseMany&) const = default;
};

// The encoded size of a GrantMany / ReleaseMany with these fields (version,
// tag, count, each key with its u32 length, and the rest): what
// kMaxGrantManyBytes bounds.
std::size_t encoded_bytes(const GrantMany& many);
std::size_t encoded_bytes(const ReleaseMany& many);

// Set the value `key`'s lock publishes, only if it is held with `token` (an
// election's leader changing its value without losing leadership).
struct Proclaim {
    std::string key;
    Token token = 0;
    std::string value;  // 0..kMaxValueBytes, validate_value()
    bool operator==(const Proclaim&) const = default;
};

using Command = std::variant<Grant, Release, Expire, SetTokenFloor, ExpireMany, GrantMany, ReleaseMany, Checkpoint, Proclaim>;

// ---- results ----
struct Granted {
    Token token = 0;
    // The Grant created the lock (token: grant_token() of its entry); false:
    // the same owner's idempotent re-grant of the lock it holds (its token;
    // the lock keeps the longer lease_ms of the two, table.h).
    bool created = false;
    // The lease in force after the Grant: the lock's lease_ms (a re-grant
    // keeps the longer of the lock's and the Grant's).
    std::uint64_t lease_ms = 0;
    bool operator==(const Granted&) const = default;
};
struct GrantRejected {
    Token holder_token = 0;  // the token currently holding the key
    std::string key{};       // a GrantMany's first held key (in the order asked); "" for a Grant
    bool operator==(const GrantRejected&) const = default;
};
struct Released {
    bool operator==(const Released&) const = default;
};
struct NotFound {
    bool operator==(const NotFound&) const = default;
};
struct Expired {
    bool existed = false;
    bool operator==(const Expired&) const = default;
};
struct ExpiredMany {
    std::uint32_t existed = 0;  // how many of the batch's locks were held with their token (now removed)
    bool operator==(const ExpiredMany&) const = default;
};
struct Checkpointed {
    std::uint32_t applied = 0;  // how many of the batch's locks were held with their token (and set)
    bool operator==(const Checkpointed&) const = default;
};
struct Noop {
    bool operator==(const Noop&) const = default;
};
// A Grant refused because the lock table is full (table.h kMaxTableBytes).
struct TableFull {
    std::uint64_t table_bytes = 0;  // the table's bytes() when it was refused
    bool operator==(const TableFull&) const = default;
};
struct FloorSet {
    Token floor = 0;  // the floor in force after apply
    bool operator==(const FloorSet&) const = default;
};
// A Proclaim applied: the lock held with its token publishes its value now.
struct Proclaimed {
    bool operator==(const Proclaimed&) const = default;
};

// A key of a set addressed alone: a Release of one key of a set, a
// ReleaseMany naming only part of it, or a same-owner Grant of one of its
// keys (a set is released, and retried, whole). Nothing changed.
struct PartOfSet {
    std::string key;        // the key named that is part of the set
    Token token = 0;        // the set's token
    std::uint32_t keys = 0;  // how many keys the set holds
    bool operator==(const PartOfSet&) const = default;
};

using Result = std::variant<Granted, GrantRejected, Released, NotFound, Expired, Noop, FloorSet, TableFull, ExpiredMany,
                            PartOfSet, Checkpointed, Proclaimed>;

struct DecodeError {
    std::string message;  // says what was wrong and where (byte offset)
};

// Checks a key against the limits (1..512 bytes of valid UTF-8, no control
// characters). Returns an empty string when valid, else why not.
std::string validate_key(std::string_view key);

// Checks an owner: 0..kMaxOwnerBytes bytes of valid UTF-8 without control
// characters (empty = no owner). Returns an empty string when valid, else why not.
std::string validate_owner(std::string_view owner);

// Checks a user: 0..kMaxUserBytes bytes, the owner's text rule.
std::string validate_user(std::string_view user);

// Checks a value: 0..kMaxValueBytes bytes, the owner's text rule.
std::string validate_value(std::string_view value);

// Checks every field of a command against the limits (key, owner, user, value, 1 <= lease_ms
// <= kMaxLeaseMs, floor <= kMaxToken, an ExpireMany's or a Checkpoint's count and size). Leaders call it before proposing; the
// state machine calls it on apply so a bad committed entry has a fixed outcome.
// Returns an empty string when valid, else why not.
std::string validate(const Command& cmd);
// The same for one kind, without making a Command of it (the table's apply).
std::string validate(const Grant& grant);
std::string validate(const ExpireMany& many);
std::string validate(const GrantMany& many);
std::string validate(const ReleaseMany& many);
std::string validate(const Checkpoint& checkpoint);
std::string validate(const Proclaim& proclaim);

// Encoding: [version u8][tag u8][fields...], integers little-endian fixed
// width, strings as u32 length + bytes. Bounded by the limits above.
// Version 1, tags: 1 Grant{key, lease_ms u64, owner}, 2 Release{key, token u64},
// 3 Expire{key, token u64}, 4 SetTokenFloor{floor u64},
// 5 ExpireMany{count u32 (1..kMaxExpireMany), then count x (key, token u64)},
// 6 GrantMany{count u32 (2..kMaxGrantManyKeys), count x key, lease_ms u64, owner, user},
// 7 ReleaseMany{count u32 (2..kMaxGrantManyKeys), count x key, token u64},
// 8 Checkpoint{count u32 (1..kMaxCheckpoints), then count x (key, token u64,
// remaining_ms u64)}, 9 Proclaim{key, token u64, value}. Tags 6..9 are
// written in version 1 with every field (a GrantMany's user even when empty):
// no reader older than them knows them.
// Version 2 is written for a Grant with a non-empty user and an empty value,
// and only for it: tag 1 Grant{key, lease_ms u64, owner, user}. Version 3 is
// written for a Grant with a non-empty value, and only for it: tag 1
// Grant{key, lease_ms u64, owner, user (may be empty), value}. Everything else
// is written in version 1, so a cluster without authentication and elections
// writes only what releases before version 2 read. A version 2 or 3 command
// that a lower version could carry (a version 2 Grant with an empty user, a
// version 3 Grant with an empty value, any other tag) is refused: one
// encoding per command.
// Version 4 stamps a command with the leader's wall clock when it proposed
// it: [4][wall_ms u64][the command's own encoding, from its version byte
// (1..3) on]. A leader writes it (encode(cmd, wall_ms)) only when every
// member can read it (member::Config::log_wall_time); decode_command() reads
// versions 1..4 (a stamp is dropped: it changes nothing the table does) and
// decode_entry() returns the stamp too. A stamped command inside a stamp is
// refused.
// encode() throws std::length_error for a key, owner, user or value longer than its limit
// (decode would reject it); every other command encodes, and
// decode_command(encode(c)) == c. decode_command() checks structure and length
// limits only; validate() checks the values.
std::string encode(const Command& cmd);
std::variant<Command, DecodeError> decode_command(std::string_view bytes);

// A command with the leader's wall clock (milliseconds since the Unix epoch)
// when the entry carries one (version 4).
struct Stamped {
    Command command;
    std::optional<std::uint64_t> wall_ms;
};
std::string encode(const Command& cmd, std::uint64_t wall_ms);  // version 4
std::variant<Stamped, DecodeError> decode_entry(std::string_view bytes);

// How the lock formats word a failed read (a codec::Wording; `context` is
// "command" or "snapshot"), e.g.
//   command: grant key length 513 exceeds the limit of 512 bytes (at byte offset 2)
std::string read_error(const codec::ReadFailure& failure, std::string_view context);

std::string describe(const Command& cmd);  // for logs: "grant key=... lease_ms=... owner=... user=..."
std::string describe(const Result& result);

}  // namespace pgfence::lock
