// `fencectl run KEY -- CMD ARGS...`: hold a lock while a command runs.
#pragma once

#include <ostream>

#include "cli/args.h"
#include "client/client.h"

namespace pgfence::cli {

// Acquires, runs the child under keepalives, terminates it if the lease is
// lost, releases. Returns the child's exit status or a code from exit_codes.h.
int run_with_lock(const Args& args, client::Client& client, std::ostream& err);

}  // namespace pgfence::cli
