// fencectl's output: aligned text tables and JSON.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "client/client.h"

namespace pgfence::cli {

// Prints rows under a header, columns padded to the widest cell.
void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

// Epoch milliseconds as ISO 8601 UTC, "2026-12-04T21:33:13.042Z" (without
// `millis`: "2026-12-04T21:33:13Z"): what --since and --until take back.
std::string utc_text(std::int64_t unix_ms, bool millis = true);

std::string lock_json(const client::LockInfo& lock);
std::string lease_json(const client::Lease& lease);
std::vector<std::string> lock_row(const client::LockInfo& lock);
const std::vector<std::string>& lock_header();

// A member that answered (its own JSON) or not ({"endpoint","role","error"}, role
// "unreachable" or "not pgfence").
std::string unreachable_json(const std::string& endpoint, const std::string& role, const std::string& error);

}  // namespace pgfence::cli
