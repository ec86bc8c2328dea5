#include "load.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

namespace pgfence::bench {
namespace {

constexpr auto kPauseAfterError = std::chrono::milliseconds(5);

struct Worker {
    std::vector<std::uint32_t> latencies_us;
    std::uint64_t cycles = 0, errors = 0;
    std::string first_error;
};

void work(Cycler& c, Worker& w, Clock::time_point end) {
    w.latencies_us.reserve(1 << 16);
    while (Clock::now() < end) {
        const auto t0 = Clock::now();
        const bool got = c.acquire();
        const auto t1 = Clock::now();
        if (!got || !c.release()) {
            if (w.errors++ == 0) w.first_error = c.last_error();
            std::this_thread::sleep_for(kPauseAfterError);
            continue;
        }
        ++w.cycles;
        if (w.latencies_us.size() < kMaxSamplesPerConnection) {
            w.latencies_us.push_back(
                static_cast<std::uint32_t>(std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count()));
        }
    }
}

double percentile(const std::vector<std::uint32_t>& sorted, double p) {
    if (sorted.empty()) return 0;
    const auto i = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
    return sorted[i];
}

}  // namespace

LoadResult run_load(const CyclerFactory& factory, int connections, std::chrono::milliseconds duration) {
    std::vector<std::unique_ptr<Cycler>> cyclers;
    for (int i = 0; i < connections; ++i) cyclers.push_back(factory(i));  // setup (e.g. etcd lease) untimed
    std::vector<Worker> workers(static_cast<std::size_t>(connections));
    std::vector<std::thread> threads;
    const auto start = Clock::now();
    const auto end = start + duration;
    for (int i = 0; i < connections; ++i) {
        threads.emplace_back([&, i] { work(*cyclers[static_cast<std::size_t>(i)], workers[static_cast<std::size_t>(i)], end); });
    }
    for (auto& t : threads) t.join();
    LoadResult r;
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<std::uint32_t> all;
    for (auto& w : workers) {
        r.cycles += w.cycles;
        r.errors += w.errors;
        if (r.first_error.empty()) r.first_error = w.first_error;
        all.insert(all.end(), w.latencies_us.begin(), w.latencies_us.end());
    }
    std::sort(all.begin(), all.end());
    r.cycles_per_s = static_cast<double>(r.cycles) / r.seconds;
    r.p50_us = percentile(all, 0.50);
    r.p99_us = percentile(all, 0.99);
    r.max_us = all.empty() ? 0 : all.back();
    return r;
}

std::string format_result(const std::string& target, int connections, const LoadResult& r) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "target=%s connections=%d seconds=%.2f cycles=%llu cycles_per_s=%.1f p50_us=%.0f p99_us=%.0f "
                  "max_us=%.0f errors=%llu",
                  target.c_str(), connections, r.seconds, static_cast<unsigned long long>(r.cycles), r.cycles_per_s,
                  r.p50_us, r.p99_us, r.max_us, static_cast<unsigned long long>(r.errors));
    return line;
}

}  // namespace pgfence::bench
