// Counters, gauges and histograms of one member, rendered in the Prometheus
// text format for GET /metrics. Updated on the loop thread only (no locks).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace pgfence::server {

class Histogram {
public:
    // Bucket upper bounds in seconds (100 us .. 2.5 s), plus +Inf.
    static constexpr std::array<double, 14> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                        0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   2.5};
    void observe(std::chrono::nanoseconds d);
    void render(std::string& out, const char* name, const char* help) const;

private:
    std::array<std::uint64_t, kBounds.size() + 1> counts_{};
    std::uint64_t count_ = 0;
    double sum_seconds_ = 0;
};

struct Gauges {  // sampled at render time
    std::uint64_t waiters = 0;
    std::uint64_t locks_held = 0;
    std::uint64_t term = 0;
    bool is_leader = false;
    std::uint64_t commit_index = 0;
    std::uint64_t applied_index = 0;
    std::uint64_t peer_frames_dropped = 0;
    std::uint64_t http_connections = 0;
};

struct Metrics {
    std::uint64_t grants = 0;
    std::uint64_t grant_conflicts = 0;
    std::uint64_t releases = 0;
    std::uint64_t release_not_held = 0;
    std::uint64_t expiries_existed = 0;
    std::uint64_t expiries_missing = 0;
    std::uint64_t keepalives = 0;
    std::uint64_t keepalive_failures = 0;
    std::uint64_t phantom_releases = 0;
    std::uint64_t waiter_timeouts = 0;
    std::uint64_t leader_changes = 0;
    std::uint64_t bad_requests = 0;
    std::uint64_t snapshots = 0;
    Histogram fsync;
    Histogram proposal_commit;

    std::string render(const Gauges& g) const;
};

}  // namespace pgfence::server
