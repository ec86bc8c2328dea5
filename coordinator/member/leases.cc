// The leader's leases with their expiry index (leases.h).
#include "member/leases.h"

#include <algorithm>

namespace pgfence::member {

const Lease* LeaseSet::find(std::string_view key) const {
    auto it = leases_.find(key);
    return it == leases_.end() ? nullptr : &it->second;
}

Lease* LeaseSet::find_token(std::string_view key, lock::Token token, Map::iterator* at) {
    auto it = leases_.find(key);
    if (it == leases_.end() || it->second.token != token) return nullptr;
    *at = it;
    return &it->second;
}

void LeaseSet::unindex(const Map::iterator& it) {
    if (it->second.phase == LeasePhase::kRunning) running_.erase(Due{it->second.expire_at, it->first});
}

void LeaseSet::index(const Map::iterator& it) {
    if (it->second.phase == LeasePhase::kRunning) running_.emplace(it->second.expire_at, it->first);
}

void LeaseSet::start_all(const lock::LockTable& table, Time now, std::uint64_t max_clock_drift_ppm) {
    clear();
    table.for_each([&](const lock::Lock& l) {
        auto it = leases_.emplace_hint(leases_.end(), l.key,
                                       Lease::started(l.token, l.lease_ms, now, max_clock_drift_ppm));
        running_.emplace_hint(running_.end(), it->second.expire_at, it->first);
    });
}

void LeaseSet::start(std::string_view key, lock::Token token, std::uint64_t lease_ms, Time now,
                     std::uint64_t max_clock_drift_ppm) {
    auto it = leases_.find(key);
    if (it == leases_.end()) {
        it = leases_.emplace(std::string(key), Lease{}).first;
    } else {
        unindex(it);
    }
    it->second = Lease::started(token, lease_ms, now, max_clock_drift_ppm);
    index(it);
}

bool LeaseSet::restart(std::string_view key, lock::Token token, Time now, std::uint64_t max_clock_drift_ppm) {
    Map::iterator it;
    Lease* l = find_token(key, token, &it);
    if (l == nullptr) return false;
    unindex(it);
    l->restart(now, max_clock_drift_ppm);
    index(it);
    return true;
}

bool LeaseSet::cut(std::string_view key, lock::Token token, Time now) {
    Map::iterator it;
    Lease* l = find_token(key, token, &it);
    if (l == nullptr || l->expiring()) return false;
    unindex(it);
    l->deadline = std::min(l->deadline, now);
    l->expire_at = std::min(l->expire_at, now);
    index(it);
    return true;
}

bool LeaseSet::set_running(std::string_view key, lock::Token token) {
    Map::iterator it;
    Lease* l = find_token(key, token, &it);
    if (l == nullptr) return false;
    unindex(it);
    l->phase = LeasePhase::kRunning;
    index(it);
    return true;
}

bool LeaseSet::set_expiring(std::string_view key, lock::Token token) {
    Map::iterator it;
    Lease* l = find_token(key, token, &it);
    if (l == nullptr) return false;
    unindex(it);
    l->phase = LeasePhase::kExpiring;
    return true;
}

bool LeaseSet::erase(std::string_view key, lock::Token token) {
    Map::iterator it;
    if (find_token(key, token, &it) == nullptr) return false;
    unindex(it);
    leases_.erase(it);
    return true;
}

void LeaseSet::clear() {
    running_.clear();
    leases_.clear();
}

std::size_t LeaseSet::take_due(Time now, std::size_t limit, std::vector<DueLease>& out) {
    std::size_t taken = 0;
    while (taken < limit && !running_.empty() && running_.begin()->first <= now) {
        auto lease = leases_.find(running_.begin()->second);
        running_.erase(running_.begin());
        lease->second.phase = LeasePhase::kConfirming;
        out.push_back(DueLease{lease->first, lease->second.token});
        ++taken;
    }
    return taken;
}

std::string LeaseSet::check_invariants() const {
    std::size_t running = 0;
    for (const auto& [key, l] : leases_) {
        if (l.phase != LeasePhase::kRunning) continue;
        ++running;
        auto at = running_.find(Due{l.expire_at, key});
        if (at == running_.end() || at->second.data() != key.data()) {
            return "the running lease of " + key + " is not indexed at its expire_at";
        }
    }
    if (running != running_.size()) {
        return "the expiry index holds " + std::to_string(running_.size()) + " leases, " +
               std::to_string(running) + " run";
    }
    return {};
}

}  // namespace pgfence::member
