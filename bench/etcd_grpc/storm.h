// An expiry storm: N held locks whose leases all run out at about the same
// time, and how long etcd takes to revoke them all while a probe client keeps
// locking.
//
//   1. term_before: the raft term (etcd.h raft_term).
//   2. Preload N locks under "<prefix>/", each on its own lease of TTL T
//      (preload.h). t_first = when the first lease's grant was answered;
//      its expiry deadline is t_first + the TTL etcd granted it.
//   3. A probe (one channel of its own, lock name "<prefix>-probe", outside
//      "<prefix>/", on a lease of its own) loops Lock + Unlock, blocking,
//      kProbeGap apart, from a thread of its own, from when the preload ends
//      until the wait ends. Its figures count the whole Lock + Unlock cycles
//      that overlap the storm (from the first lease's expiry deadline to
//      t_empty), as bench_scale storm counts pgfence's acquire + release.
//   4. Every kPollPeriod, Range(count_only) over the keys under "<prefix>/";
//      t_empty = when the first answer with count 0 arrived (resolution: the
//      period plus one Range round trip). Range errors are retried at the next
//      poll. Gives up timeout_s after the first lease's expiry deadline.
//   5. term_after, as in 1.
//
// expired_all_s = t_empty - (t_first + TTL): from when the first lease could
// expire to when none is left. If the preload outlasts the TTL, leases were
// expiring during it (warned on stderr) and the figure includes that overlap.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "preload.h"

namespace pgfence::bench::etcd {

constexpr auto kPollPeriod = std::chrono::milliseconds(50);
constexpr auto kProbeGap = std::chrono::milliseconds(10);  // as bench_scale's probe
constexpr int kMaxTimeoutS = 3600;

struct Storm {
    Preload preload;
    int timeout_s = 300;  // 1..kMaxTimeoutS
};

struct StormResult {
    double expired_all_s = 0;
    std::uint64_t probe_cycles = 0;
    double probe_p99_us = 0, probe_max_us = 0;
    std::uint64_t term_before = 0, term_after = 0;
    std::string error;  // "" on success
};

StormResult run_storm(const Storm& s);

// "storm_locks=N expired_all_s=X probe_cycles=.. probe_p99_us=.. probe_max_us=..
// term_before=.. term_after=..": one line, no newline.
std::string format_storm(int locks, const StormResult& r);

}  // namespace pgfence::bench::etcd
