// The simulated cluster: see sim_cluster.h.
#include "sim_cluster.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "history.h"
#include "safety_checker.h"
#include "sim_failure.h"
#include "sim_shell.h"
#include "sim_network.h"
#include "sim_workload.h"
#include "swarm.h"

namespace pgfence::sim {
namespace {

constexpr std::size_t kMaxEvents = 400'000;          // queued events; messages beyond are dropped
constexpr std::uint64_t kMaxLivenessSteps = 2'000'000;
constexpr std::uint64_t kLivenessElectionTimeouts = 40;  // liveness bound, in election timeouts
// rho for members and clients: members' clocks run at 0.77..1.43 x real time
// (their tick spread, below), within rho = 50%; clients' at real time. Beyond
// rho, cores and clients assume the default 5% on the same clocks.
constexpr std::uint64_t kRhoPpm = member::kMaxClockDriftPpmLimit;
constexpr std::uint64_t kBeyondRhoPpm = member::kDefaultMaxClockDriftPpm;
constexpr double kBeyondRhoShare = 1.0 / 8;

struct Event {
    enum class Kind : std::uint8_t {
        kTick, kDeliver, kPersistDone, kPersistAdvance, kCrash, kRestart, kClientRequest, kClientReply, kClientWake,
        kClientTimeout, kClientWrite, kFaultCrash, kFaultPartition, kFaultTransfer,
    };
    Kind kind = Kind::kTick;
    std::size_t member = 0;
    std::uint64_t generation = 0;
    int client = 0;
    std::uint64_t op_id = 0;
    raft::Message message;
    ClientRequest request;
    ClientReply reply;
    Workload::Write write;  // kClientWrite
    std::uint64_t sent_us = 0;  // kDeliver: when the message left
};

struct Slot {
    std::unique_ptr<Member> member;
    SimRandom random{0};
    std::uint64_t incarnation = 0;  // bumps at every crash: stale ticks/persists are ignored
    std::uint64_t persist_generation = 0;
    std::uint64_t tick_us = 0;
    raft::Role last_role = raft::Role::kFollower;
};

class Cluster {
public:
    explicit Cluster(const RunOptions& options);
    RunResult run();

private:
    void schedule(std::uint64_t at_us, Event e);
    void schedule_in(std::uint64_t delay_us, Event e) { schedule(now_us_ + delay_us, std::move(e)); }
    void schedule_fault(Event::Kind kind, double per_s);
    void handle(Event& e);
    void handle_member_event(Event& e);
    void handle_client_event(Event& e);
    void handle_fault(Event& e);
    void pump(std::size_t i, Outbox& out);
    void route(const Outbox& out);
    void crash(std::size_t i, const char* why);
    void crash_in(std::size_t i, std::uint64_t delay_us);  // a targeted crash, scheduled
    void restart(std::size_t i);
    void after_step(std::size_t i);
    void start_liveness();
    bool liveness_done();
    void start_drain();
    bool drained() const;
    std::string held_locks() const;
    void trace(const std::string& line) const;
    void finish_result();
    void add_counters(const member::Counters& c);

    RunOptions options_;
    SimRandom root_;
    SimRandom net_random_{0};
    SimRandom fault_random_{0};
    FaultConfig faults_;
    int n_ = 3;
    SafetyChecker checker_;
    std::unique_ptr<LeaderChecker> leader_checker_;
    std::unique_ptr<SimNetwork> network_;
    std::unique_ptr<Workload> workload_;
    std::vector<Slot> slots_;
    std::map<std::pair<std::uint64_t, std::uint64_t>, Event> events_;  // (time, seq) -> event
    std::uint64_t now_us_ = 0;
    std::uint64_t seq_ = 0;
    std::uint64_t step_ = 0;
    bool fault_phase_ = true;
    std::uint64_t client_timeout_us_ = 0;
    bool beyond_rho_ = false;
    std::uint64_t rho_ppm_ = kRhoPpm;
    // Liveness phase.
    std::uint64_t liveness_start_us_ = 0;
    std::uint64_t liveness_deadline_us_ = 0;
    raft::Index marker_index_ = 0;
    raft::Term marker_term_ = 0;
    // Drain phase: after the liveness goal, until no member holds a lock.
    bool draining_ = false;
    std::uint64_t drain_start_us_ = 0;
    std::uint64_t drain_deadline_us_ = 0;
    RunResult result_;
};

Cluster::Cluster(const RunOptions& options) : options_(options), root_(options.seed) {
    // Its own stream: the mode does not shift the seed's other draws.
    beyond_rho_ = options.beyond_rho || SimRandom(options.seed ^ 0xB3F0D1CEull).chance(kBeyondRhoShare);
    rho_ppm_ = beyond_rho_ ? kBeyondRhoPpm : kRhoPpm;
    n_ = options.members != 0 ? options.members : (root_.chance(0.6) ? 3 : 5);
    SimRandom fault_settings = root_.fork(1);
    faults_ = draw_fault_config(fault_settings);
    if (options.fault_free) make_fault_free(faults_);
    net_random_ = root_.fork(2);
    fault_random_ = root_.fork(3);
    network_ = std::make_unique<SimNetwork>(static_cast<std::size_t>(n_), faults_);
    workload_ = std::make_unique<Workload>(faults_.clients, static_cast<std::size_t>(n_), faults_.tick_us_base,
                                           rho_ppm_, !beyond_rho_, checker_.model(), root_.fork(4));
    client_timeout_us_ = 8 * static_cast<std::uint64_t>(faults_.election_ticks) * faults_.tick_us_base;
    raft::Config config;
    config.cluster_id = root_.next() | 1;
    const lock::Token token_floor = root_.chance(0.3) ? root_.between(1, 5'000) : 0;
    config.election_ticks = faults_.election_ticks;
    config.heartbeat_ticks = faults_.heartbeat_ticks;
    config.max_append_bytes = faults_.max_append_bytes;
    config.max_inflight_appends = faults_.max_inflight_appends;
    config.max_inflight_bytes = faults_.max_inflight_bytes;
    config.max_uncommitted_bytes = faults_.max_uncommitted_bytes;
    for (int i = 1; i <= n_; ++i) config.members.push_back(static_cast<raft::NodeId>(i));
    leader_checker_ = std::make_unique<LeaderChecker>(static_cast<std::size_t>(n_), rho_ppm_);
    slots_.resize(static_cast<std::size_t>(n_));
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_[i];
        config.id = i + 1;
        s.random = root_.fork(100 + i);
        const double spread = 0.7 + 0.6 * s.random.unit();  // per-member tick period, +-30%
        s.tick_us = static_cast<std::uint64_t>(static_cast<double>(faults_.tick_us_base) * spread);
        // The member ticks every tick_us_base of its own clock, which so runs
        // at tick_us_base / tick_us of the simulation's.
        member::Config mc;
        mc.raft = config;
        mc.snapshot_every = faults_.compact_every_entries;
        mc.snapshot_keep = faults_.keep_entries;
        mc.token_floor = token_floor;
        mc.max_clock_drift_ppm = rho_ppm_;
        const double rate = static_cast<double>(faults_.tick_us_base) / static_cast<double>(s.tick_us);
        s.member = std::make_unique<Member>(mc, faults_.hard_state_first, checker_, *leader_checker_, now_us_, rate);
    }
    result_.members = n_;
}

void Cluster::trace(const std::string& line) const {
    if (options_.verbose) std::printf("[%10lluus step %llu] %s\n", static_cast<unsigned long long>(now_us_),
                                      static_cast<unsigned long long>(step_), line.c_str());
}

void Cluster::schedule(std::uint64_t at_us, Event e) {
    if (events_.size() >= kMaxEvents && e.kind == Event::Kind::kDeliver) {
        ++result_.messages_dropped;
        return;
    }
    events_.emplace(std::make_pair(at_us, seq_++), std::move(e));
}

void Cluster::schedule_fault(Event::Kind kind, double per_s) {
    if (per_s <= 0 || !fault_phase_) return;
    const double wait_s = -std::log(1.0 - fault_random_.unit()) / per_s;
    Event e;
    e.kind = kind;
    schedule_in(static_cast<std::uint64_t>(wait_s * 1e6) + 1, std::move(e));
}

RunResult Cluster::run() {
    trace("members=" + std::to_string(n_) + (beyond_rho_ ? " clocks beyond rho" : "") + " " + faults_.describe());
    try {
        for (std::size_t i = 0; i < slots_.size(); ++i) restart(i);
        for (int c = 0; c < workload_->clients(); ++c) {
            Event e;
            e.kind = Event::Kind::kClientWake;
            e.client = c;
            schedule_in(fault_random_.between(0, faults_.think_us_max), std::move(e));
        }
        schedule_fault(Event::Kind::kFaultCrash, faults_.crash_per_s);
        schedule_fault(Event::Kind::kFaultPartition, faults_.partition_per_s);
        schedule_fault(Event::Kind::kFaultTransfer, faults_.transfer_per_s);
        while (!events_.empty()) {
            if (fault_phase_ && step_ >= options_.steps) start_liveness();
            if (!fault_phase_ && !draining_ && liveness_done()) start_drain();
            if (draining_ && drained()) break;
            require(fault_phase_ || draining_ || now_us_ <= liveness_deadline_us_, "liveness: no commit progress within ",
                    kLivenessElectionTimeouts, " election timeouts after healing (leader proposal at index ",
                    marker_index_, " term ", marker_term_, ")");
            require(!draining_ || now_us_ <= drain_deadline_us_, "drain: locks still held ",
                    (drain_deadline_us_ - drain_start_us_) / 1000, " ms after the liveness goal with no client "
                    "starting anything (every lease, phantom grants' included, must run out): ", held_locks());
            require(step_ < options_.steps + kMaxLivenessSteps, "the liveness and drain phases ran out of steps");
            auto first = events_.begin();
            now_us_ = first->first.first;
            Event e = std::move(first->second);
            events_.erase(first);
            ++step_;
            handle(e);
        }
        require(!fault_phase_, "the event queue ran dry during the fault phase");
        const std::string broken = check_linearizable(checker_.committed(), workload_->acked());
        require(broken.empty(), "client history not linearizable: ", broken);
    } catch (const std::exception& failure) {
        result_.ok = false;
        result_.failure = failure.what();
    }
    finish_result();
    return result_;
}

void Cluster::finish_result() {
    result_.step = step_;
    result_.elections = checker_.leaders_elected();
    result_.commits = checker_.committed().size();
    result_.messages_dropped += network_->dropped();
    result_.ops_acked = workload_->acked().size();
    result_.ops_unknown = workload_->unknown();
    result_.held_intervals = workload_->leases().intervals();
    result_.writes_accepted = workload_->resource().accepted();
    result_.stale_writes_refused = workload_->resource().refused();
    result_.partitions = network_->partitions();
    result_.client_partitions = network_->client_cuts();
    result_.lease_pairs_checked = workload_->leases().pairs_checked();
    result_.beyond_rho = beyond_rho_;
    result_.lease_overlaps = workload_->leases().overlaps();
    result_.expires_checked = leader_checker_->expires_checked();
    result_.waiter_order_checked = leader_checker_->waiter_grants_checked();
    result_.fresh_tokens_checked = workload_->tokens().fresh_checked();
    for (const auto& op : workload_->acked()) result_.reads_acked += op.kind == ClientOp::Kind::kRead ? 1 : 0;
    result_.sim_time_us = now_us_;
    for (const auto& s : slots_) {
        result_.snapshots_installed += s.member->stats().snapshots_restored;
        if (s.member->up()) add_counters(s.member->core().counters());
    }
}

void Cluster::add_counters(const member::Counters& c) {
    result_.grants += c.grants;
    result_.releases += c.releases;
    result_.expires += c.expiries_existed;
    result_.expires_proposed += c.expires_proposed;
    result_.keepalives += c.keepalives;
    result_.waiter_grants += c.waiter_grants;
    result_.leader_changes += c.leader_changes;
    result_.phantom_releases += c.phantom_releases;
}

void Cluster::handle(Event& e) {
    switch (e.kind) {
        case Event::Kind::kTick:
        case Event::Kind::kDeliver:
        case Event::Kind::kPersistDone:
        case Event::Kind::kPersistAdvance:
        case Event::Kind::kCrash:
        case Event::Kind::kRestart: handle_member_event(e); return;
        case Event::Kind::kClientRequest:
        case Event::Kind::kClientReply:
        case Event::Kind::kClientWake:
        case Event::Kind::kClientTimeout:
        case Event::Kind::kClientWrite: handle_client_event(e); return;
        case Event::Kind::kFaultCrash:
        case Event::Kind::kFaultPartition:
        case Event::Kind::kFaultTransfer: handle_fault(e); return;
    }
}

void Cluster::handle_member_event(Event& e) {
    Slot& s = slots_[e.member];
    Member& m = *s.member;
    Outbox out;
    switch (e.kind) {
        case Event::Kind::kTick:
            if (!m.up() || e.generation != s.incarnation) return;
            m.tick(out);
            {
                const double drift = 1.0 + faults_.tick_drift * (2.0 * s.random.unit() - 1.0);
                Event next = e;
                schedule_in(static_cast<std::uint64_t>(static_cast<double>(s.tick_us) * drift) + 1, next);
            }
            break;
        case Event::Kind::kDeliver:
            if (!m.up()) return;
            m.step(e.message, e.sent_us, out);
            break;
        case Event::Kind::kPersistDone:
            if (!m.up() || e.generation != s.persist_generation || !m.persisting()) return;
            m.persist_durable(out);
            if (m.durable_not_advanced()) {
                // Eager, as the server: the writer thread has sent the
                // messages; the event loop runs the completion (advance) a
                // little later, and a crash may come in between.
                const std::uint64_t delay = s.random.between(0, faults_.persist_us_max);
                Event next = e;
                next.kind = Event::Kind::kPersistAdvance;
                schedule_in(delay, next);
                if (fault_phase_ && fault_random_.chance(faults_.crash_while_persisting)) {
                    crash_in(e.member, fault_random_.between(0, delay));
                }
            }
            break;
        case Event::Kind::kPersistAdvance:
            if (!m.up() || e.generation != s.persist_generation || !m.durable_not_advanced()) return;
            m.finish_persist(out);
            break;
        case Event::Kind::kCrash:
            // Crashes aimed during the fault phase may fall due after healing:
            // the liveness phase promises no faults, so they are void then.
            if (fault_phase_ && m.up() && e.generation == s.incarnation) crash(e.member, "crashes (targeted)");
            return;
        case Event::Kind::kRestart:
            if (!m.up() && e.generation == s.incarnation) restart(e.member);
            return;
        default: return;
    }
    after_step(e.member);  // before pump: a nemesis reacting to a new leader acts before it sends
    pump(e.member, out);
}

// Starts persisting the member's next Ready (if any) and sends what it
// produced. Eager, a follower's Ready is written inline, as the server's
// event loop does: synced, sent, applied and advanced at once (then the next
// one), unless a targeted crash cuts the write short.
void Cluster::pump(std::size_t i, Outbox& out) {
    Slot& s = slots_[i];
    // Each round takes one Ready. With no input, the core runs out of work
    // to hand: at most one Ready per bounded batch of committed entries (a
    // follower catching up applies them a batch at a time). The bound
    // catches a core that never runs out. Back to back, with no input and no
    // after_step() (the nemesis) in between, is one schedule of the
    // server's, whose next pump is a posted drain that may also run after
    // other inputs.
    constexpr int kMaxInlineRounds = 1'000'000;
    int rounds = 0;
    while (s.member->up() && s.member->begin_persist(out)) {
        require(++rounds <= kMaxInlineRounds, "member ", i + 1, " handed out more than ", kMaxInlineRounds,
                " Readies in a row with no input");
        const bool cut = fault_phase_ && s.member->disk().has_pending() &&
                         fault_random_.chance(faults_.crash_while_persisting);
        if (!s.member->persisting_inline()) {
            const std::uint64_t delay = s.random.between(faults_.persist_us_min, faults_.persist_us_max) + 1;
            Event done;
            done.kind = Event::Kind::kPersistDone;
            done.member = i;
            done.generation = ++s.persist_generation;
            schedule_in(delay, done);
            if (cut) crash_in(i, fault_random_.between(0, delay - 1));
            break;
        }
        if (cut) {
            crash(i, "crashes (targeted, in an inline write)");
            break;
        }
        s.member->persist_durable(out);
    }
    route(out);
}

void Cluster::route(const Outbox& out) {
    for (const auto& m : out.messages) {
        require(m.from >= 1 && m.from <= static_cast<raft::NodeId>(n_) && m.to >= 1 &&
                    m.to <= static_cast<raft::NodeId>(n_),
                "message from member ", m.from, " to member ", m.to, " outside the cluster 1..", n_);
        ++result_.messages_sent;
        for (const std::uint64_t delay : network_->fate(m.from - 1, m.to - 1, now_us_, net_random_)) {
            Event e;
            e.kind = Event::Kind::kDeliver;
            e.member = m.to - 1;
            e.message = m;
            e.sent_us = now_us_;
            schedule_in(delay, std::move(e));
        }
    }
    for (const auto& r : out.replies) {
        Event e;
        e.kind = Event::Kind::kClientReply;
        e.client = r.client;
        e.reply = r;
        schedule_in(network_->client_delay_us(net_random_), std::move(e));
    }
}

void Cluster::after_step(std::size_t i) {
    Slot& s = slots_[i];
    if (!s.member->up()) return;
    const raft::Role role = s.member->raft().role();
    if (role != s.last_role && role == raft::Role::kLeader) {
        trace("member " + std::to_string(i + 1) + " leads term " + std::to_string(s.member->raft().term()));
        if (fault_phase_ && fault_random_.chance(faults_.isolate_new_leader)) {
            trace(network_->isolate(i, now_us_, 1000 * fault_random_.between(1, faults_.partition_ms_max)));
        }
        if (fault_phase_ && fault_random_.chance(faults_.crash_new_leader)) {
            crash_in(i, fault_random_.between(0, 3 * faults_.delay_max_us + faults_.persist_us_max));
        }
    }
    s.last_role = role;
}

// A targeted crash of member i's current incarnation, delay_us from now
// (void if it restarts or heals first: see the kCrash event).
void Cluster::crash_in(std::size_t i, std::uint64_t delay_us) {
    Event cut;
    cut.kind = Event::Kind::kCrash;
    cut.member = i;
    cut.generation = slots_[i].incarnation;
    schedule_in(delay_us, cut);
}

void Cluster::crash(std::size_t i, const char* why) {
    Slot& s = slots_[i];
    ++s.incarnation;
    ++s.persist_generation;
    add_counters(s.member->core().counters());
    const CrashLoss loss = s.member->crash(fault_random_);
    ++result_.crashes;
    if (loss == CrashLoss::kTornPrefix) ++result_.torn_crashes;
    s.last_role = raft::Role::kFollower;
    trace("member " + std::to_string(i + 1) + " " + why + ": " + to_string(loss));
    Event e;
    e.kind = Event::Kind::kRestart;
    e.member = i;
    e.generation = s.incarnation;
    const std::uint64_t downtime_us = fault_phase_ ? 1000 * fault_random_.between(1, faults_.downtime_ms_max) : 0;
    schedule_in(downtime_us, e);
}

void Cluster::restart(std::size_t i) {
    Slot& s = slots_[i];
    s.member->start(s.random.next());
    trace("member " + std::to_string(i + 1) + " starts, durable last index " +
          std::to_string(s.member->disk().durable().last_index()));
    Event tick;
    tick.kind = Event::Kind::kTick;
    tick.member = i;
    tick.generation = s.incarnation;
    schedule_in(s.random.between(1, s.tick_us), tick);
    Outbox out;
    pump(i, out);
}

void Cluster::handle_client_event(Event& e) {
    switch (e.kind) {
        case Event::Kind::kClientRequest: {
            Member& m = *slots_[e.member].member;
            // Lost (the member is down or cut off from the client): the client times out.
            if (!m.up() || network_->client_blocked(e.request.client, e.member, now_us_)) return;
            Outbox out;
            m.handle_client(e.request, out);
            after_step(e.member);
            pump(e.member, out);
            return;
        }
        case Event::Kind::kClientReply: {
            if (network_->client_blocked(e.reply.client, e.reply.from - 1, now_us_)) return;  // lost on the way
            const Workload::Reaction r = workload_->on_reply(e.reply, now_us_);
            if (r.write) {
                Event w;
                w.kind = Event::Kind::kClientWrite;
                w.client = e.reply.client;
                w.write = *r.write;
                schedule_in(r.write->delay_us, std::move(w));
            }
            Event next;
            next.client = e.reply.client;
            if (r.next == Workload::Next::kResend) {
                next.kind = Event::Kind::kClientRequest;
                next.member = r.send.member;
                next.request = r.send.request;
                schedule_in(network_->client_delay_us(net_random_) + fault_random_.between(0, faults_.tick_us_base),
                            std::move(next));
            } else if (r.next == Workload::Next::kDone) {
                next.kind = Event::Kind::kClientWake;
                schedule_in(fault_random_.between(1, faults_.think_us_max), std::move(next));
            }
            return;
        }
        case Event::Kind::kClientWake: {
            if (!fault_phase_ || !workload_->idle(e.client)) return;
            const Workload::Send send = workload_->begin(e.client, now_us_);
            Event request;
            request.kind = Event::Kind::kClientRequest;
            request.member = send.member;
            request.request = send.request;
            schedule_in(network_->client_delay_us(net_random_), std::move(request));
            Event timeout;
            timeout.kind = Event::Kind::kClientTimeout;
            timeout.client = e.client;
            timeout.op_id = send.request.op_id;
            schedule_in(client_timeout_us_, std::move(timeout));
            return;
        }
        case Event::Kind::kClientWrite:
            workload_->write(e.write);
            return;
        case Event::Kind::kClientTimeout: {
            if (!workload_->on_timeout(e.client, e.op_id)) return;
            // The client gave up and closed its connections: every member
            // still holding one of its requests hears of it (the server
            // watches a waiting request's socket; a Grant still in flight
            // then has its lease ended when it applies and is expired: a
            // phantom release).
            for (std::size_t i = 0; i < slots_.size(); ++i) {
                if (!slots_[i].member->up()) continue;
                Outbox out;
                slots_[i].member->client_gone(e.client, e.op_id, out);
                after_step(i);
                pump(i, out);
            }
            Event next;
            next.kind = Event::Kind::kClientWake;
            next.client = e.client;
            schedule_in(fault_random_.between(1, faults_.think_us_max), std::move(next));
            return;
        }
        default: return;
    }
}

void Cluster::handle_fault(Event& e) {
    if (!fault_phase_) return;
    if (e.kind == Event::Kind::kFaultCrash) {
        const std::size_t i = fault_random_.index(slots_.size());
        if (slots_[i].member->up()) crash(i, "crashes");
        schedule_fault(e.kind, faults_.crash_per_s);
    } else if (e.kind == Event::Kind::kFaultPartition) {
        trace(network_->start_partition(now_us_, fault_random_));
        // Half the time a client also loses some members (it retries the others).
        if (fault_random_.chance(0.5)) {
            trace(network_->cut_client(static_cast<int>(fault_random_.index(static_cast<std::size_t>(workload_->clients()))),
                                       now_us_, fault_random_));
        }
        schedule_fault(e.kind, faults_.partition_per_s);
    } else {
        for (std::size_t i = 0; i < slots_.size(); ++i) {
            Member& m = *slots_[i].member;
            if (!m.up() || m.raft().role() != raft::Role::kLeader) continue;
            const raft::NodeId target = 1 + (i + 1 + fault_random_.index(slots_.size() - 1)) % slots_.size();
            trace("member " + std::to_string(i + 1) + " transfers leadership to " + std::to_string(target) +
                  (m.transfer(target) ? "" : " (refused)"));
            Outbox out;
            pump(i, out);
            break;
        }
        schedule_fault(e.kind, faults_.transfer_per_s);
    }
}

void Cluster::start_liveness() {
    fault_phase_ = false;
    network_->heal_all();
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        if (!slots_[i].member->up()) restart(i);
    }
    std::uint64_t slowest_tick_us = 0;
    for (const auto& s : slots_) slowest_tick_us = std::max(slowest_tick_us, s.tick_us);
    liveness_start_us_ = now_us_;
    liveness_deadline_us_ = now_us_ + kLivenessElectionTimeouts * 2 *
                                          static_cast<std::uint64_t>(faults_.election_ticks) * slowest_tick_us;
    trace("liveness phase: everything healed");
}

// The liveness phase's goal: a proposal by a current leader, committed and
// applied on every member. Proposes it (again) whenever it is missing.
bool Cluster::liveness_done() {
    const auto& committed = checker_.committed();
    if (marker_index_ != 0 && committed.size() >= marker_index_) {
        if (committed[marker_index_ - 1].term == marker_term_) {
            bool everywhere = true;
            for (const auto& s : slots_) {
                everywhere = everywhere && s.member->up() && s.member->table().applied_index() >= marker_index_;
            }
            if (everywhere) {
                result_.liveness_ticks = (now_us_ - liveness_start_us_) / slots_[0].tick_us;
                return true;
            }
            return false;
        }
        marker_index_ = 0;  // overwritten before commit: propose again
    }
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Member& m = *slots_[i].member;
        if (!m.up() || m.raft().role() != raft::Role::kLeader || m.raft().term() == marker_term_) continue;
        const raft::ProposeResult r = m.propose_raw(lock::Grant{"liveness", 1000, "sim-liveness"});
        if (r.error != raft::ProposeError::kNone) continue;
        marker_index_ = r.index;
        marker_term_ = r.term;
        trace("liveness marker proposed at index " + std::to_string(r.index) + " term " + std::to_string(r.term));
        Outbox out;
        pump(i, out);
        break;
    }
    return false;
}

// The drain phase: no client starts anything since healing, so every lock
// must go once the operations in flight end (each gives up within one client
// timeout) and the leases they left run out: at most the longest lease (the
// liveness marker's 1000 ms or 60 ticks) x (1 + rho) of the slowest clock,
// plus elections. Phantom grants (a client that gave up) are among them:
// they must not stay held.
void Cluster::start_drain() {
    draining_ = true;
    drain_start_us_ = now_us_;
    std::uint64_t slowest_tick_us = 0;
    for (const auto& s : slots_) slowest_tick_us = std::max(slowest_tick_us, s.tick_us);
    const double slowest = static_cast<double>(slowest_tick_us) / static_cast<double>(faults_.tick_us_base);
    const std::uint64_t longest_lease_us = std::max<std::uint64_t>(1000, 60 * faults_.tick_us_base / 1000) * 1000;
    const double lease_us = static_cast<double>(longest_lease_us) *
                            (1.0 + static_cast<double>(rho_ppm_) / 1e6) * slowest;
    drain_deadline_us_ = now_us_ + 2 * client_timeout_us_ + static_cast<std::uint64_t>(lease_us) +
                         kLivenessElectionTimeouts * 2 * static_cast<std::uint64_t>(faults_.election_ticks) *
                             slowest_tick_us;
    trace("drain phase: waiting for every lease to run out");
}

bool Cluster::drained() const {
    for (const auto& s : slots_) {
        if (!s.member->up() || s.member->table().size() != 0) return false;
    }
    return true;
}

std::string Cluster::held_locks() const {
    std::string out;
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        if (!slots_[i].member->up()) continue;
        for (const lock::Lock& l : slots_[i].member->table().list()) {
            if (out.size() > 300) return out + " ...";
            out += "member " + std::to_string(i + 1) + " holds " + l.key + " token " + std::to_string(l.token) + "; ";
        }
    }
    return out;
}

}  // namespace

RunResult run_simulation(const RunOptions& options) {
    Cluster cluster(options);
    return cluster.run();
}

}  // namespace pgfence::sim
