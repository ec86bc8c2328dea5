// The process's resident set size, for the memory benchmarks
// (bench_token_history, bench_lock_memory): what they measure is the growth
// of VmRSS around the structures they build.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

namespace pgfence::bench {

// Resident set size in KiB (/proc/self/status VmRSS); -1 when it cannot be read.
inline long rss_kib() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
    }
    return -1;
}

}  // namespace pgfence::bench
