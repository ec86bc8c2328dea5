// The member core's apply: each committed entry through the lock table, then
// what its result means for counters, logs, leases and waiters, and the
// answer of the proposal it decides (core.h "rules").
#include <unordered_set>

#include "member/core.h"

namespace pgfence::member {

namespace {
std::string num(std::uint64_t v) { return std::to_string(v); }
}  // namespace

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
    constexpr int kMaxApplyRounds = 16;  // take_committed() batches per turn
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
    entry_wall_ms_.reset();
    if (e.type == raft::EntryType::kNormal) {
        auto decoded = lock::decode_entry(e.data);
        if (auto* err = std::get_if<lock::DecodeError>(&decoded)) {
            log(LogLevel::kError, "entry_undecodable", {{"index", num(e.index)}, {"error", err->message}});
        } else {
            auto& stamped = std::get<lock::Stamped>(decoded);
            cmd = std::move(stamped.command);
            entry_wall_ms_ = stamped.wall_ms;
        }
    }
    // Release and Expire remove the lock: whether it is held with the
    // token, and its owner, before the command (one per lock of an ExpireMany).
    // (An ExpireMany's owners only go in log lines: its first lock's, and
    // each one's at debug level.)
    std::vector<HeldBefore> before;
    auto note = [&](const std::string& key, lock::Token token, bool owner = true) {
        const lock::Lock* l = table_.find(key);
        const bool held = l != nullptr && l->token == token;
        before.push_back(HeldBefore{held, held && owner ? l->owner.str() : std::string()});
    };
    if (const auto* r = cmd ? std::get_if<lock::Release>(&*cmd) : nullptr) note(r->key, r->token);
    if (const auto* x = cmd ? std::get_if<lock::Expire>(&*cmd) : nullptr) note(x->key, x->token);
    if (const auto* m = cmd ? std::get_if<lock::ReleaseMany>(&*cmd) : nullptr) {
        for (const std::string& key : m->keys) note(key, m->token);
    }
    if (const auto* m = cmd ? std::get_if<lock::ExpireMany>(&*cmd) : nullptr) {
        before.reserve(m->locks.size());
        for (const lock::Expire& x : m->locks) note(x.key, x.token, before.empty() || config_.debug_logs);
    }
    if (config_.observer != nullptr) config_.observer->before_apply(e, table_);
    const lock::Result result = cmd ? table_.apply(e.index, *cmd) : table_.apply_noop(e.index);
    if (e.type == raft::EntryType::kConfig) on_config_applied(e);
    if (config_.observer != nullptr) config_.observer->after_apply(e, result, table_);
    if (cmd) on_applied(e.index, *cmd, result, before, now);
    if (!checkpoints_restored_ && leader_term_ != 0 && e.term == leader_term_ && is_leader()) {
        restart_from_checkpoints(now);
    }
    auto it = proposals_.find(e.index);
    if (it == proposals_.end()) return;
    Proposal p = std::move(it->second);
    proposals_.erase(it);
    if (p.term == e.term) {
        counters_.proposal_commit.observe(now - p.proposed_at);
        const Witness applied{e.index, e.term, &result};
        p.done(&applied, now);
    } else {
        p.done(nullptr, now);
    }
}

// One lock event for watches (watch_history.h's table).
void Core::note_event(raft::Index index, WatchEventType type, const std::string& key, lock::Token token,
                      const std::string& owner, std::uint64_t lease_ms, bool existed, const std::string& value) {
    history_.append(WatchEvent{index, type, key, token, owner, lease_ms, existed, value});
}

std::string Core::owner_of(std::string_view key, lock::Token token) const {
    const lock::Lock* l = table_.find(key);
    return l != nullptr && l->token == token ? l->owner.str() : std::string();
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
            if (ok->created) {
                note_event(index, WatchEventType::kGranted, g->key, ok->token, g->owner, ok->lease_ms, false, g->value);
                tokens_.granted(index, grant_wall_ms(), ok->token, {g->key}, g->owner, ok->lease_ms);
            } else {
                tokens_.regranted(ok->token, ok->lease_ms);
            }
            const std::uint64_t lease_ms = ok->lease_ms;  // in force: a re-grant keeps the longer (lock/table.h)
            log(level, "grant", {{"key", g->key}, {"token", num(ok->token)}, {"owner", g->owner},
                                 {"lease_ms", num(lease_ms)}, {"index", num(index)}, {"user", g->user}});
            // An idempotent re-grant applied while Expire{key, token} is in
            // flight keeps the expiry (on_grant_result refuses it): resetting
            // the lease would promise a lock that the Expire then removes.
            const Lease* held = ok->created ? nullptr : leases_.find(g->key);
            const bool expiring = held != nullptr && held->token == ok->token && held->expiring();
            if (leader && !expiring) leases_.start(g->key, ok->token, lease_ms, now, config_.max_clock_drift_ppm);
        } else if (const auto* full = std::get_if<lock::TableFull>(&result)) {
            ++counters_.grants_table_full;
            log(leader ? LogLevel::kWarn : LogLevel::kDebug, "table_full",
                {{"key", g->key}, {"table_bytes", num(full->table_bytes)}, {"limit", num(table_.max_bytes())}});
        } else {
            ++counters_.grant_conflicts;
            const auto* rej = std::get_if<lock::GrantRejected>(&result);
            log(level, "grant_rejected",
                {{"key", g->key}, {"owner", g->owner}, {"holder_token", num(rej ? rej->holder_token : 0)},
                 {"user", g->user}});
        }
        return;
    }
    if (const auto* g = std::get_if<lock::GrantMany>(&cmd)) {
        on_applied_many(index, *g, result, now);
        return;
    }
    if (const auto* r = std::get_if<lock::ReleaseMany>(&cmd)) {
        const bool removed = std::holds_alternative<lock::Released>(result);
        ++(removed ? counters_.releases : counters_.release_not_held);
        for (std::size_t i = 0; i < r->keys.size(); ++i) {
            log(level, "release", {{"key", r->keys[i]}, {"token", num(r->token)},
                                   {"released", removed ? "true" : "false"}, {"owner", before[i].owner},
                                   {"keys", num(r->keys.size())}});
        }
        if (removed) {
            tokens_.ended(r->token, TokenEnd::kReleased, index, entry_wall_ms_,
                          static_cast<std::uint32_t>(r->keys.size()));
            for (const std::string& key : r->keys) {
                note_event(index, WatchEventType::kReleased, key, r->token);
                on_removed(key, r->token, now);
            }
        }
        return;
    }
    if (const auto* r = std::get_if<lock::Release>(&cmd)) {
        const bool removed = std::holds_alternative<lock::Released>(result);
        ++(removed ? counters_.releases : counters_.release_not_held);
        log(level, "release", {{"key", r->key}, {"token", num(r->token)}, {"released", removed ? "true" : "false"},
                               {"owner", before.front().owner}});
        if (removed) {
            tokens_.ended(r->token, TokenEnd::kReleased, index, entry_wall_ms_);
            note_event(index, WatchEventType::kReleased, r->key, r->token);
            on_removed(r->key, r->token, now);
        }
    } else if (const auto* x = std::get_if<lock::Expire>(&cmd)) {
        const auto* ex = std::get_if<lock::Expired>(&result);
        const bool existed = ex != nullptr && ex->existed;
        note_event(index, WatchEventType::kExpired, x->key, x->token, {}, 0, existed);
        on_expired(*x, existed, before.front().owner, now);
        log_expired(index, *x, existed, before.front().owner, 1, existed ? 1 : 0);
    } else if (const auto* m = std::get_if<lock::ExpireMany>(&cmd)) {
        // An invalid batch removes nothing (ExpiredMany{0}); a valid one
        // removes each lock held with its token, a key named twice once.
        const auto* ex = std::get_if<lock::ExpiredMany>(&result);
        const bool valid = ex != nullptr && ex->existed > 0;
        std::unordered_set<std::string_view> removed;
        removed.reserve(m->locks.size());
        std::size_t expired = 0;
        bool first_existed = false;
        for (std::size_t i = 0; i < m->locks.size(); ++i) {
            const lock::Expire& one = m->locks[i];
            const bool existed = valid && before[i].held && removed.insert(one.key).second;
            note_event(index, WatchEventType::kExpired, one.key, one.token, {}, 0, existed);
            on_expired(one, existed, before[i].owner, now);
            if (existed) ++expired;
            if (i == 0) first_existed = existed;
        }
        if (!m->locks.empty()) {
            log_expired(index, m->locks.front(), first_existed, before.front().owner, m->locks.size(), expired);
        }
    } else if (const auto* c = std::get_if<lock::Checkpoint>(&cmd)) {
        const auto* done = std::get_if<lock::Checkpointed>(&result);
        if (done != nullptr) counters_.checkpoints += done->applied;
        log(LogLevel::kDebug, "checkpoint",
            {{"locks", num(c->locks.size())}, {"applied", num(done != nullptr ? done->applied : 0)},
             {"first_key", c->locks.empty() ? std::string() : c->locks.front().key},
             {"first_remaining_ms", num(c->locks.empty() ? 0 : c->locks.front().remaining_ms)}});
    } else if (const auto* p = std::get_if<lock::Proclaim>(&cmd)) {
        const bool set = std::holds_alternative<lock::Proclaimed>(result);
        if (set) note_event(index, WatchEventType::kProclaimed, p->key, p->token, {}, 0, false, p->value);
        log(level, "proclaim", {{"key", p->key}, {"token", num(p->token)}, {"proclaimed", set ? "true" : "false"},
                                {"value_bytes", num(p->value.size())}});
    } else if (const auto* f = std::get_if<lock::SetTokenFloor>(&cmd)) {
        log(LogLevel::kInfo, "token_floor", {{"requested", num(f->floor)}, {"floor", num(table_.token_floor())}});
    }
}

// A GrantMany applied: one lease per key of the set, started together.
void Core::on_applied_many(raft::Index index, const lock::GrantMany& g, const lock::Result& result, Time now) {
    const bool leader = is_leader();
    const LogLevel level = leader ? LogLevel::kInfo : LogLevel::kDebug;
    if (const auto* ok = std::get_if<lock::Granted>(&result)) {
        ++counters_.grants;
        ++counters_.grants_many;
        if (ok->created) {
            for (const std::string& key : g.keys) {
                note_event(index, WatchEventType::kGranted, key, ok->token, g.owner, ok->lease_ms);
            }
            tokens_.granted(index, grant_wall_ms(), ok->token, g.keys, g.owner, ok->lease_ms);
        } else {
            tokens_.regranted(ok->token, ok->lease_ms);
        }
        // One line per key, as an ExpireMany's expiries: each key's lease is one.
        for (const std::string& key : g.keys) {
            log(level, "grant", {{"key", key}, {"token", num(ok->token)}, {"owner", g.owner},
                                 {"lease_ms", num(ok->lease_ms)}, {"index", num(index)}, {"user", g.user},
                                 {"keys", num(g.keys.size())}});
        }
        // As for one key (on_applied), key by key: a re-grant while a key's
        // Expire is in flight keeps that expiry (on_grant_result refuses it).
        if (!leader) return;
        for (const std::string& key : g.keys) {
            const Lease* held = ok->created ? nullptr : leases_.find(key);
            if (held != nullptr && held->token == ok->token && held->expiring()) continue;
            leases_.start(key, ok->token, ok->lease_ms, now, config_.max_clock_drift_ppm);
        }
    } else if (const auto* full = std::get_if<lock::TableFull>(&result)) {
        ++counters_.grants_table_full;
        log(leader ? LogLevel::kWarn : LogLevel::kDebug, "table_full",
            {{"key", g.keys.front()}, {"keys", num(g.keys.size())}, {"table_bytes", num(full->table_bytes)},
             {"limit", num(table_.max_bytes())}});
    } else {
        ++counters_.grant_conflicts;
        const auto* rej = std::get_if<lock::GrantRejected>(&result);
        log(level, "grant_rejected",
            {{"key", rej != nullptr && !rej->key.empty() ? rej->key : g.keys.front()},
             {"keys", num(g.keys.size())}, {"owner", g.owner},
             {"holder_token", num(rej ? rej->holder_token : 0)}, {"user", g.user}});
    }
}

// One lock of an Expire or ExpireMany applied: a line only at debug level
// (a storm applies a million); log_expired() sums up the entry.
void Core::on_expired(const lock::Expire& x, bool existed, const std::string& owner, Time now) {
    ++(existed ? counters_.expiries_existed : counters_.expiries_missing);
    if (config_.debug_logs) {
        log(LogLevel::kDebug, "expire_lock",
            {{"key", x.key}, {"token", num(x.token)}, {"existed", existed ? "true" : "false"}, {"owner", owner},
             {"index", num(table_.applied_index())}});
    }
    if (existed) {
        tokens_.ended(x.token, TokenEnd::kExpired, table_.applied_index(), entry_wall_ms_);
        on_removed(x.key, x.token, now);
    }
}

// One line per Expire or ExpireMany entry applied (info on the leader):
// its first lock (key, token, existed, owner), how many locks it names and
// how many of them it removed, and its index.
void Core::log_expired(raft::Index index, const lock::Expire& first, bool first_existed, const std::string& owner,
                       std::size_t locks, std::size_t expired) {
    log(is_leader() ? LogLevel::kInfo : LogLevel::kDebug, "expire",
        {{"key", first.key}, {"token", num(first.token)}, {"existed", first_existed ? "true" : "false"},
         {"owner", owner}, {"locks", num(locks)}, {"expired", num(expired)}, {"index", num(index)}});
}

// The lock `key` held with `token` is gone: its lease too, and a leader
// serves the key's waiters (if any key has some: a storm's keys have none).
void Core::on_removed(const std::string& key, lock::Token token, Time now) {
    leases_.erase(key, token);
    if (is_leader() && !waiters_.empty()) serve_waiters(key, now);
}

}  // namespace pgfence::member
