// The member core: everything one fence-coordinator member decides, as a
// deterministic state machine driven by its caller — the server's Asio shell
// (server/member.cc) or the whole-cluster simulation (tests/simulation).
//
// It owns the Raft core, the lock table, client proposals and their
// timeouts, the leader's leases (lease.h) with the quorum-confirmed Expire,
// KeepAlive, the FIFO wait queues, phantom grants, the token floor and the
// snapshot policy. No sockets, files, threads, clocks or global random: time
// arrives with every input (a monotonic reading, lease.h `Time`), and the
// Raft core's randomness comes from Config::raft.random_seed. The same
// inputs in the same order give the same effects.
//
// ---- inputs -------------------------------------------------------------------
//   tick(now)                  one heartbeat period passed (Raft's logical time)
//   step(message, now)         a peer's Raft message
//   request(id, request, now)  a client request; `id` is the caller's, unique
//                              among requests not yet answered
//   client_gone(id, now)       a request's client went away (its connection
//                              closed) before it was answered
//   response_written(id, ok, now)  a Granted answer was written (ok) or could
//                              not be (the client is gone: a phantom grant,
//                              its lease ended and expired)
//   persist_started(now)       the caller began writing the Persist it took
//                              (a leader then applies and answers the entries
//                              its Ready gives as committed while the disk
//                              works, and, with Config::early_appends, sends
//                              the entries that applying them proposed, e.g.
//                              a waiter's Grant)
//   persisted(now)             the outstanding Persist is durable and its
//                              after-persist messages were sent
//   snapshot_saved(snapshot, now)  the outstanding SaveSnapshot (that very
//                              snapshot: the Raft core keeps it, not a copy) is durable
//   begin_shutdown(reachable, now)  stop taking writes; a leader hands its
//                              leadership to the most caught-up reachable peer
//   wall_clock(wall_ms)        the shell's wall clock (ms since the Unix epoch),
//                              told before every other input: a leader stamps
//                              the entries it proposes with it (lock/commands.h
//                              version 4) and the token history records keepalives
//                              at it. Only recorded, never used to decide.
// and then, once per batch of inputs (the shell: once per turn of its event
// loop, so that requests read together share one Ready and one write):
//   turn(now)                  confirms leadership for what asked, follows role
//                              changes, hands out the next Ready; while a
//                              Persist is outstanding and with
//                              Config::early_appends, a leader's appends of
//                              the entries proposed since (send, below)
//   take_effects()             what the caller must now do (below)
//   wants_turn()               true when a turn now would do more (a Ready or a
//                              confirmation is waiting and no Persist is
//                              outstanding): the caller runs another turn soon.
//                              False while a Persist is outstanding even if
//                              entries were proposed: with
//                              Config::early_appends, those proposed by an
//                              input go out at the turn that input schedules,
//                              those proposed at persist_started() with its
//                              effects; without, all with the next Ready
//
// ---- effects, and the order the caller carries them out in ---------------------
//   send      Raft messages to send now (they need nothing durable first;
//             while a leader's Persist is outstanding and with
//             Config::early_appends, turn() and persist_started() put here
//             what it has to send since, raft.h take_messages_now)
//   persist   at most one outstanding: write hard_state, snapshot and entries
//             durably, in the order raft.h's Ready states (the snapshot before
//             the entries, which truncate a conflicting suffix; the hard state
//             on either side), THEN send its `messages`, then call persisted().
//             Call persist_started() once the write is under way (before
//             persisted()), and take the effects it leaves.
//             Nothing else is written to the log meanwhile (one write at a time).
//   save      at most one outstanding: save the snapshot durably (the
//             server writes its file beside persists, then records it in
//             the log's order, not concurrently with one), then call
//             snapshot_saved().
//   respond   answers, by request id: at most one per request (none after
//             client_gone(), none for a phantom grant); once
//             answered, an id may be used again
//   watch     ids of requests that may wait long (queued acquires): tell
//             client_gone() when their client leaves
//   logs      lines to log, in order
//   fatal     non-empty: the member cannot go on (a snapshot that does not
//             restore); the caller stops without acknowledging anything more
//   configuration  the configuration in force changed: the peers to reach
//   removed   this member's removal applied: the caller stops it
// Effects accumulate across inputs until take_effects(); responses may be
// produced by any input, a Persist only by turn(). The shell carries out the
// sends, the save and the Persist before it writes the answers, so a leader's
// write starts while its batch is being answered. After `fatal`, turn() does
// nothing.
//
// ---- rules (docs/design.md "Time", docs/guarantees.md) ---------------------------
//   - A leader applies committed entries at persist_started(), once the
//     write of the Ready that carries them is under way (they are durable on
//     this member already, raft.h), so the answers go out while it is written; a follower (or candidate)
//     applies them at persisted(), after its acks went out, and so does a
//     leader whose Ready carries a snapshot (restored first). While a Persist is outstanding, commits learnt meanwhile are
//     applied by turn() (raft::Raft::take_committed). A proposal is answered
//     when its index applies with its term; with another term, or after
//     Config::proposal_timeout, it is answered Unavailable.
//   - Only the leader takes requests (acquire, release and keepalive not
//     while shutting down); others are answered Unavailable{leader}. A
//     request first follows any role change (as turn() does), so a new
//     leader's leases are in place before its first keepalive.
//   - A set (GrantMany) has one lease per key, started, restarted
//     (keepalive of the whole set only) and expired together: its keys
//     share one deadline, so one expiry check takes them together and
//     proposes them in one ExpireMany (unless the wave limit cuts the batch:
//     the rest follow in the next).
//   - A lease starts when its Grant applies on the leader, restarts on a
//     keepalive (confirmed by a quorum round started after it arrived), and
//     restarts at its full length on a new leader; with
//     Config::lease_checkpoints, once the first entry of the new leader's
//     term applies, a lease whose lock has a checkpoint (remaining_ms)
//     restarts again, for that long. Checkpoints: at most
//     Config::max_checkpoints_per_tick per tick, one per run of a lease at
//     its half, value checkpoint_remaining_ms() (lease.h). A keepalive or
//     same-owner re-grant of a lease with a checkpoint stored or in flight
//     is answered only once a clearing Checkpoint (remaining_ms 0) proposed
//     after it applied in this term (docs/guarantees.md "Checkpoints"). Expire{key, token} is
//     proposed once expire_at (lease.h: lease_ms * (1 + rho) after the
//     start) has passed AND a quorum round asked for after the lease's
//     current expire_at confirmed this member still leads (a round asked
//     before a restart proves nothing about the restarted lease). The leases
//     due at one moment (at most Config::expiry_wave of them, and none
//     while the previous such wave's round and Expires are not done: the
//     rest once the last Expire of that wave applies, or at a later tick)
//     share that round, and their Expires are proposed together,
//     as ExpireMany entries of up to Config::max_expire_batch locks (a lone
//     one as Expire). Once proposed, keepalive fails and a same-owner
//     re-grant of that token is answered Held (or queued, if it may wait).
//     A same-owner re-grant that applies in a later term than the one that
//     proposed it is answered Unavailable, never Granted: that term's
//     Expire of the token may follow it in the log, and this term's leases
//     do not know of it.
//   - Waiters: an acquire with wait_ms > 0 on a held key (or a key with a
//     queue) joins the key's FIFO queue; when the key is freed the head's
//     Grant is proposed; a head that loses the race keeps its place. A set
//     (Acquire::keys) that waits joins the queue of every one of its keys
//     at once, and its GrantMany is proposed only when it is the head of
//     each and each is free (no barging: a later waiter on one of its keys
//     waits behind it even while that key is free). Queues are FIFO by
//     arrival on every key, so the earliest waiter overall heads all its
//     queues: it goes as soon as its keys are free (no deadlock, no
//     starvation). A
//     waiter is answered Held when its wait_ms runs out, dropped when its
//     client goes, answered Unavailable when leadership is lost. At most
//     Config::max_waiters wait, all keys together.
//   - Phantom grants (logged phantom_release, counted phantom_releases): a
//     grant whose client went away before it applied (client_gone), or
//     whose Granted answer could not be written, has its lease ended at
//     once and is expired like any lease that ran out (the quorum round,
//     then Expire) — unless an answer still promises that lease
//     to a client (lease.h, Lease::answers: another Granted answer of the
//     token not reported unwritten, a keepalive answered, or a lease a new
//     leader restarted): a lease answered to anyone runs to its deadline.
//     Not a Release: the same owner may hold that token through a retry's
//     idempotent re-grant, which then keeps it if answered before the Expire
//     is proposed (its lease restarts) and is refused if answered after.
//   - Token floor: a new leader proposes SetTokenFloor{Config::token_floor}
//     when the table's floor is lower.
//   - Snapshots: a SaveSnapshot of the applied table, with the configuration
//     in force at its index, built Config::snapshot_slice_locks locks per
//     turn while entries go on applying (lock::LockTable::begin_snapshot:
//     the bytes are the table at the index it began at), and begun once
//     neither a save is outstanding nor one being built and, since the last
//     one, both Config::snapshot_every entries were applied and the entries
//     applied (their data and kEntryOverheadBytes each) hold at least
//     snapshot_log_pct % of the table's own bytes
//     (lock::LockTable::bytes(), about its snapshot's size). The second
//     bound makes the snapshot's cost per applied byte a constant whatever
//     the table's size: a table of 1 GiB is not written again every 10,000
//     small entries. It also bounds the log a restart replays to about that
//     share of the table. A backup (TakeBackup) is
//     the same snapshot of the applied table, answered once a quorum round
//     asked for after the request confirmed this member leads (as a list).
//   - Membership (core_members.cc, admin requests): add (a learner, its
//     addresses in the configuration), promote, remove are the Raft core's
//     changes, answered with the configuration once applied; a leader asked
//     to remove itself hands leadership to the most caught-up voter and
//     answers Unavailable{that voter}, whose retry there removes it (with no
//     other voter, the removal is refused). A member whose removal applies,
//     or whose campaign a leader answers with raft::Removed (it was removed
//     while it could not hear of it), is told to stop (Effects::removed).
//
// Threading: not thread-safe; one thread owns a Core.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "lock/table.h"
#include "member/api.h"
#include "member/counters.h"
#include "member/lease.h"
#include "member/leases.h"
#include "member/token_history.h"
#include "member/watch_history.h"
#include "raft/raft.h"

namespace pgfence::member {

using RequestId = std::uint64_t;

// Told of every entry the core applies, every snapshot it restores and every
// command it proposes, as it happens (the simulation's checkers; the server
// passes none). Must not call back into the core.
class ApplyObserver {
public:
    virtual ~ApplyObserver() = default;
    virtual void before_apply(const raft::Entry& entry, const lock::LockTable& table) = 0;
    virtual void after_apply(const raft::Entry& entry, const lock::Result& result, const lock::LockTable& table) = 0;
    virtual void restored(const raft::SnapshotMeta& meta, const lock::LockTable& table) = 0;
    // A command this member proposed (as leader) and raft accepted at
    // `index` (it may never commit); propose_raw() does not come here. The
    // simulation reads a leader's Expires from it, the core logging one line
    // per entry.
    virtual void proposed(raft::Index index, const lock::Command& cmd) {
        (void)index;
        (void)cmd;
    }
};

// Config bounds. A snapshot interval holds up to snapshot_log_pct % of the
// table in log, kept in memory until the next snapshot: 4x a 192 MiB table
// is already 768 MiB.
constexpr std::uint64_t kMaxSnapshotLogPct = 400;
// What a log entry costs besides its data, as the snapshot policy counts it:
// about the WAL's framing of an entry (CRC, length, type, term, index).
constexpr std::uint64_t kEntryOverheadBytes = 26;
constexpr std::uint64_t kMaxSnapshotEvery = 10'000'000;
// The most leases one expiry wave takes (Config::expiry_wave). A request
// proposed during an expiry storm waits behind about one wave's Expires,
// and the next wave starts as the last Expire of one applies. 1024 keeps a
// probe's p99 under 20 ms in a storm of 1M leases on a quiet machine; a
// larger wave ends the storm sooner and takes the p99 past that (the wave
// sizes measured, and what a wave costs: docs/decisions.md, ExpireMany).
constexpr std::size_t kDefaultExpiryWave = 1024;
// Expires per entry by default (Config::max_expire_batch): the most an
// ExpireMany holds, a wave's Expires in one entry.
constexpr std::size_t kDefaultMaxExpireBatch = lock::kMaxExpireMany;
constexpr std::size_t kMaxExpiryWave = 65536;
// A snapshot is built a slice of locks per turn (lock::LockTable's
// continue_snapshot): 16,384 locks is about 1 ms of encoding here, so a
// table of a million locks is written out over some 60 turns of the event
// loop instead of stalling one turn for tens of milliseconds.
constexpr std::size_t kDefaultSnapshotSliceLocks = 16384;
constexpr std::size_t kMaxSnapshotSliceLocks = 10'000'000;

struct Config {
    raft::Config raft;  // id, members, cluster_id, ticks, random_seed, limits
    std::uint64_t max_clock_drift_ppm = kDefaultMaxClockDriftPpm;  // rho (lease.h)
    std::uint64_t snapshot_every = 10000;  // applied entries between snapshots, at least
    std::uint64_t snapshot_log_pct = 100;  // applied entry bytes between snapshots, at least, in % of table bytes
    std::uint64_t snapshot_keep = 1000;    // log entries kept behind a snapshot
    std::size_t snapshot_slice_locks = kDefaultSnapshotSliceLocks;  // locks encoded per turn, 1..kMaxSnapshotSliceLocks
    // Leases that ran out together are expired this many to an entry, as
    // one ExpireMany (1..lock::kMaxExpireMany; 1: one Expire each). Every
    // member must be able to apply ExpireMany unless it is 1 (an upgrade
    // from a release before ExpireMany, docs/operations.md "Upgrades").
    std::size_t max_expire_batch = kDefaultMaxExpireBatch;
    // An owner is bound to the user that acquired with it (Acquire::user is
    // proposed in the Grant, a version-2 command). false: Grants are proposed
    // without the user (version 1, which a member of a release before owner
    // binding can apply) and a re-grant is by owner alone, as without auth.
    // Every member must be able to apply version-2 commands before it is true.
    bool owner_binding = true;
    // The most leases one expiry wave takes (1..kMaxExpiryWave; the
    // server's --expiry-wave): its round and Expires are done before the
    // next wave is taken.
    std::size_t expiry_wave = kDefaultExpiryWave;
    // Leases' remaining time is checkpointed through the log (lock::Checkpoint)
    // once per run, at its half, and a new leader restarts a lease from its
    // lock's checkpoint (docs/guarantees.md "Checkpoints"). Every member
    // must be able to apply Checkpoint before it is true. Whether true or
    // not, a keepalive or re-grant of a lease with a checkpoint stored or in
    // flight commits a clearing one before it is answered.
    bool lease_checkpoints = false;
    // While one of its writes is outstanding, a leader whose term is durable
    // sends each turn what it has to send since (Raft::take_messages_now:
    // the entries proposed since, commit index, heartbeats, read rounds)
    // instead of with its next Ready. Off by default (the server's
    // --early-appends; why: docs/decisions.md, "Appends sent while the
    // leader writes").
    bool early_appends = false;
    // The most leases checkpointed per tick, in one Checkpoint entry
    // (1..lock::kMaxCheckpoints; fewer when their keys fill kMaxCheckpointBytes).
    std::size_t max_checkpoints_per_tick = lock::kMaxCheckpoints;
    std::uint64_t token_floor = 0;         // proposed by a new leader if higher than the table's
    // The lock table's size limit (lock::LockTable): the same on every
    // member, or they diverge. The server keeps the default; tests lower it.
    std::uint64_t max_table_bytes = lock::kMaxTableBytes;
    std::size_t max_waiters = 10000;       // queued acquires, all keys together
    std::size_t max_proposals = 100000;    // proposals awaiting their apply
    // The lock events kept for watches (watch_history.h), both >= 1.
    std::size_t watch_history_events = kDefaultWatchHistoryEvents;
    std::uint64_t watch_history_bytes = kDefaultWatchHistoryBytes;
    // Each token's life as applied here (token_history.h), both >= 1.
    std::size_t token_history_tokens = kDefaultTokenHistoryTokens;
    std::uint64_t token_history_bytes = kDefaultTokenHistoryBytes;
    // Entries are stamped with the leader's wall clock (lock::encode(cmd,
    // wall_ms), version 4) once wall_clock() told it. false: written as
    // before (versions 1..3), which a member of a release before the stamp
    // reads. Every member must be able to read version 4 before it is true.
    bool log_wall_time = true;
    std::chrono::nanoseconds proposal_timeout = std::chrono::seconds(10);
    int sweep_every_ticks = 5;             // how often proposals are checked for the timeout
    bool debug_logs = false;               // produce debug-level lines (else they are skipped)
    ApplyObserver* observer = nullptr;     // not owned; outlives the core
};

// One answer. `index`/`term`: the log entry whose apply decided it, and
// `result` what the lock table returned there (a proposal's answer); for a
// list, the applied index it was read at; 0 otherwise. The shell needs only
// `id` and `response`; the simulation checks the rest against the log.
struct Answer {
    RequestId id = 0;
    Response response;
    raft::Index index = 0;
    raft::Term term = 0;
    lock::Result result = lock::Noop{};
};

enum class LogLevel : std::uint8_t { kDebug, kInfo, kWarn, kError };

// One log line: event name and up to kMaxFields key=value fields.
struct LogLine {
    static constexpr std::size_t kMaxFields = 7;
    LogLevel level = LogLevel::kInfo;
    const char* event = "";
    std::array<std::pair<const char*, std::string>, kMaxFields> fields;
    std::size_t count = 0;
};

struct Effects {
    std::vector<raft::Message> send;
    std::shared_ptr<const raft::Ready> persist;  // hard_state, snapshot, entries; then messages
    std::shared_ptr<const raft::Snapshot> save;
    std::vector<Answer> respond;
    std::vector<RequestId> watch;
    std::vector<LogLine> logs;
    std::string fatal;
    // The configuration in force changed (or is reported for the first
    // time): the members the peer transport must reach now, with their
    // addresses (member/addresses.h) where the configuration has them.
    // Empty: a joining member that knows none yet (nothing to change).
    std::optional<raft::Configuration> configuration;
    // An applied configuration entry dropped this member from one that had
    // it: the caller stops it (gracefully: nothing more needs it). Once per
    // removal.
    bool removed = false;
    bool empty() const {
        return send.empty() && !persist && !save && respond.empty() && watch.empty() && logs.empty() &&
               fatal.empty() && !configuration && !removed;
    }
    void clear();  // empties it, keeping the vectors' capacity
};

class Core {
public:
    // Restores the lock table from storage's snapshot and builds the Raft core
    // on `storage` (read only here). Throws std::invalid_argument naming the
    // problem (a bad Config, a snapshot that does not decode).
    Core(Config config, const raft::Storage& storage);
    ~Core();
    Core(const Core&) = delete;
    Core& operator=(const Core&) = delete;

    void tick(Time now);
    void step(const raft::Message& message, Time now);
    void request(RequestId id, Request request, Time now);
    void client_gone(RequestId id, Time now);
    void response_written(RequestId id, bool ok, Time now);
    void persist_started(Time now);
    void persisted(Time now);
    void snapshot_saved(std::shared_ptr<const raft::Snapshot> snapshot, Time now);
    void begin_shutdown(const std::vector<raft::NodeId>& reachable, Time now);
    // The ID of the key the shell signs token proofs with from now on
    // (net/token_signer.h; "": it signs none): each Granted answer records
    // it as its lease's kid (lease.h). Told at start and at every reload.
    void set_proof_kid(std::string_view kid);
    void wall_clock(std::uint64_t wall_ms) { wall_ms_ = wall_ms; }
    void turn(Time now);
    Effects take_effects();
    // The same into `out` (cleared first): a caller that keeps one Effects
    // across batches reuses its vectors' capacity.
    void take_effects(Effects& out);
    bool wants_turn() const;
    bool has_effects() const { return !effects_.empty(); }

    // ---- read-only views (status, metrics, tests, the simulation's checks) ----
    const raft::Raft& raft() const { return *raft_; }
    const lock::LockTable& table() const { return table_; }
    // The lock events applied here (watch_history.h): appended as entries
    // apply, reset when a snapshot is restored.
    const WatchHistory& watch_history() const { return history_; }
    // Each token's life as applied here (token_history.h): kept across a
    // restore, which ends what it did not see end.
    const TokenHistory& token_history() const { return tokens_; }
    const Counters& counters() const { return counters_; }
    bool is_leader() const { return raft_->role() == raft::Role::kLeader; }
    // Acquire, release and keepalive are taken (else answered Unavailable).
    bool serves_writes() const { return is_leader() && !shutting_down_; }
    bool persisting() const { return ready_ != nullptr; }
    bool saving() const { return saving_; }
    bool shutting_down() const { return shutting_down_; }
    // This member's removal applied (or a leader answered it raft::Removed),
    // and it was not added again since: Effects::removed was told.
    bool removed() const { return removed_; }
    std::uint64_t ticks() const { return ticks_; }  // tick() calls so far
    std::size_t waiter_count() const { return waiter_total_; }
    std::size_t proposal_count() const { return proposals_.size(); }
    const Lease* lease(std::string_view key) const;
    // The name of Lease::kid; valid only until the leases next change (LeaseSet::kid()).
    std::string_view lease_kid(const Lease& lease) const { return leases_.kid(lease); }
    std::uint64_t ttl_ms(std::string_view key, Time now) const;  // 0 when not held or ended
    // A leader's held leases by the kid of the proof last handed out for
    // each (lease.h, kNoProofKid, kUnknownProofKid); empty elsewhere.
    const std::map<std::string, std::size_t, std::less<>>& leases_by_kid() const { return leases_.by_kid(); }
    raft::Term leader_term() const { return leader_term_; }  // 0: not leading
    // The configuration in force: each member's addresses (from its context;
    // empty for a member of the first configuration) and, on the leader, its
    // match index and whether a learner is caught up. GET /v1/members and the
    // join answer.
    Members members_view() const;

    // The Raft core's own invariants and the leases' and waiters': "" or the
    // first broken. They hold between inputs (a step that demotes this member
    // leaves its leases until the next turn or request follows the change).
    std::string check_invariants() const;

    // Liveness help for the simulation: proposes a command outside any request.
    raft::ProposeResult propose_raw(const lock::Command& cmd);
    bool transfer_leadership(raft::NodeId target);

private:
    // What decided an answer, reported with it (Answer::index, term,
    // result): a proposal's entry as it applied and the table's result
    // there, or for a read the applied index it shows (term 0, no result).
    // Handed to the code that answers, never kept: `result` lives only while
    // the entry is being applied. Witness{} (all zero): no entry decided the
    // answer. (No member initializers: a default argument below is Witness{}.)
    struct Witness {
        raft::Index index;
        raft::Term term;
        const lock::Result* result;  // null: none
    };
    // A proposal made as leader, answered when its index applies:
    // done(&witness, now) when it applied with its term (witness.result is
    // the table's result), done(nullptr, now) when it is lost (another
    // term's entry took the index, or it timed out).
    using ProposalDone = std::function<void(const Witness*, Time)>;
    struct Proposal {
        raft::Term term = 0;
        Time proposed_at{};
        ProposalDone done;
    };
    struct Waiter {
        RequestId id = 0;
        Acquire acquire;
        Time deadline{};
    };
    // A Granted answer handed to the shell, not yet reported written, and
    // counted in its lease's answers (in `term`'s leadership; 0: answered
    // while not leading, with no lease to count it in).
    struct Unwritten {
        std::vector<std::string> keys;  // the one key, or a set's
        lock::Token token = 0;
        raft::Term term = 0;
    };

    // core.cc
    std::string kid_of(std::string_view key, lock::Token token) const;  // its lease's, else kUnknownProofKid
    void observe_role(Time now);
    // While a leader's Persist is outstanding, with Config::early_appends:
    // what it has to send since (raft.h take_messages_now) into effects_.send.
    void send_messages_now();
    void become_leader(Time now);
    void lose_leadership(Time now);
    bool propose(const lock::Command& cmd, Time now, ProposalDone done, raft::ProposeError* error,
                 raft::Index* index = nullptr);
    void sweep_proposals(Time now);
    bool needs_write(const raft::Ready& rd) const;
    void respond(RequestId id, Response r, const Witness& by = {});
    void unavailable(RequestId id);
    void log(LogLevel level, const char* event, std::initializer_list<std::pair<const char*, std::string_view>> fields);

    // core_apply.cc
    void apply_ready(const raft::Ready& rd, Time now);
    void apply_taken(Time now);
    void apply_entry(const raft::Entry& e, Time now);
    // Of a lock a removing command names, before it applied.
    struct HeldBefore {
        bool held = false;  // with the command's token
        std::string owner;  // "" when not held so
    };
    void on_applied(raft::Index index, const lock::Command& cmd, const lock::Result& result,
                    const std::vector<HeldBefore>& before, Time now);
    void on_applied_many(raft::Index index, const lock::GrantMany& g, const lock::Result& result, Time now);
    void on_expired(const lock::Expire& x, bool existed, const std::string& owner, Time now);
    void log_expired(raft::Index index, const lock::Expire& first, bool first_existed, const std::string& owner,
                     std::size_t locks, std::size_t expired);
    void on_removed(const std::string& key, lock::Token token, Time now);
    void note_event(raft::Index index, WatchEventType type, const std::string& key, lock::Token token,
                    const std::string& owner = {}, std::uint64_t lease_ms = 0, bool existed = false,
                    const std::string& value = {});
    std::string owner_of(std::string_view key, lock::Token token) const;
    // A keepalive of `key` (or a set's first key) with `token` refused: why,
    // for the token history ("not_held", "expiring", "part_of_set").
    void note_keepalive_refused(const std::string& key, lock::Token token, const char* reason = nullptr);

    // core_snapshots.cc
    void maybe_snapshot();
    void continue_snapshot();  // one slice of the snapshot being built; the save once it is whole
    std::shared_ptr<raft::Snapshot> applied_snapshot() const;  // the applied table, with its configuration
    void take_backup(RequestId id);

    // core_leases.cc
    void confirm(std::function<void(bool, Time)> cb);
    void flush_confirms(Time now);
    void on_read_state(const raft::ReadState& rs);
    void run_confirmed_reads(Time now);
    void fail_reads(std::uint64_t ctx, Time now);
    void restart_all_leases(Time now);
    // Once everything committed before this leadership applied (its first
    // entry did): each running lease whose lock has a checkpoint restarts
    // from it.
    void restart_from_checkpoints(Time now);
    void propose_checkpoints(Time now);
    // Whether `key`'s lease with `token` has a checkpoint stored in the
    // table or proposed and not applied.
    bool has_checkpoint(const std::string& key, lock::Token token) const;
    // Of `keys` (one lock, or a set's), those whose lease with `token` has a checkpoint.
    std::vector<std::string> with_checkpoint(const std::vector<std::string>& keys, lock::Token token) const;
    // Commits one Checkpoint clearing the checkpoints of `keys` (with
    // `token`; 1..lock::kMaxGrantManyKeys of them) then calls
    // done(applied, now) (applied: false when it could not be proposed or was lost).
    void clear_checkpoints(const std::vector<std::string>& keys, lock::Token token, Time now,
                           std::function<void(bool, Time)> done);
    void answer_granted(RequestId id, const Acquire& req, lock::Token token, std::uint64_t lease_ms,
                        const Witness& by);
    void check_expiries(Time now);
    void propose_expires(const std::vector<DueLease>& due, Time now, std::uint64_t wave);
    // One part of `wave` is done: its round, or one of its Expires (applied
    // at *applied_at; nullptr: the round, or an Expire dropped unapplied).
    void expiry_wave_done(std::uint64_t wave, const Time* applied_at);
    void acquire(RequestId id, const Acquire& req, bool from_queue, Time now);
    void on_grant_result(RequestId id, const Acquire& req, bool from_queue, const Witness* applied, Time now);
    // Queues an acquire (`front`: a queue head that lost the race keeps its
    // place); refused Held, reported with `by`, when too many wait.
    void enqueue_waiter(RequestId id, const Acquire& req, bool front, Time now, const Witness& by = {});
    void serve_waiters(const std::string& key, Time now);
    // Takes waiter `w` (a copy) out of every queue it is in (a set's: one per
    // key), then, with `serve`, serves those of its keys other than
    // `except` (their heads may change).
    void remove_waiter(const Waiter& w, Time now, std::string_view except = {}, bool serve = true);
    // A waiting set is at the head of each of its keys' queues, each key
    // free and no grant in flight on it (core.h "Waiters").
    bool set_may_go(const Waiter& w) const;
    void sweep_waiters(Time now);
    void drop_all_waiters();
    void keepalive(RequestId id, const KeepAlive& req);
    // A set's keepalive: every key's lease, restarted together, or none.
    void keepalive_set(RequestId id, const KeepAlive& req);
    void release(RequestId id, const Release& req, Time now);
    void proclaim(RequestId id, const Proclaim& req, Time now);
    // A grant of `key` with `token` reached nobody (a phantom grant): its
    // lease ends now and is expired, unless an answer still promises it
    // (Lease::answers).
    void expire_phantom_grant(const std::string& key, lock::Token token, Time now);
    void list_locks(RequestId id, const ListLocks& req);

    // core_members.cc
    void change_members(RequestId id, const Request& req, Time now);
    // A voter to hand leadership to: among `reachable` when given (else
    // those heard from in this election period first), the most caught-up;
    // kNoNode when there is none.
    raft::NodeId handover_target(const std::vector<raft::NodeId>* reachable) const;
    void note_configuration();                 // Effects::configuration when it changed
    void on_config_applied(const raft::Entry& e);  // this member's removal
    void note_told_removed();                  // a leader said this member was removed

    Config config_;
    std::unique_ptr<raft::Raft> raft_;
    lock::LockTable table_;
    WatchHistory history_;
    TokenHistory tokens_;
    std::uint64_t wall_ms_ = 0;  // wall_clock(); 0: not told
    // The wall clock the entry being applied carries (lock::Stamped).
    std::optional<std::uint64_t> entry_wall_ms_;
    // What a grant applied now records as its wall time: entry_wall_ms_
    // (core_leases.cc, where the simulation's mutants are).
    std::optional<std::uint64_t> grant_wall_ms() const;
    Counters counters_;
    Effects effects_;

    // The Ready handed out as a Persist and not yet persisted(): no other
    // Ready is taken meanwhile (raft.h). Null: none outstanding.
    std::shared_ptr<const raft::Ready> ready_;
    bool apply_at_start_ = false;  // its committed entries are applied at persist_started()
    bool ready_applied_ = false;   // they were
    bool applying_ = false;       // inside an apply (no re-entry)
    // Term and vote as last handed out for writing. A Ready whose hard state
    // changed only in commit, with no entries or snapshot, is not written
    // (the storage writes term and vote; commit is recovered): the change
    // waits in unwritten_hard_state_ for the next write.
    raft::HardState written_hard_state_;
    std::optional<raft::HardState> unwritten_hard_state_;
    bool saving_ = false;  // a SaveSnapshot is outstanding
    raft::SnapshotMeta building_;  // of the snapshot table_ is building (table_.snapshotting())
    raft::Index last_snapshot_index_ = 0;
    std::uint64_t applied_bytes_since_snapshot_ = 0;  // entries applied since the last snapshot was taken,
                                                      // their data and kEntryOverheadBytes each
    raft::Term applied_term_ = 0;

    raft::Term leader_term_ = 0;  // term of our current leadership (0: not leader)
    bool checkpoints_restored_ = false;  // restart_from_checkpoints() ran in this leadership
    raft::NodeId last_leader_ = raft::kNoNode;
    std::uint64_t ticks_ = 0;
    bool shutting_down_ = false;
    std::string proof_kid_{kNoProofKid};  // set_proof_kid()
    bool failed_ = false;  // `fatal` was set: turn() does nothing more
    bool removed_ = false;  // this member's removal applied (Effects::removed told once)
    std::optional<raft::Configuration> reported_config_;  // the configuration last put in Effects

    std::map<raft::Index, Proposal> proposals_;
    // Leader only, one per held lock, restarted by a new leader. Invariant:
    // a lease's token is the held lock's token for that key.
    LeaseSet leases_;
    // The expiry wave in flight (check_expiries): its number, and its round
    // and Expire proposals not yet done (0: none; a new check may take more).
    // Losing leadership ends it (a later number ignores its callbacks).
    std::uint64_t expiry_wave_ = 0;
    std::size_t expiry_wave_pending_ = 0;
    std::map<std::string, std::deque<Waiter>, std::less<>> waiters_;
    std::size_t waiter_total_ = 0;
    std::set<std::string, std::less<>> waiter_grant_in_flight_;  // a queue head's Grant is proposed
    std::unordered_set<RequestId> grants_in_flight_;  // acquires whose Grant is proposed, not yet applied
    std::unordered_set<RequestId> gone_;              // of those, the ones whose client went away
    std::unordered_map<RequestId, Unwritten> unwritten_;

    // Leadership confirmation: callbacks asked for during one batch share one
    // read_index() issued after them (flush_confirms, in turn()), so each is
    // confirmed by a quorum round that started after it was asked for.
    std::uint64_t next_read_ctx_ = 1;
    std::vector<std::function<void(bool, Time)>> confirm_batch_;
    std::map<std::uint64_t, std::vector<std::function<void(bool, Time)>>> confirms_;  // by read ctx
    std::multimap<raft::Index, std::uint64_t> confirmed_waiting_apply_;         // read index -> ctx
};

}  // namespace pgfence::member
