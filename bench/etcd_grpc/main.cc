// bench_etcd_grpc: etcd 3.4 load through its native gRPC API, the client path
// of etcd's own clientv3 (bench/coordinator/run.sh's etcd-grpc row, the
// anchor its pgfence figures are compared with). See kHelp for the modes;
// load.h, preload.h and storm.h for what each does and measures.
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "load.h"
#include "preload.h"
#include "storm.h"

namespace {

using namespace pgfence;
using namespace pgfence::bench::etcd;

constexpr const char* kHelp = R"(bench_etcd_grpc: etcd 3.4 through its gRPC API (v3lockpb, etcdserverpb).

  bench_etcd_grpc load --endpoints H:P,H:P,... --connections C --seconds D [--prefix P] [--cacert F]
                       [--warmup-s W]
      C clients (1-4096), closed loop, for D seconds (1-600), client i on its own
      channel (TCP connection) to endpoint i mod n and its own lock name "P/i":
      LeaseGrant (TTL 60 s, kept alive) once, untimed, then Lock(name, lease) +
      Unlock(key) repeated. All clients are driven by one thread. --warmup-s W
      (0-600, default 0): the clock starts once every client has completed one
      cycle, or after W s; that warm-up's cycles are not counted. The open-files
      limit is raised (within the hard limit) to fit C channels. Prints one line
        target=etcd-grpc connections=C seconds=S cycles=N cycles_per_s=X p50_us=..
        p99_us=.. max_us=.. errors=.. redirects=0 loadgen_cpu_s=.. warmup_s=..
      (latency: of Lock, from its call to its answer). Exit 1 if no cycle completed.

  bench_etcd_grpc preload --endpoints ... --locks N --ttl-s T [--prefix P] [--connections C] [--cacert F]
      N held locks (1-1000000) on distinct names, each under its own lease of
      TTL T s (2-86400): LeaseGrant + Put("P/i/<lease hex>", "", lease), the key
      etcd's lock service holds a lock with; C channels (1-64, default 4), 64
      locks in flight on each. Prints "preloaded=N seconds=S"; progress on stderr.
      The locks stay until their leases expire.

  bench_etcd_grpc storm --endpoints ... --locks N --ttl-s T [--prefix P] [--connections C]
                        [--timeout-s S] [--cacert F]
      Preload as above, then wait (polling a count of the keys under "P/" every
      50 ms) until none is left, while one probe client loops Lock + Unlock on
      "P-probe", 10 ms apart; the probe's figures count the cycles that overlap
      the storm (from the deadline below until none is left). The clock
      starts when the first lease was granted (its grant's
      answer arrived): expired_all_s counts from that lease's expiry deadline
      (that moment + its TTL) to the first poll that finds no key. Gives up
      S s (1-3600, default 300) after that deadline: a failure, exit 1. Prints
        storm_locks=N expired_all_s=X probe_cycles=.. probe_p99_us=.. probe_max_us=..
        term_before=.. term_after=..
      (the raft term, largest of the members' Maintenance.Status, before and after).

  Endpoints: host:port, or https://host:port with --cacert F (the CA that
  signed the members' certificates). --prefix P: 1-200 characters, default
  "bench-grpc-<pid>" (load), "bench-preload-<pid>", "bench-storm-<pid>".
)";

int usage_error(const std::string& why) {
    std::cerr << "bench_etcd_grpc: " << why << "\n(bench_etcd_grpc --help for usage)\n";
    return 2;
}

using Flags = std::map<std::string, std::string>;

// "--name value" pairs after the mode; names outside `known` are an error.
Flags parse_flags(int argc, char** argv, const std::set<std::string>& known) {
    Flags f;
    for (int i = 2; i < argc; i += 2) {
        const std::string arg = argv[i];
        if (!arg.starts_with("--") || !known.contains(arg.substr(2)))
            throw std::invalid_argument("unknown flag '" + arg + "' for " + argv[1]);
        if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
        f[arg.substr(2)] = argv[i + 1];
    }
    return f;
}

// Flag `name` as a whole number in [lo, hi]; `fallback` when absent (< lo: required).
std::int64_t number(const Flags& f, const std::string& name, std::int64_t lo, std::int64_t hi,
                    std::int64_t fallback) {
    const auto it = f.find(name);
    if (it == f.end()) {
        if (fallback < lo) throw std::invalid_argument("--" + name + " is required");
        return fallback;
    }
    const std::string& text = it->second;
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
        throw std::invalid_argument("--" + name + " '" + text + "' is not a whole number in [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return v;
}

Target target_of(const Flags& f) {
    const auto it = f.find("endpoints");
    if (it == f.end()) throw std::invalid_argument("--endpoints is required");
    const client::EndpointsParse eps = client::parse_endpoints(it->second);
    if (!eps.error.empty()) throw std::invalid_argument("--endpoints: " + eps.error);
    Target t{eps.endpoints, ""};
    bool any_tls = false;
    for (const auto& e : t.endpoints) any_tls = any_tls || e.tls;
    const auto ca = f.find("cacert");
    if (any_tls && ca == f.end())
        throw std::invalid_argument("https:// endpoints need --cacert (the members' CA)");
    if (ca != f.end()) {
        if (std::string error = load_ca(ca->second, t); !error.empty()) throw std::invalid_argument(error);
    }
    return t;
}

std::string prefix_of(const Flags& f, const std::string& fallback) {
    const auto it = f.find("prefix");
    if (it == f.end()) return fallback + "-" + std::to_string(::getpid());
    if (it->second.empty() || it->second.size() > 200)
        throw std::invalid_argument("--prefix must be 1-200 characters, got " +
                                    std::to_string(it->second.size()));
    return it->second;
}

Preload preload_of(const Flags& f, const std::string& default_prefix) {
    return {target_of(f), static_cast<int>(number(f, "locks", 1, kMaxLocks, 0)),
            number(f, "ttl-s", kMinTtlS, kMaxTtlS, 0), prefix_of(f, default_prefix),
            static_cast<int>(number(f, "connections", 1, kMaxPreloadConnections, 4))};
}

int load(int argc, char** argv) {
    const Flags f = parse_flags(argc, argv, {"endpoints", "connections", "seconds", "prefix", "cacert", "warmup-s"});
    const int connections = static_cast<int>(number(f, "connections", 1, kMaxConnections, 0));
    // A channel is one TCP connection.
    if (std::string err = bench::fit_connections(connections); !err.empty()) throw std::invalid_argument(err);
    const LockLoad l{target_of(f), connections, prefix_of(f, "bench-grpc"),
                     std::chrono::seconds(number(f, "seconds", 1, 600, 0)), nullptr,
                     std::chrono::seconds(number(f, "warmup-s", 0, 600, 0))};
    const bench::LoadResult r = run_lock_load(l);
    std::cout << bench::format_result("etcd-grpc", connections, r) << std::endl;
    if (r.errors > 0) std::cerr << "bench_etcd_grpc: " << r.errors << " errors, first: " << r.first_error << '\n';
    return r.cycles > 0 ? 0 : 1;
}

int preload(int argc, char** argv) {
    const Flags f = parse_flags(argc, argv, {"endpoints", "locks", "ttl-s", "prefix", "connections", "cacert"});
    const Preload p = preload_of(f, "bench-preload");
    const PreloadResult r = run_preload(p);
    if (!r.error.empty()) {
        std::cerr << "bench_etcd_grpc: preload failed after " << r.locks << " locks: " << r.error << '\n';
        return 1;
    }
    std::printf("preloaded=%d seconds=%.2f\n", r.locks, r.seconds);
    if (r.retries > 0) std::fprintf(stderr, "bench_etcd_grpc: %llu RPCs retried\n", static_cast<unsigned long long>(r.retries));
    return 0;
}

int storm(int argc, char** argv) {
    const Flags f = parse_flags(argc, argv,
                                {"endpoints", "locks", "ttl-s", "prefix", "connections", "timeout-s", "cacert"});
    const Storm s{preload_of(f, "bench-storm"), static_cast<int>(number(f, "timeout-s", 1, kMaxTimeoutS, 300))};
    const StormResult r = run_storm(s);
    if (!r.error.empty()) {
        std::cerr << "bench_etcd_grpc: storm failed: " << r.error << '\n';
        return 1;
    }
    std::cout << format_storm(s.preload.locks, r) << std::endl;
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "--help" || mode == "-h" || mode == "help") {
        std::cout << kHelp;
        return 0;
    }
    try {
        if (mode == "load") return load(argc, argv);
        if (mode == "preload") return preload(argc, argv);
        if (mode == "storm") return storm(argc, argv);
        return usage_error("unknown mode '" + mode + "' (load, preload, storm)");
    } catch (const std::invalid_argument& e) {
        return usage_error(e.what());
    }
}
