// fence-worker: see `fence-worker --help` (worker/usage.cc) and docs/guarantees.md.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>

#include "client/client.h"
#include "pgfence_version.h"
#include "worker/options.h"
#include "worker/worker.h"

namespace {

extern "C" void on_signal(int) {
    pgfence::worker::request_stop();
}

void install_handlers() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

int run(int argc, char** argv) {
    using namespace pgfence;
    const worker::ParseResult parsed = worker::parse_options(argc, argv);
    if (parsed.help) {
        std::fputs(worker::usage().c_str(), stdout);
        return kExitOk;
    }
    if (parsed.version) {
        std::fputs("fence-worker (pgfence) " PGFENCE_VERSION "\n", stdout);
        return kExitOk;
    }
    if (!parsed.options) {
        std::fprintf(stderr, "%s\n", parsed.error.c_str());
        return kExitUsage;
    }
    if (parsed.options->print_clock) {
        const auto now = std::chrono::steady_clock::now().time_since_epoch();
        std::printf("%lld\n", static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
        return kExitOk;
    }
    const client::EndpointsParse endpoints = client::endpoints_from(parsed.options->endpoints);
    if (!endpoints.error.empty()) {
        std::fprintf(stderr, "fence-worker: %s\n", endpoints.error.c_str());
        return kExitUsage;
    }
    client::Options copts;
    copts.endpoints = endpoints.endpoints;
    copts.max_clock_drift_ppm = parsed.options->max_clock_drift_ppm;
    const worker::Options& wo = *parsed.options;
    if (auto why = client::load_credentials(wo.cacert, wo.cert, wo.key, wo.bearer_file, copts); !why.empty()) {
        std::fprintf(stderr, "fence-worker: %s\n", why.c_str());
        return kExitUsage;
    }
    install_handlers();
    worker::Worker w(*parsed.options, copts);
    return w.run();
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fence-worker: internal error: %s\n", e.what());
        return pgfence::kExitOther;
    }
}
