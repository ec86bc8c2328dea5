// bench_coordinator: acquire+release load against pgfence or etcd, and
// pgfence failover time. Prints one key=value line per run (bench/coordinator/run.sh
// turns them into a table).
//
//   bench_coordinator load pgfence|etcd --endpoints H:P,... --connections C --seconds D [--cacert F]
//                                       [--warmup-s W]
//   bench_coordinator failover --endpoints H:P,... --kill-pid PID [--timeout-ms N]
//
// https://H:P endpoints are reached over TLS, verified against --cacert.
// --warmup-s W (0-600, default 0): the clock starts once every connection has
// completed one cycle, or after W s (load.h); warmup_s= in the line says how long.
// The process's open-files limit is raised (within the hard limit) to fit C
// connections; C beyond what it allows is refused before the run.
// failover: one warm acquire+release, then SIGKILL to PID (the leader) and
// acquire in a loop until one succeeds; prints failover_ms (kill -> success).
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "client/client.h"
#include "scripts.h"
#include "load.h"
#include "report.h"

namespace {

using namespace pgfence;
using namespace std::chrono_literals;

constexpr int kMaxConnections = 4096;
constexpr int kMaxSeconds = 600;

int usage(const std::string& why) {
    std::cerr << "bench_coordinator: " << why << "\n"
              << "usage: bench_coordinator load pgfence|etcd --endpoints H:P,... --connections C --seconds D [--cacert F]\n"
              << "                                          [--warmup-s W]\n"
              << "       bench_coordinator failover --endpoints H:P,... --kill-pid PID [--timeout-ms N]\n";
    return 2;
}

// "--name value" pairs after the mode words; false on a malformed list.
bool flags(int argc, char** argv, int first, std::map<std::string, std::string>& out) {
    for (int i = first; i < argc; i += 2) {
        const std::string name = argv[i];
        if (!name.starts_with("--") || i + 1 >= argc) return false;
        out[name.substr(2)] = argv[i + 1];
    }
    return true;
}

int number(const std::map<std::string, std::string>& f, const std::string& name, int lo, int hi, int fallback) {
    auto it = f.find(name);
    if (it == f.end()) return fallback;
    const int v = std::stoi(it->second);
    if (v < lo || v > hi) throw std::invalid_argument("--" + name + " " + it->second + " not in [" +
                                                      std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
}

int load(const std::string& target, const std::vector<client::Endpoint>& endpoints, int connections, int seconds,
         const std::string& cacert, int warmup_s) {
    if (auto err = bench::fit_connections(connections); !err.empty()) return usage(err);
    auto settings = std::make_shared<client::ConnectionSettings>();
    if (!cacert.empty()) {
        if (auto err = net::make_tls_context({"", "", cacert}, net::TlsSide::kClient, settings->tls); !err.empty()) {
            return usage("--cacert: " + err);
        }
    }
    const std::string prefix = "bench-" + std::to_string(::getpid());
    bench::ScriptFactory factory = [&](int i) {
        const std::string key = prefix + "-" + std::to_string(i);
        if (target == "etcd") return bench::make_etcd_script(endpoints, i, key, settings);
        return bench::make_pgfence_script(endpoints, i, key);
    };
    const bench::LoadResult r =
        bench::run_load(factory, connections, std::chrono::seconds(seconds), settings->tls, std::chrono::seconds(warmup_s));
    std::cout << bench::format_result(target, connections, r) << std::endl;
    if (r.errors > 0) std::cerr << "bench_coordinator: " << r.errors << " errors, first: " << r.first_error << '\n';
    return r.cycles > 0 ? 0 : 1;
}

int failover(const std::vector<client::Endpoint>& endpoints, int pid, int timeout_ms) {
    client::Options o;
    o.endpoints = endpoints;
    o.timeout = std::chrono::milliseconds(timeout_ms);
    o.attempt_timeout = 500ms;  // a member that is down or stuck is left quickly
    o.backoff_initial = 5ms;
    o.backoff_max = 50ms;
    o.max_attempts = 100'000;
    client::Client c(o);
    const std::string key = "failover-" + std::to_string(::getpid());
    auto warm = c.acquire({key, 10s, 0ms, ""});
    if (!warm || !c.release(key, warm.value().token)) {
        std::cerr << "bench_coordinator: warm-up acquire failed: " << warm.message() << '\n';
        return 1;
    }
    const auto killed_at = client::Clock::now();
    if (::kill(pid, SIGKILL) != 0) {
        std::perror("bench_coordinator: kill");
        return 1;
    }
    // With an owner, a retry whose earlier attempt was granted (answer lost
    // with the leader) gets the same token instead of a 409 from itself.
    auto r = c.acquire({key, 10s, 0ms, "bench-failover"});
    const auto ms = std::chrono::duration<double, std::milli>(client::Clock::now() - killed_at).count();
    if (!r) {
        std::cerr << "bench_coordinator: no acquire succeeded within " << timeout_ms << "ms: " << r.message() << '\n';
        return 1;
    }
    c.release(key, r.value().token);
    std::printf("failover_ms=%.1f token_before=%llu token_after=%llu\n", ms,
                static_cast<unsigned long long>(warm.value().token), static_cast<unsigned long long>(r.value().token));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string mode = argc > 1 ? argv[1] : "";
        const bool is_load = mode == "load";
        if (!is_load && mode != "failover") return usage("unknown mode '" + mode + "'");
        const std::string target = is_load && argc > 2 ? argv[2] : "";
        if (is_load && target != "pgfence" && target != "etcd") return usage("unknown target '" + target + "'");
        std::map<std::string, std::string> f;
        if (!flags(argc, argv, is_load ? 3 : 2, f)) return usage("flags must be --name value pairs");
        const client::EndpointsParse eps = client::parse_endpoints(f["endpoints"]);
        if (!eps.error.empty()) return usage(eps.error);
        if (is_load) {
            return load(target, eps.endpoints, number(f, "connections", 1, kMaxConnections, 1),
                        number(f, "seconds", 1, kMaxSeconds, 10), f["cacert"], number(f, "warmup-s", 0, kMaxSeconds, 0));
        }
        return failover(eps.endpoints, number(f, "kill-pid", 2, 1 << 30, 0), number(f, "timeout-ms", 100, 60'000, 10'000));
    } catch (const std::exception& e) {
        return usage(e.what());
    }
}
