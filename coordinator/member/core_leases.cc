// The member core's leases, keepalive, expiry, FIFO waiters, phantom grants
// and the leadership confirmation (ReadIndex round) they rely on (core.h).
#include <algorithm>

#include "member/core.h"

namespace pgfence::member {

namespace {
std::string num(std::uint64_t v) { return std::to_string(v); }
const std::string kNoUser;

// Broken on purpose, for the simulation's checker tests only (ctest
// sim_catches_*, tests/simulation/CMakeLists.txt builds the core a second
// time with PGFENCE_MEMBER_MUTANT set): each mutant breaks one rule, which a
// checker must catch. 0, fence-coordinator's build: no mutant.
#ifndef PGFENCE_MEMBER_MUTANT
#define PGFENCE_MEMBER_MUTANT 0
#endif
enum class Mutant : int {
    kNone = 0,
    kExpireUnconfirmed = 1,  // Expire proposed at expire_at, without a quorum round
    kKeepAliveExpiring = 2,  // KeepAlive answered for a lease whose Expire was proposed
    kWaitersLifo = 3,        // a new waiter is queued at the front
    kPhantomLeaked = 4,      // a phantom grant's lease is dropped: the lock is never expired
    kPhantomCutsAnswered = 5,  // a phantom grant's expiry cuts a lease answered to another request
    kKeepAliveKeepsCheckpoint = 6,  // a keepalive of a checkpointed lease is answered without clearing it
    kGrantWallFromOwnClock = 7,     // a grant's wall time in the token history is this member's clock, not the entry's
};
constexpr Mutant kMutant = static_cast<Mutant>(PGFENCE_MEMBER_MUTANT);
}  // namespace

std::optional<std::uint64_t> Core::grant_wall_ms() const {
    if constexpr (kMutant == Mutant::kGrantWallFromOwnClock) {
        return wall_ms_ != 0 ? std::optional<std::uint64_t>(wall_ms_) : std::nullopt;
    }
    return entry_wall_ms_;
}

// ---- leadership confirmation -------------------------------------------------

void Core::confirm(std::function<void(bool, Time)> cb) { confirm_batch_.push_back(std::move(cb)); }

void Core::flush_confirms(Time now) {
    if (confirm_batch_.empty()) return;
    auto batch = std::move(confirm_batch_);
    confirm_batch_.clear();
    const std::uint64_t ctx = next_read_ctx_++;
    if (!raft_->read_index(ctx)) {
        for (auto& cb : batch) cb(false, now);
        return;
    }
    confirms_[ctx] = std::move(batch);
}

void Core::on_read_state(const raft::ReadState& rs) { confirmed_waiting_apply_.emplace(rs.index, rs.context); }

void Core::run_confirmed_reads(Time now) {
    while (!confirmed_waiting_apply_.empty() && confirmed_waiting_apply_.begin()->first <= table_.applied_index()) {
        const std::uint64_t ctx = confirmed_waiting_apply_.begin()->second;
        confirmed_waiting_apply_.erase(confirmed_waiting_apply_.begin());
        auto it = confirms_.find(ctx);
        if (it == confirms_.end()) continue;
        auto cbs = std::move(it->second);
        confirms_.erase(it);
        const bool still = is_leader();
        for (auto& cb : cbs) cb(still, now);
    }
}

void Core::fail_reads(std::uint64_t ctx, Time now) {
    auto it = confirms_.find(ctx);
    if (it == confirms_.end()) return;
    auto cbs = std::move(it->second);
    confirms_.erase(it);
    for (auto& cb : cbs) cb(false, now);
}

// ---- leases --------------------------------------------------------------------

void Core::restart_all_leases(Time now) {
    leases_.start_all(table_, now, config_.max_clock_drift_ppm);
}

// Called once the first entry of this leadership's term applied: every
// entry committed before the term did too, so each lock's remaining_ms is
// the last checkpoint of its lease, and none applies later (docs/guarantees.md
// "Checkpoints"). Nothing of this term renewed a lease yet: a keepalive is
// answered after a round that waits for that entry, this term's re-grants
// apply after it.
void Core::restart_from_checkpoints(Time now) {
    checkpoints_restored_ = true;
    if (!config_.lease_checkpoints) return;
    std::uint64_t restarted = 0;
    // A lease being confirmed (its full run ran out before this) restarts
    // too, and runs on; none is being expired yet (that needs a round,
    // which waits for this term's first entry).
    table_.for_each([&](const lock::Lock& l) {
        if (l.remaining_ms == 0) return;
        if (leases_.restart(l.key, l.token, now, config_.max_clock_drift_ppm, l.remaining_ms)) ++restarted;
    });
    log(LogLevel::kInfo, "leases_from_checkpoints", {{"term", num(leader_term_)}, {"restarted", num(restarted)},
                                                      {"locks", num(table_.size())}});
}

// The leases whose run is half over are checkpointed, one entry per tick;
// none before restart_from_checkpoints() ran in this leadership (so that the
// checkpoints it restarts from are those of earlier terms only).
void Core::propose_checkpoints(Time now) {
    if (!checkpoints_restored_) return;
    std::vector<DueCheckpoint> due;
    if (leases_.take_checkpoints(now, config_.max_checkpoints_per_tick, lock::kMaxCheckpointBytes, due) == 0) return;
    lock::Checkpoint batch;
    for (const DueCheckpoint& d : due) {
        const std::uint64_t remaining = checkpoint_remaining_ms(d.run_ms, d.started, now, config_.max_clock_drift_ppm);
        if (remaining == 0) continue;
        batch.locks.push_back(lock::LeaseCheckpoint{d.key, d.token, remaining});
    }
    if (batch.locks.empty()) return;
    raft::ProposeError err = raft::ProposeError::kNone;
    raft::Index index = 0;
    if (!propose(batch, now, [](const Witness*, Time) {}, &err, &index)) {
        log(LogLevel::kWarn, "checkpoint_not_proposed",
            {{"locks", num(batch.locks.size())}, {"error", raft::to_string(err)}});
        return;
    }
    for (const lock::LeaseCheckpoint& c : batch.locks) leases_.checkpoint_proposed(c.key, c.token, index);
}

bool Core::has_checkpoint(const std::string& key, lock::Token token) const {
    const lock::Lock* l = table_.find(key);
    if (l != nullptr && l->token == token && l->remaining_ms != 0) return true;
    const Lease* lease = leases_.find(key);
    return lease != nullptr && lease->token == token && lease->checkpoint_index > table_.applied_index();
}

std::vector<std::string> Core::with_checkpoint(const std::vector<std::string>& keys, lock::Token token) const {
    std::vector<std::string> out;
    for (const std::string& key : keys) {
        if (has_checkpoint(key, token)) out.push_back(key);
    }
    return out;
}

void Core::clear_checkpoints(const std::vector<std::string>& keys, lock::Token token, Time now,
                             std::function<void(bool, Time)> done) {
    lock::Checkpoint clear;
    for (const std::string& key : keys) clear.locks.push_back(lock::LeaseCheckpoint{key, token, 0});
    raft::ProposeError err = raft::ProposeError::kNone;
    raft::Index index = 0;
    const bool ok = propose(clear, now, [done](const Witness* applied, Time at) { done(applied != nullptr, at); },
                            &err, &index);
    if (!ok) {
        done(false, now);
        return;
    }
    counters_.checkpoint_clears += keys.size();
    for (const std::string& key : keys) leases_.checkpoint_proposed(key, token, index);
}

// A lease is expired from its expire_at (the nominal deadline plus the
// clock-rate margin, lease.h), and only after a quorum round asked for after
// expire_at confirms this member still leads. A lease restarted meanwhile (a
// keepalive, a re-grant) has a later expire_at than the round's ask: that
// round proves nothing about the new deadline and the lease runs on.
// The leases due now share one round and their Expires go out in batches
// (ExpireMany), so an expiry storm costs a round and an entry per batch.
// One wave at a time: the leases taken at one check go through their round
// and the apply of their Expires before the next check takes more, so the
// pace of an expiry storm follows what the cluster applies (a follower
// applying a million expiries in one go stalls its loop past an election
// timeout) instead of what one leader can propose. The next wave is taken
// as soon as the last Expire of a wave applies, not at the next tick: a
// storm runs back to back, each wave small enough that a request queued
// behind one waits for few Expires.
void Core::check_expiries(Time now) {
    if (expiry_wave_pending_ > 0) return;
    std::vector<DueLease> due;
    if (leases_.take_due(now, config_.expiry_wave, due) == 0) return;
    const std::uint64_t wave = ++expiry_wave_;
    expiry_wave_pending_ = 1;  // the round; each Expire proposed adds one
    if constexpr (kMutant == Mutant::kExpireUnconfirmed) {
        for (const DueLease& d : due) leases_.settle_expiring(d.key, d.token, now, true);
        propose_expires(due, now, wave);
        expiry_wave_done(wave, nullptr);
        return;
    }
    confirm([this, due = std::move(due), asked = now, wave](bool ok, Time at) mutable {
        std::vector<DueLease> confirmed;
        if (ok) confirmed.reserve(due.size());
        for (DueLease& d : due) {
            // Logged before the lookup: losing leadership clears the leases
            // before the dropped round fails this callback.
            if (!ok) {
                log(LogLevel::kInfo, "expire_not_confirmed",
                    {{"key", d.key}, {"token", num(d.token)}, {"owner", owner_of(d.key, d.token)}});
            }
            // Failed, or restarted after the round was asked for: runs on.
            // Due: kExpiring from here (propose_expires() runs it again if
            // its Expire cannot be proposed), in the one lookup of its lease.
            if (leases_.settle_expiring(d.key, d.token, asked, ok) == LeaseSet::Settled::kDue) {
                confirmed.push_back(std::move(d));
            }
        }
        propose_expires(confirmed, at, wave);
        expiry_wave_done(wave, nullptr);
    });
}

void Core::expiry_wave_done(std::uint64_t wave, const Time* applied_at) {
    if (wave != expiry_wave_ || expiry_wave_pending_ == 0) return;
    // The wave's last Expire applied: the next wave now (the round or a
    // proposal failing ends a wave too, but its leases wait for the tick).
    if (--expiry_wave_pending_ == 0 && applied_at != nullptr && is_leader() && leader_term_ == raft_->term()) {
        check_expiries(*applied_at);
    }
}

// Proposes the expiry of `due` (leases made kExpiring by settle_expiring()),
// in ExpireMany batches up to the command's limits; the leases of a batch
// proposed stay kExpiring for good. Those of a batch that could not be
// proposed go back to running, for a later wave. One info line per entry
// proposed (its first lock, how many), none per lock but at debug level.
void Core::propose_expires(const std::vector<DueLease>& due, Time now, std::uint64_t wave) {
    // A batch holds at least one lock: the largest key's fits in an entry.
    static_assert(lock::expire_many_bytes(lock::kMaxKeyBytes) <= lock::kMaxExpireManyBytes);
    std::size_t next = 0;
    while (next < due.size()) {
        std::size_t bytes = 0;
        const std::size_t first = next;
        for (; next < due.size() && next - first < config_.max_expire_batch; ++next) {
            const std::size_t more = lock::expire_many_bytes(due[next].key.size());
            if (bytes + more > lock::kMaxExpireManyBytes) break;
            bytes += more;
        }
        const std::size_t count = next - first;
        lock::Command cmd = lock::Expire{due[first].key, due[first].token};
        if (count > 1) {
            lock::ExpireMany many;
            many.locks.reserve(count);
            for (std::size_t i = first; i < next; ++i) many.locks.push_back(lock::Expire{due[i].key, due[i].token});
            cmd = std::move(many);
        }
        raft::ProposeError err = raft::ProposeError::kNone;
        raft::Index index = 0;
        auto done = [this, wave](const Witness* applied, Time at) {
            expiry_wave_done(wave, applied != nullptr ? &at : nullptr);
        };
        if (!propose(cmd, now, done, &err, &index)) {
            for (std::size_t i = first; i < next; ++i) {
                const DueLease& x = due[i];
                leases_.set_running(x.key, x.token);
                log(LogLevel::kWarn, "expire_not_proposed", {{"key", x.key}, {"token", num(x.token)},
                                                             {"error", raft::to_string(err)},
                                                             {"owner", owner_of(x.key, x.token)}});
            }
            continue;
        }
        ++expiry_wave_pending_;
        if (count > 1) ++counters_.expire_batches;
        counters_.expires_proposed += count;
        if (config_.debug_logs) {
            for (std::size_t i = first; i < next; ++i) {
                const DueLease& x = due[i];
                log(LogLevel::kDebug, "expire_proposed_lock", {{"key", x.key}, {"token", num(x.token)},
                                                               {"owner", owner_of(x.key, x.token)},
                                                               {"index", num(index)}});
            }
        }
        // The first lock's lease (its batch ran out together; lengths may differ).
        const Lease* l = leases_.find(due[first].key);
        const std::uint64_t lease_ms = l != nullptr ? l->lease_ms : 0;
        log(LogLevel::kInfo, "expire_proposed",
            {{"key", due[first].key}, {"token", num(due[first].token)}, {"lease_ms", num(lease_ms)},
             {"margin_ms", num(expiry_margin_ms(lease_ms, config_.max_clock_drift_ppm))},
             {"owner", owner_of(due[first].key, due[first].token)}, {"batch", num(count)}, {"index", num(index)}});
    }
}

namespace {

// The keys an acquire names: its set's, or its one key.
template <typename F>
void for_keys(const Acquire& req, F&& f) {
    if (req.keys.empty()) {
        f(req.key);
    } else {
        for (const std::string& key : req.keys) f(key);
    }
}

std::string part_of_set_message(std::string_view key, std::uint32_t keys, lock::Token token, const char* verb) {
    return "key " + std::string(key) + " is part of a set of " + std::to_string(keys) + " keys granted with token " +
           std::to_string(token) + ": " + verb + " them together";
}

}  // namespace

void Core::keepalive(RequestId id, const KeepAlive& req) {
    if (!req.keys.empty()) {
        keepalive_set(id, req);
        return;
    }
    // A set is kept alive whole (lock/table.h: the set is the locks of one token).
    if (const lock::Lock* held = table_.find(req.key); held != nullptr && held->token == req.token) {
        if (const std::uint32_t n = table_.set_size(req.token); n > 0) {
            note_keepalive_refused(req.key, req.token, "part_of_set");
            respond(id, PartOfSet{part_of_set_message(req.key, n, req.token, "keep")});
            return;
        }
    }
    auto usable = [this](const std::string& key, lock::Token token) {
        const Lease* l = leases_.find(key);
        const bool expiring = kMutant != Mutant::kKeepAliveExpiring && l != nullptr && l->expiring();
        return l != nullptr && l->token == token && !expiring;
    };
    if (!usable(req.key, req.token)) {
        ++counters_.keepalive_failures;
        note_keepalive_refused(req.key, req.token);
        respond(id, NotHeld{});
        return;
    }
    confirm([this, id, req, usable](bool ok, Time now) {
        if (!ok) {
            unavailable(id);
            return;
        }
        if (!usable(req.key, req.token)) {
            ++counters_.keepalive_failures;
            note_keepalive_refused(req.key, req.token);
            respond(id, NotHeld{});
            return;
        }
        leases_.restart(req.key, req.token, now, config_.max_clock_drift_ppm);
        auto answer = [this, id, req, usable, term = leader_term_](bool cleared, Time at) {
            // Cleared in this leadership: its leases are those restarted here.
            if (!cleared || leader_term_ != term) {
                unavailable(id);
                return;
            }
            if (!usable(req.key, req.token)) {
                ++counters_.keepalive_failures;
                note_keepalive_refused(req.key, req.token);
                respond(id, NotHeld{});
                return;
            }
            // Restarted again when answered after a clearing checkpoint (at
            // the confirmation too: no checkpoint of the earlier run may be
            // proposed after the clearing one).
            leases_.restart(req.key, req.token, at, config_.max_clock_drift_ppm);
            leases_.answered(req.key, req.token);
            ++counters_.keepalives;
            tokens_.keepalive_ok(req.token, wall_ms_);
            log(LogLevel::kDebug, "keepalive",
                {{"key", req.key}, {"token", num(req.token)}, {"owner", owner_of(req.key, req.token)}});
            respond(id, KeptAlive{req.key, req.token, leases_.find(req.key)->lease_ms});
        };
        // The lease runs at full length again: a checkpoint of its earlier
        // run, stored or in flight, would be too short for a new leader.
        if (kMutant != Mutant::kKeepAliveKeepsCheckpoint && has_checkpoint(req.key, req.token)) {
            clear_checkpoints({req.key}, req.token, now, answer);
            return;
        }
        answer(true, now);
    });
}

void Core::note_keepalive_refused(const std::string& key, lock::Token token, const char* reason) {
    if (reason == nullptr) {
        const Lease* l = leases_.find(key);
        reason = l != nullptr && l->token == token && l->expiring() ? "expiring" : "not_held";
    }
    tokens_.keepalive_refused(token, wall_ms_, reason);
}

void Core::keepalive_set(RequestId id, const KeepAlive& req) {
    // Usable: distinct keys (validate), each with a lease of the token not
    // being expired, and the set holding no other key.
    auto check = [this, req]() -> int {  // 0 usable, 1 not held, 2 part of a larger set
        if (!lock::validate(lock::ReleaseMany{req.keys, req.token}).empty()) return 1;
        for (const std::string& key : req.keys) {
            const Lease* l = leases_.find(key);
            const bool expiring = kMutant != Mutant::kKeepAliveExpiring && l != nullptr && l->expiring();
            if (l == nullptr || l->token != req.token || expiring) return 1;
        }
        return table_.set_size(req.token) == req.keys.size() ? 0 : 2;
    };
    auto refuse = [this, id, req](int why) {
        ++counters_.keepalive_failures;
        note_keepalive_refused(req.keys.front(), req.token, why == 2 ? "part_of_set" : nullptr);
        if (why == 2) {
            respond(id, PartOfSet{part_of_set_message(req.keys.front(), table_.set_size(req.token), req.token, "keep")});
        } else {
            respond(id, NotHeld{});
        }
    };
    if (const int why = check(); why != 0) {
        refuse(why);
        return;
    }
    confirm([this, id, req, check, refuse](bool ok, Time now) {
        if (!ok) {
            unavailable(id);
            return;
        }
        if (const int why = check(); why != 0) {
            refuse(why);
            return;
        }
        // As for one key (keepalive): restarted now, and again when answered
        // after the checkpoints of the earlier run are cleared.
        for (const std::string& key : req.keys) leases_.restart(key, req.token, now, config_.max_clock_drift_ppm);
        auto answer = [this, id, req, check, refuse, term = leader_term_](bool cleared, Time at) {
            if (!cleared || leader_term_ != term) {
                unavailable(id);
                return;
            }
            if (const int why = check(); why != 0) {
                refuse(why);
                return;
            }
            for (const std::string& key : req.keys) {
                leases_.restart(key, req.token, at, config_.max_clock_drift_ppm);
                leases_.answered(key, req.token);
            }
            ++counters_.keepalives;
            tokens_.keepalive_ok(req.token, wall_ms_);
            log(LogLevel::kDebug, "keepalive",
                {{"key", req.keys.front()}, {"keys", num(req.keys.size())}, {"token", num(req.token)}});
            respond(id, KeptAlive{{}, req.token, leases_.find(req.keys.front())->lease_ms, req.keys});
        };
        if (kMutant != Mutant::kKeepAliveKeepsCheckpoint) {
            if (auto stale = with_checkpoint(req.keys, req.token); !stale.empty()) {
                clear_checkpoints(stale, req.token, now, answer);
                return;
            }
        }
        answer(true, now);
    });
}

void Core::release(RequestId id, const Release& req, Time now) {
    raft::ProposeError err = raft::ProposeError::kNone;
    const lock::Command cmd = req.keys.empty() ? lock::Command{lock::Release{req.key, req.token}}
                                               : lock::Command{lock::ReleaseMany{req.keys, req.token}};
    const bool ok = propose(cmd, now, [this, id](const Witness* applied, Time) {
        if (applied == nullptr) {
            unavailable(id);
        } else if (std::holds_alternative<lock::Released>(*applied->result)) {
            respond(id, Released{}, *applied);
        } else if (const auto* part = std::get_if<lock::PartOfSet>(applied->result)) {
            respond(id, PartOfSet{part_of_set_message(part->key, part->keys, part->token, "release")}, *applied);
        } else {
            respond(id, NotHeld{}, *applied);
        }
    }, &err);
    if (!ok) unavailable(id);
}

// The value is set by the log (lock::Proclaim), whatever the lease: a lock
// held with the token when it applies publishes it; otherwise 404.
void Core::proclaim(RequestId id, const Proclaim& req, Time now) {
    raft::ProposeError err = raft::ProposeError::kNone;
    const bool ok = propose(lock::Proclaim{req.key, req.token, req.value}, now,
                            [this, id, req](const Witness* applied, Time) {
                                if (applied == nullptr) {
                                    unavailable(id);
                                } else if (std::holds_alternative<lock::Proclaimed>(*applied->result)) {
                                    respond(id, Proclaimed{req.key, req.token, req.value}, *applied);
                                } else if (const auto* full = std::get_if<lock::TableFull>(applied->result)) {
                                    respond(id,
                                            TableFull{"the lock table holds " + num(full->table_bytes) +
                                                      " bytes of locks; the limit is " + num(table_.max_bytes())},
                                            *applied);
                                } else {
                                    respond(id, NotHeld{}, *applied);
                                }
                            },
                            &err);
    if (ok) return;
    if (err == raft::ProposeError::kTooLarge) {
        respond(id, TooLarge{});
    } else {
        unavailable(id);
    }
}

// The grant's lease ends now and is expired the usual way (a quorum round,
// then Expire{key, token}), not released at once: the same owner may hold
// that very token through another request (an idempotent re-grant of a
// retry), and then a re-grant answered before the Expire is proposed
// restarts the lease and keeps the lock, one answered after it is refused
// (on_grant_result). A Release would take the lock from under that retry.
// A lease some answer still promises (Lease::answers: a retry answered in
// the same batch, with the very same deadline; a keepalive; a lease a new
// leader restarted) is not cut at all.
void Core::expire_phantom_grant(const std::string& key, lock::Token token, Time now) {
    const Lease* lease = leases_.find(key);
    const bool held = lease != nullptr && lease->token == token;
    if (held && lease->answered() && kMutant != Mutant::kPhantomCutsAnswered) {
        log(LogLevel::kInfo, "phantom_release",
            {{"key", key}, {"token", num(token)}, {"expiring", "false"},
             {"reason", "the lease was answered to a client"}, {"answers", num(lease->answers)},
             {"owner", owner_of(key, token)}});
        return;
    }
    ++counters_.phantom_releases;
    if constexpr (kMutant == Mutant::kPhantomLeaked) {
        if (held) leases_.erase(key, token);
        return;
    }
    // Ends now, or stays ended: a lease that already ran out (its
    // confirmation round may be under way) keeps its earlier expire_at; one
    // whose Expire is proposed is left as it is.
    if (held) {
        leases_.cut(key, token, now);
        tokens_.phantom(token);
    }
    log(LogLevel::kInfo, "phantom_release",
        {{"key", key}, {"token", num(token)}, {"expiring", held ? "true" : "false"}, {"owner", owner_of(key, token)}});
    if (held) check_expiries(now);
}

void Core::list_locks(RequestId id, const ListLocks& req) {
    confirm([this, id, req](bool ok, Time now) {
        if (!ok) {
            unavailable(id);
            return;
        }
        Locks out;
        if (req.key) {
            const lock::Lock* l = table_.find(*req.key);
            if (l == nullptr) {
                respond(id, NotHeld{}, Witness{table_.applied_index(), 0, nullptr});
                return;
            }
            out.one = true;
            out.locks.push_back(LockView{*l, ttl_ms(l->key, now), kid_of(l->key, l->token)});
        } else {
            const std::size_t limit = std::clamp<std::size_t>(req.limit, 1, kMaxListLimit);
            bool more = false;
            for (lock::Lock& l : table_.list_page(req.prefixes, req.after, limit, more)) {
                const std::uint64_t ttl = ttl_ms(l.key, now);
                std::string kid = kid_of(l.key, l.token);
                out.locks.push_back(LockView{std::move(l), ttl, std::move(kid)});
            }
            if (more) out.next = out.locks.back().lock.key;
        }
        respond(id, std::move(out), Witness{table_.applied_index(), 0, nullptr});  // the state this list shows
    });
}

// ---- acquire and waiters ----------------------------------------------------------

void Core::acquire(RequestId id, const Acquire& req, bool from_queue, Time now) {
    // The user the owner is bound to: none with Config::owner_binding off.
    const std::string& user = config_.owner_binding ? req.user : kNoUser;
    if (!from_queue && req.wait_ms == 0) {
        // No barging without a wait either: a free key with waiters (or a
        // waiter's grant in flight) is theirs first, so acquires that never
        // wait cannot starve a waiting set whose other keys are still held.
        // (A held key is refused as held, by the table.)
        std::string busy;
        for_keys(req, [&](const std::string& key) {
            const bool queue_busy = waiters_.count(key) > 0 || waiter_grant_in_flight_.count(key) > 0;
            if (busy.empty() && table_.find(key) == nullptr && queue_busy) busy = key;
        });
        if (!busy.empty()) {
            respond(id, Held{"key " + busy + " has waiting acquires ahead of this one"});
            return;
        }
    }
    if (!from_queue && req.wait_ms > 0) {
        // Waits when a key is held by another (the table refuses or re-grants
        // by lock::regrants()), or has waiters or a waiter's grant in flight (no barging).
        bool wait = false;
        for_keys(req, [&](const std::string& key) {
            const lock::Lock* held = table_.find(key);
            const bool same_owner = held != nullptr && lock::regrants(*held, req.owner, user);
            const bool queue_busy = waiters_.count(key) > 0 || waiter_grant_in_flight_.count(key) > 0;
            wait = wait || (held != nullptr && !same_owner) || queue_busy;
        });
        if (wait) {
            enqueue_waiter(id, req, false, now);
            return;
        }
    }
    if (from_queue) {
        for_keys(req, [&](const std::string& key) { waiter_grant_in_flight_.insert(key); });
        ++counters_.waiter_grants;
    }
    raft::ProposeError err = raft::ProposeError::kNone;
    const lock::Command cmd = req.keys.empty()
                                  ? lock::Command{lock::Grant{req.key, req.lease_ms, req.owner, user, req.value}}
                                  : lock::Command{lock::GrantMany{req.keys, req.lease_ms, req.owner, user}};
    const bool ok = propose(cmd, now,
                            [this, id, req, from_queue](const Witness* applied, Time at) {
                                on_grant_result(id, req, from_queue, applied, at);
                            },
                            &err);
    if (ok) {
        grants_in_flight_.insert(id);
        return;
    }
    if (from_queue) for_keys(req, [&](const std::string& key) { waiter_grant_in_flight_.erase(key); });
    if (err == raft::ProposeError::kTooLarge) {
        respond(id, TooLarge{});
    } else {
        unavailable(id);
    }
}

void Core::on_grant_result(RequestId id, const Acquire& req, bool from_queue, const Witness* applied, Time now) {
    if (from_queue) for_keys(req, [&](const std::string& key) { waiter_grant_in_flight_.erase(key); });
    grants_in_flight_.erase(id);
    const bool gone = gone_.erase(id) > 0;
    const lock::Result* r = applied != nullptr ? applied->result : nullptr;
    if (gone && (r == nullptr || !std::holds_alternative<lock::Granted>(*r))) return;  // nobody to answer
    if (r == nullptr) {
        unavailable(id);
        return;
    }
    if (const auto* g = std::get_if<lock::Granted>(r)) {
        const lock::Token token = g->token;
        // A re-grant of a lock (of a set: of any of its keys) whose Expire is proposed.
        bool expiring = false;
        if (!g->created) {
            for_keys(req, [&](const std::string& key) {
                const Lease* lease = leases_.find(key);
                expiring = expiring || (lease != nullptr && lease->token == token && lease->expiring());
            });
        }
        if (expiring) {
            // A same-owner retry of a lock whose Expire is already proposed:
            // the lock is about to go, so this is no grant (see on_applied).
            if (gone) return;
            if (req.wait_ms > 0 && is_leader()) {
                enqueue_waiter(id, req, from_queue, now, *applied);
            } else {
                respond(id, Held{"the lease of token " + num(token) + " ran out and is being expired; retry"}, *applied);
            }
            return;
        }
        if (!g->created && applied->term != leader_term_) {
            // A re-grant proposed in an earlier term (this member led it, or
            // leads no more): behind it in the log may come an Expire of the
            // lock from that term, proposed when the lease it had then ran
            // out, which this term's leases know nothing of (lose_leadership
            // forgot it). Outcome unknown to the client: it retries, and a
            // retry proposed now is decided by this term's leases. A created
            // grant needs no such care: every lease of its token starts at or
            // after its apply, so no Expire can come before its deadline.
            if (gone) return;
            unavailable(id);
            return;
        }
        if (gone) {
            for_keys(req, [&](const std::string& key) { expire_phantom_grant(key, token, now); });
            return;
        }
        // A re-grant restarted the lease at full length (and the table
        // cleared its checkpoint): one proposed before it applied and
        // applying after it would be too short for a new leader.
        const std::vector<std::string> stale =
            g->created ? std::vector<std::string>{}
                       : with_checkpoint(req.keys.empty() ? std::vector<std::string>{req.key} : req.keys, token);
        if (!stale.empty()) {
            const std::uint64_t lease_ms = g->lease_ms;
            clear_checkpoints(stale, token, now,
                             [this, id, req, token, lease_ms, index = applied->index, term = applied->term,
                              result = *applied->result](bool ok, Time) {
                                 if (!ok || leader_term_ != term) {
                                     unavailable(id);
                                     return;
                                 }
                                 answer_granted(id, req, token, lease_ms, Witness{index, term, &result});
                             });
            return;
        }
        answer_granted(id, req, token, g->lease_ms, *applied);
        return;
    }
    if (const auto* full = std::get_if<lock::TableFull>(r)) {
        respond(id,
                TableFull{"the lock table holds " + num(full->table_bytes) + " bytes of locks; the limit is " +
                          num(table_.max_bytes()) + ": release locks (or shorten leases) first"},
                *applied);
        // The keys are free: the next waiters' turn (they may fit, or be told so).
        if (from_queue && is_leader()) for_keys(req, [&](const std::string& key) { serve_waiters(key, now); });
        return;
    }
    if (const auto* part = std::get_if<lock::PartOfSet>(r)) {
        respond(id, PartOfSet{part_of_set_message(part->key, part->keys, part->token, "acquire")}, *applied);
        return;
    }
    const auto* rej = std::get_if<lock::GrantRejected>(r);
    if (req.wait_ms > 0 && is_leader() && rej != nullptr && rej->holder_token != 0) {
        enqueue_waiter(id, req, from_queue, now, *applied);  // a queue head keeps its place at the front
        return;
    }
    std::string why = "grant refused";
    if (rej != nullptr && rej->holder_token != 0) {
        why = (rej->key.empty() ? std::string("key") : "key " + rej->key) + " is held with token " +
              num(rej->holder_token);
    }
    respond(id, Held{std::move(why)}, *applied);
}

void Core::answer_granted(RequestId id, const Acquire& req, lock::Token token, std::uint64_t lease_ms,
                          const Witness& by) {
    // Counted before it goes out: from here on the lease is promised to
    // this client until the shell reports the answer unwritten.
    bool counted = false;
    for_keys(req, [&](const std::string& key) { counted = leases_.answered(key, token, proof_kid_) || counted; });
    unwritten_[id] = Unwritten{req.keys.empty() ? std::vector<std::string>{req.key} : req.keys, token,
                               counted ? leader_term_ : 0};
    // A re-grant answers the lease in force: the longer, when the retry asked
    // for less, and the value the lock publishes.
    const lock::Lock* held = req.keys.empty() ? table_.find(req.key) : nullptr;
    std::string value = held != nullptr && held->token == token ? held->value.str() : req.value;
    respond(id, Granted{req.key, token, lease_ms, req.owner, req.keys, std::move(value)}, by);
}

void Core::enqueue_waiter(RequestId id, const Acquire& req, bool front, Time now, const Witness& by) {
    if (!front && waiter_total_ >= config_.max_waiters) {
        respond(id, Held{"too many waiting acquires (limit " + num(config_.max_waiters) + ")"}, by);
        return;
    }
    effects_.watch.push_back(id);
    const Waiter w{id, req, now + std::chrono::milliseconds(req.wait_ms)};
    // A set joins every one of its keys' queues at once (core.h "Waiters").
    for_keys(w.acquire, [&](const std::string& key) {
        auto& q = waiters_[key];
        if (front || kMutant == Mutant::kWaitersLifo) {
            q.push_front(w);
        } else {
            q.push_back(w);
        }
    });
    ++waiter_total_;
    // A key may have been freed meanwhile (or never held): serve at once.
    for_keys(w.acquire, [&](const std::string& key) {
        if (table_.find(key) == nullptr) serve_waiters(key, now);
    });
}

bool Core::set_may_go(const Waiter& w) const {
    for (const std::string& key : w.acquire.keys) {
        if (waiter_grant_in_flight_.count(key) > 0 || table_.find(key) != nullptr) return false;
        auto q = waiters_.find(key);
        if (q == waiters_.end() || q->second.front().id != w.id) return false;
    }
    return true;
}

void Core::remove_waiter(const Waiter& w, Time now, std::string_view except, bool serve) {
    for_keys(w.acquire, [&](const std::string& key) {
        auto it = waiters_.find(key);
        if (it == waiters_.end()) return;
        auto& q = it->second;
        q.erase(std::remove_if(q.begin(), q.end(), [&](const Waiter& x) { return x.id == w.id; }), q.end());
        if (q.empty()) waiters_.erase(it);
    });
    --waiter_total_;
    if (!serve || !is_leader()) return;
    for_keys(w.acquire, [&](const std::string& key) {
        if (key != except && table_.find(key) == nullptr) serve_waiters(key, now);
    });
}

// `key` is free (released, expired, or its head changed): grant it to the
// head of its FIFO queue (heads whose wait ran out are answered first). A
// set at the head goes only when it heads every one of its keys' queues and
// they are all free (set_may_go); until then the key waits with it.
void Core::serve_waiters(const std::string& key, Time now) {
    for (;;) {
        if (waiter_grant_in_flight_.count(key) > 0 || table_.find(key) != nullptr) return;
        auto it = waiters_.find(key);
        if (it == waiters_.end()) return;
        const Waiter head = it->second.front();
        if (head.deadline <= now) {
            ++counters_.waiter_timeouts;
            respond(head.id, Held{"wait timed out"});
            remove_waiter(head, now, key);
            continue;
        }
        if (!head.acquire.keys.empty() && !set_may_go(head)) return;
        // Not served: its keys are the set's now (acquire marks them in flight).
        remove_waiter(head, now, key, false);
        acquire(head.id, head.acquire, true, now);
        return;
    }
}

void Core::sweep_waiters(Time now) {
    // Each waiter whose wait ran out once (a set's is in several queues).
    std::vector<Waiter> late;
    for (const auto& [key, q] : waiters_) {
        for (const Waiter& w : q) {
            const bool home = w.acquire.keys.empty() || w.acquire.keys.front() == key;
            if (home && w.deadline <= now) late.push_back(w);
        }
    }
    for (const Waiter& w : late) {
        // Answered meanwhile: serving a key another left may time it out first.
        auto q = waiters_.find(w.acquire.keys.empty() ? w.acquire.key : w.acquire.keys.front());
        if (q == waiters_.end() ||
            std::none_of(q->second.begin(), q->second.end(), [&](const Waiter& x) { return x.id == w.id; })) {
            continue;
        }
        ++counters_.waiter_timeouts;
        respond(w.id, Held{"wait timed out"});
        remove_waiter(w, now);
    }
}

void Core::drop_all_waiters() {
    auto all = std::move(waiters_);
    waiters_.clear();
    waiter_total_ = 0;
    waiter_grant_in_flight_.clear();
    for (auto& [key, q] : all) {
        for (Waiter& w : q) {
            if (w.acquire.keys.empty() || w.acquire.keys.front() == key) unavailable(w.id);
        }
    }
}

}  // namespace pgfence::member
