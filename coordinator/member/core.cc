// The member core's Ready handling, apply, roles, proposals and snapshots
// (core.h). Leases, waiters and leadership confirmation: core_leases.cc.
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

Core::Core(Config config, const raft::Storage& storage) : config_(std::move(config)) {
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

void Core::respond(RequestId id, Response r) {
    gone_.erase(id);
    Answer& a = effects_.respond.emplace_back();
    a.id = id;
    a.response = std::move(r);
    if (id == deciding_id_ && id != 0) {
        a.index = deciding_index_;
        a.term = deciding_term_;
        if (deciding_result_ != nullptr) a.result = *deciding_result_;
    }
}

void Core::unavailable(RequestId id) { respond(id, Unavailable{raft_->leader()}); }

// ---- inputs -----------------------------------------------------------------------

void Core::tick(Time now) {
    ++ticks_;
    raft_->tick();
    if (is_leader()) {
        check_expiries(now);
        sweep_waiters(now);
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
    } else {
        change_members(id, req, now);
    }
}

void Core::client_gone(RequestId id, Time /*now*/) {
    // A queued waiter is dropped at once (its place goes to the next); an
    // acquire whose Grant is in flight is remembered: when the Grant applies
    // it is a phantom (lease ended, expired) instead of answered. Any other
    // id is ignored.
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
        auto& q = it->second;
        for (auto w = q.begin(); w != q.end(); ++w) {
            if (w->id != id) continue;
            q.erase(w);
            --waiter_total_;
            if (q.empty()) waiters_.erase(it);
            return;
        }
    }
    if (grants_in_flight_.count(id) > 0) gone_.insert(id);
}

bool Core::wants_pump() const {
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
    leases_.unanswered(u.key, u.token);
    phantom_release(u.key, u.token, now);
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
// the Persist; one that does not is finished here.
void Core::pump(Time now) {
    if (failed_) return;
    flush_confirms(now);
    observe_role(now);
    note_configuration();
    continue_snapshot();
    if (ready_ != nullptr) {
        // Commits learnt meanwhile follow the outstanding Ready's own
        // committed entries, never precede them.
        if (ready_applied_) apply_taken(now);
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

void Core::snapshot_saved(std::shared_ptr<const raft::Snapshot> snapshot, Time /*now*/) {
    if (!saving_) throw std::logic_error("Core::snapshot_saved: no SaveSnapshot outstanding");
    saving_ = false;
    const raft::Index index = snapshot->meta.index;
    // A snapshot installed from the leader meanwhile may be newer.
    last_snapshot_index_ = std::max(last_snapshot_index_, index);
    ++counters_.snapshots;
    raft_->compact(std::move(snapshot), config_.snapshot_keep);
    log(LogLevel::kInfo, "snapshot_taken", {{"index", num(index)}, {"locks", num(table_.size())}});
}

bool Core::needs_write(const raft::Ready& rd) const {
    if (rd.snapshot || !rd.entries.empty()) return true;
    return rd.hard_state &&
           (rd.hard_state->term != written_hard_state_.term || rd.hard_state->vote != written_hard_state_.vote);
}

// Step 3 of the Ready contract: committed entries, then confirmed reads.
void Core::apply_ready(const raft::Ready& rd, Time now) {
    applying_ = true;
    for (const raft::Entry& e : rd.committed) apply_entry(e, now);
    for (const raft::ReadState& rs : rd.reads) on_read_state(rs);
    for (std::uint64_t ctx : rd.dropped_reads) fail_reads(ctx, now);
    run_confirmed_reads(now);
    applying_ = false;
}

// While a Persist is outstanding: apply what became committed meanwhile (a
// leader learns most commits from a follower's ack during its own write).
void Core::apply_taken(Time now) {
    if (applying_) return;
    applying_ = true;
    bool any = false;
    constexpr int kMaxApplyRounds = 16;  // take_committed() batches per pump
    for (int round = 0; round < kMaxApplyRounds; ++round) {
        const std::vector<raft::Entry> entries = raft_->take_committed();
        if (entries.empty()) break;
        for (const raft::Entry& e : entries) apply_entry(e, now);
        any = true;
    }
    if (any) run_confirmed_reads(now);
    applying_ = false;
}

void Core::apply_entry(const raft::Entry& e, Time now) {
    if (e.index <= table_.applied_index()) return;
    applied_term_ = e.term;
    applied_bytes_since_snapshot_ += e.data.size() + kEntryOverheadBytes;
    std::optional<lock::Command> cmd;
    if (e.type == raft::EntryType::kNormal) {
        auto decoded = lock::decode_command(e.data);
        if (auto* err = std::get_if<lock::DecodeError>(&decoded)) {
            log(LogLevel::kError, "entry_undecodable", {{"index", num(e.index)}, {"error", err->message}});
        } else {
            cmd = std::move(std::get<lock::Command>(decoded));
        }
    }
    // Release and Expire remove the lock: whether it is held with the
    // token, and its owner, before the command (one per lock of an ExpireMany).
    std::vector<HeldBefore> before;
    auto note = [&](const std::string& key, lock::Token token) {
        const lock::Lock* l = table_.find(key);
        const bool held = l != nullptr && l->token == token;
        before.push_back(HeldBefore{held, held ? l->owner : std::string()});
    };
    if (const auto* r = cmd ? std::get_if<lock::Release>(&*cmd) : nullptr) note(r->key, r->token);
    if (const auto* x = cmd ? std::get_if<lock::Expire>(&*cmd) : nullptr) note(x->key, x->token);
    if (const auto* m = cmd ? std::get_if<lock::ExpireMany>(&*cmd) : nullptr) {
        before.reserve(m->locks.size());
        for (const lock::Expire& x : m->locks) note(x.key, x.token);
    }
    if (config_.observer != nullptr) config_.observer->before_apply(e, table_);
    const lock::Result result = cmd ? table_.apply(e.index, *cmd) : table_.apply_noop(e.index);
    if (e.type == raft::EntryType::kConfig) on_config_applied(e);
    if (config_.observer != nullptr) config_.observer->after_apply(e, result, table_);
    if (cmd) on_applied(e.index, *cmd, result, before, now);
    auto it = proposals_.find(e.index);
    if (it == proposals_.end()) return;
    Proposal p = std::move(it->second);
    proposals_.erase(it);
    if (p.term == e.term) {
        counters_.proposal_commit.observe(now - p.proposed_at);
        deciding_id_ = p.id;
        deciding_index_ = e.index;
        deciding_term_ = e.term;
        deciding_result_ = &result;
        p.done(&result, now);
        deciding_id_ = 0;
        deciding_index_ = 0;
        deciding_term_ = 0;
        deciding_result_ = nullptr;
    } else {
        p.done(nullptr, now);
    }
}

std::string Core::owner_of(std::string_view key, lock::Token token) const {
    const lock::Lock* l = table_.find(key);
    return l != nullptr && l->token == token ? l->owner : std::string();
}

// Counters, logs, leases and waiters follow every applied command. `before`:
// of each lock a Release, Expire or ExpireMany names, whether it was held
// with the command's token and by whom, before this command.
void Core::on_applied(raft::Index index, const lock::Command& cmd, const lock::Result& result,
                      const std::vector<HeldBefore>& before, Time now) {
    const bool leader = is_leader();
    const LogLevel level = leader ? LogLevel::kInfo : LogLevel::kDebug;
    if (const auto* g = std::get_if<lock::Grant>(&cmd)) {
        if (const auto* ok = std::get_if<lock::Granted>(&result)) {
            ++counters_.grants;
            log(level, "grant", {{"key", g->key}, {"token", num(ok->token)}, {"owner", g->owner},
                                 {"lease_ms", num(g->lease_ms)}, {"index", num(index)}});
            // An idempotent re-grant applied while Expire{key, token} is in
            // flight keeps the expiry (on_grant_result refuses it): resetting
            // the lease would promise a lock that the Expire then removes.
            const Lease* held = leases_.find(g->key);
            const bool expiring = held != nullptr && held->token == ok->token && held->expiring();
            if (leader && !expiring) leases_.start(g->key, ok->token, g->lease_ms, now, config_.max_clock_drift_ppm);
        } else if (const auto* full = std::get_if<lock::TableFull>(&result)) {
            ++counters_.grants_table_full;
            log(leader ? LogLevel::kWarn : LogLevel::kDebug, "table_full",
                {{"key", g->key}, {"table_bytes", num(full->table_bytes)}, {"limit", num(table_.max_bytes())}});
        } else {
            ++counters_.grant_conflicts;
            const auto* rej = std::get_if<lock::GrantRejected>(&result);
            log(level, "grant_rejected",
                {{"key", g->key}, {"owner", g->owner}, {"holder_token", num(rej ? rej->holder_token : 0)}});
        }
        return;
    }
    if (const auto* r = std::get_if<lock::Release>(&cmd)) {
        const bool removed = std::holds_alternative<lock::Released>(result);
        ++(removed ? counters_.releases : counters_.release_not_held);
        log(level, "release", {{"key", r->key}, {"token", num(r->token)}, {"released", removed ? "true" : "false"},
                               {"owner", before.front().owner}});
        if (removed) on_removed(r->key, r->token, now);
    } else if (const auto* x = std::get_if<lock::Expire>(&cmd)) {
        const auto* ex = std::get_if<lock::Expired>(&result);
        on_expired(*x, ex != nullptr && ex->existed, before.front().owner, now);
    } else if (const auto* m = std::get_if<lock::ExpireMany>(&cmd)) {
        // An invalid batch removes nothing (ExpiredMany{0}); a valid one
        // removes each lock held with its token, a key named twice once.
        const auto* ex = std::get_if<lock::ExpiredMany>(&result);
        const bool valid = ex != nullptr && ex->existed > 0;
        std::unordered_set<std::string_view> removed;
        for (std::size_t i = 0; i < m->locks.size(); ++i) {
            const lock::Expire& one = m->locks[i];
            const bool existed = valid && before[i].held && removed.insert(one.key).second;
            on_expired(one, existed, before[i].owner, now);
        }
    } else if (const auto* f = std::get_if<lock::SetTokenFloor>(&cmd)) {
        log(LogLevel::kInfo, "token_floor", {{"requested", num(f->floor)}, {"floor", num(table_.token_floor())}});
    }
}

void Core::on_expired(const lock::Expire& x, bool existed, const std::string& owner, Time now) {
    ++(existed ? counters_.expiries_existed : counters_.expiries_missing);
    log(is_leader() ? LogLevel::kInfo : LogLevel::kDebug, "expire",
        {{"key", x.key}, {"token", num(x.token)}, {"existed", existed ? "true" : "false"}, {"owner", owner}});
    if (existed) on_removed(x.key, x.token, now);
}

// The lock `key` held with `token` is gone: its lease too, and a leader
// serves the key's waiters.
void Core::on_removed(const std::string& key, lock::Token token, Time now) {
    leases_.erase(key, token);
    if (is_leader()) serve_waiters(key, now);
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

// A new leader restarts every held lease at its full lease_ms (DESIGN.md "Time").
void Core::become_leader(Time now) {
    if (leader_term_ != 0) lose_leadership(now);
    leader_term_ = raft_->term();
    log(LogLevel::kInfo, "became_leader", {{"term", num(leader_term_)}, {"locks", num(table_.size())}});
    restart_all_leases(now);
    if (config_.token_floor > table_.token_floor()) {
        raft::ProposeError err = raft::ProposeError::kNone;
        propose(lock::SetTokenFloor{config_.token_floor}, now, [](const lock::Result*, Time) {}, &err);
    }
}

void Core::lose_leadership(Time /*now*/) {
    log(LogLevel::kInfo, "lost_leadership", {{"term", num(leader_term_)}, {"leader", num(raft_->leader())}});
    leader_term_ = 0;
    leases_.clear();
    ++expiry_wave_;  // the wave in flight ends with the leases it was for
    expiry_wave_pending_ = 0;
    drop_all_waiters();
}

bool Core::propose(const lock::Command& cmd, Time now, std::function<void(const lock::Result*, Time)> done,
                   raft::ProposeError* error, RequestId for_id) {
    if (proposals_.size() >= config_.max_proposals) {
        *error = raft::ProposeError::kBacklog;
        return false;
    }
    const raft::ProposeResult r = raft_->propose(lock::encode(cmd));
    *error = r.error;
    if (r.error != raft::ProposeError::kNone) return false;
    proposals_[r.index] = Proposal{for_id, r.term, now, std::move(done)};
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

std::shared_ptr<raft::Snapshot> Core::applied_snapshot() const {
    auto snap = std::make_shared<raft::Snapshot>();
    snap->meta.index = table_.applied_index();
    snap->meta.term = applied_term_;
    snap->meta.config = raft_->configuration_at(snap->meta.index);
    snap->data = table_.snapshot();
    return snap;
}

void Core::maybe_snapshot() {
    const raft::Index applied = table_.applied_index();
    if (saving_ || table_.snapshotting()) return;  // one at a time
    if (applied >= last_snapshot_index_ && applied - last_snapshot_index_ < config_.snapshot_every) return;
    // Overflow-free: a table's bytes stay below raft::kMaxSnapshotBytes (its
    // snapshot fits), and the percentage is at most kMaxSnapshotLogPct.
    if (applied_bytes_since_snapshot_ < table_.bytes() * config_.snapshot_log_pct / 100) return;
    applied_bytes_since_snapshot_ = 0;
    building_ = raft::SnapshotMeta{applied, applied_term_, raft_->configuration_at(applied)};
    table_.begin_snapshot();
    continue_snapshot();
}

// A table restored meanwhile (a snapshot from the leader) dropped the build.
void Core::continue_snapshot() {
    if (!table_.snapshotting() || !table_.continue_snapshot(config_.snapshot_slice_locks)) return;
    auto snap = std::make_shared<raft::Snapshot>();
    snap->meta = building_;
    snap->data = table_.take_snapshot();
    saving_ = true;
    effects_.save = std::move(snap);
}

void Core::take_backup(RequestId id) {
    // After the confirming round: every entry committed before the request
    // arrived is applied by then (ReadIndex), so the backup holds every
    // grant a client was answered before it asked.
    confirm([this, id](bool ok, Time) {
        if (!ok) {
            unavailable(id);
            return;
        }
        deciding_id_ = id;
        deciding_index_ = table_.applied_index();
        respond(id, Backup{applied_snapshot()});
        deciding_id_ = 0;
        deciding_index_ = 0;
    });
}

const Lease* Core::lease(std::string_view key) const { return leases_.find(key); }

std::string Core::kid_of(std::string_view key, lock::Token token) const {
    const Lease* l = leases_.find(key);
    return l != nullptr && l->token == token ? std::string(l->kid.view()) : std::string(kUnknownProofKid);
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
    std::size_t queued = 0;
    for (const auto& [key, q] : waiters_) {
        if (q.empty()) return "an empty wait queue for " + key;
        queued += q.size();
    }
    if (queued != waiter_total_) return "waiter count " + num(waiter_total_) + " but " + num(queued) + " queued";
    if (leader_term_ == 0 && waiter_total_ != 0) return "a member that does not lead has waiters";
    for (RequestId id : gone_) {
        if (grants_in_flight_.count(id) == 0) return "gone request " + num(id) + " has no Grant in flight";
    }
    return {};
}

}  // namespace pgfence::member
