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
                // The same non-empty owner, asked by the same user.
                if (!c.owner.empty() && it->second.owner == c.owner && it->second.user == c.user) {
                    it->second.lease_ms = std::max(it->second.lease_ms, c.lease_ms);
                    it->second.remaining_ms = 0;
                    return lock::Granted{it->second.token, false, it->second.lease_ms};
                }
                return lock::GrantRejected{it->second.token};
            } else if constexpr (std::is_same_v<C, lock::Release> || std::is_same_v<C, lock::Expire>) {
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
