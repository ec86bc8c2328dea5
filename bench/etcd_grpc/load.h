// Closed-loop lock load on etcd's v3lockpb API: C connections, each looping
// Lock + Unlock on its own lock name, all driven by ONE thread through one
// gRPC CompletionQueue.
//
// One thread rather than one per connection (as bench/coordinator/load.cc's
// single epoll loop, for the same reason): on a 2-core machine the load
// generator shares the CPU with the cluster it measures, and C blocking
// threads cost a wake-up per answer. gRPC's own internal threads (its
// poller, timers) are there regardless and are counted in loadgen_cpu_s.
//
// Per connection i, before the clock starts (untimed): a channel of its own
// to endpoints[i % n] (etcd members proxy lock calls to their leader
// themselves) and a lease (LeaseGrant, TTL kLeaseTtlS), kept alive by one
// LeaseKeeper for all connections. Then, timed: Lock(name, lease) -> the
// lock's key; Unlock(key); repeat. Lock latency runs from the Lock call to
// its answer. A failed RPC (or one unanswered within kRpcTimeout) counts one
// error; the connection moves to the next endpoint, pauses kPauseAfterError
// and starts over with a Lock (re-entrant: the same name and lease give back
// the same key). At the end, RPCs in flight are cancelled (not counted) and
// the leases revoked, which deletes any lock key left (untimed).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "etcd.h"
#include "report.h"

namespace pgfence::bench::etcd {

constexpr std::int64_t kLeaseTtlS = 10;
constexpr auto kRpcTimeout = std::chrono::seconds(5);
constexpr auto kPauseAfterError = std::chrono::milliseconds(5);
// Recorded latencies per connection; later samples are dropped.
constexpr std::size_t kMaxSamplesPerConnection = 4'000'000;
constexpr int kMaxConnections = 256;

struct LockLoad {
    Target target;
    int connections = 1;     // 1..kMaxConnections
    std::string name_prefix;  // connection i locks "<name_prefix>/<i>"
    Clock::duration duration{};
    // Ends the run early when set (from another thread); null: run `duration`.
    const std::atomic<bool>* stop = nullptr;
};

// Runs the load; r.seconds is the timed part only. Setup failures (a lease
// that cannot be granted) are returned as r.first_error with r.cycles 0 and
// r.errors 1. A LeaseKeeper failure counts one error.
LoadResult run_lock_load(const LockLoad& load);

}  // namespace pgfence::bench::etcd
