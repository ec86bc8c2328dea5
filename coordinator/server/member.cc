// The shell's loop: inputs into the core, the core's effects carried out in
// the order member/core.h states (sends, snapshot save, the Persist and its
// after-persist messages), the writer thread for a leader's writes.
#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include <boost/asio/io_context.hpp>

#include "log/log.h"
#include "net/host_port.h"
#include "server/member_impl.h"
#include "server/open_files.h"

namespace pgfence::server {

using log::log_event;
using log::log_value;
using log::LogLevel;

namespace {

// What this member tells members that are not running yet (net/seed_info.h)
// when it is the seed of its cluster: the lowest ID of its first
// configuration. Empty otherwise (a member that joined has none).
std::string seed_info_of(const storage::Identity& identity, std::uint64_t self) {
    if (!identity.first_config || identity.first_config->members.empty()) return {};
    for (const raft::ConfigMember& m : identity.first_config->members) {
        if (m.id < self) return {};
    }
    net::SeedInfo info;
    info.member_id = self;
    info.first_config = *identity.first_config;
    if (identity.origin) {
        info.restored = true;
        info.from_cluster = identity.origin->from_cluster;
        info.from_index = identity.origin->from_index;
        info.token_floor = identity.origin->token_floor;
    }
    return net::encode_seed_info(info);
}

// Holds the log for one persist or snapshot save. Two at once (the loop and
// the writer thread) would interleave writes to the log: a broken invariant,
// fatal (logged as `fatal`, exit 70, like the loop's own broken invariants;
// not 74, which means the disk failed).
class DiskTurn {
public:
    explicit DiskTurn(std::atomic<bool>& busy) : busy_(busy) {
        if (busy_.exchange(true, std::memory_order_acquire)) {
            log_event(LogLevel::kError, "fatal",
                      {{"error", "a persist or snapshot save began while another was running"}});
            log::log_flush();
            std::_Exit(70);
        }
    }
    ~DiskTurn() { busy_.store(false, std::memory_order_release); }
    DiskTurn(const DiskTurn&) = delete;
    DiskTurn& operator=(const DiskTurn&) = delete;

private:
    std::atomic<bool>& busy_;
};

}  // namespace

Member::Member(boost::asio::io_context& io, Options options, StartPlan plan, std::unique_ptr<DurableLog> log)
    : impl_(std::make_unique<Impl>(io, std::move(options), std::move(plan), std::move(log))) {}

Member::~Member() = default;

// The writer's jobs use the transport and the log: it stops first. The
// signer's callbacks, posted to the loop, go with the loop.
Member::Impl::~Impl() {
    if (proof_signer) proof_signer->stop();
    snapshot_writer.stop();
    writer.stop();
}

std::string Member::start() { return impl_->start(); }

void Member::shutdown(std::function<void()> done) { impl_->shutdown(std::move(done)); }

void Member::reload() { impl_->reload_security(); }

Member::Impl::Impl(boost::asio::io_context& io_ctx, Options o, StartPlan p, std::unique_ptr<DurableLog> l)
    : io(io_ctx), options(std::move(o)), plan(std::move(p)), log(std::move(l)), loop(io_ctx),
      writer([this](std::function<void()> fn) { loop.post(std::move(fn)); }),
      snapshot_writer([this](std::function<void()> fn) { loop.post(std::move(fn)); }), security(options) {
    limits.min_lease_ms = options.min_lease_ms;
    limits.max_lease_ms = options.max_lease_ms;
    limits.max_wait_ms = options.max_wait_ms;
}

std::string Member::Impl::start() {
    if (auto err = security.load(); !err.empty()) return err;
    if (security.signer()) {
        proof_signer = std::make_unique<ProofSigner>([this](std::function<void()> fn) { loop.post(std::move(fn)); },
                                                     options.cluster_id);
    }
    if (security.auth_enabled() && !options.client_tls()) {
        log_event(LogLevel::kWarn, "auth_without_tls",
                  {{"reason", "--auth-file without --cert-file: bearer secrets cross the network in plaintext"}});
    }
    member::Config cfg;
    cfg.raft.id = options.id;
    if (plan.identity.first_config) {  // always (bootstrap.h); empty: joined a running cluster
        for (const raft::ConfigMember& m : plan.identity.first_config->members) {
            cfg.raft.members.push_back(m.id);
            if (!m.context.empty()) cfg.raft.contexts[m.id] = m.context;
        }
    }
    cfg.raft.cluster_id = options.cluster_id;
    cfg.raft.heartbeat_ticks = 1;
    cfg.raft.election_ticks = options.election_ticks();
    cfg.raft.max_snapshot_chunk_bytes = options.snapshot_chunk_bytes;
    cfg.raft.random_seed = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^ (options.id << 32);
    cfg.max_clock_drift_ppm = options.max_clock_drift_ppm;
    cfg.snapshot_every = options.snapshot_every;
    cfg.snapshot_keep = options.snapshot_keep;
    cfg.snapshot_log_pct = options.snapshot_log_pct;
    cfg.max_expire_batch = options.max_expire_batch;
    cfg.token_floor = options.token_floor;
    cfg.debug_logs = log::log_enabled(LogLevel::kDebug);
    try {
        core = std::make_unique<member::Core>(cfg, log->storage());
    } catch (const std::exception& e) {
        return "cannot start the member core on " + options.data_dir + ": " + e.what();
    }
    book = plan.addresses;
    const raft::Configuration& in_force = core->raft().configuration();
    // (A member that joined may hold entries from before its add, whose
    // configurations never named it: only one of a first configuration that
    // names it is known to have been removed.)
    const bool first_named = plan.identity.first_config && plan.identity.first_config->contains(options.id);
    if (first_named && !in_force.members.empty() && !in_force.contains(options.id) &&
        core->raft().configuration_index() <= core->raft().status().commit &&
        core->raft().configuration_index() != 0) {
        // Its removal is committed: nothing of the cluster needs it any more.
        return "member " + std::to_string(options.id) + " was removed from the cluster (the configuration at index " +
               std::to_string(core->raft().configuration_index()) +
               " does not name it): delete its data directory, or add it again (fencectl member add) and start it "
               "on an empty one with --join";
    }
    apply_configuration(in_force);
    const net::HostPort listen = net::parse_host_port(book[options.id].peer_addr);
    if (!listen.ok()) {
        return "member " + std::to_string(options.id) + "'s peer address is not known: " +
               (config.members.empty() ? "it joined a cluster but has not received its configuration yet; start it "
                                         "with --join ENDPOINTS of the running cluster"
                                       : "the configuration in force does not name it (was it removed?), and "
                                         "--peers does not either");
    }
    net::TransportOptions topts;
    topts.self_id = options.id;
    topts.cluster_id = options.cluster_id;
    topts.listen_host = std::string(listen.host);
    topts.listen_port = listen.port;
    topts.peers = peers_to_dial(true);
    topts.seed_info = seed_info_of(plan.identity, options.id);
    transport = std::make_unique<net::PeerTransport>(
        io, topts, [this](raft::Message m) { on_peer_message(std::move(m)); },
        [this](const net::MemberInfo& info) { on_member_info(info); });
    transport->set_tls(security.peer_accept_tls(), security.peer_dial_tls());
    if (auto err = transport->start(my_info()); !err.empty()) return err;
    raise_open_files();
    net::HttpServerOptions hopts;
    hopts.max_connections = options.max_connections;
    const net::HostPort client_addr = net::parse_host_port(options.client_addr);  // validated
    hopts.host = client_addr.host;
    hopts.port = client_addr.port;
    http = std::make_unique<net::HttpServer>(
        io, hopts, [this](const net::HttpRequest& req, ExchangePtr ex) { handle_http(req, ex); });
    http->set_tls(security.client_tls(), options.client_cert_auth);
    if (auto err = http->start(); !err.empty()) return err;
    loop.every(std::chrono::milliseconds(options.heartbeat_ms), [this] { on_tick(); });
    core->set_proof_kid(security.signer() ? security.signer()->kid() : std::string());
    log_event(LogLevel::kInfo, "member_started",
              {{"id", log_value(options.id)}, {"cluster_id", log_value(options.cluster_id)},
               {"client_addr", options.client_addr}, {"applied", log_value(core->table().applied_index())},
               {"term", log_value(core->raft().term())}, {"client_tls", options.client_tls() ? "on" : "off"},
               {"peer_tls", options.peer_tls() ? "on" : "off"}, {"auth", security.auth_enabled() ? "on" : "off"},
               {"token_signing_kid", security.signer() ? security.signer()->kid() : std::string()}});
    after_event();
    return {};
}

void Member::Impl::on_tick() {
    ++ticks;
    report_gone();
    core->tick(now());
    if (ticks % kInfoEveryTicks == 0) {
        std::erase_if(telling_removed, [this](const auto& t) { return t.second <= ticks; });
        transport->broadcast_info(my_info());
        // Leadership and removed members' leaving change whom to dial
        // without a new configuration.
        transport->set_peers(peers_to_dial());
    }
    after_event();
}

void Member::Impl::on_peer_message(raft::Message m) {
    core->step(m, now());
    after_event();
}

// --max-connections client connections, besides the peers and the member's
// files, need that many descriptors: the soft open-files limit is raised to
// fit, within the hard limit (a lower hard limit is logged, not fatal: the
// connections beyond it fail at accept, as any past the limit).
void Member::Impl::raise_open_files() {
    const std::uint64_t needed = options.max_connections + kOpenFilesReserve;
    OpenFilesLimit lim;
    const std::string why = raise_open_files_limit(needed, lim);
    if (!why.empty() || lim.soft < needed) {
        log_event(LogLevel::kWarn, "open_files_limit",
                  {{"needed", log_value(needed)}, {"soft", log_value(lim.soft)}, {"hard", log_value(lim.hard)},
                   {"max_connections", log_value(options.max_connections)},
                   {"error", why.empty() ? "the hard limit is lower: raise it (ulimit -Hn, LimitNOFILE=)" : why}});
    } else if (lim.raised) {
        log_event(LogLevel::kInfo, "open_files_limit", {{"soft", log_value(lim.soft)}, {"hard", log_value(lim.hard)}});
    }
}

// Every input (HTTP request, peer message, tick, finished write) ends here.
// The work it leaves — confirmations, role changes, the next Ready — is done
// once per turn of the event loop, after the inputs already waiting in it, so
// requests read in the same epoll round share one Ready, one write and one
// AppendRequest per follower.
void Member::Impl::after_event() {
    if (drain_posted) return;
    drain_posted = true;
    loop.post([this] {
        drain_posted = false;
        drain();
    });
}

// Waiting requests whose client left (watch_close makes asking free), told
// before the core serves a queue or times one out (client_left, member_http.cc).
void Member::Impl::report_gone() {
    for (auto it = watched.begin(); it != watched.end();) {
        auto o = outstanding.find(*it);
        if (o != outstanding.end() && !o->second.exchange->client_gone()) {
            ++it;
            continue;
        }
        const member::RequestId id = *it;
        it = watched.erase(it);
        if (o != outstanding.end()) client_left(id, LeftAt::kWaiting);
    }
}

void Member::Impl::drain() {
    report_gone();
    core->pump(now());
    // Twice at most: what persist_started() left (a leader's answers) is
    // carried out in the same turn.
    for (int pass = 0; pass < 2 && core->has_effects(); ++pass) {
        core->take_effects(effects);
        execute(effects);
    }
    if (core->wants_pump()) after_event();  // e.g. a waiter's Grant proposed while applying
    log::log_flush();  // one write for the lines this turn logged
}

// The core's effects, in the order member/core.h gives: the disk work first
// (a leader's write starts while its batch is answered), then the answers,
// then the log lines.
void Member::Impl::execute(member::Effects& fx) {
    auto log_lines = [&fx] {
        for (const member::LogLine& line : fx.logs) {
            std::array<log::LogField, member::LogLine::kMaxFields> fields;
            for (std::size_t i = 0; i < line.count; ++i) fields[i] = {line.fields[i].first, line.fields[i].second};
            log_event(static_cast<LogLevel>(line.level), line.event, fields.data(), line.count);
        }
    };
    if (!fx.fatal.empty()) {
        log_lines();
        log::log_flush();
        std::_Exit(70);
    }
    if (fx.configuration) apply_configuration(*fx.configuration);
    for (const raft::Message& m : fx.send) {
        if (std::holds_alternative<raft::Removed>(m.body) && telling_removed.count(m.to) == 0) {
            // Not dialed any more: dialed again for a while (this answer is
            // dropped; the next campaign's is delivered).
            telling_removed[m.to] = ticks + 20 * static_cast<std::uint64_t>(options.election_ticks());
            transport->set_peers(peers_to_dial());
        }
        transport->send(m);
    }
    if (fx.save) run_save(fx.save);
    if (fx.persist) run_persist(fx.persist);
    for (member::Answer& a : fx.respond) answer(a.id, std::move(a.response));
    for (member::RequestId id : fx.watch) {
        auto it = outstanding.find(id);
        if (it == outstanding.end()) continue;
        it->second.exchange->watch_close();  // report_gone() asks client_gone() of it
        watched.insert(id);
    }
    log_lines();
    if (fx.removed) {
        // Nothing more needs this member: it stops as on SIGTERM (the core
        // logged removed_from_cluster).
        removed = true;
        loop.post([this] { shutdown([this] { io.stop(); }); });
    }
}

// The Persist: hard state, snapshot and entries with one fdatasync, then the
// Ready's `messages`, then persisted().
//
// A follower (or candidate) writes on the loop itself: persist, send its acks
// or votes, carry on. Nothing it could do meanwhile would help: its acks and
// its next write both wait for this one, and peer messages that arrive during
// the write wait in the socket and are read together afterwards. The two
// thread hand-offs this saves (loop to writer, writer back to the loop) cost
// more than the stall: about 8% of the cluster's cycles/s at 32 connections
// (docs/deviations.md, "Coordinator threads").
//
// A leader hands the write to the writer thread, which sends `messages`
// itself once they are durable, and carries on: the core has applied the
// Ready's committed entries already, and while the write runs the loop goes
// on reading requests and acks; the next Ready carries everything proposed
// meanwhile (group commit). So does a follower while a snapshot save is
// queued there (its Persist queues behind the save).
void Member::Impl::run_persist(const std::shared_ptr<const raft::Ready>& rd) {
    if (proof_signer && core->is_leader() && !rd->entries.empty()) {
        // The batch's Grants are signed while it is written and replicated.
        proof_signer->presign(security.signer(), std::shared_ptr<const std::vector<raft::Entry>>(rd, &rd->entries),
                              core->table().token_floor());
    }
    if (core->is_leader() || save_queued) {
        auto took = std::make_shared<std::chrono::nanoseconds>();  // the persist alone, not the sends
        writer.submit(
            [this, rd, took] {
                *took = persist_ready(*rd);
                for (const raft::Message& m : rd->messages) transport->send(m);
            },
            [this, took] {
                metrics.fsync.observe(*took);
                core->persisted(now());
                start_save();
                after_event();
            });
        core->persist_started(now());  // the write is under way: apply and answer the batch meanwhile
        return;
    }
    core->persist_started(now());
    std::chrono::nanoseconds took{};
    run_storage_work([this, &rd, &took] { took = persist_ready(*rd); });
    metrics.fsync.observe(took);
    for (const raft::Message& m : rd->messages) transport->send(m);
    core->persisted(now());
    start_save();
    after_event();
}

// The snapshot save, in two steps so that it never holds up a Persist (a
// Persist carries the heartbeats and acks; writing a snapshot file of tens
// of megabytes takes up to seconds, longer than an election timeout):
//   1. the snapshot thread writes the file (encode, fdatasync, rename), while
//      Persists go on. Every entry the snapshot covers is durable in the log
//      already (Raft hands out for applying only entries stable here); the
//      file is begun only once no Persist is outstanding all the same, so
//      that the log holds them whatever the order of the two threads' writes;
//   2. then, in the log's order like a Persist (on the writer thread, a
//      follower's Persists queued behind it), the log adopts it and drops
//      the entries it covers; then the core hears of it.
void Member::Impl::run_save(const std::shared_ptr<const raft::Snapshot>& snap) {
    pending_save = snap;
    start_save();
}

void Member::Impl::start_save() {
    if (pending_save == nullptr || core->persisting()) return;
    std::shared_ptr<const raft::Snapshot> snap = std::move(pending_save);
    pending_save.reset();
    auto took = std::make_shared<std::chrono::nanoseconds>();  // the file: encode, write, fdatasync, rename
    snapshot_writer.submit(
        [this, snap, took] {
            const auto start = Clock::now();
            log->write_snapshot_file(*snap);
            *took = Clock::now() - start;
        },
        [this, snap, took] {
            metrics.snapshot_save.observe(*took);
            metrics.snapshot_save_last_seconds = std::chrono::duration<double>(*took).count();
            save_queued = true;
            writer.submit(
                [this, snap] {
                    const DiskTurn turn(disk_busy);
                    log->adopt_snapshot(snap);
                },
                [this, snap] {
                    save_queued = false;
                    core->snapshot_saved(snap, now());
                    after_event();
                });
        });
}

// On the loop or the writer thread, never concurrently with another persist
// or snapshot save (the core hands out one Persist at a time, and the loop
// writes inline only while no snapshot save is queued): DiskTurn checks it.
// Returns how long the persist took.
std::chrono::nanoseconds Member::Impl::persist_ready(const raft::Ready& rd) {
    const DiskTurn turn(disk_busy);
    const auto start = Clock::now();
    log->persist(rd.hard_state, rd.snapshot, rd.entries);
    return Clock::now() - start;
}

// New connections use what reloaded; open ones keep the contexts they have.
void Member::Impl::reload_security() {
    const std::vector<std::string> failed = security.reload();
    for (const std::string& why : failed) {
        ++metrics.security_reloads_failed;
        log_event(LogLevel::kError, "reload_failed", {{"error", why}, {"kept", "the files loaded before"}});
    }
    http->set_tls(security.client_tls(), options.client_cert_auth);
    transport->set_tls(security.peer_accept_tls(), security.peer_dial_tls());
    // Grants answered from now on are signed by the key loaded now (answer()).
    core->set_proof_kid(security.signer() ? security.signer()->kid() : std::string());
    log_event(LogLevel::kInfo, "reloaded",
              {{"failed", log_value(failed.size())},
               {"auth_file_digest", security.auth_enabled() ? security.policy()->digest() : std::string()},
               {"token_signing_kid", security.signer() ? security.signer()->kid() : std::string()}});
}

void Member::Impl::shutdown(std::function<void()> done) {
    if (shutting_down) return;
    shutting_down = true;
    std::vector<raft::NodeId> reachable;
    for (const raft::ConfigMember& m : config.members) {
        if (m.id != options.id && transport->connected(m.id)) reachable.push_back(m.id);
    }
    core->begin_shutdown(reachable, now());
    drain();  // logs shutdown_requested and sends the transfer before a follower stops
    const auto give_up = Clock::now() + std::chrono::milliseconds(2 * options.max_election_timeout_ms());
    shutdown_step(give_up, std::move(done));
}

void Member::Impl::shutdown_step(Clock::time_point give_up, std::function<void()> done) {
    if ((core->is_leader() || core->persisting()) && Clock::now() < give_up) {
        loop.after(std::chrono::milliseconds(options.heartbeat_ms), [this, give_up, done] { shutdown_step(give_up, done); });
        return;
    }
    log_event(LogLevel::kInfo, "shutdown",
              {{"role", raft::to_string(core->raft().role())}, {"leader", log_value(core->raft().leader())}});
    loop.stop_timers();
    http->stop();
    transport->stop();
    snapshot_writer.stop();
    writer.stop();
    if (removed) {
        // The commit that covers its removal is written, so that a restart
        // sees the removal committed and refuses to start (start()).
        const raft::Status st = core->raft().status();
        try {
            const DiskTurn turn(disk_busy);
            log->persist_commit(raft::HardState{st.term, st.vote, st.commit});
        } catch (const std::exception& e) {
            log_event(LogLevel::kWarn, "removal_not_recorded", {{"error", e.what()}});
        }
    }
    done();
}

}  // namespace pgfence::server
