// fencectl snapshot save FILE | status FILE: backups of the cluster's lock
// table and token sequence (storage/backup.h), taken from the leader.
#pragma once

#include <ostream>

#include "cli/args.h"
#include "client/client.h"

namespace pgfence::cli {

// A backup's timeout when --timeout is not given: a large table takes a while.
constexpr milliseconds kSnapshotTimeout{120'000};

// save: asks the leader for a backup (GET /v1/snapshot), checks it, and
// writes FILE atomically (FILE.tmp, fsync, rename): FILE is either the old
// file or the whole new backup. status: reads FILE, checks it and says what
// is in it. Exit codes from exit_codes.h.
int run_snapshot_command(const Args& args, client::Client& client, std::ostream& out, std::ostream& err);

}  // namespace pgfence::cli
