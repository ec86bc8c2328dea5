// Member core loop: Ready draining in the documented order, apply, roles,
// snapshots, proposals.
#include <atomic>
#include <cstdlib>

#include <boost/asio/io_context.hpp>

#include "net/log.h"
#include "server/member_impl.h"

namespace pgfence::server {

using net::log_event;
using net::log_value;
using net::LogLevel;

namespace {

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
            net::log_flush();
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

Member::Member(boost::asio::io_context& io, Options options, std::unique_ptr<DurableLog> log)
    : impl_(std::make_unique<Impl>(io, std::move(options), std::move(log))) {}

Member::~Member() = default;

// The writer's jobs use the transport and the log: it stops first.
Member::Impl::~Impl() { writer.stop(); }

std::string Member::start() { return impl_->start(); }

void Member::shutdown(std::function<void()> done) { impl_->shutdown(std::move(done)); }

Member::Impl::Impl(boost::asio::io_context& io_ctx, Options o, std::unique_ptr<DurableLog> l)
    : io(io_ctx), options(std::move(o)), log(std::move(l)), loop(io_ctx),
      writer([this](std::function<void()> fn) { loop.post(std::move(fn)); }) {
    limits.min_lease_ms = options.min_lease_ms;
    limits.max_lease_ms = options.max_lease_ms;
    limits.max_wait_ms = options.max_wait_ms;
}

std::string Member::Impl::start() {
    raft::Config cfg;
    cfg.id = options.id;
    for (const PeerSpec& p : options.peers) cfg.members.push_back(p.id);
    cfg.cluster_id = options.cluster_id;
    cfg.heartbeat_ticks = 1;
    cfg.election_ticks = options.election_ticks();
    cfg.random_seed = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^ (options.id << 32);
    const raft::Snapshot snap = log->storage().snapshot();
    if (!snap.empty()) {
        auto restored = lock::LockTable::restore(snap.data);
        if (auto* err = std::get_if<lock::DecodeError>(&restored)) {
            return "snapshot in " + options.data_dir + " does not decode: " + err->message;
        }
        table = std::move(std::get<lock::LockTable>(restored));
        last_snapshot_index = snap.meta.index;
        applied_term = snap.meta.term;
    }
    written_hard_state = log->storage().hard_state();
    try {
        raft = std::make_unique<raft::Raft>(cfg, log->storage());
    } catch (const std::exception& e) {
        return std::string("cannot start the Raft core: ") + e.what();
    }
    net::TransportOptions topts;
    topts.self_id = options.id;
    topts.cluster_id = options.cluster_id;
    for (const PeerSpec& p : options.peers) {
        if (p.id == options.id) {
            topts.listen_host = p.host;
            topts.listen_port = p.port;
        } else {
            topts.peers.push_back(net::PeerAddress{p.id, p.host, p.port});
        }
    }
    transport = std::make_unique<net::PeerTransport>(
        io, topts, [this](raft::Message m) { on_peer_message(std::move(m)); },
        [this](const net::MemberInfo& info) { on_member_info(info); });
    if (auto err = transport->start(my_info()); !err.empty()) return err;
    net::HttpServerOptions hopts;
    std::string host;
    std::uint16_t port = 0;
    net::split_host_port(options.client_addr, host, port);
    hopts.host = host;
    hopts.port = port;
    http = std::make_unique<net::HttpServer>(
        io, hopts, [this](const net::HttpRequest& req, ExchangePtr ex) { handle_http(req, ex); });
    if (auto err = http->start(); !err.empty()) return err;
    loop.every(std::chrono::milliseconds(options.heartbeat_ms), [this] { on_tick(); });
    log_event(LogLevel::kInfo, "member_started",
              {{"id", log_value(options.id)}, {"cluster_id", log_value(options.cluster_id)},
               {"client_addr", options.client_addr}, {"applied", log_value(table.applied_index())},
               {"term", log_value(raft->term())}});
    after_event();
    return {};
}

void Member::Impl::on_tick() {
    ++ticks;
    raft->tick();
    if (is_leader()) {
        check_expiries();
        sweep_waiters();
    }
    if (ticks % kInfoEveryTicks == 0) {
        transport->broadcast_info(my_info());
        sweep_proposals();
    }
    after_event();
}

void Member::Impl::on_peer_message(raft::Message m) {
    raft->step(m);
    after_event();
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

void Member::Impl::drain() {
    flush_confirms();
    observe_role();
    pump();
    net::log_flush();  // one write for the lines this turn logged
}

// Drains one Ready: messages_now at once; hard state, snapshot and entries
// with one fdatasync; `messages` once that is durable.
//
// A follower (or candidate) writes on the loop itself: persist, send its acks
// or votes, apply, advance. Nothing it could do meanwhile would help: its
// acks and its next write both wait for this one, and peer messages that
// arrive during the write wait in the socket and are read together
// afterwards. The two thread hand-offs this saves (loop to writer, writer
// back to the loop) cost more than the stall: about 8% of the cluster's
// cycles/s at 32 connections (docs/deviations.md, "Coordinator threads").
//
// A leader hands the write to the writer thread (submit_ready) and carries
// on, and so does a follower while a snapshot save runs there (its Ready
// queues behind the save).
//
// A Ready whose hard state changed only in commit (not stored:
// DurableStorage writes term and vote) and that carries no entries or
// snapshot skips the write.
void Member::Impl::pump() {
    if (ready_in_flight) {
        apply_taken();
        return;
    }
    if (!raft->has_ready()) return;
    auto rd = std::make_shared<raft::Ready>(raft->ready());
    for (const raft::Message& m : rd->messages_now) transport->send(m);
    ready_in_flight = true;
    if (!needs_write(*rd)) {
        if (rd->hard_state) unwritten_hard_state = rd->hard_state;
    } else {
        if (!rd->hard_state) rd->hard_state = unwritten_hard_state;
        unwritten_hard_state.reset();
        if (rd->hard_state) written_hard_state = *rd->hard_state;
        if (is_leader() || snapshot_in_flight) {
            submit_ready(rd);
            return;
        }
        std::chrono::nanoseconds took{};
        run_storage_work([this, &rd, &took] { took = persist_ready(*rd); });
        metrics.fsync.observe(took);
    }
    for (const raft::Message& m : rd->messages) transport->send(m);
    finish_ready(rd, false);
}

// The write on the writer thread, which sends `messages` itself once they
// are durable. Committed entries are applied at once, in parallel with the
// write: the core hands out only entries already durable on this member (and
// on a quorum), so applying and answering them waits for nothing in this
// batch. Meanwhile the loop goes on reading requests and acks, applying what
// an ack commits (apply_taken); the next Ready carries everything proposed
// meanwhile (group commit).
void Member::Impl::submit_ready(const std::shared_ptr<raft::Ready>& rd) {
    const bool applied_now = !rd->snapshot;  // a snapshot restores the table first
    auto took = std::make_shared<std::chrono::nanoseconds>();  // the persist alone, not the sends
    writer.submit(
        [this, rd, took] {
            *took = persist_ready(*rd);
            for (const raft::Message& m : rd->messages) transport->send(m);
        },
        [this, rd, applied_now, took] {
            metrics.fsync.observe(*took);
            finish_ready(rd, applied_now);
        });
    // After the hand-off: the write starts while the batch is answered.
    if (applied_now) apply_ready(*rd);
}

// On the loop or the writer thread, never concurrently with another persist
// or snapshot save (one Ready is in flight at a time, and the loop writes
// inline only while no snapshot save is queued): DiskTurn checks it. Returns
// how long the persist took.
std::chrono::nanoseconds Member::Impl::persist_ready(const raft::Ready& rd) {
    const DiskTurn turn(disk_busy);
    const auto start = Clock::now();
    log->persist(rd.hard_state, rd.snapshot, rd.entries);
    return Clock::now() - start;
}

bool Member::Impl::needs_write(const raft::Ready& rd) const {
    if (rd.snapshot || !rd.entries.empty()) return true;
    return rd.hard_state && (rd.hard_state->term != written_hard_state.term ||
                             rd.hard_state->vote != written_hard_state.vote);
}

// Step 3 of the Ready contract: committed entries, then confirmed reads.
void Member::Impl::apply_ready(const raft::Ready& rd) {
    applying = true;
    for (const raft::Entry& e : rd.committed) apply_entry(e);
    for (const raft::ReadState& rs : rd.reads) on_read_state(rs);
    for (std::uint64_t ctx : rd.dropped_reads) fail_reads(ctx);
    run_confirmed_reads();
    applying = false;
}

// While a Ready is being written: apply what became committed meanwhile (the
// leader learns most commits from a follower's ack during its own next write).
// The core hands nothing if that Ready carries a snapshot (restored first).
void Member::Impl::apply_taken() {
    if (applying) return;
    applying = true;
    bool any = false;
    for (int round = 0; round < kMaxApplyRounds; ++round) {
        const std::vector<raft::Entry> entries = raft->take_committed();
        if (entries.empty()) break;
        for (const raft::Entry& e : entries) apply_entry(e);
        any = true;
    }
    if (any) run_confirmed_reads();
    applying = false;
}

void Member::Impl::finish_ready(const std::shared_ptr<raft::Ready>& rd, bool applied) {
    if (rd->snapshot) {
        auto restored = lock::LockTable::restore(rd->snapshot->data);
        if (auto* err = std::get_if<lock::DecodeError>(&restored)) {
            log_event(LogLevel::kError, "snapshot_restore_failed", {{"error", err->message}});
            std::_Exit(70);
        }
        table = std::move(std::get<lock::LockTable>(restored));
        applied_term = rd->snapshot->meta.term;
        last_snapshot_index = rd->snapshot->meta.index;
        log_event(LogLevel::kInfo, "snapshot_installed",
                  {{"index", log_value(rd->snapshot->meta.index)}, {"locks", log_value(table.size())}});
    }
    if (!applied) apply_ready(*rd);
    raft->advance(*rd);
    ready_in_flight = false;
    maybe_snapshot();
    after_event();
}

void Member::Impl::apply_entry(const raft::Entry& e) {
    if (e.index <= table.applied_index()) return;
    applied_term = e.term;
    lock::Result result = lock::Noop{};
    std::optional<lock::Command> cmd;
    if (e.type == raft::EntryType::kNormal) {
        auto decoded = lock::decode_command(e.data);
        if (auto* err = std::get_if<lock::DecodeError>(&decoded)) {
            log_event(LogLevel::kError, "entry_undecodable", {{"index", log_value(e.index)}, {"error", err->message}});
        } else {
            cmd = std::get<lock::Command>(decoded);
        }
    }
    // Release and Expire remove the lock: its owner, for their log lines.
    std::string owner;
    if (const auto* r = cmd ? std::get_if<lock::Release>(&*cmd) : nullptr) owner = owner_of(r->key, r->token);
    if (const auto* x = cmd ? std::get_if<lock::Expire>(&*cmd) : nullptr) owner = owner_of(x->key, x->token);
    result = cmd ? table.apply(e.index, *cmd) : table.apply_noop(e.index);
    if (cmd) on_applied(e.index, *cmd, result, owner);
    auto it = proposals.find(e.index);
    if (it == proposals.end()) return;
    Pending p = std::move(it->second);
    proposals.erase(it);
    if (p.term == e.term) {
        metrics.proposal_commit.observe(Clock::now() - p.proposed_at);
        p.done(&result);
    } else {
        p.done(nullptr);
    }
}

std::string Member::Impl::owner_of(std::string_view key, lock::Token token) const {
    const lock::Lock* l = table.find(key);
    return l != nullptr && l->token == token ? l->owner : std::string();
}

// Metrics, logs, leases and waiters follow every applied command. `owner`:
// of the lock a Release or Expire names, as it was before this command.
void Member::Impl::on_applied(raft::Index index, const lock::Command& cmd, const lock::Result& result,
                              const std::string& owner) {
    const bool leader = is_leader();
    const LogLevel level = leader ? LogLevel::kInfo : LogLevel::kDebug;
    if (const auto* g = std::get_if<lock::Grant>(&cmd)) {
        if (const auto* ok = std::get_if<lock::Granted>(&result)) {
            ++metrics.grants;
            log_event(level, "grant", {{"key", g->key}, {"token", log_value(ok->token)}, {"owner", g->owner},
                                       {"lease_ms", log_value(g->lease_ms)}, {"index", log_value(index)}});
            // An idempotent re-grant applied while Expire{key, token} is in
            // flight keeps the expiry (on_grant_result refuses it): resetting
            // the lease would promise a lock that the Expire then removes.
            auto held = leases.find(g->key);
            const bool expiring = held != leases.end() && held->second.token == ok->token && held->second.expire_proposed;
            if (leader && !expiring) {
                leases[g->key] = Lease::started(ok->token, g->lease_ms, Clock::now(), options.max_clock_drift_ppm);
            }
        } else {
            ++metrics.grant_conflicts;
            const auto* rej = std::get_if<lock::GrantRejected>(&result);
            log_event(level, "grant_rejected", {{"key", g->key}, {"owner", g->owner},
                                                {"holder_token", log_value(rej ? rej->holder_token : 0)}});
        }
        return;
    }
    std::string key;
    lock::Token token = 0;
    bool removed = false;
    if (const auto* r = std::get_if<lock::Release>(&cmd)) {
        key = r->key;
        token = r->token;
        removed = std::holds_alternative<lock::Released>(result);
        ++(removed ? metrics.releases : metrics.release_not_held);
        log_event(level, "release", {{"key", key}, {"token", log_value(token)},
                                     {"released", removed ? "true" : "false"}, {"owner", owner}});
    } else if (const auto* x = std::get_if<lock::Expire>(&cmd)) {
        key = x->key;
        token = x->token;
        const auto* ex = std::get_if<lock::Expired>(&result);
        removed = ex != nullptr && ex->existed;
        ++(removed ? metrics.expiries_existed : metrics.expiries_missing);
        log_event(level, "expire", {{"key", key}, {"token", log_value(token)},
                                    {"existed", removed ? "true" : "false"}, {"owner", owner}});
    } else if (const auto* f = std::get_if<lock::SetTokenFloor>(&cmd)) {
        log_event(LogLevel::kInfo, "token_floor", {{"requested", log_value(f->floor)}, {"floor", log_value(table.token_floor())}});
        return;
    }
    if (!removed) return;
    auto it = leases.find(key);
    if (it != leases.end() && it->second.token == token) leases.erase(it);
    if (leader) serve_waiters(key);
}

void Member::Impl::observe_role() {
    const raft::Role role = raft->role();
    const raft::NodeId leader = raft->leader();
    if (leader != last_leader) {
        if (leader != raft::kNoNode) ++metrics.leader_changes;
        log_event(LogLevel::kInfo, "leader_changed", {{"leader", log_value(leader)}, {"term", log_value(raft->term())}});
        last_leader = leader;
    }
    const bool leader_now = role == raft::Role::kLeader;
    if (leader_now && leader_term != raft->term()) become_leader();
    if (!leader_now && leader_term != 0) lose_leadership();
    last_role = role;
}

// A new leader restarts every held lease at its full lease_ms (DESIGN.md "Time").
void Member::Impl::become_leader() {
    if (leader_term != 0) lose_leadership();
    leader_term = raft->term();
    log_event(LogLevel::kInfo, "became_leader", {{"term", log_value(leader_term)}, {"locks", log_value(table.size())}});
    restart_all_leases();
    if (options.token_floor > table.token_floor()) {
        raft::ProposeError err = raft::ProposeError::kNone;
        propose(lock::SetTokenFloor{options.token_floor}, [](const lock::Result*) {}, &err);
    }
}

void Member::Impl::lose_leadership() {
    log_event(LogLevel::kInfo, "lost_leadership", {{"term", log_value(leader_term)}, {"leader", log_value(raft->leader())}});
    leader_term = 0;
    leases.clear();
    drop_all_waiters();
}

bool Member::Impl::propose(const lock::Command& cmd, std::function<void(const lock::Result*)> done,
                           raft::ProposeError* error) {
    if (proposals.size() >= kMaxPendingProposals) {
        *error = raft::ProposeError::kBacklog;
        return false;
    }
    const raft::ProposeResult r = raft->propose(lock::encode(cmd));
    *error = r.error;
    if (r.error != raft::ProposeError::kNone) return false;
    proposals[r.index] = Pending{r.term, Clock::now(), std::move(done)};
    return true;
}

// Proposals that never applied (partitioned ex-leader) are failed after a bound.
void Member::Impl::sweep_proposals() {
    const auto cutoff = Clock::now() - kProposalTimeout;
    for (auto it = proposals.begin(); it != proposals.end();) {
        if (it->second.proposed_at < cutoff) {
            auto done = std::move(it->second.done);
            it = proposals.erase(it);
            done(nullptr);
        } else {
            ++it;
        }
    }
}

void Member::Impl::maybe_snapshot() {
    const raft::Index applied = table.applied_index();
    if (snapshot_in_flight || applied < last_snapshot_index + options.snapshot_every) return;
    raft::Snapshot snap;
    snap.meta.index = applied;
    snap.meta.term = applied_term;
    for (const PeerSpec& p : options.peers) snap.meta.members.push_back(p.id);
    snap.data = table.snapshot();
    snapshot_in_flight = true;
    auto shared = std::make_shared<raft::Snapshot>(std::move(snap));
    writer.submit(
        [this, shared] {
            const DiskTurn turn(disk_busy);
            log->save_snapshot(*shared);
        },
        [this, shared] {
            snapshot_in_flight = false;
            last_snapshot_index = shared->meta.index;
            ++metrics.snapshots;
            raft->compact(shared->meta.index, shared->data, options.snapshot_keep);
            log_event(LogLevel::kInfo, "snapshot_taken",
                      {{"index", log_value(shared->meta.index)}, {"locks", log_value(table.size())}});
            after_event();
        });
}

void Member::Impl::shutdown(std::function<void()> done) {
    if (shutting_down) return;
    shutting_down = true;
    log_event(LogLevel::kInfo, "shutdown_requested", {{"role", raft::to_string(raft->role())}});
    if (is_leader()) {
        raft::NodeId best = raft::kNoNode;
        raft::Index best_match = 0;
        for (const raft::PeerStatus& p : raft->status().peers) {
            if (p.id != options.id && p.match >= best_match && transport->connected(p.id)) {
                best = p.id;
                best_match = p.match;
            }
        }
        if (best != raft::kNoNode && raft->transfer_leadership(best)) {
            log_event(LogLevel::kInfo, "leadership_transfer", {{"target", log_value(best)}, {"match", log_value(best_match)}});
        }
        after_event();
    }
    const auto give_up = Clock::now() + std::chrono::milliseconds(2 * options.max_election_timeout_ms());
    shutdown_step(give_up, std::move(done));
}

void Member::Impl::shutdown_step(Clock::time_point give_up, std::function<void()> done) {
    if ((is_leader() || ready_in_flight) && Clock::now() < give_up) {
        loop.after(std::chrono::milliseconds(options.heartbeat_ms), [this, give_up, done] { shutdown_step(give_up, done); });
        return;
    }
    log_event(LogLevel::kInfo, "shutdown", {{"role", raft::to_string(raft->role())}, {"leader", log_value(raft->leader())}});
    loop.stop_timers();
    http->stop();
    transport->stop();
    writer.stop();
    done();
}

}  // namespace pgfence::server
