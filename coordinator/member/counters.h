// The member core's counters and its one latency histogram (the histogram
// type, its bounds a parameter, is the shell's too), read by the shell for
// GET /metrics (server/metrics.cc renders them in Prometheus's
// text format). Pure, std only; updated by the core only.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace pgfence::member {

// A latency histogram over the bucket upper bounds `Bounds` (seconds,
// ascending), plus +Inf.
template <const auto& Bounds>
class BoundedHistogram {
public:
    static constexpr const auto& kBounds = Bounds;
    void observe(std::chrono::nanoseconds d) {
        const double s = std::chrono::duration<double>(d).count();
        std::size_t i = 0;
        while (i < kBounds.size() && s > kBounds[i]) ++i;
        ++counts_[i];
        ++count_;
        sum_seconds_ += s;
    }
    // Per bucket (the last is +Inf), not cumulative.
    const std::array<std::uint64_t, Bounds.size() + 1>& buckets() const { return counts_; }
    std::uint64_t count() const { return count_; }
    double sum_seconds() const { return sum_seconds_; }

private:
    std::array<std::uint64_t, Bounds.size() + 1> counts_{};
    std::uint64_t count_ = 0;
    double sum_seconds_ = 0;
};

// The core's and the shell's latencies: 100 us .. 2.5 s.
inline constexpr std::array<double, 14> kLatencyBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                          0.025,  0.05,    0.1,    0.25,  0.5,    1.0,   2.5};
using Histogram = BoundedHistogram<kLatencyBounds>;

struct Counters {
    std::uint64_t grants = 0;            // Grants and GrantManys applied that granted
    std::uint64_t grants_many = 0;       // of them, GrantManys (a set of keys)
    std::uint64_t grant_conflicts = 0;   // Grants applied that were refused (held, or invalid)
    std::uint64_t grants_table_full = 0;  // Grants applied that were refused: the table was full
    std::uint64_t releases = 0;          // Releases applied that removed a lock
    std::uint64_t release_not_held = 0;
    std::uint64_t expiries_existed = 0;  // Expires applied that removed a lock
    std::uint64_t expiries_missing = 0;
    std::uint64_t expires_proposed = 0;  // by this member as leader
    std::uint64_t expire_batches = 0;    // ExpireMany entries proposed by this member as leader
    std::uint64_t checkpoints = 0;       // locks whose remaining_ms an applied Checkpoint set (or cleared)
    std::uint64_t checkpoint_clears = 0;  // clearing Checkpoints proposed by this member as leader (keepalive, re-grant)
    std::uint64_t keepalives = 0;        // answered as leader
    std::uint64_t keepalive_failures = 0;
    std::uint64_t phantom_releases = 0;  // grants nobody received: lease ended at once, then expired
    std::uint64_t waiter_grants = 0;     // grants proposed for the head of a wait queue
    std::uint64_t waiter_timeouts = 0;
    std::uint64_t proposal_timeouts = 0;
    std::uint64_t leader_changes = 0;
    std::uint64_t snapshots = 0;
    Histogram proposal_commit;  // propose() to applied, on the leader
};

}  // namespace pgfence::member
