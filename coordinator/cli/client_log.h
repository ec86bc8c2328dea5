// Reading a holder's own log for `fencectl explain --client-log FILE`:
// fence-worker's CSV event log (worker/event_log.h, the format is written
// down there), keeping only the lines of the tokens asked for.
//
// Bounded: at most kMaxClientLogBytes of the file are read (a longer file is
// read to that point and the result says so) and at most kMaxClientLogLines
// matching lines are kept; a line longer than kMaxClientLogLineBytes is
// skipped. Lines that do not parse are counted, not fatal (a worker killed
// mid-line leaves a torn last line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cli/explain_cause.h"

namespace pgfence::cli::explain {

constexpr std::size_t kMaxClientLogBytes = std::size_t{256} << 20;  // 256 MiB
constexpr std::size_t kMaxClientLogLines = 100'000;
constexpr std::size_t kMaxClientLogLineBytes = 4096;

struct ClientLog {
    std::vector<ClientEvent> events;  // lines of the tokens asked for, in file order
    std::size_t bad_lines = 0;        // lines that did not parse
    bool truncated = false;           // the byte or line limit stopped the read
    std::string error;                // the file could not be opened: names it and why
};

// One CSV line (worker,event,key,token,send_ns,ack_ns,path,outcome,value),
// quoted fields allowed; false when it does not parse.
bool parse_client_log_line(const std::string& line, ClientEvent& out);

// The lines of `path` whose token is in `tokens`.
ClientLog read_client_log(const std::string& path, const std::set<std::uint64_t>& tokens);

}  // namespace pgfence::cli::explain
