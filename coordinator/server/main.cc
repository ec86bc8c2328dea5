// fence-coordinator: one member of a pgfence cluster. See --help.
#include <boost/asio.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <sys/random.h>

#include "client/client.h"
#include "log/log.h"
#include "pgfence_version.h"
#include "server/ask_seed.h"
#include "server/bootstrap.h"
#include "server/member.h"
#include "server/options.h"
#include "storage/backup.h"
#include "storage/durable_storage.h"
#include "storage/file_util.h"
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

// DIR's sibling DIR<suffix> (DIR without its trailing slashes).
std::string sibling_of(const std::string& dir, const char* suffix) {
    std::string d = dir;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    return d + suffix;
}

std::string aside_of(const std::string& dir) { return sibling_of(dir, ".before-force-new-cluster"); }

// The directory a restored cluster's member is built in before it takes
// the data directory's place.
std::string building_of(const std::string& dir) { return sibling_of(dir, ".restoring"); }

// A restored member's data directory, made whole or not at all: built in
// DIR.restoring (identity, then the first snapshot and hard state, each
// durable), which then takes DIR's place in one rename — after the old DIR
// is moved aside for --force-new-cluster, or an empty DIR removed for
// --restore. A crash before the rename leaves DIR as it was (the next start
// begins again); one between the two renames of --force-new-cluster leaves
// DIR missing and DIR.restoring whole, finished by the next start
// (finish_forced_move).
std::string bootstrap_restored(const server::Options& opts, const server::StartPlan& plan) {
    const std::string building = building_of(opts.data_dir);
    const std::string parent = std::filesystem::absolute(sibling_of(opts.data_dir, "")).parent_path().string();
    try {
        if (!opts.force_new_cluster && std::filesystem::exists(opts.data_dir) &&
            (!std::filesystem::is_directory(opts.data_dir) || !std::filesystem::is_empty(opts.data_dir))) {
            return opts.data_dir + " is not an empty directory: restore into an empty (or missing) data directory";
        }
        std::filesystem::remove_all(building);
        std::filesystem::create_directories(building);
        {
            auto log = server::open_durable_log(building, plan.identity);
            const raft::Snapshot& first = *plan.first_snapshot;
            log->persist(raft::HardState{plan.first_term, raft::kNoNode, first.meta.index}, first, {});
        }  // closed: its lock is released
        storage::sync_dir(parent);  // DIR.restoring's entry is durable before any rename
        if (opts.force_new_cluster) {
            // The old directory stays, moved aside, until the operator deletes it.
            std::filesystem::rename(opts.data_dir, aside_of(opts.data_dir));
        } else {
            std::filesystem::remove(opts.data_dir);  // empty, or missing
        }
        std::filesystem::rename(building, opts.data_dir);
        storage::sync_dir(parent);
    } catch (const std::exception& e) {
        // DIR.restoring goes, unless it is whole and DIR already moved aside
        // (forced, failed between the renames): the next start finishes that.
        std::error_code ignored;
        const bool between_renames = opts.force_new_cluster && !std::filesystem::exists(opts.data_dir, ignored) &&
                                     std::filesystem::exists(aside_of(opts.data_dir), ignored);
        if (!between_renames) std::filesystem::remove_all(building, ignored);
        return e.what();
    }
    return {};
}

// A --force-new-cluster interrupted between its two renames: the new
// directory is whole (it was complete before the first), so it takes DIR's place now.
std::string finish_forced_move(const server::Options& opts) {
    const std::string building = building_of(opts.data_dir);
    if (std::filesystem::exists(opts.data_dir) || !std::filesystem::exists(aside_of(opts.data_dir)) ||
        !std::filesystem::exists(building)) {
        return {};
    }
    std::error_code ec;
    std::filesystem::rename(building, opts.data_dir, ec);
    if (ec) return "cannot finish moving " + building + " to " + opts.data_dir + ": " + ec.message();
    log::log_event(log::LogLevel::kWarn, "forced_new_cluster_finished", {{"dir", opts.data_dir}});
    return {};
}

// --restore FILE: the backup, checked.
std::string read_backup(const std::string& file, std::optional<server::RestoreSource>& out) {
    storage::Backup backup;
    try {
        if (auto why = storage::decode_backup(storage::read_whole_file(file, storage::kMaxBackupBytes), backup);
            !why.empty()) {
            return why;
        }
    } catch (const std::exception& e) {
        return e.what();
    }
    out = server::RestoreSource{backup.cluster_id, std::move(backup.snapshot)};
    return {};
}

// --force-new-cluster: this member's state, every entry of its log applied.
std::string take_own_state(const server::Options& opts, const std::optional<storage::Identity>& stored,
                           std::optional<server::RestoreSource>& out) {
    if (!stored) return opts.data_dir + " holds no member (no identity file)";
    if (std::filesystem::exists(aside_of(opts.data_dir))) {
        return aside_of(opts.data_dir) + " exists: this directory was forced into a new cluster before; start "
               "without --force-new-cluster (or move that directory away first)";
    }
    try {
        auto old = storage::DurableStorage::open(opts.data_dir, *stored);
        raft::Snapshot state;
        const raft::Configuration first = stored->first_config.value_or(raft::Configuration{});
        if (auto why = server::replay_log(*old, first, state); !why.empty()) return opts.data_dir + ": " + why;
        out = server::RestoreSource{stored->cluster_id, std::move(state)};
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

// 64 bits from the OS's randomness (getrandom(2)): a new cluster's ID.
std::string os_random(std::uint64_t& out) {
    unsigned char* p = reinterpret_cast<unsigned char*>(&out);
    std::size_t got = 0;
    while (got < sizeof out) {
        const ssize_t n = getrandom(p + got, sizeof out - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::string("getrandom: ") + std::strerror(errno);
        got += static_cast<std::size_t>(n);
    }
    return {};
}

std::uint64_t wall_clock_us() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

}  // namespace

int main(int argc, char** argv) {
    server::Options opts;
    std::string err = server::parse_options(argc, argv, opts);
    if (err.empty() && opts.help) {
        std::fputs(server::usage().c_str(), stdout);
        return 0;
    }
    if (err.empty() && opts.version) {
        std::fputs("fence-coordinator (pgfence) " PGFENCE_VERSION "\n", stdout);
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
        if (err = finish_forced_move(opts); !err.empty()) throw std::runtime_error(err);
        stored = storage::load_identity(opts.data_dir);
    } catch (const std::exception& e) {
        log::log_event(log::LogLevel::kError, "storage_open_failed", {{"dir", opts.data_dir}, {"error", e.what()}});
        return 1;
    }
    server::StartInputs in;
    in.stored = stored;
    std::optional<server::JoinAnswer>& join = in.join;
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
    std::optional<server::RestoreSource>& restore = in.restore;
    if (!opts.restore_file.empty() && !stored) {
        if (err = read_backup(opts.restore_file, restore); !err.empty()) {
            std::fprintf(stderr, "fence-coordinator: --restore %s: %s\n", opts.restore_file.c_str(), err.c_str());
            return 1;
        }
    }
    if (opts.force_new_cluster) {
        if (err = take_own_state(opts, stored, restore); !err.empty()) {
            std::fprintf(stderr, "fence-coordinator: --force-new-cluster: %s\n", err.c_str());
            return 1;
        }
    }
    // A new cluster whose ID is not derived: the seed chooses it (and a new
    // generation's floor) from these; the other members ask the seed.
    if (const std::uint64_t seed = server::seed_of(opts, stored.has_value()); seed == opts.id) {
        if (err = os_random(in.random); !err.empty()) {
            std::fprintf(stderr, "fence-coordinator: a new cluster ID: %s\n", err.c_str());
            return 1;
        }
        in.now_us = wall_clock_us();
        if (restore) {
            if (err = server::check_seed_clock(in.now_us); !err.empty()) {
                std::fprintf(stderr, "fence-coordinator: %s\n", err.c_str());
                return 1;
            }
        }
    } else if (seed != 0) {
        if (err = server::ask_seed(opts, seed, server::kSeedWait, in.seed); !err.empty()) {
            std::fprintf(stderr, "fence-coordinator: %s\n", err.c_str());
            return 1;
        }
    }
    server::StartPlan plan;
    if (err = server::plan_start(opts, in, plan); !err.empty()) {
        std::fprintf(stderr, "fence-coordinator: %s\n", err.c_str());
        return 2;
    }
    if (plan.first_snapshot) {
        if (err = bootstrap_restored(opts, plan); !err.empty()) {
            std::fprintf(stderr, "fence-coordinator: %s: %s\n",
                         opts.force_new_cluster ? "--force-new-cluster" : "--restore", err.c_str());
            return 1;
        }
        log::log_event(log::LogLevel::kWarn, opts.force_new_cluster ? "forced_new_cluster" : "restored",
                       {{"from_cluster", log::log_value(restore->cluster_id)},
                        {"from_index", log::log_value(restore->state.meta.index)},
                        {"cluster_id", log::log_value(plan.identity.cluster_id)},
                        {"token_headroom", log::log_value(opts.restore_token_headroom)},
                        {"token_floor", log::log_value(plan.identity.origin->token_floor)},
                        {"old_dir", opts.force_new_cluster ? aside_of(opts.data_dir) : std::string()}});
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
