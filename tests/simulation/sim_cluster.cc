// The simulated cluster: see sim_cluster.h.
#include "sim_cluster.h"

#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "history.h"
#include "quorum_checker.h"
#include "safety_checker.h"
#include "sim_admin.h"
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
constexpr double kTwinShare = 0.25;  // seeds with twin acquires (all with --twins)
constexpr double kMembershipShare = 3.0 / 8;  // seeds whose membership changes

struct Event {
    enum class Kind : std::uint8_t {
        kTick, kDeliver, kPersistDone, kPersistAdvance, kCrash, kRestart, kClientRequest, kClientReply, kClientWake,
        kClientTimeout, kClientWrite, kFaultCrash, kFaultPartition, kFaultTransfer, kAdminWake,
        kTransferAfterKeepAlive,  // checkpoint churn: one transfer, not rescheduled
    };
    Kind kind = Kind::kTick;
    std::size_t member = 0;
    std::uint64_t generation = 0;
    int client = 0;
    std::uint64_t op_id = 0;
    raft::Message message;
    ClientRequest request;
    std::optional<ClientRequest> twin;  // kClientRequest: a twin acquire's abandoned attempt, read with `request`
    bool twin_gone_first = false;
    ClientReply reply;
    Workload::Write write;  // kClientWrite
    std::uint64_t sent_us = 0;  // kDeliver: when the message left
};

// One member's place. Slots are only added (a member that joins), never
// dropped: a removed member's stays, stopped.
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
    void handle_admin_reply(const ClientReply& reply);
    void handle_admin_wake();
    void handle_fault(Event& e);
    bool transfer_leadership();  // whether a leader took the request
    void add_slot(const member::Config& config, SimRandom random);
    void start_joiner(raft::NodeId id);
    void stop(std::size_t i);
    void tell_gone(int client, std::uint64_t op_id);  // a client gave up: every member holding its request hears
    void turn(std::size_t i, Outbox& out);
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
    // The configuration of the up member that leads the highest term (null: none leads).
    const raft::Configuration* leader_configuration() const;
    const Member* leading_member() const;  // the up member that leads the highest term (null: none)
    void check_configuration_index(const raft::Configuration& config) const;
    void check_token_histories() const;
    [[noreturn]] void fail_token_history(std::size_t i, std::size_t j, const member::TokenRecord& ra,
                                         const member::TokenRecord& rb, const std::string& what) const;
    void trace(const std::string& line) const;
    void finish_result();
    void add_counters(const member::Counters& c);

    RunOptions options_;
    mutable std::uint64_t token_histories_compared_ = 0;  // tokens check_token_histories() compared
    SimRandom root_;
    SimRandom net_random_{0};
    SimRandom fault_random_{0};
    SimRandom churn_random_{0};  // checkpoint churn's draws (its own stream)
    FaultConfig faults_;
    int n_ = 3;
    SafetyChecker checker_;
    std::unique_ptr<LeaderChecker> leader_checker_;
    std::unique_ptr<QuorumChecker> quorum_checker_;
    std::unique_ptr<SimNetwork> network_;
    std::unique_ptr<Workload> workload_;
    std::deque<Slot> slots_;  // a deque: references to a slot stay valid as members join
    member::Config member_config_;  // every member's, but for its id (and a joiner's empty member list)
    // Membership changes (membership seeds only): the operator, its own
    // random stream (the other streams draw as in a seed without it), and
    // how often it asks for something.
    bool membership_ = false;
    std::unique_ptr<Admin> admin_;
    SimRandom admin_random_{0};
    double admin_per_s_ = 0;
    // How long the admin waits for an answer: a client's timeout, or (an
    // impatient operator, some seeds) 1..3 election timeouts, after which it
    // lists and goes on while its change may still be pending.
    std::uint64_t admin_timeout_us_ = 0;
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
    raft::Configuration final_config_;  // the leader's configuration when the liveness goal was met
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
    if (options.checkpoint_churn) {
        churn_random_ = SimRandom(options.seed ^ 0x63686B70ull);
        make_checkpoint_churn(faults_, churn_random_);
    }
    net_random_ = root_.fork(2);
    fault_random_ = root_.fork(3);
    // Its own stream, like the clock mode: a seed without membership changes
    // draws everything else as it would without this code.
    SimRandom membership_random(options.seed ^ 0x6D656D62ull);
    membership_ = options.membership || (!options.fault_free && membership_random.chance(kMembershipShare));
    admin_random_ = membership_random.fork(1);
    admin_per_s_ = 0.5 * static_cast<double>(1u << admin_random_.between(0, 3));  // 0.5 .. 4 requests a second
    network_ = std::make_unique<SimNetwork>(static_cast<std::size_t>(n_),
                                            static_cast<std::size_t>(n_ + Admin::kMaxJoiners), faults_);
    workload_ = std::make_unique<Workload>(faults_.clients, static_cast<std::size_t>(n_), faults_.tick_us_base,
                                           rho_ppm_, !beyond_rho_, checker_.model(), root_.fork(4));
    // Twin acquires (sim_workload.h) in some seeds, from their own stream
    // like the clock mode: a seed without them draws everything as a seed never given twins would.
    SimRandom twin_random(options.seed ^ 0x7477696Eull);
    if (options.twins || twin_random.chance(kTwinShare)) {
        workload_->set_twins(0.05 * static_cast<double>(twin_random.between(1, 6)), twin_random.fork(1));
    }
    // Elections (values and proclaims) in half the seeds, from their own stream too.
    SimRandom election_random(options.seed ^ 0x656C6563ull);
    if (election_random.chance(0.5)) workload_->set_elections(election_random.fork(1));
    if (options.checkpoint_churn) workload_->set_keepalive_heavy();
    client_timeout_us_ = 8 * static_cast<std::uint64_t>(faults_.election_ticks) * faults_.tick_us_base;
    admin_timeout_us_ = admin_random_.chance(0.4) ? admin_random_.between(1, 3) *
                                                        static_cast<std::uint64_t>(faults_.election_ticks) *
                                                        faults_.tick_us_base
                                                  : client_timeout_us_;
    raft::Config config;
    config.cluster_id = root_.next() | 1;
    const lock::Token token_floor = root_.chance(0.3) ? root_.between(1, 5'000) : 0;
    config.election_ticks = faults_.election_ticks;
    config.heartbeat_ticks = faults_.heartbeat_ticks;
    config.max_append_bytes = faults_.max_append_bytes;
    config.max_snapshot_chunk_bytes = faults_.max_snapshot_chunk_bytes;
    config.max_inflight_appends = faults_.max_inflight_appends;
    config.max_inflight_bytes = faults_.max_inflight_bytes;
    config.max_uncommitted_bytes = faults_.max_uncommitted_bytes;
    for (int i = 1; i <= n_; ++i) config.members.push_back(static_cast<raft::NodeId>(i));
    leader_checker_ = std::make_unique<LeaderChecker>(static_cast<std::size_t>(n_), rho_ppm_);
    quorum_checker_ = std::make_unique<QuorumChecker>(raft::Configuration::of_voters(config.members));
    if (membership_) admin_ = std::make_unique<Admin>(n_, admin_random_.fork(2));
    member_config_.raft = config;
    member_config_.snapshot_every = faults_.compact_every_entries;
    member_config_.snapshot_log_pct = faults_.snapshot_log_pct;
    member_config_.snapshot_slice_locks = faults_.snapshot_slice_locks;
    member_config_.max_expire_batch = faults_.max_expire_batch;
    member_config_.expiry_wave = faults_.expiry_wave;
    member_config_.lease_checkpoints = faults_.lease_checkpoints;
    member_config_.early_appends = options.early_appends;
    member_config_.max_checkpoints_per_tick = faults_.max_checkpoints_per_tick;
    member_config_.snapshot_keep = faults_.keep_entries;
    member_config_.token_floor = token_floor;
    member_config_.max_clock_drift_ppm = rho_ppm_;
    for (int i = 0; i < n_; ++i) {
        member::Config mc = member_config_;
        mc.raft.id = static_cast<raft::NodeId>(i + 1);
        add_slot(mc, root_.fork(100 + static_cast<std::uint64_t>(i)));
    }
    result_.members = n_;
    result_.membership = membership_;
}

// A member's place: its tick period (+-30% of the base) and clock, its core's config.
// Whether member `id` stamps the entries it proposes with its wall clock
// (member::Config::log_wall_time), decided by the seed alone (no draw, so
// the rest of a seed's run is as without it): every member in a third of the
// seeds; none in another (a cluster upgrading from a release before the
// stamp); odd IDs only in the last (the second round of that upgrade: both
// formats in one log).
bool stamps_wall_time(std::uint64_t seed, raft::NodeId id) {
    switch (seed % 3) {
        case 0: return true;
        case 1: return false;
        default: return id % 2 == 1;
    }
}

void Cluster::add_slot(const member::Config& given, SimRandom random) {
    member::Config config = given;
    config.log_wall_time = stamps_wall_time(options_.seed, config.raft.id);
    Slot& s = slots_.emplace_back();
    s.random = random;
    const double spread = 0.7 + 0.6 * s.random.unit();  // per-member tick period, +-30%
    s.tick_us = static_cast<std::uint64_t>(static_cast<double>(faults_.tick_us_base) * spread);
    // The member ticks every tick_us_base of its own clock, which so runs
    // at tick_us_base / tick_us of the simulation's.
    const double rate = static_cast<double>(faults_.tick_us_base) / static_cast<double>(s.tick_us);
    s.member = std::make_unique<Member>(config, faults_.hard_state_first, checker_, *leader_checker_,
                                        *quorum_checker_, now_us_, rate);
}

// A new member, started with an empty member list (it joins: it waits for
// the leader to tell it its configuration, and never campaigns until then).
void Cluster::start_joiner(raft::NodeId id) {
    require(id == slots_.size() + 1, "the admin asked for member ", id, " to join, the next id is ", slots_.size() + 1);
    member::Config mc = member_config_;
    mc.raft.id = id;
    mc.raft.members.clear();
    add_slot(mc, admin_random_.fork(100 + id));
    network_->set_members(slots_.size());
    workload_->set_members(slots_.size());
    trace("member " + std::to_string(id) + " joins (an empty member list)");
    restart(slots_.size() - 1);
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
        if (membership_) {
            trace("membership changes: the admin asks about " + std::to_string(admin_per_s_) + " times a second");
            handle_admin_wake();  // schedules the first request
        }
        while (!events_.empty()) {
            if (fault_phase_ && step_ >= options_.steps) start_liveness();
            if (!fault_phase_ && !draining_ && liveness_done()) start_drain();
            if (draining_ && drained()) {
                check_token_histories();
                break;
            }
            require(fault_phase_ || draining_ || now_us_ <= liveness_deadline_us_, "liveness: no commit progress within ",
                    kLivenessElectionTimeouts, " election timeouts and a round trip per append's worth of entries behind after healing "
                    "(leader proposal at index ", marker_index_, " term ", marker_term_, ")");
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
    result_.answered_expires_checked = workload_->leases().expires_checked();
    result_.waiter_order_checked = leader_checker_->waiter_grants_checked();
    result_.waiting_sets_checked = leader_checker_->waiting_sets_checked();
    result_.fresh_tokens_checked = workload_->tokens().fresh_checked();
    result_.proclaims = workload_->proclaimed();
    result_.token_histories_checked = token_histories_compared_;
    for (const auto& op : workload_->acked()) result_.reads_acked += op.kind == ClientOp::Kind::kRead ? 1 : 0;
    result_.sim_time_us = now_us_;
    for (const auto& s : slots_) {
        result_.snapshots_installed += s.member->stats().snapshots_restored;
        result_.twin_grants_unwritten += s.member->stats().twin_grants_unwritten;
        if (s.member->up()) add_counters(s.member->core().counters());
    }
    if (admin_ != nullptr) {
        const AdminCounts& a = admin_->counts();
        result_.members_added = a.adds;
        result_.promotions = a.promotions;
        result_.removals = a.removals;
        result_.leader_removals = a.leader_removals;
    }
    result_.config_changes = quorum_checker_->config_changes_committed();
    result_.elections_checked = quorum_checker_->elections_checked();
    result_.commit_quorums_checked = quorum_checker_->commits_checked();
    result_.voters_min = static_cast<int>(quorum_checker_->voters_min());
    result_.voters_max = static_cast<int>(quorum_checker_->voters_max());
}

void Cluster::add_counters(const member::Counters& c) {
    result_.grants += c.grants;
    result_.grants_many += c.grants_many;
    result_.releases += c.releases;
    result_.expires += c.expiries_existed;
    result_.expires_proposed += c.expires_proposed;
    result_.expire_batches += c.expire_batches;
    result_.keepalives += c.keepalives;
    result_.checkpoints += c.checkpoints;
    result_.checkpoint_clears += c.checkpoint_clears;
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
        case Event::Kind::kAdminWake: handle_admin_wake(); return;
        case Event::Kind::kTransferAfterKeepAlive:
            if (fault_phase_ && transfer_leadership()) ++result_.keepalive_transfers;
            return;
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
    after_step(e.member);  // before its turn: a nemesis reacting to a new leader acts before it sends
    turn(e.member, out);
}

// Starts persisting the member's next Ready (if any) and sends what it
// produced. Eager, a follower's Ready is written inline, as the server's
// event loop does: synced, sent, applied and advanced at once (then the next
// one), unless a targeted crash cuts the write short.
void Cluster::turn(std::size_t i, Outbox& out) {
    Slot& s = slots_[i];
    // Each round takes one Ready. With no input, the core runs out of work
    // to hand: at most one Ready per bounded batch of committed entries (a
    // follower catching up applies them a batch at a time). The bound
    // catches a core that never runs out. Back to back, with no input and no
    // after_step() (the nemesis) in between, is one schedule of the
    // server's, whose next turn is a posted drain that may also run after
    // other inputs.
    constexpr int kMaxInlineRounds = 1'000'000;
    int rounds = 0;
    while (s.member->up()) {
        const bool writing = s.member->begin_persist(out);
        require(++rounds <= kMaxInlineRounds, "member ", i + 1, " handed out more than ", kMaxInlineRounds,
                " Readies in a row with no input");
        // A Ready that needed no write was finished inside begin_persist;
        // the server posts its next drain while the core wants one.
        if (!writing) {
            if (s.member->up() && s.member->core().wants_turn()) continue;
            break;
        }
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
    // As the server on Effects::removed: the member stops for good (its
    // last messages and answers went out).
    if (s.member->up() && s.member->removed()) stop(i);
}

void Cluster::route(const Outbox& out) {
    const auto started = static_cast<raft::NodeId>(slots_.size());
    for (const auto& m : out.messages) {
        require(m.from >= 1 && m.from <= started && m.to >= 1 && m.to <= started, "message from member ", m.from,
                " to member ", m.to, " outside the members started, 1..", started);
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
    for (const auto& [key, token] : out.expires_proposed) workload_->expire_proposed(key, token, now_us_);
    for (const auto& r : out.replies) {
        // Checkpoint churn: four keepalives answered in five are followed,
        // within a tenth of their lease, by a leadership transfer (a new
        // leader restarts the lease, from its lock's checkpoint if one is stored).
        if (const auto* k = std::get_if<member::KeptAlive>(&r.answer.response);
            k != nullptr && options_.checkpoint_churn && fault_phase_ && churn_random_.chance(0.8)) {
            Event transfer;
            transfer.kind = Event::Kind::kTransferAfterKeepAlive;
            schedule_in(churn_random_.between(0, k->ttl_ms * 100), std::move(transfer));
        }
        Event e;
        e.kind = Event::Kind::kClientReply;
        e.client = r.client;
        e.reply = r;
        SimRandom& random = r.client == Admin::kClient ? admin_random_ : net_random_;
        schedule_in(network_->client_delay_us(random), std::move(e));
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

// Told it was removed (Effects::removed): the member stops for good, as
// fence-coordinator exits; nothing restarts it (its events are void).
void Cluster::stop(std::size_t i) {
    Slot& s = slots_[i];
    ++s.incarnation;
    ++s.persist_generation;
    add_counters(s.member->core().counters());
    s.member->stop();
    workload_->member_stopped(i);
    s.last_role = raft::Role::kFollower;
    ++result_.removed_stopped;
    trace("member " + std::to_string(i + 1) + " was removed: it stops");
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
    turn(i, out);
}

void Cluster::handle_client_event(Event& e) {
    switch (e.kind) {
        case Event::Kind::kClientRequest: {
            Member& m = *slots_[e.member].member;
            // Lost (the member is down or cut off from the client): the client times out.
            if (!m.up() || network_->client_blocked(e.request.client, e.member, now_us_)) return;
            // The admin stops when everything heals: the liveness phase
            // promises a configuration that changes no more.
            if (e.request.client == Admin::kClient && !fault_phase_) return;
            Outbox out;
            if (e.twin) {
                m.handle_twins(*e.twin, e.request, e.twin_gone_first, out);
            } else {
                m.handle_client(e.request, out);
            }
            after_step(e.member);
            turn(e.member, out);
            return;
        }
        case Event::Kind::kClientReply: {
            if (e.reply.client == Admin::kClient) {
                handle_admin_reply(e.reply);
                return;
            }
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
            if (send.twin_attempt != 0) {
                request.twin = send.request;
                request.twin->attempt = send.twin_attempt;
                request.twin_gone_first = send.twin_gone_first;
            }
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
            if (e.client == Admin::kClient) {
                if (admin_->on_timeout(e.op_id)) tell_gone(e.client, e.op_id);
                return;
            }
            if (!workload_->on_timeout(e.client, e.op_id)) return;
            tell_gone(e.client, e.op_id);
            Event next;
            next.kind = Event::Kind::kClientWake;
            next.client = e.client;
            schedule_in(fault_random_.between(1, faults_.think_us_max), std::move(next));
            return;
        }
        default: return;
    }
}

// The client gave up and closed its connections: every member still holding
// one of its requests hears of it (the server watches a waiting request's
// socket; a Grant still in flight then has its lease ended when it applies
// and is expired: a phantom release).
void Cluster::tell_gone(int client, std::uint64_t op_id) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        if (!slots_[i].member->up()) continue;
        Outbox out;
        slots_[i].member->client_gone(client, op_id, out);
        after_step(i);
        turn(i, out);
    }
}

// The admin's next request, at times drawn at its rate (if it is not still
// waiting on the last one); an add first starts the member that joins.
void Cluster::handle_admin_wake() {
    if (!fault_phase_) return;
    if (admin_->idle()) {
        const Admin::Start start = admin_->begin(slots_.size());
        if (start.join != raft::kNoNode) start_joiner(start.join);
        trace("admin asks member " + std::to_string(start.send.member + 1) + ": " +
              describe(start.send.request.request));
        Event request;
        request.kind = Event::Kind::kClientRequest;
        request.member = start.send.member;
        request.request = start.send.request;
        schedule_in(network_->client_delay_us(admin_random_), std::move(request));
        Event timeout;
        timeout.kind = Event::Kind::kClientTimeout;
        timeout.client = Admin::kClient;
        timeout.op_id = start.send.request.op_id;
        schedule_in(admin_timeout_us_, std::move(timeout));
    }
    Event wake;
    wake.kind = Event::Kind::kAdminWake;
    const double wait_s = -std::log(1.0 - admin_random_.unit()) / admin_per_s_;
    schedule_in(static_cast<std::uint64_t>(wait_s * 1e6) + 1, std::move(wake));
}

void Cluster::handle_admin_reply(const ClientReply& reply) {
    const Admin::Reaction r = admin_->on_reply(reply, slots_.size());
    if (r.next != Admin::Next::kResend || !fault_phase_) return;
    trace("admin asks member " + std::to_string(r.send.member + 1) + " again: " + describe(r.send.request.request));
    Event next;
    next.kind = Event::Kind::kClientRequest;
    next.member = r.send.member;
    next.request = r.send.request;
    schedule_in(network_->client_delay_us(admin_random_) + admin_random_.between(0, faults_.tick_us_base),
                std::move(next));
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
        transfer_leadership();
        schedule_fault(e.kind, faults_.transfer_per_s);
    }
}

// The first up leader hands its leadership to another voter of its
// configuration (drawn in the order of the ids after its own).
bool Cluster::transfer_leadership() {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        Member& m = *slots_[i].member;
        if (!m.up() || m.raft().role() != raft::Role::kLeader) continue;
        std::vector<raft::NodeId> voters;
        const raft::Configuration& config = m.raft().configuration();
        for (std::size_t k = 1; k < slots_.size(); ++k) {
            const auto id = static_cast<raft::NodeId>(1 + (i + k) % slots_.size());
            if (config.is_voter(id)) voters.push_back(id);
        }
        if (voters.empty()) return false;
        const raft::NodeId target = voters[fault_random_.index(voters.size())];
        const bool took = m.transfer(target);
        trace("member " + std::to_string(i + 1) + " transfers leadership to " + std::to_string(target) +
              (took ? "" : " (refused)"));
        Outbox out;
        turn(i, out);
        return took;
    }
    return false;
}

void Cluster::start_liveness() {
    fault_phase_ = false;
    network_->heal_all();
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        if (!slots_[i].member->up() && !slots_[i].member->stopped()) restart(i);
    }
    std::uint64_t slowest_tick_us = 0;
    for (const auto& s : slots_) slowest_tick_us = std::max(slowest_tick_us, s.tick_us);
    // The backlog: from the oldest applied index of a member still running
    // to the newest log index (every entry a member may have to receive).
    raft::Index newest = 0;
    raft::Index oldest_applied = 0;
    bool any = false;
    for (const auto& s : slots_) {
        const Member& m = *s.member;
        if (!m.up()) continue;
        newest = std::max(newest, m.raft().status().last_index);
        oldest_applied = any ? std::min(oldest_applied, m.table().applied_index()) : m.table().applied_index();
        any = true;
    }
    const std::uint64_t backlog = newest > oldest_applied ? newest - oldest_applied : 0;
    liveness_start_us_ = now_us_;
    liveness_deadline_us_ =
        now_us_ + liveness_bound_us(faults_, kLivenessElectionTimeouts, slowest_tick_us, backlog);
    trace("liveness phase: everything healed (" + std::to_string(backlog) + " entries behind, bound " +
          std::to_string((liveness_deadline_us_ - now_us_) / 1000) + " ms)");
}

// The liveness phase's goal: a proposal by a current leader, committed and
// applied on every member of the leader's configuration (a member removed
// that never learnt it runs on outside it). Proposes it (again) whenever it
// is missing.
bool Cluster::liveness_done() {
    const auto& committed = checker_.committed();
    if (marker_index_ != 0 && committed.size() >= marker_index_) {
        if (committed[marker_index_ - 1].term == marker_term_) {
            const raft::Configuration* config = leader_configuration();
            if (config == nullptr) return false;
            bool everywhere = true;
            for (const raft::ConfigMember& cm : config->members) {
                require(cm.id >= 1 && cm.id <= slots_.size() && !slots_[cm.id - 1].member->stopped(), "member ",
                        cm.id, " is in the leader's configuration ", describe(*config), " but ",
                        cm.id > slots_.size() ? "was never started" : "stopped, told it was removed");
                const Member& m = *slots_[cm.id - 1].member;
                everywhere = everywhere && m.up() && m.table().applied_index() >= marker_index_;
            }
            if (everywhere) {
                check_configuration_index(*config);
                final_config_ = *config;
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
        turn(i, out);
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

// Every member of the configuration the liveness phase ended with.
bool Cluster::drained() const {
    for (const raft::ConfigMember& cm : final_config_.members) {
        const Member& m = *slots_[cm.id - 1].member;
        if (!m.up() || m.table().size() != 0) return false;
    }
    return true;
}

std::string Cluster::held_locks() const {
    std::string out;
    for (const raft::ConfigMember& cm : final_config_.members) {
        const std::size_t i = cm.id - 1;
        if (!slots_[i].member->up()) continue;
        for (const lock::Lock& l : slots_[i].member->table().list()) {
            if (out.size() > 300) return out + " ...";
            out += "member " + std::to_string(i + 1) + " holds " + l.key + " token " + std::to_string(l.token) + "; ";
        }
    }
    return out;
}

const Member* Cluster::leading_member() const {
    const Member* best = nullptr;
    for (const auto& s : slots_) {
        const Member& m = *s.member;
        if (!m.up() || m.raft().role() != raft::Role::kLeader) continue;
        if (best == nullptr || m.raft().term() > best->raft().term()) best = &m;
    }
    return best;
}

const raft::Configuration* Cluster::leader_configuration() const {
    const Member* best = leading_member();
    return best != nullptr ? &best->raft().configuration() : nullptr;
}

// Every two up members agree on what the log decides of each token both
// keep in full (member/token_history.h): granted here, not ended by a
// restore nor superseded. Only what one of them has not applied yet may
// differ: an end, or a next token's grant, above the lower of their applied
// indexes (the member that lags has not seen it); at or below it, a token
// held on one and ended on the other, or a next token only one knows, is a
// difference.
void Cluster::check_token_histories() const {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
        const Member& a = *slots_[i].member;
        if (!a.up()) continue;
        for (std::size_t j = i + 1; j < slots_.size(); ++j) {
            const Member& b = *slots_[j].member;
            if (!b.up()) continue;
            const raft::Index both_applied =
                std::min(a.core().table().applied_index(), b.core().table().applied_index());
            a.core().token_history().for_each([&](const member::TokenRecord& ra) {
                const member::TokenRecord* rb = b.core().token_history().lookup(ra.token).record;
                auto full = [](const member::TokenRecord& r) {
                    return r.granted_index != 0 && r.end != member::TokenEnd::kRestore &&
                           r.end != member::TokenEnd::kSuperseded;
                };
                if (rb == nullptr || !full(ra) || !full(*rb)) return;
                member::TokenRecord x = ra;
                member::TokenRecord y = *rb;
                // An end only one applied: equal when it is above what both applied.
                const bool x_held = x.end == member::TokenEnd::kHeld;
                const bool y_held = y.end == member::TokenEnd::kHeld;
                if (x_held != y_held) {
                    const member::TokenRecord& ended = x_held ? y : x;
                    if (ended.ended_index <= both_applied) {
                        fail_token_history(i, j, ra, *rb, "held on one member, ended on the other at or below index " +
                                                              std::to_string(both_applied) + " both applied");
                    }
                    return;
                }
                // Both held: the keys still held and the lease in force change while it is
                // held (a set's keys expiring in different entries, a re-grant), so one member
                // may have applied a change the other has not yet.
                if (x_held && y_held) {
                    x.keys_held = y.keys_held;
                    x.lease_ms = y.lease_ms;
                }
                // A next token only one knows: equal when its grant is above what both applied.
                if ((x.next_token == 0) != (y.next_token == 0)) {
                    const member::TokenHistory& knows = x.next_token != 0 ? a.core().token_history()
                                                                          : b.core().token_history();
                    const lock::Token next = x.next_token != 0 ? x.next_token : y.next_token;
                    const member::TokenRecord* n = knows.lookup(next).record;
                    const bool unknown_here = x.next_unknown || y.next_unknown;
                    if (!unknown_here && n != nullptr && n->granted_index != 0 && n->granted_index <= both_applied) {
                        fail_token_history(i, j, ra, *rb, "next token " + std::to_string(next) +
                                                              " granted at or below index " +
                                                              std::to_string(both_applied) +
                                                              " both applied, known to one member only");
                    }
                    x.next_token = y.next_token = 0;
                }
                if (!x.same_derived(y)) fail_token_history(i, j, ra, *rb, "what the log decides");
                ++token_histories_compared_;
            });
        }
    }
}

void Cluster::fail_token_history(std::size_t i, std::size_t j, const member::TokenRecord& ra,
                                 const member::TokenRecord& rb, const std::string& what) const {
    fail("members ", i + 1, " and ", j + 1, " differ on token ", ra.token, ": ", what, " (granted at ",
            ra.granted_index, " / ", rb.granted_index, ", ended ", member::to_string(ra.end), " at ", ra.ended_index,
            " / ", member::to_string(rb.end), " at ", rb.ended_index, ", next ", ra.next_token, " / ", rb.next_token,
            ", lease_ms ", ra.lease_ms, " / ", rb.lease_ms, ", granted wall ", ra.granted_wall_ms.value_or(0), " / ",
            rb.granted_wall_ms.value_or(0), ", ended wall ", ra.ended_wall_ms.value_or(0), " / ",
            rb.ended_wall_ms.value_or(0), ", keys ", ra.keys.size(), " / ", rb.keys.size(), ")");
}

// Every member of `config` (the leader's; each has applied the liveness
// marker, so it holds every configuration entry before it) that has that
// configuration in force reports the leader's index for it, whether it
// holds the entry or learnt it from a snapshot (its own after a restart, or
// an installed one). Consecutive configurations differ, so one that has not
// the leader's newest entry has another configuration.
void Cluster::check_configuration_index(const raft::Configuration& config) const {
    const Member* leader = leading_member();
    const raft::Index want = leader->raft().configuration_index();
    for (const raft::ConfigMember& cm : config.members) {
        const Member& m = *slots_[cm.id - 1].member;
        if (!(m.raft().configuration() == config)) continue;
        require(m.raft().configuration_index() == want, "member ", cm.id, " reports configuration index ",
                m.raft().configuration_index(), " for the leader's configuration ", describe(config),
                ", made by the entry at ", want, " (snapshot at ", m.raft().status().snapshot_index, ")");
    }
}

}  // namespace

RunResult run_simulation(const RunOptions& options) {
    Cluster cluster(options);
    return cluster.run();
}

}  // namespace pgfence::sim
