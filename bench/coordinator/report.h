// What one closed-loop load run measured, and its one-line summary: shared by
// bench_coordinator (HTTP load, load.h) and bench_etcd_grpc (etcd's gRPC API),
// so that bench/coordinator/run.sh reads the same fields from both; and the
// percentiles, storm windows and open-files limit that bench_scale and
// bench_etcd_grpc share.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pgfence::bench {

struct LoadResult {
    std::uint64_t cycles = 0;
    std::uint64_t errors = 0;
    std::uint64_t redirects = 0;
    double seconds = 0;
    double cycles_per_s = 0;
    double p50_us = 0, p99_us = 0, max_us = 0;  // acquire latency
    double cpu_s = 0;  // CPU the load generator itself used (user + system), timed part
    double warmup_s = 0;  // untimed, before the clock: until every connection had done a cycle
    std::string first_error;
};

// CPU this process has used so far (user + system, all threads), in seconds.
double cpu_seconds();

// Raises this process's soft RLIMIT_NOFILE to `want` (within the hard
// limit); returns the soft limit now in force.
std::uint64_t raise_open_files(std::uint64_t want);

// raise_open_files for a load of `connections` sockets and the process's own
// descriptors besides; "" or why they do not fit (naming the limits).
std::string fit_connections(int connections);

// Sorts `latencies_us` and sets r.p50_us, r.p99_us and r.max_us from it
// (0 when empty).
void set_percentiles(std::vector<std::uint32_t>& latencies_us, LoadResult& r);

// Percentile p (0..1) of `sorted` (ascending): the element at rank
// p x (n - 1); 0 when empty.
double percentile_us(const std::vector<std::uint32_t>& sorted, double p);

// One timed cycle of a probe.
struct Span {
    std::chrono::steady_clock::time_point start, end;
};

// The durations in us, ascending, of the spans that overlap [from, to]
// (end >= from and start <= to): a probe's cycles during a storm.
std::vector<std::uint32_t> sorted_us_overlapping(const std::vector<Span>& spans,
                                                 std::chrono::steady_clock::time_point from,
                                                 std::chrono::steady_clock::time_point to);

// "target=T connections=C seconds=S cycles=N cycles_per_s=X p50_us=.. p99_us=..
// max_us=.. errors=.. redirects=.. loadgen_cpu_s=.. warmup_s=..": one line, no newline.
std::string format_result(const std::string& target, int connections, const LoadResult& r);

}  // namespace pgfence::bench
