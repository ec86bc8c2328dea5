// Held locks made directly, as fast as etcd takes them: for each i in
// [0, locks), LeaseGrant(ttl) then Put("<prefix>/<i>/<lease ID in lowercase
// hex>", "", lease). That is the key etcd 3.4's lock service writes for a held
// lock: v3lock's Lock runs clientv3/concurrency's Mutex with the request's
// lease, whose key is fmt.Sprintf("%s%x", name + "/", leaseID), its value
// empty, put under that lease; a lock named "<prefix>/<i>" with no other key
// under "<prefix>/<i>/" is held. Each lock has its own lease, so each expires
// on its own and etcd's leader revokes it (deleting the key) in a raft entry.
//
// Pipelined from one thread and one CompletionQueue: `connections` channels
// (each its own TCP connection, to endpoint i mod n), kInFlightPerConnection
// locks in progress on each. A failed RPC (or one unanswered within
// kRpcTimeout) is retried after kRetryPause, at most kMaxAttempts times per
// step, then the preload fails. A grant whose answer was lost may leave a
// lease without a key; it expires on its own. Progress goes to stderr at
// every tenth of the locks.
#pragma once

#include <cstdint>
#include <string>

#include "etcd.h"

namespace pgfence::bench::etcd {

constexpr int kMaxLocks = 1'000'000;
constexpr int kInFlightPerConnection = 64;
constexpr int kMaxPreloadConnections = 64;
constexpr int kMaxAttempts = 5;
constexpr auto kRetryPause = std::chrono::milliseconds(100);
// etcd raises a shorter TTL to its minimum (2 s with the default election
// timeout); an upper bound keeps a mistaken run from holding keys for days.
constexpr std::int64_t kMinTtlS = 2;
constexpr std::int64_t kMaxTtlS = 86'400;

struct Preload {
    Target target;
    int locks = 0;            // 1..kMaxLocks
    std::int64_t ttl_s = 0;   // kMinTtlS..kMaxTtlS
    std::string prefix;       // keys "<prefix>/<i>/<lease hex>"
    int connections = 4;      // 1..kMaxPreloadConnections
};

struct PreloadResult {
    int locks = 0;  // made (all of them unless `error`)
    double seconds = 0;
    // When the first successful LeaseGrant answer arrived; etcd counted its
    // TTL from when its leader applied the grant, a little earlier.
    Clock::time_point first_granted;
    std::int64_t first_ttl_s = 0;  // the TTL etcd granted it
    Clock::time_point last_granted;
    std::uint64_t retries = 0;
    std::string error;  // "" on success; else the failure that stopped it
};

PreloadResult run_preload(const Preload& p);

// "<prefix>/<i>/<lease hex>": the key etcd's lock service holds lock
// "<prefix>/<i>" under `lease` with.
std::string held_lock_key(const std::string& prefix, int i, std::int64_t lease);

}  // namespace pgfence::bench::etcd
