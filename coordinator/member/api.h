// What a member's clients ask and what the member answers, as values: the
// requests of docs/http-api.md after parsing, and the answers before
// they are written as HTTP. Pure, std only. net/api_request.h parses request
// bodies into these types; the server's shell (server/member_http.cc) maps
// each Response to its status code and JSON body.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "lock/commands.h"
#include "lock/table.h"
#include "raft/types.h"

namespace pgfence::member {

// An election NAME is the lock on the key kElectionPrefix + NAME (the
// election routes, docs/http-api.md "Elections"): its holder is the leader,
// its token the leader's fencing epoch, its value what the leader publishes;
// permissions under --auth-file are the key's. The one place the mapping is
// written.
inline constexpr std::string_view kElectionPrefix = "election/";
constexpr std::size_t kMaxElectionNameBytes = lock::kMaxKeyBytes - kElectionPrefix.size();
inline std::string election_key(std::string_view name) {
    std::string key(kElectionPrefix);
    key += name;
    return key;
}

// POST /v1/acquire. wait_ms > 0: queue behind the holder (FIFO per key).
// `user`: who asks, as the shell authenticated it ("" without --auth-file);
// the owner is bound to it (lock::regrants()).
// `keys`: a set of 2..lock::kMaxGrantManyKeys keys acquired together
// (lock::GrantMany), `key` then empty; else empty and `key` is the one key.
// `value`: what the lock publishes once granted (POST /v1/election/campaign:
// the leader's value; lock::Grant::value).
struct Acquire {
    std::string key;
    std::uint64_t lease_ms = 0;
    std::uint64_t wait_ms = 0;
    std::string owner;
    std::string user{};
    std::vector<std::string> keys{};
    std::string value{};
};

// POST /v1/release and POST /v1/keepalive carry the same body.
// `keys`: a whole set (Acquire::keys), `key` then empty.
struct Release {
    std::string key;
    std::uint64_t token = 0;
    std::vector<std::string> keys{};
};
struct KeepAlive {
    std::string key;
    std::uint64_t token = 0;
    std::vector<std::string> keys{};
};
// POST /v1/election/proclaim: the lock held with `token` publishes `value`.
struct Proclaim {
    std::string key;
    std::uint64_t token = 0;
    std::string value;
};

// GET /v1/locks?key=K (one lock), or a page of the list:
// GET /v1/locks[?prefix=P][&after=A][&limit=N], the locks whose key starts
// with P, from the first key after A, at most N (1..kMaxListLimit, default
// kDefaultListLimit). The answer's `next` names the page's last key when more
// follow: the next page is asked for with after=next. `prefixes` is P, or,
// under an auth file, the parts of P the caller may read
// (auth::Policy::readable_within): sorted, none a prefix of another, so a
// page holds, and its `next` names, only keys the caller may read.
constexpr std::size_t kDefaultListLimit = 1000;
constexpr std::size_t kMaxListLimit = 10000;
struct ListLocks {
    std::optional<std::string> key;
    std::vector<std::string> prefixes{std::string()};
    std::string after;
    std::size_t limit = kDefaultListLimit;
};

// ---- membership (raft.h "Membership changes"), admin only ----------------------

// POST /v1/members/add {"id","peer_addr","client_addr"}: a new member, as a learner.
struct AddMember {
    std::uint64_t id = 0;
    std::string peer_addr;
    std::string client_addr;
};
// POST /v1/members/promote {"id"}: a caught-up learner becomes a voter.
struct PromoteMember {
    std::uint64_t id = 0;
};
// POST /v1/members/remove {"id"}: any member, the leader too (it hands its
// leadership over first, and the new leader removes it).
struct RemoveMember {
    std::uint64_t id = 0;
};
// GET /v1/members.
struct ListMembers {};

// GET /v1/snapshot (admin): a backup of the applied lock table and token
// sequence, taken by a leader whose leadership a quorum round confirmed after
// the request arrived.
struct TakeBackup {};

using Request = std::variant<Acquire, Release, KeepAlive, ListLocks, AddMember, PromoteMember, RemoveMember,
                             ListMembers, TakeBackup, Proclaim>;

// ---- answers -------------------------------------------------------------------

// 200 {"key","token","lease_ms","owner"}: lease_ms is the lease in force,
// the longer one when a retry asked for less. The shell reports whether it could
// write it (Core::response_written): a grant nobody received is a phantom
// (its lease ends at once and it is expired).
// A set's grant: `keys` in the order asked (`key` empty), one token.
struct Granted {
    std::string key;
    lock::Token token = 0;
    std::uint64_t lease_ms = 0;
    std::string owner;
    std::vector<std::string> keys{};
    std::string value{};  // what the lock publishes (a re-grant: the lock's own)
};

struct Released {};  // 200 {"released":true}

struct Proclaimed {  // 200: the lock held with `token` publishes `value` now
    std::string key;
    lock::Token token = 0;
    std::string value;
};

struct KeptAlive {  // 200 {"key","token","ttl_ms"} (a set: {"keys",...})
    std::string key;
    lock::Token token = 0;
    std::uint64_t ttl_ms = 0;
    std::vector<std::string> keys{};
};

// 400 {"error":"part_of_set","message"}: a release or keepalive of one key of
// a set (or of a list that is not the whole set), or a same-owner acquire
// of one of its keys: a set is kept alive, released and retried whole.
struct PartOfSet {
    std::string message;
};

struct LockView {
    lock::Lock lock;
    std::uint64_t ttl_ms = 0;  // of the leader's nominal lease deadline (0: ended)
    // The ID of the key that signed the proof last handed out for the lease
    // (member/lease.h: or "none", or "unknown" for a lease granted under a
    // former leader).
    std::string kid;
};
struct Locks {  // 200: one lock (the request named a key) or {"locks":[...]} (a page)
    bool one = false;
    std::vector<LockView> locks;
    std::optional<std::string> next;  // a page followed by more: its last key
};

// One member as the leader sees it. Addresses are empty for a member of the
// first configuration (its addresses are the --peers the members were given).
struct MemberView {
    std::uint64_t id = 0;
    bool voter = false;
    std::string peer_addr;
    std::string client_addr;
    bool caught_up = false;  // a learner that may be promoted now
    std::uint64_t match = 0;  // the last log index known replicated to it (the leader's own: its last index)
};
// 200 {"config_index", "members":[...]}: the configuration in force, after
// the change asked for was applied (a change's answer) or now (a list).
struct Members {
    std::uint64_t config_index = 0;
    std::vector<MemberView> members;
};
// 404 {"error":"unknown_member"}: promote or remove of an id not in the configuration.
struct UnknownMember {
    std::uint64_t id = 0;
};
// 409 {"error":"member_change_refused","message"}: an add of a member, a
// promote of a voter or of a learner not caught up, or a change while
// another is not committed (retry).
struct ChangeRefused {
    std::string message;
};

// 200: the backup (the shell writes it as a backup file, storage/backup.h):
// the applied table at snapshot.meta.index, with the configuration in force
// there.
struct Backup {
    std::shared_ptr<const raft::Snapshot> snapshot;
};

struct NotHeld {};  // 404 {"error":"not_held"}

struct Held {  // 409 {"error":"held","message":...}
    std::string message;
};

struct TooLarge {};  // 400: the command does not fit one log entry

// 507 {"error":"table_full","message"}: a Grant refused because the lock
// table is at lock::kMaxTableBytes (every member refuses it alike).
struct TableFull {
    std::string message;
};

// 307 to the leader's client address when the shell knows it, else 503
// {"error":"no_leader"}. `leader`: the leader this member knows (raft::kNoNode: none).
struct Unavailable {
    std::uint64_t leader = 0;
};

using Response = std::variant<Granted, Released, KeptAlive, Locks, NotHeld, Held, TooLarge, Unavailable, Members,
                              UnknownMember, ChangeRefused, Backup, TableFull, PartOfSet,
                              Proclaimed>;

}  // namespace pgfence::member
