// The member core's inputs, Ready handling, answers, roles and proposals
// (core.h). Applying entries: core_apply.cc; snapshots and backups:
// core_snapshots.cc; leases, waiters and leadership confirmation:
// core_leases.cc; membership: core_members.cc.
#include "member/core.h"

#include <algorithm>
#include <stdexcept>

namespace pgfence::member {

namespace {

std::string num(std::uint64_t v) { return std::to_string(v); }

// A full table's snapshot keeps 64 MiB of room for its header, the
// configuration and the snapshot file's framing.
static_assert(lock::kMaxTableBytes + (64u << 20) <= raft::kMaxSnapshotBytes);

}  // namespace

Core::Core(Config config, const raft::Storage& storage)
    : config_(std::move(config)),
      history_(config_.watch_history_events, config_.watch_history_bytes),
      tokens_(config_.token_history_tokens, config_.token_history_bytes) {
    if (config_.snapshot_log_pct > kMaxSnapshotLogPct) {
        throw std::invalid_argument("snapshot_log_pct " + num(config_.snapshot_log_pct) + " is above " +
                                    num(kMaxSnapshotLogPct));
    }
    if (config_.snapshot_every > kMaxSnapshotEvery) {
        throw std::invalid_argument("snapshot_every " + num(config_.snapshot_every) + " is above " +
                                    num(kMaxSnapshotEvery));
    }
    if (config_.snapshot_slice_locks < 1 || config_.snapshot_slice_locks > kMaxSnapshotSliceLocks) {
        throw std::invalid_argument("snapshot_slice_locks " + num(config_.snapshot_slice_locks) + " is not in 1.." +
                                    num(kMaxSnapshotSliceLocks));
    }
    if (config_.max_expire_batch < 1 || config_.max_expire_batch > lock::kMaxExpireMany) {
        throw std::invalid_argument("max_expire_batch " + num(config_.max_expire_batch) + " is not in 1.." +
                                    num(lock::kMaxExpireMany));
    }
    if (config_.expiry_wave < 1 || config_.expiry_wave > kMaxExpiryWave) {
        throw std::invalid_argument("expiry_wave " + num(config_.expiry_wave) + " is not in 1.." + num(kMaxExpiryWave));
    }
    if (config_.max_checkpoints_per_tick < 1 || config_.max_checkpoints_per_tick > lock::kMaxCheckpoints) {
        throw std::invalid_argument("max_checkpoints_per_tick " + num(config_.max_checkpoints_per_tick) +
                                    " is not in 1.." + num(lock::kMaxCheckpoints));
    }
    leases_ = LeaseSet(config_.lease_checkpoints);
    if (config_.max_table_bytes > lock::kMaxTableBytes) {
        throw std::invalid_argument("max_table_bytes " + num(config_.max_table_bytes) + " is above " +
                                    num(lock::kMaxTableBytes) + ": its snapshot might not fit");
    }
    table_ = lock::LockTable(config_.max_table_bytes);
    const raft::Snapshot snap = storage.snapshot();
    if (!snap.empty()) {
        auto restored = lock::LockTable::restore(snap.data, config_.max_table_bytes);
        if (auto* err = std::get_if<lock::DecodeError>(&restored)) {
            throw std::invalid_argument("the snapshot at index " + num(snap.meta.index) +
                                        " does not decode: " + err->message);
        }
        table_ = std::move(std::get<lock::LockTable>(restored));
        last_snapshot_index_ = snap.meta.index;
        applied_term_ = snap.meta.term;
        history_.reset(snap.meta.index);
        tokens_.restored(snap.meta.index, table_);
        if (config_.observer != nullptr) config_.observer->restored(snap.meta, table_);
    }
    written_hard_state_ = storage.hard_state();
    raft_ = std::make_unique<raft::Raft>(config_.raft, storage);
}

Core::~Core() = default;

void Effects::clear() {
    send.clear();
    persist.reset();
    save.reset();
    respond.clear();
    watch.clear();
    logs.clear();
    fatal.clear();
    configuration.reset();
    removed = false;
}

Effects Core::take_effects() {
    Effects out;
    take_effects(out);
    return out;
}

void Core::take_effects(Effects& out) {
    out.clear();
    std::swap(out, effects_);
}

void Core::log(LogLevel level, const char* event,
               std::initializer_list<std::pair<const char*, std::string_view>> fields) {
    if (level == LogLevel::kDebug && !config_.debug_logs) return;
    LogLine& line = effects_.logs.emplace_back();
    line.level = level;
    line.event = event;
    for (const auto& [name, value] : fields) {
        if (line.count == LogLine::kMaxFields) break;
        line.fields[line.count].first = name;
        line.fields[line.count].second.assign(value);
        ++line.count;
    }
}

void Core::respond(RequestId id, Response r, const Witness& by) {
    gone_.erase(id);
    Answer& a = effects_.respond.emplace_back();
    a.id = id;
    a.response = std::move(r);
    a.index = by.index;
    a.term = by.term;
    if (by.result != nullptr) a.result = *by.result;
}

void Core::unavailable(RequestId id) { respond(id, Unavailable{raft_->leader()}); }

// ---- inputs -----------------------------------------------------------------------

void Core::tick(Time now) {
    ++ticks_;
    raft_->tick();
    if (is_leader()) {
        check_expiries(now);
        sweep_waiters(now);
        if (config_.lease_checkpoints && leader_term_ == raft_->term()) propose_checkpoints(now);
    }
    if (config_.sweep_every_ticks > 0 && ticks_ % static_cast<std::uint64_t>(config_.sweep_every_ticks) == 0) {
        sweep_proposals(now);
    }
}

void Core::step(const raft::Message& message, Time /*now*/) {
    raft_->step(message);
    if (std::holds_alternative<raft::Removed>(message.body)) note_told_removed();
}

void Core::request(RequestId id, Request req, Time now) {
    observe_role(now);
    if (auto* list = std::get_if<ListLocks>(&req)) {
        if (!is_leader()) {
            unavailable(id);
        } else {
            list_locks(id, *list);
        }
        return;
    }
    if (std::holds_alternative<ListMembers>(req)) {
        if (!is_leader()) {
            unavailable(id);
        } else {
            respond(id, members_view());
        }
        return;
    }
    if (std::holds_alternative<TakeBackup>(req)) {
        if (!is_leader()) {
            unavailable(id);
        } else {
            take_backup(id);
        }
        return;
    }
    if (!serves_writes()) {
        unavailable(id);
        return;
    }
    if (auto* a = std::get_if<Acquire>(&req)) {
        acquire(id, *a, false, now);
    } else if (auto* r = std::get_if<Release>(&req)) {
        release(id, *r, now);
    } else if (auto* k = std::get_if<KeepAlive>(&req)) {
        keepalive(id, *k);
    } else if (auto* p = std::get_if<Proclaim>(&req)) {
        proclaim(id, *p, now);
    } else {
        change_members(id, req, now);
    }
}

void Core::client_gone(RequestId id, Time now) {
    // A queued waiter is dropped at once (its place goes to the next); an
    // acquire whose Grant is in flight is remembered: when the Grant applies
    // it is a phantom (lease ended, expired) instead of answered. Any other
    // id is ignored.
    // A set's waiter is in the queue of each of its keys.
    for (const auto& [key, q] : waiters_) {
        for (const Waiter& w : q) {
            if (w.id != id) continue;
            remove_waiter(Waiter(w), now);
            return;
        }
    }
    if (grants_in_flight_.count(id) > 0) gone_.insert(id);
}

bool Core::wants_turn() const {
    return !failed_ && ready_ == nullptr && (raft_->has_ready() || !confirm_batch_.empty());
}

void Core::response_written(RequestId id, bool ok, Time now) {
    auto it = unwritten_.find(id);
    if (it == unwritten_.end()) return;
    Unwritten u = std::move(it->second);
    unwritten_.erase(it);
    // Counted in a lease of this leadership (a later one restarted its
    // leases, each answered for all it knows): one answer fewer stands.
    if (ok || !is_leader() || u.term != leader_term_) return;
    for (const std::string& key : u.keys) {
        leases_.unanswered(key, u.token);
        expire_phantom_grant(key, u.token, now);
    }
}

void Core::set_proof_kid(std::string_view kid) { proof_kid_ = kid.empty() ? kNoProofKid : kid; }

void Core::begin_shutdown(const std::vector<raft::NodeId>& reachable, Time /*now*/) {
    if (shutting_down_) return;
    shutting_down_ = true;
    log(LogLevel::kInfo, "shutdown_requested", {{"role", raft::to_string(raft_->role())}});
    if (!is_leader()) return;
    const raft::NodeId best = handover_target(&reachable);
    if (best != raft::kNoNode && raft_->transfer_leadership(best)) {
        log(LogLevel::kInfo, "leadership_transfer", {{"target", num(best)}, {"reason", "shutdown"}});
    }
}

// Confirmations asked for during the batch, role changes, then the next
// Ready: its messages_now go out at once; a Ready that needs a write becomes
// the Persist; one that does not is finished here. While a Persist is
// outstanding, a leader with Config::early_appends sends what was proposed
// since (raft.h take_messages_now): the followers write it while this
// member finishes its write.
void Core::turn(Time now) {
    if (failed_) return;
    flush_confirms(now);
    observe_role(now);
    note_configuration();
    continue_snapshot();
    if (ready_ != nullptr) {
        // Commits learnt meanwhile follow the outstanding Ready's own
        // committed entries, never precede them.
        if (ready_applied_) apply_taken(now);
        send_messages_now();
        return;
    }
    if (!raft_->has_ready()) return;
    raft::Ready rd = raft_->ready();
    for (raft::Message& m : rd.messages_now) effects_.send.push_back(std::move(m));
    rd.messages_now.clear();
    if (!needs_write(rd)) {
        if (rd.hard_state) unwritten_hard_state_ = rd.hard_state;
        for (raft::Message& m : rd.messages) effects_.send.push_back(std::move(m));
        rd.messages.clear();
        apply_ready(rd, now);
        raft_->advance(rd);
        maybe_snapshot();
        return;
    }
    if (!rd.hard_state) rd.hard_state = unwritten_hard_state_;
    unwritten_hard_state_.reset();
    if (rd.hard_state) written_hard_state_ = *rd.hard_state;
    // A leader answers while it writes; a follower acks first; a snapshot
    // restores the table first, at persisted().
    apply_at_start_ = !rd.snapshot && is_leader();
    ready_applied_ = false;
    ready_ = std::make_shared<const raft::Ready>(std::move(rd));
    effects_.persist = ready_;
}

void Core::persist_started(Time now) {
    if (ready_ == nullptr || !apply_at_start_ || ready_applied_) return;
    ready_applied_ = true;
    apply_ready(*ready_, now);
    send_messages_now();  // e.g. a waiter's Grant proposed while applying
}

void Core::send_messages_now() {
    if (!config_.early_appends) return;
    for (raft::Message& m : raft_->take_messages_now()) effects_.send.push_back(std::move(m));
}

void Core::persisted(Time now) {
    if (ready_ == nullptr) throw std::logic_error("Core::persisted: no Persist outstanding");
    const std::shared_ptr<const raft::Ready> rd = std::move(ready_);
    ready_.reset();
    if (rd->snapshot) {
        auto restored = lock::LockTable::restore(rd->snapshot->data, config_.max_table_bytes);
        if (auto* err = std::get_if<lock::DecodeError>(&restored)) {
            effects_.fatal = "the snapshot at index " + num(rd->snapshot->meta.index) +
                             " received from the leader does not decode";
            log(LogLevel::kError, "snapshot_restore_failed", {{"error", err->message}});
            failed_ = true;
            return;
        }
        table_ = std::move(std::get<lock::LockTable>(restored));
        applied_term_ = rd->snapshot->meta.term;
        last_snapshot_index_ = rd->snapshot->meta.index;
        applied_bytes_since_snapshot_ = 0;
        history_.reset(rd->snapshot->meta.index);
        tokens_.restored(rd->snapshot->meta.index, table_);
        if (config_.observer != nullptr) config_.observer->restored(rd->snapshot->meta, table_);
        log(LogLevel::kInfo, "snapshot_installed",
            {{"index", num(rd->snapshot->meta.index)}, {"locks", num(table_.size())}});
    }
    if (!ready_applied_) apply_ready(*rd, now);
    ready_applied_ = false;
    apply_at_start_ = false;
    raft_->advance(*rd);
    maybe_snapshot();
}

bool Core::needs_write(const raft::Ready& rd) const {
    if (rd.snapshot || !rd.entries.empty()) return true;
    return rd.hard_state &&
           (rd.hard_state->term != written_hard_state_.term || rd.hard_state->vote != written_hard_state_.vote);
}

void Core::observe_role(Time now) {
    const raft::NodeId leader = raft_->leader();
    if (leader != last_leader_) {
        if (leader != raft::kNoNode) ++counters_.leader_changes;
        log(LogLevel::kInfo, "leader_changed", {{"leader", num(leader)}, {"term", num(raft_->term())}});
        last_leader_ = leader;
    }
    const bool leader_now = is_leader();
    if (leader_now && leader_term_ != raft_->term()) become_leader(now);
    if (!leader_now && leader_term_ != 0) lose_leadership(now);
}

// A new leader restarts every held lease at its full lease_ms (docs/design.md "Time").
void Core::become_leader(Time now) {
    if (leader_term_ != 0) lose_leadership(now);
    leader_term_ = raft_->term();
    tokens_.leading_from(table_.applied_index());
    log(LogLevel::kInfo, "became_leader", {{"term", num(leader_term_)}, {"locks", num(table_.size())}});
    restart_all_leases(now);
    checkpoints_restored_ = false;
    // This term's first entry (the no-op) applied already: all before it did.
    if (applied_term_ == leader_term_) restart_from_checkpoints(now);
    if (config_.token_floor > table_.token_floor()) {
        raft::ProposeError err = raft::ProposeError::kNone;
        propose(lock::SetTokenFloor{config_.token_floor}, now, [](const Witness*, Time) {}, &err);
    }
}

void Core::lose_leadership(Time /*now*/) {
    log(LogLevel::kInfo, "lost_leadership", {{"term", num(leader_term_)}, {"leader", num(raft_->leader())}});
    leader_term_ = 0;
    tokens_.led_until(table_.applied_index());
    leases_.clear();
    ++expiry_wave_;  // the wave in flight ends with the leases it was for
    expiry_wave_pending_ = 0;
    drop_all_waiters();
}

bool Core::propose(const lock::Command& cmd, Time now, ProposalDone done, raft::ProposeError* error,
                   raft::Index* index) {
    if (proposals_.size() >= config_.max_proposals) {
        *error = raft::ProposeError::kBacklog;
        return false;
    }
    const bool stamp = config_.log_wall_time && wall_ms_ != 0;
    const raft::ProposeResult r = raft_->propose(stamp ? lock::encode(cmd, wall_ms_) : lock::encode(cmd));
    *error = r.error;
    if (r.error != raft::ProposeError::kNone) return false;
    proposals_[r.index] = Proposal{r.term, now, std::move(done)};
    if (index != nullptr) *index = r.index;
    if (config_.observer != nullptr) config_.observer->proposed(r.index, cmd);
    return true;
}

raft::ProposeResult Core::propose_raw(const lock::Command& cmd) { return raft_->propose(lock::encode(cmd)); }

bool Core::transfer_leadership(raft::NodeId target) { return raft_->transfer_leadership(target); }

// Proposals that never applied (a partitioned ex-leader's) fail after a bound.
void Core::sweep_proposals(Time now) {
    for (auto it = proposals_.begin(); it != proposals_.end();) {
        if (now - it->second.proposed_at >= config_.proposal_timeout) {
            auto done = std::move(it->second.done);
            it = proposals_.erase(it);
            ++counters_.proposal_timeouts;
            done(nullptr, now);
        } else {
            ++it;
        }
    }
}

const Lease* Core::lease(std::string_view key) const { return leases_.find(key); }

std::string Core::kid_of(std::string_view key, lock::Token token) const {
    const Lease* l = leases_.find(key);
    return l != nullptr && l->token == token ? std::string(leases_.kid(*l)) : std::string(kUnknownProofKid);
}

std::uint64_t Core::ttl_ms(std::string_view key, Time now) const {
    const Lease* l = leases_.find(key);
    if (l == nullptr || l->deadline <= now) return 0;
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(l->deadline - now).count());
}

std::string Core::check_invariants() const {
    if (std::string broken = raft_->check_invariants(); !broken.empty()) return broken;
    if (leader_term_ == 0 && !leases_.empty()) return "a member that does not lead holds " + num(leases_.size()) + " leases";
    std::string bad_lease;
    leases_.for_each([&](const std::string& key, const Lease& l) {
        if (!bad_lease.empty()) return;
        const lock::Lock* held = table_.find(key);
        if (held == nullptr || held->token != l.token) {
            bad_lease = "lease of " + key + " with token " + num(l.token) + " but the table holds " +
                     (held ? "token " + num(held->token) : std::string("nothing"));
        } else if (l.expire_at < l.deadline) {
            bad_lease = "lease of " + key + " expires before its deadline";
        }
    });
    if (!bad_lease.empty()) return bad_lease;
    if (std::string broken = leases_.check_invariants(); !broken.empty()) return broken;
    std::size_t queued = 0;  // a set's waiter once (in the queue of its first key)
    for (const auto& [key, q] : waiters_) {
        if (q.empty()) return "an empty wait queue for " + key;
        for (const Waiter& w : q) queued += w.acquire.keys.empty() || w.acquire.keys.front() == key ? 1 : 0;
    }
    if (queued != waiter_total_) return "waiter count " + num(waiter_total_) + " but " + num(queued) + " queued";
    if (leader_term_ == 0 && waiter_total_ != 0) return "a member that does not lead has waiters";
    for (RequestId id : gone_) {
        if (grants_in_flight_.count(id) == 0) return "gone request " + num(id) + " has no Grant in flight";
    }
    return {};
}

}  // namespace pgfence::member
