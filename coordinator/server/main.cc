// fence-coordinator: one member of a pgfence cluster. See --help.
#include <boost/asio.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "log/log.h"
#include "server/member.h"
#include "server/options.h"

using namespace pgfence;

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
    std::unique_ptr<server::DurableLog> log;
    try {
        std::filesystem::create_directories(opts.data_dir);
        log = server::open_durable_log(opts.data_dir, opts.cluster_id, opts.id);
    } catch (const std::exception& e) {
        log::log_event(log::LogLevel::kError, "storage_open_failed", {{"dir", opts.data_dir}, {"error", e.what()}});
        return 1;
    }
    boost::asio::io_context io;
    server::Member member(io, opts, std::move(log));
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
