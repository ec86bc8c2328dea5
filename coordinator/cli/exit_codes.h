// fencectl's exit codes (documented in `fencectl --help` and docs/cli.md).
#pragma once

namespace pgfence::cli {

constexpr int kExitOk = 0;
constexpr int kExitOther = 1;        // anything else: protocol errors, spawn failures
constexpr int kExitUsage = 2;        // bad command line, or the server rejected the request as invalid (400)
constexpr int kExitHeld = 3;         // acquire: lock held by someone else, or --wait ran out
constexpr int kExitLostLease = 4;    // keepalive refused; run: lease lost (child terminated)
constexpr int kExitUnavailable = 5;  // no member answered (connection errors, no leader) in time
constexpr int kExitNotFound = 6;     // get: no such lock; release: not held with that token
constexpr int kExitNotAuthorized = 7;  // 401 (no or unknown credentials) or 403 (no permission on the key)
constexpr int kExitUnknownMember = 8;  // member promote/remove: no member of that ID in the configuration
constexpr int kExitRefused = 9;        // member add/promote/remove refused now (the message says why)

}  // namespace pgfence::cli
