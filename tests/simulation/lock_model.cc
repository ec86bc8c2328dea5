// The sequential lock model: see lock_model.h.
#include "lock_model.h"

#include <algorithm>
#include <type_traits>

#include "sim_failure.h"

namespace pgfence::sim {

lock::Result LockModel::apply(std::uint64_t index, const lock::Command& cmd) {
    require(index == applied_index_ + 1, "model applies index ", index, " after ", applied_index_);
    applied_index_ = index;
    return std::visit(
        [&](const auto& c) -> lock::Result {
            using C = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<C, lock::Grant>) {
                auto it = holders_.find(c.key);
                if (it == holders_.end()) {
                    // Written out here, not lock::grant_token: the model is
                    // independent of the table it checks.
                    const lock::Token token = index + floor_;
                    holders_[c.key] = ModelHolder{token, c.owner, c.user, c.lease_ms};
                    record(c.key, token);
                    return lock::Granted{token, true, c.lease_ms};
                }
                // The same non-empty owner, asked by the same user: its
                // lock's token back, unless the key is part of a set (a set
                // is retried whole).
                if (!c.owner.empty() && it->second.owner == c.owner && it->second.user == c.user) {
                    if (const std::uint32_t n = set_size(it->second.token); n >= 2) {
                        return lock::PartOfSet{c.key, it->second.token, n};
                    }
                    it->second.lease_ms = std::max(it->second.lease_ms, c.lease_ms);
                    it->second.remaining_ms = 0;
                    return lock::Granted{it->second.token, false, it->second.lease_ms};
                }
                return lock::GrantRejected{it->second.token};
            } else if constexpr (std::is_same_v<C, lock::GrantMany>) {
                return grant_many(index, c);
            } else if constexpr (std::is_same_v<C, lock::ReleaseMany>) {
                return release_many(c);
            } else if constexpr (std::is_same_v<C, lock::Release> || std::is_same_v<C, lock::Expire>) {
                if constexpr (std::is_same_v<C, lock::Release>) {
                    auto it = holders_.find(c.key);
                    if (it != holders_.end() && it->second.token == c.token) {
                        if (const std::uint32_t n = set_size(c.token); n >= 2) return lock::PartOfSet{c.key, c.token, n};
                    }
                }
                const bool match = remove(c.key, c.token);
                if constexpr (std::is_same_v<C, lock::Release>) {
                    return match ? lock::Result{lock::Released{}} : lock::Result{lock::NotFound{}};
                } else {
                    return lock::Expired{match};
                }
            } else if constexpr (std::is_same_v<C, lock::ExpireMany>) {
                // A batch the limits refuse (lock::validate) removes nothing.
                if (!lock::validate(c).empty()) return lock::ExpiredMany{0};
                std::uint32_t existed = 0;
                for (const lock::Expire& x : c.locks) existed += remove(x.key, x.token) ? 1 : 0;
                return lock::ExpiredMany{existed};
            } else if constexpr (std::is_same_v<C, lock::Checkpoint>) {
                if (!lock::validate(c).empty()) return lock::Checkpointed{0};
                std::uint32_t applied = 0;
                for (const lock::LeaseCheckpoint& p : c.locks) {
                    auto it = holders_.find(p.key);
                    if (it == holders_.end() || it->second.token != p.token || p.remaining_ms > it->second.lease_ms) {
                        continue;
                    }
                    it->second.remaining_ms = p.remaining_ms;  // (the simulation's table never fills)
                    ++applied;
                }
                return lock::Checkpointed{applied};
            } else if constexpr (std::is_same_v<C, lock::Proclaim>) {
                // The value is not modelled (reads compare tokens); whether
                // the key is held with the token is.
                auto it = holders_.find(c.key);
                const bool held = it != holders_.end() && it->second.token == c.token;
                return held && lock::validate(c).empty() ? lock::Result{lock::Proclaimed{}}
                                                         : lock::Result{lock::NotFound{}};
            } else {
                floor_ = std::max(floor_, c.floor);
                return lock::FloorSet{floor_};
            }
        },
        cmd);
}

lock::Result LockModel::apply_noop(std::uint64_t index) {
    require(index == applied_index_ + 1, "model applies no-op ", index, " after ", applied_index_);
    applied_index_ = index;
    return lock::Noop{};
}

std::uint32_t LockModel::set_size(lock::Token token) const {
    std::uint32_t n = 0;
    for (const auto& [key, h] : holders_) n += h.token == token ? 1 : 0;
    return n;
}

// All or nothing (docs/design.md "Sets of keys"): every key free -> each
// held with the entry's token; the same owner and user holding exactly
// these keys as one set -> its token back, the longer lease; else the first
// held key in the order asked refuses it.
lock::Result LockModel::grant_many(std::uint64_t index, const lock::GrantMany& g) {
    if (!lock::validate(g).empty()) return lock::GrantRejected{0};
    const ModelHolder* first_held = nullptr;
    std::string first_key;
    for (const std::string& key : g.keys) {
        auto it = holders_.find(key);
        if (it != holders_.end() && first_held == nullptr) {
            first_held = &it->second;
            first_key = key;
        }
    }
    if (first_held == nullptr) {
        const lock::Token token = index + floor_;
        for (const std::string& key : g.keys) {
            holders_[key] = ModelHolder{token, g.owner, g.user, g.lease_ms};
            record(key, token);
        }
        return lock::Granted{token, true, g.lease_ms};
    }
    const lock::Token held = first_held->token;
    bool same = !g.owner.empty() && set_size(held) == g.keys.size();
    for (const std::string& key : g.keys) {
        auto it = holders_.find(key);
        same = same && it != holders_.end() && it->second.token == held && it->second.owner == g.owner &&
               it->second.user == g.user;
    }
    if (!same) return lock::GrantRejected{held, first_key};
    std::uint64_t lease_ms = 0;
    for (const std::string& key : g.keys) {
        ModelHolder& h = holders_[key];
        h.lease_ms = std::max(h.lease_ms, g.lease_ms);
        h.remaining_ms = 0;  // a re-grant restarts the lease at full length
        lease_ms = h.lease_ms;
    }
    return lock::Granted{held, false, lease_ms};
}

lock::Result LockModel::release_many(const lock::ReleaseMany& r) {
    if (!lock::validate(r).empty()) return lock::NotFound{};
    for (const std::string& key : r.keys) {
        auto it = holders_.find(key);
        if (it == holders_.end() || it->second.token != r.token) return lock::NotFound{};
    }
    if (const std::uint32_t n = set_size(r.token); n != r.keys.size()) return lock::PartOfSet{r.keys.front(), r.token, n};
    for (const std::string& key : r.keys) remove(key, r.token);
    return lock::Released{};
}

bool LockModel::remove(const std::string& key, lock::Token token) {
    auto it = holders_.find(key);
    if (it == holders_.end() || it->second.token != token) return false;
    holders_.erase(it);
    record(key, 0);
    return true;
}

void LockModel::record(const std::string& key, lock::Token token) {
    history_[key].emplace_back(applied_index_, token);
}

lock::Token LockModel::token_at(const std::string& key, std::uint64_t index) const {
    require(index <= applied_index_, "model asked for index ", index, " beyond ", applied_index_);
    auto it = history_.find(key);
    if (it == history_.end()) return 0;
    const auto& changes = it->second;
    auto after = std::upper_bound(changes.begin(), changes.end(), index,
                                  [](std::uint64_t i, const auto& change) { return i < change.first; });
    return after == changes.begin() ? 0 : std::prev(after)->second;
}

}  // namespace pgfence::sim
