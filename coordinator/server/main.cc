// fence-coordinator: one member of a pgfence cluster. See --help.
#include <boost/asio.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>

#include "client/client.h"
#include "log/log.h"
#include "server/bootstrap.h"
#include "server/member.h"
#include "server/options.h"
#include "storage/meta_files.h"

using namespace pgfence;

namespace {

// Asks the running cluster (--join) what member opts.id was added with:
// "" and `out` set (out->listed false when it was not added), or why no
// member answered usefully within `timeout`.
std::string ask_to_join(const server::Options& opts, std::chrono::milliseconds timeout,
                        std::optional<server::JoinAnswer>& out) {
    client::EndpointsParse endpoints = client::parse_endpoints(opts.join);
    if (!endpoints.error.empty()) return endpoints.error;
    client::Options copts;
    copts.endpoints = endpoints.endpoints;
    copts.timeout = timeout;
    // https:// endpoints: the members' certificates are checked against
    // --trusted-ca-file, and this member's own certificate is presented
    // (clusters with --client-cert-auth ask for one).
    copts.ca_file = opts.trusted_ca_file;
    copts.cert_file = opts.cert_file;
    copts.key_file = opts.key_file;
    client::Client c(copts);
    client::Result<client::MemberList> r = c.join_info(opts.id);
    server::JoinAnswer answer;
    if (!r && r.error().kind != client::ErrorKind::kUnknownMember) return r.message();
    if (r) {
        answer.cluster_id = r.value().cluster_id;
        answer.listed = true;
        for (const client::MemberEntry& m : r.value().members) {
            answer.members[m.id] = server::Addresses{m.peer_addr, m.client_addr};
        }
        if (answer.cluster_id == 0) return "the answer carries no cluster ID";
    }
    out = std::move(answer);
    return {};
}

}  // namespace

int main(int argc, char** argv) {
    server::Options opts;
    std::string err = server::parse_options(argc, argv, opts);
    if (err.empty() && opts.help) {
        std::fputs(server::usage().c_str(), stdout);
        return 0;
    }
    if (err.empty()) err = server::validate_options(opts);
    log::LogLevel level = log::LogLevel::kInfo;
    if (err.empty() && !log::parse_log_level(opts.log_level, level)) {
        err = "--log-level '" + opts.log_level + "' is not one of debug, info, warn, error";
    }
    if (!err.empty()) {
        std::fprintf(stderr, "fence-coordinator: %s\n", err.c_str());
        return 2;
    }
    log::set_log_level(level);
    std::optional<storage::Identity> stored;
    try {
        stored = storage::load_identity(opts.data_dir);
    } catch (const std::exception& e) {
        log::log_event(log::LogLevel::kError, "storage_open_failed", {{"dir", opts.data_dir}, {"error", e.what()}});
        return 1;
    }
    std::optional<server::JoinAnswer> join;
    // A joined member asks again while it may not have its configuration yet.
    const bool joined = stored && stored->first_config && stored->first_config->members.empty();
    if (!opts.join.empty() && (!stored || joined)) {
        if (err = ask_to_join(opts, stored ? std::chrono::seconds(3) : std::chrono::seconds(20), join); !err.empty()) {
            if (!stored) {
                std::fprintf(stderr, "fence-coordinator: --join: %s\n", err.c_str());
                return 1;
            }
            log::log_event(log::LogLevel::kWarn, "join_unanswered", {{"error", err}, {"using", "the log"}});
        }
    }
    server::StartPlan plan;
    if (err = server::plan_start(opts, stored, join, plan); !err.empty()) {
        std::fprintf(stderr, "fence-coordinator: %s\n", err.c_str());
        return 2;
    }
    for (const std::string& note : plan.notes) log::log_event(log::LogLevel::kWarn, "flag_not_used", {{"note", note}});
    opts.cluster_id = plan.identity.cluster_id;
    opts.client_addr = plan.client_addr;
    std::unique_ptr<server::DurableLog> log;
    try {
        std::filesystem::create_directories(opts.data_dir);
        log = server::open_durable_log(opts.data_dir, plan.identity);
    } catch (const std::exception& e) {
        log::log_event(log::LogLevel::kError, "storage_open_failed", {{"dir", opts.data_dir}, {"error", e.what()}});
        return 1;
    }
    boost::asio::io_context io;
    server::Member member(io, opts, std::move(plan), std::move(log));
    // Armed before start(): a SIGHUP while the member replays its log must not
    // end it. It is handled in io.run(), after start() has made the servers.
    boost::asio::signal_set hangup(io, SIGHUP);
    std::function<void()> wait_hangup = [&] {
        hangup.async_wait([&](const boost::system::error_code& ec, int) {
            if (ec) return;
            log::log_event(log::LogLevel::kInfo, "signal", {{"signal", std::to_string(SIGHUP)}});
            member.reload();
            wait_hangup();
        });
    };
    wait_hangup();
    if (err = member.start(); !err.empty()) {
        log::log_event(log::LogLevel::kError, "start_failed", {{"error", err}});
        return 1;
    }
    boost::asio::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        log::log_event(log::LogLevel::kInfo, "signal", {{"signal", std::to_string(sig)}});
        member.shutdown([&io] { io.stop(); });
    });
    try {
        io.run();
    } catch (const std::exception& e) {
        // A broken invariant (raft logic_error, lock table) or a failed
        // apply: stop loudly rather than serve from an unknown state.
        log::log_event(log::LogLevel::kError, "fatal", {{"error", e.what()}});
        log::log_flush();
        std::_Exit(70);
    }
    log::log_event(log::LogLevel::kInfo, "exit", {});
    log::log_flush();
    return 0;
}
