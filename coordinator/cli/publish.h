// fencectl's --advance: publishing the lock's token at resources in
// PostgreSQL before the work under the lock starts (run: before CMD starts;
// acquire: before the token is printed), so that every older token is
// refused there from then on. What the database holds afterwards, and the
// exit codes: pgconn/advance.h.
#pragma once

#include <string>

#include "cli/args.h"
#include "client/client.h"

namespace pgfence::cli {

struct Publication {
    int code = 0;         // kExitOk, kExitStale, kExitDatabase, or kExitLostLease (no time was left)
    std::string message;  // "" when published (or nothing to publish); else names resources, token, cause
};

// Publishes `lease`'s token at every --advance resource over --dsn, done by
// `publish_by` (connect, statements and lock waits are bounded by it). Each
// resource named like a key of the lease is sent that key's proof. Nothing
// to do without --advance.
Publication publish_first(const Args& args, const client::Lease& lease, client::Clock::time_point publish_by);

}  // namespace pgfence::cli
