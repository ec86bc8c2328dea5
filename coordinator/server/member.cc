// The shell's loop: inputs into the core, then once per loop turn (run_turn) the
// core's turn() and its effects carried out in the order member/core.h states
// (sends, the Persist and its after-persist messages, the snapshot save),
// the disk work placed by DiskTurn (disk_turn.h).
#include <algorithm>
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

// A broken invariant of the shell: logged as `fatal`, exit 70 (like the
// core's own `fatal`; not 74, which means the disk failed).
[[noreturn]] void stop_broken(std::string_view why) {
    log_event(LogLevel::kError, "fatal", {{"error", why}});
    log::log_flush();
    std::_Exit(70);
}

// Holds the log for one write (LogWriteCheck, disk_turn.h), on whichever
// thread runs it. Two at once (the loop and the writer thread) would
// interleave writes to the log.
class LogWrite {
public:
    explicit LogWrite(LogWriteCheck& check) : check_(check) {
        if (!check_.try_begin()) stop_broken("a persist or snapshot save began while another was running");
    }
    ~LogWrite() { check_.end(); }
    LogWrite(const LogWrite&) = delete;
    LogWrite& operator=(const LogWrite&) = delete;

private:
    LogWriteCheck& check_;
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
    cfg.expiry_wave = options.expiry_wave;
    cfg.owner_binding = options.owner_binding;
    cfg.lease_checkpoints = options.lease_checkpoints;
    cfg.early_appends = options.early_appends;
    cfg.max_checkpoints_per_tick = options.max_checkpoints_per_tick;
    cfg.token_floor = options.token_floor;
    cfg.watch_history_events = options.watch_history_events;
    cfg.watch_history_bytes = options.watch_history_bytes;
    cfg.token_history_tokens = options.token_history_events;
    cfg.token_history_bytes = options.token_history_bytes;
    cfg.log_wall_time = options.log_wall_time;
    cfg.debug_logs = log::log_enabled(LogLevel::kDebug);
    try {
        core = std::make_unique<member::Core>(cfg, log->storage());
    } catch (const std::exception& e) {
        return "cannot start the member core on " + options.data_dir + ": " + e.what();
    }
    watchers = std::make_unique<Watchers>(core->watch_history(),
                                          WatchLimits{options.max_watchers, options.watch_buffer_bytes}, options.id);
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
    announced_at_start = in_force;
    const net::HostPort listen = net::parse_host_port(book[options.id].peer_addr);
    if (!listen.ok()) {
        return "member " + std::to_string(options.id) + "'s peer address is not known: " +
               (in_force.members.empty() ? "it joined a cluster but has not received its configuration yet; start it "
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
    set_incoming_limits(options, topts);
    transport = std::make_unique<net::PeerTransport>(
        io, topts, [this](raft::Message m) { on_peer_message(std::move(m)); },
        [this](const net::MemberInfo& info) { on_member_info(info); });
    transport->set_tls(security.peer_accept_tls(), security.peer_dial_tls());
    if (auto err = transport->start(my_info()); !err.empty()) return err;
    raise_open_files();
    net::HttpServerOptions hopts;
    hopts.max_connections = options.max_connections;
    hopts.max_connections_per_address = options.max_connections_per_address;
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
    schedule_turn();
    return {};
}

void Member::Impl::on_tick() {
    report_gone();
    core->tick(now());
    watchers->tick(core->table().applied_index(), Clock::now());
    const std::uint64_t ticks = core->ticks();
    if (ticks % kInfoEveryTicks == 0) {
        std::erase_if(telling_removed, [ticks](const auto& t) { return t.second <= ticks; });
        transport->broadcast_info(my_info());
        // Leadership and removed members' leaving change whom to dial
        // without a new configuration.
        transport->set_peers(peers_to_dial());
    }
    schedule_turn();
}

void Member::Impl::on_peer_message(raft::Message m) {
    // The commit path's timing (commit_phases.h): a leader's acks of its
    // term, a follower's appends of the current term or later.
    const auto* ack = std::get_if<raft::AppendResponse>(&m.body);
    if (ack != nullptr && ack->success && core->is_leader() && m.term == core->raft().term() &&
        core->raft().configuration().is_voter(m.from)) {
        commit_phases.acked(m.from, ack->match_index, Clock::now());
    } else if (const auto* app = std::get_if<raft::AppendRequest>(&m.body);
               app != nullptr && !app->entries.empty() && m.term >= core->raft().term()) {
        commit_phases.append_read(m.term, app->entries.back().index, Clock::now());
    }
    core->step(m, now());
    schedule_turn();
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
// requests read in the same epoll round share one Ready and one write, and,
// when no write is outstanding, one AppendRequest per follower (while one is,
// those proposed since go out with the next Ready, or in their own with
// --early-appends on, core.h `send`).
void Member::Impl::schedule_turn() {
    if (turn_scheduled) return;
    turn_scheduled = true;
    loop.post([this] {
        turn_scheduled = false;
        run_turn();
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

void Member::Impl::run_turn() {
    report_gone();
    core->turn(now());
    // Twice at most: what persist_started() left (a leader's answers) is
    // carried out in the same turn.
    for (int pass = 0; pass < 2 && core->has_effects(); ++pass) {
        core->take_effects(effects);
        execute(effects);
    }
    watchers->publish();  // the events applied this turn (nothing to do when none, or no watch)
    if (core->wants_turn()) schedule_turn();  // e.g. a waiter's Grant proposed while applying
    log::log_flush();  // one write for the lines this turn logged
}

// The core's effects, in the order member/core.h gives: the disk work first
// (a leader's write starts while its batch is answered; the Persist before
// the save, so that DiskTurn knows of it when it places the save), then the
// answers, then the log lines.
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
    if (core->is_leader() && core->raft().term() != phases_term) {
        commit_phases.reset();  // leadership won: a follower's appends are forgotten too
        phases_term = core->raft().term();
    }
    for (const raft::Message& m : fx.send) {
        if (std::holds_alternative<raft::Removed>(m.body) && telling_removed.count(m.to) == 0) {
            // Not dialed any more: dialed again for a while (this answer is
            // dropped; the next campaign's is delivered).
            telling_removed[m.to] = core->ticks() + 20 * static_cast<std::uint64_t>(options.election_ticks());
            transport->set_peers(peers_to_dial());
        }
        transport->send(m);
        // An ack sent without a write (the entries were in the log already):
        // the appends it covers are not timed (commit_phases.h).
        if (const auto* ack = std::get_if<raft::AppendResponse>(&m.body); ack != nullptr && ack->success) {
            commit_phases.drop_appends(ack->match_index);
        }
    }
    if (!core->is_leader() && phases_term != 0) {
        commit_phases.reset();  // leadership lost: its batches are not answered here
        phases_term = 0;
    }
    time_sends(fx.send);
    if (fx.persist) run_persist(fx.persist);
    if (fx.save) disk_step(DiskTurn::SaveTaken{fx.save});
    const Clock::time_point applied_at = fx.respond.empty() ? Clock::time_point{} : Clock::now();
    const bool timing = core->is_leader() && phases_term != 0;
    for (member::Answer& a : fx.respond) {
        const Clock::time_point read_at = answer(a.id, std::move(a.response));
        if (timing && a.term == phases_term && read_at != Clock::time_point{}) {
            commit_phases.answered(a.index, read_at, applied_at, Clock::now());
        }
    }
    for (member::RequestId id : fx.watch) {
        auto it = outstanding.find(id);
        if (it == outstanding.end()) continue;
        it->second.read_at = {};  // it waits in a key's queue: its wait is not the commit's (commit_phases.h)
        it->second.exchange->watch_close();  // report_gone() asks client_gone() of it
        watched.insert(id);
    }
    log_lines();
    if (fx.removed) {
        // Nothing more needs this member: it stops as on SIGTERM (the core
        // logged removed_from_cluster).
        loop.post([this] { shutdown([this] { io.stop(); }); });
    }
}

// The Persist: hard state, snapshot and entries with one fdatasync, then the
// Ready's `messages`, then persisted(). Where it runs is DiskTurn's to say
// (disk_turn.h):
//
// A follower (or candidate) writes on the loop itself: persist, send its acks
// or votes, carry on. Nothing it could do meanwhile would help: its acks and
// its next write both wait for this one, and peer messages that arrive during
// the write wait in the socket and are read together afterwards. The two
// thread hand-offs this saves (loop to writer, writer back to the loop) cost
// more than the stall: about 8% of the cluster's cycles/s at 32 connections
// (docs/decisions.md, "Coordinator threads").
//
// A leader hands the write to the writer thread, which sends `messages`
// itself once they are durable, and carries on: the core has applied the
// Ready's committed entries already, and while the write runs the loop goes
// on reading requests and acks; the next Ready carries everything proposed
// meanwhile (group commit). So does a follower while a snapshot adoption is
// queued there (its Persist queues behind the adoption).
void Member::Impl::run_persist(const std::shared_ptr<const raft::Ready>& rd) {
    if (proof_signer && core->is_leader() && !rd->entries.empty()) {
        // The batch's Grants are signed while it is written and replicated.
        proof_signer->presign(security.signer(), std::shared_ptr<const std::vector<raft::Entry>>(rd, &rd->entries),
                              core->table().token_floor());
    }
    const raft::Index timed = time_batch(*rd);
    const DiskTurn::Action where = disk_step(DiskTurn::PersistTaken{core->is_leader()});
    if (where.kind == DiskTurn::Action::kPersistOnWriter) {
        struct Took {
            std::chrono::nanoseconds persist{0};  // the persist alone, not the sends
            Clock::time_point began;
            DurableLog::PersistTimes wal;
        };
        auto took = std::make_shared<Took>();
        writer.submit(
            [this, rd, took] {
                took->began = Clock::now();
                took->persist = persist_ready(*rd);
                took->wal = log->last_persist();
                for (const raft::Message& m : rd->messages) transport->send(m);
            },
            [this, took, timed, entries = rd->entries.size()] {
                metrics.fsync.observe(took->persist);
                if (entries != 0) commit_phases.persisted_batch(entries, took->wal.bytes);
                if (timed != 0) {
                    commit_phases.written(timed, took->began, took->wal.write, took->wal.sync, Clock::now());
                }
                core->persisted(now());
                disk_step(DiskTurn::PersistDone{});
                schedule_turn();
            });
        core->persist_started(now());  // the write is under way: apply and answer the batch meanwhile
        return;
    }
    core->persist_started(now());
    std::chrono::nanoseconds took{};
    const Clock::time_point began = Clock::now();
    run_storage_work([this, &rd, &took] { took = persist_ready(*rd); });
    if (!rd->entries.empty()) commit_phases.follower_wrote(Clock::now());
    metrics.fsync.observe(took);
    const DurableLog::PersistTimes wal = log->last_persist();
    if (!rd->entries.empty()) commit_phases.persisted_batch(rd->entries.size(), wal.bytes);
    for (const raft::Message& m : rd->messages) {
        transport->send(m);
        const auto* ack = std::get_if<raft::AppendResponse>(&m.body);
        if (ack != nullptr && ack->success) commit_phases.follower_acked(ack->match_index, began, wal.sync, Clock::now());
    }
    core->persisted(now());
    disk_step(DiskTurn::PersistDone{});
    schedule_turn();
}

raft::Index Member::Impl::time_batch(const raft::Ready& rd) {
    if (!core->is_leader() || rd.entries.empty()) return 0;
    const Clock::time_point at = Clock::now();
    const raft::Index last = rd.entries.back().index;
    if (followers_needed() == 0) commit_phases.sent(last, 0, at);  // a voter alone sends nothing
    commit_phases.taken(rd.entries.front().index, last, at);
    return last;
}

std::size_t Member::Impl::followers_needed() const {
    const raft::Configuration& conf = core->raft().configuration();
    return conf.quorum() - (conf.is_voter(core->raft().id()) ? 1 : 0);
}

void Member::Impl::time_sends(const std::vector<raft::Message>& sent) {
    if (phases_term == 0) return;  // not leading
    raft::Index last = 0;
    for (const raft::Message& m : sent) {
        const auto* app = std::get_if<raft::AppendRequest>(&m.body);
        if (app != nullptr && !app->entries.empty()) {
            last = std::max(last, app->entries.back().index);
        }
    }
    if (last == 0) return;
    commit_phases.sent(last, followers_needed(), Clock::now());
}

DiskTurn::Action Member::Impl::disk_step(const DiskTurn::Event& event) {
    DiskTurn::Action a = disk_turn.step(event);
    switch (a.kind) {
        case DiskTurn::Action::kBroken:
            stop_broken(a.broken);
        case DiskTurn::Action::kWriteFile:
            write_snapshot_file(a.snapshot);
            break;
        case DiskTurn::Action::kAdoptOnWriter:
            adopt_snapshot(a.snapshot);
            break;
        case DiskTurn::Action::kSaved:
            core->snapshot_saved(a.snapshot, now());
            schedule_turn();
            break;
        case DiskTurn::Action::kNothing:
        case DiskTurn::Action::kPersistOnLoop:
        case DiskTurn::Action::kPersistOnWriter:
            break;
    }
    return a;
}

// The snapshot save, in two steps so that it never holds up a Persist (a
// Persist carries the heartbeats and acks; writing a snapshot file of tens
// of megabytes takes up to seconds, longer than an election timeout):
//   1. the snapshot thread writes the file (encode, fdatasync, rename), while
//      Persists go on. Every entry the snapshot covers is durable in the log
//      already (Raft hands out for applying only entries stable here); the
//      file is begun only once no Persist is outstanding all the same
//      (DiskTurn), so that the log holds them whatever the order of the two
//      threads' writes;
//   2. then, in the log's order like a Persist (on the writer thread, a
//      follower's Persists queued behind it), the log adopts it and drops
//      the entries it covers; then the core hears of it.
void Member::Impl::write_snapshot_file(std::shared_ptr<const raft::Snapshot> snap) {
    auto took = std::make_shared<std::chrono::nanoseconds>();  // the file: encode, write, fdatasync, rename
    snapshot_writer.submit(
        [this, snap = std::move(snap), took] {
            const auto start = Clock::now();
            log->write_snapshot_file(*snap);
            *took = Clock::now() - start;
        },
        [this, took] {
            metrics.snapshot_save.observe(*took);
            metrics.snapshot_save_last_seconds = std::chrono::duration<double>(*took).count();
            disk_step(DiskTurn::FileWritten{});
        });
}

void Member::Impl::adopt_snapshot(std::shared_ptr<const raft::Snapshot> snap) {
    writer.submit(
        [this, snap = std::move(snap)] {
            const LogWrite write(log_writes);
            log->adopt_snapshot(snap);
        },
        [this] { disk_step(DiskTurn::Adopted{}); });
}

// On the loop or the writer thread, never concurrently with another persist
// or snapshot adoption (DiskTurn places them; LogWrite checks it).
// Returns how long the persist took.
std::chrono::nanoseconds Member::Impl::persist_ready(const raft::Ready& rd) {
    const LogWrite write(log_writes);
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
    if (core->shutting_down()) return;
    watchers->publish();
    watchers->shutdown();  // the shutting_down line: watches resume on another member
    std::vector<raft::NodeId> reachable;
    for (const raft::ConfigMember& m : core->raft().configuration().members) {
        if (m.id != options.id && transport->connected(m.id)) reachable.push_back(m.id);
    }
    core->begin_shutdown(reachable, now());
    run_turn();  // logs shutdown_requested and sends the transfer before a follower stops
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
    if (core->removed()) {
        // The commit that covers its removal is written, so that a restart
        // sees the removal committed and refuses to start (start()).
        const raft::Status st = core->raft().status();
        try {
            const LogWrite write(log_writes);
            log->persist_commit(raft::HardState{st.term, st.vote, st.commit});
        } catch (const std::exception& e) {
            log_event(LogLevel::kWarn, "removal_not_recorded", {{"error", e.what()}});
        }
    }
    done();
}

}  // namespace pgfence::server
