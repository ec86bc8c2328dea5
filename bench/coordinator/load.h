// Closed-loop load: C connections, each a thread looping acquire + release on
// its own key for a fixed time; acquire latencies are recorded per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pgfence::bench {

using Clock = std::chrono::steady_clock;

// One connection's driver: acquire and release one key. Each returns false on
// an error (counted; the loop goes on until the time is up).
class Cycler {
public:
    virtual ~Cycler() = default;
    virtual bool acquire() = 0;
    virtual bool release() = 0;
    virtual std::string last_error() const = 0;
};

using CyclerFactory = std::function<std::unique_ptr<Cycler>(int connection)>;

struct LoadResult {
    std::uint64_t cycles = 0;
    std::uint64_t errors = 0;
    double seconds = 0;
    double cycles_per_s = 0;
    double p50_us = 0, p99_us = 0, max_us = 0;  // acquire latency
    std::string first_error;
};

// Bound on recorded latencies per connection (older samples are kept).
constexpr std::size_t kMaxSamplesPerConnection = 4'000'000;

LoadResult run_load(const CyclerFactory& factory, int connections, std::chrono::milliseconds duration);

std::string format_result(const std::string& target, int connections, const LoadResult& r);

}  // namespace pgfence::bench
