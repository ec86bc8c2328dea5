// Publishing a lock's generation at the resources it guards before any work
// under the lock starts (docs/guarantees.md, "Publishing the generation
// first"): fence_advance(resource, token, proof) for every resource, in one
// transaction that commits only when each of them took the token. From that
// commit on, pg_fence refuses every older token at those resources
// (fence_admit raises 55F01, fence_advance answers false), whether or not the
// new holder has written yet. A row's fence column is another fence: it is
// not moved by publishing a resource of the same name.
//
// fence_advance takes the resource's row lock, so a publish waits for an
// open transaction that fence_admit admitted there under an older token (a
// paused older holder), within the connection's lock_timeout and
// statement_timeout; with pg_fence's preemption on, that transaction is
// ended instead.
//
//   outcome     | what the database holds afterwards     | exit code (client/exit_codes.h)
//   ------------+----------------------------------------+--------------------------------
//   kPublished  | every resource's fence = token         | kExitOk
//   kStale      | unchanged: a resource's fence is above | kExitStale (10)
//               | the token (a newer holder published)   |
//   kError      | unchanged (rolled back, or never       | kExitDatabase (11)
//               | connected): connection, SQL error, a   |
//               | refused proof (55F02), a timeout       |
//
// The resources are advanced in sorted order (two publishers of overlapping
// sets cannot deadlock) and each at most once. pg_fence's functions are
// called qualified by the extension's schema, looked up in pg_extension at
// each publish (kError "pg_fence is not installed in this database" when it
// is not): a schema before it in the connection's search_path is never
// consulted.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "pgconn/connection.h"

namespace pgfence::pgconn {

// At most this many resources per lock (fencectl's and fence-worker's --advance).
inline constexpr std::size_t kMaxAdvanceResources = 64;

struct AdvanceTarget {
    std::string resource;
    std::string proof;  // the grant's proof for a lock key of the same name; "" sends none (NULL)
};

// The targets for `resources` under a grant of `keys` with `token`: a
// resource named like one of the keys gets that key's proof (`proofs`, one
// per key, for a set; else `proof`, the single key's), any other none — a
// proof binds its lock key only (docs/sql.md, "Lock keys").
std::vector<AdvanceTarget> advance_targets(const std::vector<std::string>& resources,
                                           const std::vector<std::string>& keys,
                                           const std::vector<std::string>& proofs, const std::string& proof);

// "" when `resource` is a name fence_advance accepts (1-512 bytes, no
// control characters), else why not, naming it.
std::string check_resource(const std::string& resource);

enum class PublishOutcome : std::uint8_t { kPublished, kStale, kError };

struct PublishResult {
    PublishOutcome outcome = PublishOutcome::kError;
    // "" when published; else names the resource(s), the token and the cause:
    // token 42 not published at resource "report:7": its fence is 57 already (a newer holder's)
    std::string message;
};

// Publishes over an open connection, in a transaction of its own (no
// transaction may be open on `conn`). The connection's own timeouts apply.
PublishResult publish_generation(const Connection& conn, std::vector<AdvanceTarget> targets, std::uint64_t token);

// Connects with `conninfo` ("" = the PG* environment), publishes within
// `budget` (connect_timeout, statement_timeout and lock_timeout; at least
// 1ms) and disconnects.
PublishResult publish_generation(const std::string& conninfo, const std::string& application_name,
                                 std::vector<AdvanceTarget> targets, std::uint64_t token,
                                 std::chrono::milliseconds budget);

// kExitOk, kExitStale or kExitDatabase (the table above).
int exit_code_of(PublishOutcome outcome);

}  // namespace pgfence::pgconn
