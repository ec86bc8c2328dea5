// Each token's life as a member applied it, kept for GET /v1/tokens/{token}
// and GET /v1/keys/{key}/history (docs/http-api.md). Pure, std only.
//
// Derived from the log (the same on every member that applied the entries):
//   | entry (as core_apply.cc applies it)  | record                                        |
//   | Grant, GrantMany: Granted, created   | a new token: keys, owner, lease_ms, granted   |
//   |                                      | index and wall_ms; the previous token of each |
//   |                                      | of its keys gets next_token (if it has none)  |
//   |                                      | and, if still held here, ends `superseded`    |
//   | Grant: an idempotent re-grant        | lease_ms becomes the lease in force           |
//   | Release, ReleaseMany: Released       | its keys removed                              |
//   | Expire, ExpireMany: a lock existed   | that key removed                              |
// A token ends (`released` or `expired`) at the entry that removes its last
// key: a set's keys may expire in different ExpireMany entries.
// wall_ms is the leader's wall clock carried in the entry (lock/commands.h,
// version 4); none for an entry written without it.
//
// Observed only by this member while it led (not in the log, so members
// differ; the answer labels them): keepalives answered ok and refused
// (count, last wall time, last reason), and that a grant was a phantom
// (core.h "Phantom grants"): its Expire then ends it `phantom` here and
// `expired` on the other members.
//
// Restore (restored()): the member installed a snapshot at index I and did not
// apply the entries it covers. A token kept here as held that the restored
// table does not hold with it ends `restore` (index unknown); one it holds
// takes its lease in force (a re-grant may be among the entries skipped); a
// token with a key gone and no next token keeps none (it may have been
// granted in the entries skipped: next_unknown); each lock the table holds that is not kept
// here gets a record without granted index or wall time. Every token issued
// at an entry <= I is at most I + floor, so tokens below I + floor + 1 not
// kept here answer "compacted".
//
// Bounds: at most max_tokens tokens and max_bytes bytes: token_bytes() each,
// key_index_bytes() for each key while some kept token has it, and
// keepalive_bytes() for each token with keepalives observed; adding beyond
// either drops the oldest tokens (lowest first: tokens grow with the log).
// oldest_token(): every token issued from it on is kept here or was never
// issued; lookup() of a token below it that is not kept
// answers compacted.
//
// Threading: not thread-safe; the member core's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lock/commands.h"
#include "lock/table.h"
#include "raft/types.h"

namespace pgfence::member {

constexpr std::size_t kDefaultTokenHistoryTokens = 100000;
constexpr std::uint64_t kDefaultTokenHistoryBytes = 64u << 20;
// The most tokens one key's history answers at once, and how many without a limit.
constexpr std::size_t kMaxKeyHistoryTokens = 1000;
constexpr std::size_t kDefaultKeyHistoryTokens = 100;

enum class TokenEnd : std::uint8_t { kHeld, kReleased, kExpired, kPhantom, kRestore, kSuperseded };

// "held", "released", "expired", "phantom", "restore", "superseded".
const char* to_string(TokenEnd end);

// What this member saw of a token's keepalives while it led.
struct TokenKeepalives {
    std::uint64_t ok = 0;
    std::optional<std::uint64_t> last_ok_wall_ms;
    std::uint64_t refused = 0;
    std::optional<std::uint64_t> last_refused_wall_ms;
    std::string last_refused_reason;  // "" when none refused
    bool operator==(const TokenKeepalives&) const = default;
};

struct TokenRecord {
    lock::Token token = 0;
    std::vector<std::string> keys;  // one, or a set's in the order granted
    std::string owner;
    std::uint64_t lease_ms = 0;
    raft::Index granted_index = 0;  // 0: not known (a lock a restored snapshot held)
    std::optional<std::uint64_t> granted_wall_ms;
    std::uint32_t keys_held = 0;  // of `keys`, how many are still held (0 once ended)
    TokenEnd end = TokenEnd::kHeld;
    raft::Index ended_index = 0;  // 0: held, or not known (restore, superseded)
    std::optional<std::uint64_t> ended_wall_ms;
    lock::Token next_token = 0;  // the first token granted after it on one of its keys; 0: none yet, or unknown
    // Some of its keys (all, once ended) were gone at a restore that skipped
    // entries: its next token may be among them, so none is recorded (next_token stays 0).
    bool next_unknown = false;
    bool phantom = false;        // observed as leader (above)
    const std::string& key() const { return keys.front(); }
    // What the log decides (every field above but `phantom`), for comparing members.
    bool same_derived(const TokenRecord& o) const;
};

// What the history's byte bound charges (each what it allocates: nodes,
// strings beyond their inline buffer, vectors, as glibc's malloc takes
// them): a record (its node in the token map, its owner and keys, a slot in
// each key's token list), a key while it is indexed (its node in the key
// index and a bucket), and a token's keepalive observations (their node and
// reason).
std::uint64_t token_bytes(const TokenRecord& r);
std::uint64_t key_index_bytes(const std::string& key);
std::uint64_t keepalive_bytes(const TokenKeepalives& k);

class TokenHistory {
public:
    // max_tokens >= 1, max_bytes >= 1 (else std::invalid_argument).
    TokenHistory(std::size_t max_tokens, std::uint64_t max_bytes);

    // ---- from the log ----
    // A Grant or GrantMany created `token` at `index` (above every index
    // given before: else std::logic_error).
    void granted(raft::Index index, std::optional<std::uint64_t> wall_ms, lock::Token token,
                 std::vector<std::string> keys, std::string owner, std::uint64_t lease_ms);
    // An idempotent re-grant of `token`: the lease in force (and, answered
    // to a retry, no longer a phantom).
    void regranted(lock::Token token, std::uint64_t lease_ms);
    // The entry at `index` removed `keys` of `token`'s keys: released
    // (kReleased) or expired (kExpired). The token ends so once none is left;
    // an ended token keeps its end.
    void ended(lock::Token token, TokenEnd how, raft::Index index, std::optional<std::uint64_t> wall_ms,
               std::uint32_t keys = 1);
    // The member installed a snapshot at `index` whose table is `table` (above).
    void restored(raft::Index index, const lock::LockTable& table);

    // ---- observed as leader ----
    void keepalive_ok(lock::Token token, std::uint64_t wall_ms);
    void keepalive_refused(lock::Token token, std::uint64_t wall_ms, std::string_view reason);
    void phantom(lock::Token token);
    // This member leads from the entry after `applied` on (led_until() ends
    // it), so it sees keepalives of the tokens held meanwhile. At most
    // kMaxLeaderships are kept (the oldest dropped).
    void leading_from(raft::Index applied);
    void led_until(raft::Index applied);
    static constexpr std::size_t kMaxLeaderships = 1024;

    // ---- reads ----
    struct Lookup {
        const TokenRecord* record = nullptr;  // kept here
        bool compacted = false;               // not kept: below oldest_token()
    };
    Lookup lookup(lock::Token token) const;
    // This member's keepalive observations of `token` (nullptr: none).
    const TokenKeepalives* keepalives(lock::Token token) const;
    // This member led while `r` was held (for at least part of it, as far
    // as its kept leaderships tell).
    bool led_while_held(const TokenRecord& r) const;
    // The tokens of `key` kept, newest first, at most `limit`.
    std::vector<const TokenRecord*> of_key(std::string_view key, std::size_t limit) const;
    // Calls f(const TokenRecord&) for every token kept, oldest first.
    template <typename F>
    void for_each(F&& f) const {
        for (const auto& [token, r] : records_) f(r);
    }
    lock::Token oldest_token() const { return oldest_token_; }
    std::size_t size() const { return records_.size(); }
    std::uint64_t bytes() const { return bytes_; }
    std::uint64_t dropped() const { return dropped_; }

private:
    struct KeyTokens {
        std::vector<lock::Token> tokens;  // increasing; [begin, end) kept
        std::size_t begin = 0;
    };
    TokenRecord* find(lock::Token token);
    void insert(TokenRecord r);
    void index_key(const std::string& key, lock::Token token);
    void drop_oldest();
    void trim();  // drop the oldest while beyond a bound
    TokenKeepalives& keepalives_of(lock::Token token);
    void set_reason(TokenKeepalives& k, std::string_view reason);

    std::size_t max_tokens_;
    std::uint64_t max_bytes_;
    std::map<lock::Token, TokenRecord> records_;
    std::unordered_map<std::string, KeyTokens> by_key_;
    std::unordered_map<lock::Token, TokenKeepalives> keepalives_;
    struct Leadership {
        raft::Index from = 0;  // the first entry applied while leading
        raft::Index until = 0;  // the last applied while leading; 0: leading now
    };
    std::vector<Leadership> leaderships_;  // oldest first, at most kMaxLeaderships
    std::uint64_t bytes_ = 0;
    std::uint64_t dropped_ = 0;
    lock::Token oldest_token_ = 0;
    raft::Index last_index_ = 0;
};

}  // namespace pgfence::member
