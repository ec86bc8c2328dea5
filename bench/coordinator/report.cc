#include "report.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

namespace pgfence::bench {

double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    auto s = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
    };
    return s(u.ru_utime) + s(u.ru_stime);
}

std::uint64_t raise_open_files(std::uint64_t want) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
    if (lim.rlim_cur < want) {
        lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || want < lim.rlim_max ? want : lim.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &lim);
        ::getrlimit(RLIMIT_NOFILE, &lim);
    }
    return lim.rlim_cur;
}

std::string fit_connections(int connections) {
    // Two per connection (a pgfence connection that follows a 307 holds its old
    // socket and its new one for a moment), and 1024 for stdio, epoll, gRPC's or
    // OpenSSL's own: the count bench/coordinator/run.sh raises the limit to.
    constexpr std::uint64_t kReserve = 1024;
    const std::uint64_t files = 2 * static_cast<std::uint64_t>(connections) + kReserve;
    const std::uint64_t limit = raise_open_files(files);
    if (limit >= files) return {};
    return "--connections " + std::to_string(connections) + " needs " + std::to_string(files) +
           " open files; the limit is " + std::to_string(limit) + " (raise the hard limit: ulimit -Hn)";
}

void set_percentiles(std::vector<std::uint32_t>& latencies_us, LoadResult& r) {
    std::sort(latencies_us.begin(), latencies_us.end());
    r.p50_us = percentile_us(latencies_us, 0.50);
    r.p99_us = percentile_us(latencies_us, 0.99);
    r.max_us = latencies_us.empty() ? 0 : latencies_us.back();
}

double percentile_us(const std::vector<std::uint32_t>& sorted, double p) {
    if (sorted.empty()) return 0;
    return sorted[static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1))];
}

std::vector<std::uint32_t> sorted_us_overlapping(const std::vector<Span>& spans,
                                                 std::chrono::steady_clock::time_point from,
                                                 std::chrono::steady_clock::time_point to) {
    std::vector<std::uint32_t> us;
    for (const Span& s : spans) {
        if (s.end < from || s.start > to) continue;
        us.push_back(static_cast<std::uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(s.end - s.start).count()));
    }
    std::sort(us.begin(), us.end());
    return us;
}

std::string format_result(const std::string& target, int connections, const LoadResult& r) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "target=%s connections=%d seconds=%.2f cycles=%llu cycles_per_s=%.1f p50_us=%.0f "
                  "p99_us=%.0f "
                  "max_us=%.0f errors=%llu redirects=%llu loadgen_cpu_s=%.2f warmup_s=%.2f",
                  target.c_str(), connections, r.seconds, static_cast<unsigned long long>(r.cycles),
                  r.cycles_per_s, r.p50_us, r.p99_us, r.max_us,
                  static_cast<unsigned long long>(r.errors),
                  static_cast<unsigned long long>(r.redirects), r.cpu_s, r.warmup_s);
    return line;
}

}  // namespace pgfence::bench
