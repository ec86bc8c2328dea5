// fencectl's commands (all but `run`, see run_command.h), each returning an
// exit code from exit_codes.h.
#pragma once

#include <ostream>

#include "cli/args.h"
#include "client/client.h"

namespace pgfence::cli {

// Client options from the parsed command line (endpoints: --endpoints,
// FENCE_ENDPOINTS, default). Returns false with `error` set on a bad list.
bool client_options(const Args& args, client::Options& options, std::string& error);

// Exit code for an error from `command` (keepalive's not_held means a lost lease).
int exit_code_of(const client::Error& error, const std::string& command);

// The error's message; a 400 about lease_ms or wait_ms says it in the terms
// of the flag the user typed (--lease 1h refused by the cluster (...)).
std::string in_flag_terms(const client::Error& error, const Args& args);

// Runs acquire, release, keepalive, get, list, status, member, snapshot or watch.
int run_simple_command(const Args& args, client::Client& client, std::ostream& out, std::ostream& err);

}  // namespace pgfence::cli
