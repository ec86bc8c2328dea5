// The exit codes of every pgfence tool: fencectl, fence-worker and the
// Python client's example worker use the same numbers for the same outcome
// (documented in docs/cli.md, "Exit codes", and each tool's --help).
// A tool uses the codes its outcomes can have; a number never means two things.
#pragma once

namespace pgfence {

constexpr int kExitOk = 0;
constexpr int kExitOther = 1;           // anything else: an unexpected answer, a spawn failure, a bug
constexpr int kExitUsage = 2;           // bad command line, or the server rejected the request as invalid (400)
constexpr int kExitHeld = 3;            // the lock is held by someone else, or the wait ran out
constexpr int kExitLostLease = 4;       // the lease was lost (keepalive refused, or none succeeded in time)
constexpr int kExitUnavailable = 5;     // no member answered (connection errors, no leader) in time
constexpr int kExitNotFound = 6;        // get: no such lock; release: not held with that token
constexpr int kExitNotAuthorized = 7;   // 401 (no or unknown credentials) or 403 (no permission on the key)
constexpr int kExitUnknownMember = 8;   // member promote/remove: no member of that ID in the configuration
constexpr int kExitRefused = 9;         // member add/promote/remove refused now (the message says why)
constexpr int kExitStale = 10;          // PostgreSQL refused the token (55F01): a newer holder wrote
constexpr int kExitDatabase = 11;       // PostgreSQL failed for another reason (connection, schema, timeout)
constexpr int kExitNotPgfence = 12;     // what answered on an endpoint is not a pgfence member
constexpr int kExitCompacted = 13;      // watch: the revision asked for is older than the history the members keep;
                                        // explain: the token is older than the token history the members keep
constexpr int kExitNoSuchToken = 14;    // explain: no member issued that token (404 unknown_token)

}  // namespace pgfence
