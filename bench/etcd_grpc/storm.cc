#include "storm.h"

#include <atomic>
#include <cstdio>
#include <thread>

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
    LoadResult probe;
    std::thread prober([&] {
        probe = run_lock_load({s.preload.target, 1, s.preload.prefix + "-probe", std::chrono::hours(1),
                               &stop_probe});
    });
    const auto empty = wait_empty(s, deadline + std::chrono::seconds(s.timeout_s), error);
    stop_probe = true;
    prober.join();

    r.probe_cycles = probe.cycles;
    r.probe_p99_us = probe.p99_us;
    r.probe_max_us = probe.max_us;
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
