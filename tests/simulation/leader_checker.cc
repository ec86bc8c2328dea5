// The leader's lease and waiter rules, checked from outside: see leader_checker.h.
#include "leader_checker.h"

#include <algorithm>
#include <cmath>

#include "sim_failure.h"

namespace pgfence::sim {

namespace {
double ms(member::Time t) { return static_cast<double>(t.count()) / 1e6; }
}  // namespace

LeaderChecker::LeaderChecker(std::size_t members, std::uint64_t rho_ppm) : rho_ppm_(rho_ppm), views_(members), rates_(members, 1.0), gone_keys_(members), restore_pending_(members, 0) {}

LeaderChecker::View& LeaderChecker::view(raft::NodeId id) {
    require(id >= 1, "leader checker: no member ", id);
    if (id > views_.size()) {  // a member that joined
        views_.resize(id);
        rates_.resize(id, 1.0);
        gone_keys_.resize(id);
        restore_pending_.resize(id, 0);
    }
    return views_[id - 1];
}

void LeaderChecker::set_rate(raft::NodeId id, double rate) {
    view(id);
    rates_[id - 1] = rate;
}

void LeaderChecker::start(View& v, const std::string& key, lock::Token token, std::uint64_t lease_ms,
                          member::Time local, std::uint64_t run_ms) const {
    const std::uint64_t run = run_ms == 0 ? lease_ms : run_ms;
    const auto margin = std::chrono::milliseconds(run + member::expiry_margin_ms(run, rho_ppm_));
    v.leases[key] = LeaseRecord{token, lease_ms, local + margin, false};
}

void LeaderChecker::restarted_from_checkpoints(raft::NodeId id, raft::Term term, const lock::LockTable& table,
                                               member::Time local) {
    View& v = view(id);
    require(term != 0, "member ", id, " restarted leases from checkpoints while not leading");
    if (v.term != term) {
        restore_pending_[id - 1] = term;
        return;
    }
    restore(v, table, local);
}

void LeaderChecker::restore(View& v, const lock::LockTable& table, member::Time local) const {
    table.for_each([&](const lock::Lock& l) {
        if (l.remaining_ms == 0) return;
        auto it = v.leases.find(l.key);
        if (it == v.leases.end() || it->second.token != l.token || it->second.expire_proposed) return;
        start(v, l.key, l.token, l.lease_ms, local, l.remaining_ms);
    });
}

void LeaderChecker::leading(raft::NodeId id, raft::Term term, const raft::Configuration& config,
                            raft::Index config_index, const lock::LockTable& table, member::Time local) {
    View& v = view(id);
    if (v.term == term) {
        // A leader's log only grows: a new configuration has a new index.
        if (term != 0 && v.configs.back().index != config_index) note_configuration(v, config, config_index, local);
        return;
    }
    v = View{};
    v.term = term;
    if (term == 0) return;
    for (const lock::Lock& l : table.list()) start(v, l.key, l.token, l.lease_ms, local);
    if (restore_pending_[id - 1] == term) restore(v, table, local);
    restore_pending_[id - 1] = 0;
    note_configuration(v, config, config_index, local);
}

// Keeps the configurations that may still decide an Expire: one that ended
// before every lease's expire_at (and before now) can no longer.
void LeaderChecker::note_configuration(View& v, const raft::Configuration& config, raft::Index index,
                                       member::Time local) const {
    v.configs.push_back(InForce{index, local, config});
    member::Time oldest = local;
    for (const auto& [key, l] : v.leases) oldest = std::min(oldest, l.expire_at);
    std::size_t drop = 0;
    while (drop + 1 < v.configs.size() && v.configs[drop + 1].from <= oldest) ++drop;
    v.configs.erase(v.configs.begin(), v.configs.begin() + static_cast<std::ptrdiff_t>(drop));
}

void LeaderChecker::crashed(raft::NodeId id) {
    View& v = view(id);
    gone_keys_[id - 1].clear();
    v = View{};
}

void LeaderChecker::delivered(raft::NodeId id, const raft::Message& m, std::uint64_t sent_us) {
    View& v = view(id);
    if (v.term == 0 || m.term != v.term) return;
    if (!std::holds_alternative<raft::AppendResponse>(m.body) && !std::holds_alternative<raft::HeartbeatResponse>(m.body)) {
        return;
    }
    std::uint64_t& latest = v.latest_response_sent_us[m.from];
    latest = std::max(latest, sent_us);
}

void LeaderChecker::grant_applied(raft::NodeId id, const std::string& key, lock::Token token, std::uint64_t lease_ms,
                                  member::Time local) {
    View& v = view(id);
    if (v.term == 0) return;
    auto it = v.leases.find(key);
    if (it != v.leases.end() && it->second.token == token && it->second.expire_proposed) return;  // kept expiring
    start(v, key, token, lease_ms, local);
}

void LeaderChecker::lock_removed(raft::NodeId id, const std::string& key, lock::Token token) {
    View& v = view(id);
    auto it = v.leases.find(key);
    if (it != v.leases.end() && it->second.token == token) v.leases.erase(it);
    v.removed_in_batch.insert({key, token});
}

void LeaderChecker::batch_begins(raft::NodeId id) { view(id).removed_in_batch.clear(); }

void LeaderChecker::expire_proposed(raft::NodeId id, const std::string& key, lock::Token token, std::uint64_t real_us,
                                    member::Time local) {
    View& v = view(id);
    require(v.term != 0, "member ", id, " proposed Expire{", key, ", ", token, "} while not leading");
    auto it = v.leases.find(key);
    require(it != v.leases.end() && it->second.token == token, "member ", id, " proposed Expire{", key, ", ", token,
            "} in term ", v.term, " but leases ", it == v.leases.end() ? "nothing for that key" : "another token");
    LeaseRecord& l = it->second;
    require(!l.expire_proposed, "member ", id, " proposed Expire{", key, ", ", token, "} twice in term ", v.term);
    require(local >= l.expire_at, "member ", id, " proposed Expire{", key, ", ", token, "} at ", ms(local),
            "ms of its clock, before the lease's expire_at ", ms(l.expire_at), "ms (lease ", l.lease_ms, "ms)");
    // The real time at which the member's clock reached expire_at.
    const double expire_at_real_us = ms(l.expire_at) * 1000.0 / rates_[id - 1];
    std::string responses;
    for (const auto& [peer, sent_us] : v.latest_response_sent_us) {
        responses += " " + std::to_string(peer) + "@" + std::to_string(sent_us) + "us";
    }
    // Any configuration in force since expire_at: a majority of its voters.
    bool confirmed = false;
    std::size_t best = 0, best_of = 0;
    for (std::size_t k = 0; k < v.configs.size() && !confirmed; ++k) {
        if (k + 1 < v.configs.size() && v.configs[k + 1].from <= l.expire_at) continue;  // ended before it
        const raft::Configuration& c = v.configs[k].config;
        std::size_t count = c.is_voter(id) ? 1 : 0;  // itself
        for (const auto& [peer, sent_us] : v.latest_response_sent_us) {
            if (c.is_voter(peer) && static_cast<double>(sent_us) + 1.0 >= expire_at_real_us) ++count;
        }
        const std::size_t voters = c.voters().size();
        confirmed = count >= voters / 2 + 1;
        if (best_of == 0 || count * best_of > best * voters) {
            best = count;
            best_of = voters;
        }
    }
    require(confirmed, "member ", id, " proposed Expire{", key, ", ", token, "} at ", real_us, "us with only ", best,
            " of ", best_of, " members confirming term ", v.term, " after its expire_at (",
            static_cast<std::uint64_t>(expire_at_real_us), "us real time); latest responses:",
            responses.empty() ? " none" : responses);
    l.expire_proposed = true;
    v.announced.insert({key, token});
    ++expires_checked_;
}

void LeaderChecker::expire_in_ready(raft::NodeId id, raft::Term term, const std::string& key, lock::Token token) {
    View& v = view(id);
    if (v.term != term) return;
    require(v.announced.count({key, token}) > 0, "member ", id, " handed out Expire{", key, ", ", token,
            "} of term ", term, " that it never said it proposed");
}

void LeaderChecker::kept_alive(raft::NodeId id, const std::string& key, lock::Token token, member::Time local) {
    View& v = view(id);
    if (v.term == 0) return;
    auto it = v.leases.find(key);
    if (v.removed_in_batch.count({key, token}) > 0) return;  // (the key may be granted again since)
    require(it != v.leases.end() && it->second.token == token, "member ", id, " answered KeptAlive{", key, ", ", token,
            "} in term ", v.term, " for a lock it does not lease");
    require(!it->second.expire_proposed, "member ", id, " answered KeptAlive{", key, ", ", token,
            "} after proposing its Expire in term ", v.term);
    start(v, key, token, it->second.lease_ms, local);
    ++keepalives_checked_;
}

void LeaderChecker::acquire_gone(raft::NodeId id, const std::string& key) {
    view(id);
    gone_keys_[id - 1].insert(key);
}

void LeaderChecker::phantom_released(raft::NodeId id, const std::string& key, lock::Token token, member::Time local) {
    View& v = view(id);
    if (v.term == 0) return;
    require(gone_keys_[id - 1].count(key) > 0, "member ", id, " ended a phantom grant's lease on ", key, " (token ", token,
            ") though no acquire of that key was reported gone since it started");
    auto it = v.leases.find(key);
    if (it != v.leases.end() && it->second.token == token && !it->second.expire_proposed) {
        it->second.expire_at = std::min(it->second.expire_at, local);
    }
}

void LeaderChecker::queued(raft::NodeId id, std::uint64_t request, const std::vector<std::string>& keys) {
    View& v = view(id);
    if (v.term == 0) return;
    if (!v.queued_key.emplace(request, keys).second) return;  // queued again (a head that lost a race): same place
    for (const std::string& key : keys) v.queues[key].push_back(request);
}

void LeaderChecker::answered(raft::NodeId id, std::uint64_t request, bool granted) {
    View& v = view(id);
    auto k = v.queued_key.find(request);
    if (k == v.queued_key.end()) return;
    for (const std::string& key : k->second) {
        auto& q = v.queues[key];
        auto pos = std::find(q.begin(), q.end(), request);
        if (granted) {
            require(pos == q.begin(), "member ", id, " granted waiter ", request, " of ", key, " in term ", v.term,
                    " while ", std::distance(q.begin(), pos),
                    " acquires queued before it were still waiting (the first: ", q.empty() ? 0 : q.front(), ")");
        }
        if (pos != q.end()) q.erase(pos);
        if (q.empty()) v.queues.erase(key);
    }
    if (granted) ++waiter_grants_checked_;
    if (granted && k->second.size() > 1) ++waiting_sets_checked_;
    v.queued_key.erase(k);
}

}  // namespace pgfence::sim
