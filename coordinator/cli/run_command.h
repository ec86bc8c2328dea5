// `fencectl run KEY -- CMD ARGS...`: hold a lock while a command runs;
// `fencectl elect NAME -- CMD ARGS...`: run a command while leader.
#pragma once

#include <ostream>

#include "cli/args.h"
#include "client/client.h"

namespace pgfence::cli {

// Acquires, runs the child under keepalives, terminates it if the lease is
// lost, releases. Returns the child's exit status or a code from exit_codes.h.
int run_with_lock(const Args& args, client::Client& client, std::ostream& err);

// `fencectl elect NAME --value V -- CMD ARGS...`: campaigns (without --wait,
// until leader), then runs CMD as run does, with FENCE_ELECTION, FENCE_KEY
// (the election's key), FENCE_TOKEN (the leader's fencing epoch) and
// FENCE_VALUE; resigns when CMD exits.
int run_elected(const Args& args, client::Client& client, std::ostream& err);

}  // namespace pgfence::cli
