// The process's open-files limit (RLIMIT_NOFILE), raised at start so that
// --max-connections client connections, the peer connections and the
// member's own files fit.
#pragma once

#include <cstdint>
#include <string>

namespace pgfence::server {

// Descriptors a member needs besides its client connections: peers (in and
// out), the listening sockets, WAL segments, snapshot and meta files, the
// event loop's and the writer thread's own, with room to spare.
inline constexpr std::uint64_t kOpenFilesReserve = 256;

struct OpenFilesLimit {
    std::uint64_t soft = 0;  // the limit in force afterwards
    std::uint64_t hard = 0;
    bool raised = false;     // soft was raised
};

// Raises the soft limit to at least `needed` when the hard limit allows it
// (never lowers it; a soft limit at or above `needed` is left as it is).
// Returns "" and the limits in force in `out`, or why they could not be read
// or set. A hard limit below `needed` is not an error: `out.soft` then says
// what the process has, and the caller decides.
std::string raise_open_files_limit(std::uint64_t needed, OpenFilesLimit& out);

}  // namespace pgfence::server
