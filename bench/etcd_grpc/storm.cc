#include "storm.h"

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "etcd/etcdserver/api/v3lock/v3lockpb/v3lock.grpc.pb.h"
#include "load.h"

namespace pgfence::bench::etcd {
namespace {

// Polls until no key under "<prefix>/" is left or `give_up`; when the empty
// answer arrived, or nullopt with `error` set.
std::optional<Clock::time_point> wait_empty(const Storm& s, Clock::time_point give_up,
                                            std::string& error) {
    const Target& t = s.preload.target;
    auto kv = etcdserverpb::KV::NewStub(open_channel(t, t.endpoints[0], "poll"));
    etcdserverpb::RangeRequest req;
    req.set_key(s.preload.prefix + "/");
    req.set_range_end(s.preload.prefix + "0");  // '0' follows '/': every key under "<prefix>/"
    req.set_count_only(true);
    std::int64_t left = -1;
    std::string last_error;
    for (auto next = Clock::now(); next < give_up; next += kPollPeriod) {
        std::this_thread::sleep_until(next);
        etcdserverpb::RangeResponse resp;
        const auto ctx = context_for(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::min<Clock::duration>(kSetupTimeout, give_up - Clock::now())));
        const grpc::Status st = kv->Range(ctx.get(), req, &resp);
        if (!st.ok()) {
            if (last_error.empty()) std::fprintf(stderr, "storm: Range: %s (retried)\n", describe(st).c_str());
            last_error = describe(st);
            continue;
        }
        if (resp.count() == 0) return Clock::now();
        left = resp.count();
    }
    error = "timed out with " + std::to_string(left) + " keys left" +
            (last_error.empty() ? "" : "; last Range error: " + last_error);
    return std::nullopt;
}

// The probe: Lock + Unlock cycles on one channel, kProbeGap apart, until
// `stop`; each successful cycle's start and end.
struct Probe {
    std::vector<Span> cycles;
    std::uint64_t errors = 0;
    std::string first_error;

    void error(const std::string& what) {
        if (errors++ == 0) first_error = what;
    }

    void run(const Storm& s, const std::atomic<bool>& stop) {
        const Target& t = s.preload.target;
        auto channel = open_channel(t, t.endpoints[0], "probe");
        auto lease_stub = etcdserverpb::Lease::NewStub(channel);
        auto lock = v3lockpb::Lock::NewStub(channel);
        std::string err;
        const std::int64_t lease = grant_lease(*lease_stub, kMaxTimeoutS * 2, err);
        if (lease == 0) {
            error("probe lease: " + err);
            return;
        }
        while (!stop) {
            const auto start = Clock::now();
            v3lockpb::LockRequest lreq;
            lreq.set_name(s.preload.prefix + "-probe");
            lreq.set_lease(lease);
            v3lockpb::LockResponse lresp;
            grpc::Status st = lock->Lock(context_for(kRpcTimeout).get(), lreq, &lresp);
            if (st.ok()) {
                v3lockpb::UnlockRequest ureq;
                ureq.set_key(lresp.key());
                v3lockpb::UnlockResponse uresp;
                st = lock->Unlock(context_for(kRpcTimeout).get(), ureq, &uresp);
            }
            if (st.ok()) {
                cycles.push_back({start, Clock::now()});
            } else {
                error(describe(st));
            }
            std::this_thread::sleep_for(kProbeGap);
        }
        if (std::string e = revoke_leases(*lease_stub, {lease}); !e.empty()) error("probe lease revoke: " + e);
    }
};

}  // namespace

StormResult run_storm(const Storm& s) {
    StormResult r;
    std::string error;
    r.term_before = raft_term(s.preload.target, error);
    if (r.term_before == 0) {
        r.error = "raft term before: " + error;
        return r;
    }
    const PreloadResult pre = run_preload(s.preload);
    if (!pre.error.empty()) {
        r.error = "preload: " + pre.error;
        return r;
    }
    const auto deadline = pre.first_granted + std::chrono::seconds(pre.first_ttl_s);
    std::fprintf(stderr, "storm: preloaded %d locks in %.2f s; the first lease's TTL %lld s\n",
                 pre.locks, pre.seconds, static_cast<long long>(pre.first_ttl_s));
    if (Clock::now() > deadline) {
        std::fprintf(stderr, "storm: warning: the preload outlasted the TTL; leases were expiring during it\n");
    }

    std::atomic<bool> stop_probe{false};
    Probe probe;
    std::thread prober([&] { probe.run(s, stop_probe); });
    const auto empty = wait_empty(s, deadline + std::chrono::seconds(s.timeout_s), error);
    stop_probe = true;
    prober.join();

    // The cycles that overlap the storm: [the first deadline, empty (or now)].
    const std::vector<std::uint32_t> cycle_us =
        sorted_us_overlapping(probe.cycles, deadline, empty ? *empty : Clock::now());
    r.probe_cycles = cycle_us.size();
    r.probe_p99_us = percentile_us(cycle_us, 0.99);
    r.probe_max_us = cycle_us.empty() ? 0 : cycle_us.back();
    if (probe.errors > 0) {
        std::fprintf(stderr, "storm: probe: %llu errors, first: %s\n",
                     static_cast<unsigned long long>(probe.errors), probe.first_error.c_str());
    }
    if (!empty) {
        r.error = "waiting for the keys to expire: " + error;
        return r;
    }
    r.expired_all_s = std::chrono::duration<double>(*empty - deadline).count();
    r.term_after = raft_term(s.preload.target, error);
    if (r.term_after == 0) r.error = "raft term after: " + error;
    return r;
}

std::string format_storm(int locks, const StormResult& r) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "storm_locks=%d expired_all_s=%.2f probe_cycles=%llu probe_p99_us=%.0f "
                  "probe_max_us=%.0f term_before=%llu term_after=%llu",
                  locks, r.expired_all_s, static_cast<unsigned long long>(r.probe_cycles),
                  r.probe_p99_us, r.probe_max_us, static_cast<unsigned long long>(r.term_before),
                  static_cast<unsigned long long>(r.term_after));
    return line;
}

}  // namespace pgfence::bench::etcd
