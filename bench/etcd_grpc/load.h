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
//
// With a warm-up limit (as bench/coordinator/load.h's): the clock starts once
// every connection has completed one Lock + Unlock, or the limit has passed;
// the warm-up's cycles and latencies are not counted, its errors are.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "etcd.h"
#include "report.h"

namespace pgfence::bench::etcd {

// Long enough to outlive the setup of kMaxConnections connections (a channel,
// with TLS a handshake, and a LeaseGrant each, one after another: over 10 s
// at 2,048 with TLS), before the keeper takes the leases over.
constexpr std::int64_t kLeaseTtlS = 60;
constexpr auto kRpcTimeout = std::chrono::seconds(5);
constexpr auto kPauseAfterError = std::chrono::milliseconds(5);
// Recorded latencies per connection; later samples are dropped.
constexpr std::size_t kMaxSamplesPerConnection = 4'000'000;
constexpr int kMaxConnections = 4096;

struct LockLoad {
    Target target;
    int connections = 1;     // 1..kMaxConnections
    std::string name_prefix;  // connection i locks "<name_prefix>/<i>"
    Clock::duration duration{};
    // Ends the run early when set (from another thread); null: run `duration`.
    const std::atomic<bool>* stop = nullptr;
    Clock::duration warmup_limit{};  // zero: the clock starts at once
};

// Runs the load; r.seconds is the timed part only, r.warmup_s the warm-up. Setup failures (a lease
// that cannot be granted) are returned as r.first_error with r.cycles 0 and
// r.errors 1. A LeaseKeeper failure counts one error.
LoadResult run_lock_load(const LockLoad& load);

}  // namespace pgfence::bench::etcd
