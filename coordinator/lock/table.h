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
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "lock/commands.h"
#include "lock/text.h"

namespace pgfence::lock {

// The largest lock table, counted as its snapshot's lock records (the
// 24 fixed bytes of each lock plus its key and owner, and the user, value and
// remaining time it has; lock_bytes()). A snapshot also writes what the count
// leaves out: in version 2, 4 bytes (an empty user's length) for each lock
// without a user; in version 3, a flags byte per lock. At most 4 bytes per
// lock of at least 25, 32 MiB of the room left below. A Grant
// that would take the table past it is refused (TableFull) by every member
// alike, so the table's snapshot always fits the 256 MiB a member stores,
// sends and accepts (raft::kMaxSnapshotBytes; member/core.cc asserts it): 192 MiB leaves
// the snapshot's header, the configuration and the member's own framing
// room. At 20-byte keys without owners that is about 4.5 million locks.
// A constant, not a flag: members that disagreed on it would diverge.
constexpr std::uint64_t kMaxTableBytes = 192ull << 20;

// One held lock. 72 bytes (a tree node of 104: 112 with glibc's malloc
// header, where an 80-byte Lock would take 128; jemalloc, which
// fence-coordinator links, puts both in its 112-byte class): the key
// a std::string (inline up to 15 bytes), owner, user and value a Text (one
// pointer, nothing else while empty), lease_ms and remaining_ms a u32 each
// (both at most kMaxLeaseMs: validate() refuses a longer Grant, restore() a
// longer snapshot record; the constructor throws std::logic_error on a
// longer one, never narrowing it). Built in the order of its fields' meaning (key,
// token, lease_ms, owner, user, value, remaining_ms), laid out to leave no
// padding.
struct Lock {
    Lock() = default;
    Lock(std::string key_, Token token_, std::uint64_t lease_ms_, Text owner_ = {}, Text user_ = {},
         Text value_ = {}, std::uint64_t remaining_ms_ = 0)
        : key(std::move(key_)), token(token_), lease_ms(lease_ms_u32(lease_ms_, "Lock: lease_ms")),
          remaining_ms(lease_ms_u32(remaining_ms_, "Lock: remaining_ms")), owner(std::move(owner_)),
          user(std::move(user_)), value(std::move(value_)) {}

    std::string key;
    Token token = 0;
    std::uint32_t lease_ms = 0;
    // The lease's time left at its last checkpoint (1..lease_ms), from which a
    // new leader restarts the lease; 0 = no checkpoint: the full lease_ms.
    std::uint32_t remaining_ms = 0;
    Text owner{};
    Text user{};   // who was granted it (Grant::user); "" without authentication
    Text value{};  // what the holder publishes (0..kMaxValueBytes; "" = none)
    bool operator==(const Lock&) const = default;
    // Whether the lock has a field only snapshot version 3 carries.
    bool extended() const { return !value.empty() || remaining_ms != 0; }
};

// One lock's record in the snapshot (see snapshot()): key and owner with
// their u32 lengths, token and lease_ms, a non-empty user or value with its
// u32 length, a non-zero remaining_ms as a u64 (what is empty or 0 is counted
// as nothing, kMaxTableBytes).
constexpr std::uint64_t lock_bytes(std::size_t key_bytes, std::size_t owner_bytes, std::size_t user_bytes = 0,
                                   std::size_t value_bytes = 0, bool has_remaining = false) {
    return 4 + key_bytes + 8 + 8 + 4 + owner_bytes + (user_bytes == 0 ? 0 : 4 + user_bytes) +
           (value_bytes == 0 ? 0 : 4 + value_bytes) + (has_remaining ? 8 : 0);
}
constexpr std::uint64_t lock_bytes(std::string_view key, std::string_view owner, std::string_view user = {},
                                   std::string_view value = {}, bool has_remaining = false) {
    return lock_bytes(key.size(), owner.size(), user.size(), value.size(), has_remaining);
}
inline std::uint64_t lock_bytes(const Lock& lock) {
    return lock_bytes(lock.key, lock.owner, lock.user, lock.value, lock.remaining_ms != 0);
}

// Whether a Grant from `user` naming `owner` is an idempotent retry by the
// holder of `held`: the same non-empty owner, asked by the same user ("" ==
// "" without authentication). The one place the rule is written: the table
// re-grants by it, a leader queues a waiting acquire by it. Anyone else
// naming the owner is a contender like any other.
inline bool regrants(const Lock& held, std::string_view owner, std::string_view user) {
    return !owner.empty() && held.owner == owner && held.user == user;
}

class LockTable {
  public:
    // `max_bytes`: the size limit (TableFull). Every member of a cluster must
    // use the same: production code keeps kMaxTableBytes; tests lower it.
    explicit LockTable(std::uint64_t max_bytes = kMaxTableBytes) : max_bytes_(max_bytes) {}

    // Applies one committed command found at log `index` (> applied_index();
    // otherwise std::logic_error and the table is unchanged).
    // A new lock's token is t = grant_token(index, token_floor()) (commands.h).
    // Outcomes:
    //   Grant failing validate()                  -> GrantRejected{0}, table unchanged
    //   Grant, key free, t != 0                   -> Granted{t, created: true, the Grant's lease_ms}:
    //                                                the lock publishes the Grant's value
    //   Grant, key free, t == 0 (over kMaxToken)  -> GrantRejected{0}
    //   Grant, key free, bytes() + lock_bytes(grant) > max_bytes()
    //                                             -> TableFull{bytes()}, table unchanged
    //   Grant, held, regrants(holder, owner, user) -> Granted{existing token, created: false,
    //                                                lease_ms}: the lock's lease_ms becomes
    //                                                the longer of its own and the Grant's
    //                                                (a retry never shortens a lease), its
    //                                                remaining_ms becomes 0 (the lease
    //                                                restarts at full length) and its value
    //                                                stays (a Proclaim changes it)
    //   Grant, held otherwise (another owner, or  -> GrantRejected{holder token}, table unchanged
    //     the same owner asked by another user)
    //   Grant, held by a set (set_size() >= 2), regrants() -> PartOfSet{key, set token, keys}:
    //                                                a set is retried whole (GrantMany)
    //   GrantMany failing validate()              -> GrantRejected{0}, table unchanged
    //   GrantMany, every key free, t != 0         -> Granted{t, created: true, lease_ms}: every
    //                                                key a lock with token t (one set)
    //   GrantMany, every key free, t == 0         -> GrantRejected{0}
    //   GrantMany, every key free, the locks' lock_bytes() past max_bytes()
    //                                             -> TableFull{bytes()}, table unchanged
    //   GrantMany, every key held by one set of exactly these keys, regrants(its locks)
    //                                             -> Granted{set token, created: false, lease_ms}:
    //                                                every lock's lease_ms the longer of the two,
    //                                                its remaining_ms 0 (full length again)
    //   GrantMany, some key held otherwise        -> GrantRejected{holder token, key}: the first
    //                                                such key in the order asked; table unchanged
    //   Release / Expire with the holder's token  -> Released / Expired{true}
    //   Release with a set's token (set_size() >= 2)
    //                                             -> PartOfSet{key, token, keys}, table unchanged
    //   Release / Expire otherwise                -> NotFound / Expired{false}
    //   ReleaseMany failing validate()            -> NotFound, table unchanged
    //   ReleaseMany, every key held with the token, and the set holds no other key
    //                                             -> Released: all of them removed
    //   ReleaseMany, every key held with the token, the set holds more keys
    //                                             -> PartOfSet{first key, token, keys}, unchanged
    //   ReleaseMany otherwise (a key not held with the token) -> NotFound, table unchanged
    // Expire removes a key of a set alone (a leader expires a set's keys
    // together, but an ExpireMany batch may end inside a set); what is left
    // of the set is a set of fewer keys (one key: a plain lock).
    //   ExpireMany{locks}                         -> ExpiredMany{how many were held with
    //                                                their token}: each lock as Expire, in
    //                                                order; one failing validate() -> ExpiredMany{0},
    //                                                table unchanged
    //   Checkpoint{locks}                         -> Checkpointed{how many were set}: each lock
    //                                                in order, if held with its token and
    //                                                remaining_ms <= the lock's lease_ms, gets
    //                                                that remaining_ms (0 clears it); one
    //                                                that would take bytes() past max_bytes()
    //                                                (a first checkpoint adds 8 bytes) is left
    //                                                as it is; one failing validate() ->
    //                                                Checkpointed{0}, table unchanged
    //   Proclaim{key, token, value}, held with    -> Proclaimed: the lock publishes `value`
    //     that token
    //   Proclaim, the value longer and the table  -> TableFull{bytes()}, table unchanged
    //     past max_bytes() with it
    //   Proclaim otherwise (another token, key    -> NotFound, table unchanged
    //     free, or failing validate())
    //   SetTokenFloor{f}                          -> FloorSet{max(floor, f)}; f > kMaxToken
    //                                                is ignored
    // A held key's token is never 0, so GrantRejected{0} always means "invalid".
    Result apply(std::uint64_t index, const Command& cmd);

    // A committed entry that is not a command (the leader's no-op) or that
    // failed to decode still advances applied_index(); returns Noop.
    Result apply_noop(std::uint64_t index);

    const Lock* find(std::string_view key) const;
    std::vector<Lock> list() const;  // sorted by key
    // Calls f(const Lock&) for every lock, in key order, without a copy of the table.
    template <typename F>
    void for_each(F&& f) const {
        for (const Lock& lock : locks_) f(lock);
    }
    // One page of the locks whose key starts with one of `prefixes`
    // (sorted, none a prefix of another: disjoint ranges in key order; {""}
    // is every key), sorted by key, from the first key greater than `after`
    // ("": from the start): at most `limit` (>= 1, else
    // std::invalid_argument) of them; `more` says whether further such keys
    // follow the page's last. Costs O(prefixes x log n + limit).
    std::vector<Lock> list_page(const std::vector<std::string>& prefixes, std::string_view after, std::size_t limit,
                                bool& more) const;
    std::size_t size() const { return locks_.size(); }
    // How many locks hold `token` when they are a set (>= 2), else 0 (one
    // lock, or none). A set is the locks that share a token (GrantMany).
    std::uint32_t set_size(Token token) const;
    // The keys of the set with `token`, in key order (empty: not a set).
    // O(locks): for tests and checks, not the hot path.
    std::vector<std::string> set_keys(Token token) const;
    // The number of sets held now.
    std::size_t sets() const { return sets_.size(); }
    // The locks' share of the snapshot: the sum of lock_bytes() over the locks.
    std::uint64_t bytes() const { return bytes_; }
    // How many locks have a non-empty user (the snapshot's version depends on it).
    std::size_t locks_with_user() const { return with_user_; }
    // How many locks are extended() (a value or a checkpoint): likewise.
    std::size_t locks_extended() const { return extended_; }
    std::uint64_t max_bytes() const { return max_bytes_; }
    std::uint64_t applied_index() const { return applied_index_; }
    Token token_floor() const { return token_floor_; }
    Token last_token() const { return last_token_; }  // largest token ever granted (0: none)

    // Snapshot encoding (snapshot.cc): [version u8][applied u64][floor u64][last_token u64]
    // [count u32] then per lock key, token, lease_ms, owner, in version 2
    // user, in version 3 a flags byte and the user, value and remaining_ms
    // it says are there. The lowest version that holds the table is written:
    // 3 when some lock is extended(), else 2 when some lock has a user, else
    // 1. restore() reads all three, checks every bound and fails with
    // DecodeError on anything malformed or written in a higher version than
    // needed.
    std::string snapshot() const;

    // The same snapshot, built in slices while apply() goes on:
    //   begin_snapshot()        fixes the table as it is now (applied_index(),
    //                           floor, last token, every lock);
    //   continue_snapshot(n)    encodes up to n more locks, in key order; true
    //                           once every lock of the fixed table is in;
    //   take_snapshot()         then hands out the bytes: exactly what
    //                           snapshot() returned at begin_snapshot().
    // Meanwhile a lock that apply() changes (grants, re-grants, removes) and
    // the snapshot has not reached yet has its state at the beginning kept
    // aside, once per key, and encoded instead of its current one. So a
    // snapshot of a million locks costs its caller slices of n locks between
    // other work, not one stall; what it holds besides its bytes is the
    // locks changed ahead of its cursor. One at a time: begin_snapshot()
    // while one is being built, or continue/take without one, throws
    // std::logic_error. A table restored or assigned over drops the build.
    void begin_snapshot();
    bool snapshotting() const { return build_.has_value(); }
    bool continue_snapshot(std::size_t max_locks);
    std::string take_snapshot();
    // A restored table over `max_bytes` keeps every lock; it only refuses
    // new ones until it is back under the limit.
    static std::variant<LockTable, DecodeError> restore(std::string_view bytes,
                                                        std::uint64_t max_bytes = kMaxTableBytes);

    // Checks the table's invariants (every lock valid, tokens in
    // 1..last_token, a token shared only by the locks of one set, which
    // agree on lease_ms, owner and user; sets() counted right, last_token <= applied_index + token_floor, ...). Returns
    // an empty string when they hold, else the first one broken. restore()
    // uses it; tests and the simulation call it after every step.
    std::string check_invariants() const;

    // The replicated state only (a snapshot being built is not part of it).
    bool operator==(const LockTable& other) const;

  private:
    void require_next_index(std::uint64_t index) const;
    Result apply_one(std::uint64_t index, const Grant& grant);
    Result apply_one(std::uint64_t index, const Release& release);
    Result apply_one(std::uint64_t index, const Expire& expire);
    Result apply_one(std::uint64_t index, const SetTokenFloor& set);
    Result apply_one(std::uint64_t index, const ExpireMany& many);
    Result apply_one(std::uint64_t index, const GrantMany& many);
    Result apply_one(std::uint64_t index, const ReleaseMany& many);
    // A GrantMany on keys some of which are held: the same owner's retry of
    // exactly that set (Granted), else GrantRejected naming the first held key.
    Result regrant_many(const GrantMany& many);
    // A re-grant of held `key`: its lease_ms becomes `lease_ms`, its checkpoint goes.
    void restart(std::string_view key, std::uint64_t lease_ms);
    Result apply_one(std::uint64_t index, const Checkpoint& checkpoint);
    bool set_remaining(const LeaseCheckpoint& checkpoint);
    Result apply_one(std::uint64_t index, const Proclaim& proclaim);
    bool remove_if_held(std::string_view key, Token token);
    // Counts the sets from scratch (restore()).
    void count_sets();
    void account(const Lock& lock, bool add);  // keeps bytes_, with_user_ and extended_
    // Before `key`'s lock changes: keeps its state for the snapshot being
    // built, if any, when the build has not reached the key yet.
    void before_change(std::string_view key);
    std::string check_lock(const Lock& lock) const;

    // A snapshot being built (begin_snapshot): its bytes so far, the last
    // key encoded, and the state at the beginning of the keys changed since
    // that lie ahead of it (nullopt: the key was not held then).
    struct Build {
        std::uint8_t version = 1;  // of the snapshot's format, fixed at its beginning
        std::string bytes;
        std::uint32_t count = 0;    // locks at the beginning
        std::uint32_t encoded = 0;  // of them, encoded so far
        bool started = false;       // `cursor` is set
        std::string cursor;         // the last key encoded
        std::map<std::string, std::optional<Lock>, std::less<>> before;
    };

    // By key: the set's elements are the locks themselves, so a key is
    // stored once (a map would hold it twice, as map key and as Lock::key).
    struct ByKey {
        using is_transparent = void;
        bool operator()(const Lock& a, const Lock& b) const { return a.key < b.key; }
        bool operator()(const Lock& a, std::string_view b) const { return a.key < b; }
        bool operator()(std::string_view a, const Lock& b) const { return a < b.key; }
    };
    std::set<Lock, ByKey> locks_;
    std::optional<Build> build_;
    std::uint64_t applied_index_ = 0;
    std::uint64_t bytes_ = 0;  // bytes(): kept with every insert and erase
    std::size_t with_user_ = 0;  // locks_with_user(): likewise
    std::size_t extended_ = 0;   // locks_extended(): likewise
    // The tokens held by two locks or more (the sets), with how many: kept
    // with every insert and erase, rebuilt by restore() (a derived index:
    // the snapshot holds only the locks).
    std::map<Token, std::uint32_t> sets_;
    std::uint64_t max_bytes_ = kMaxTableBytes;
    Token token_floor_ = 0;
    Token last_token_ = 0;
};

}  // namespace pgfence::lock
