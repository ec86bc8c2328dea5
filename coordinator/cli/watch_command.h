// fencectl watch KEY | --prefix P [--rev N] [--progress]: lock events as JSON
// lines on stdout, one per event as it arrives, until SIGINT or SIGTERM (exit
// 0). The watch resumes on another member when its member dies, with no gap
// and no duplicate (client/watch_stream.h).
#pragma once

#include <ostream>

#include "cli/args.h"
#include "client/client.h"

namespace pgfence::cli {

// Runs until interrupted (the signal handler exits 0 between two lines, never
// in the middle of one), or an error: 13 compacted, 5 no member served the
// stream within --timeout, 7 not authorized, 2 bad request.
int run_watch_command(const Args& args, client::Client& client, std::ostream& out, std::ostream& err);

}  // namespace pgfence::cli
