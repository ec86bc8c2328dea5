// LockTable::apply and friends: the lock state machine (semantics in table.h).
#include "lock/table.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <type_traits>

namespace pgfence::lock {

namespace {

// Outcome of a Grant that is invalid, or whose token would exceed kMaxToken.
// A held key's token is never 0 (grant_token() is 0 only for a refused Grant).
constexpr Token kInvalidGrantHolder = 0;

}  // namespace

Result LockTable::apply(std::uint64_t index, const Command& cmd) {
    require_next_index(index);
    Result result = std::visit([this, index](const auto& c) { return apply_one(index, c); }, cmd);
    applied_index_ = index;
    return result;
}

Result LockTable::apply_noop(std::uint64_t index) {
    require_next_index(index);
    applied_index_ = index;
    return Noop{};
}

void LockTable::require_next_index(std::uint64_t index) const {
    if (index <= applied_index_) {
        throw std::logic_error("lock table: entry index " + std::to_string(index) +
                               " applied after index " + std::to_string(applied_index_) +
                               "; indexes must strictly increase");
    }
}

Result LockTable::apply_one(std::uint64_t index, const Grant& grant) {
    if (!validate(grant).empty()) return GrantRejected{kInvalidGrantHolder};
    // One search: the key's place, whether held or not (the insert below uses it).
    const auto place = locks_.lower_bound(grant.key);
    if (auto held = place; held != locks_.end() && held->key == grant.key) {
        if (const std::uint32_t n = set_size(held->token); n > 0) {
            if (regrants(*held, grant.owner, grant.user)) return PartOfSet{grant.key, held->token, n};
            return GrantRejected{held->token};
        }
        if (regrants(*held, grant.owner, grant.user)) {
            const Token token = held->token;
            const std::uint64_t lease_ms = std::max<std::uint64_t>(grant.lease_ms, held->lease_ms);
            if (lease_ms == held->lease_ms && held->remaining_ms == 0) return Granted{token, false, lease_ms};
            before_change(grant.key);
            // A retry may lengthen the lease, and restarts it (no
            // checkpoint): the set's element is const, so the node is taken
            // out, changed and put back (the key, its place, is unchanged).
            account(*held, false);
            auto node = locks_.extract(held);
            // <= kMaxLeaseMs: validate() refused a longer Grant, and the held lock's is.
            node.value().lease_ms = static_cast<std::uint32_t>(lease_ms);
            node.value().remaining_ms = 0;
            account(*locks_.insert(std::move(node)).position, true);
            return Granted{token, false, lease_ms};
        }
        return GrantRejected{held->token};
    }
    const Token token = grant_token(index, token_floor_);
    if (token == 0) return GrantRejected{kInvalidGrantHolder};
    const std::uint64_t added = lock_bytes(grant.key, grant.owner, grant.user, grant.value);
    if (bytes_ + added > max_bytes_) return TableFull{bytes_};
    if (token <= last_token_) {
        throw std::logic_error("lock table: token " + std::to_string(token) +
                               " does not exceed the last token " + std::to_string(last_token_));
    }
    before_change(grant.key);
    account(*locks_.emplace_hint(place, Lock{grant.key, token, grant.lease_ms, grant.owner, grant.user, grant.value}),
            true);
    last_token_ = token;
    return Granted{token, true, grant.lease_ms};
}

Result LockTable::apply_one(std::uint64_t /*index*/, const Release& release) {
    if (const Lock* held = find(release.key); held != nullptr && held->token == release.token) {
        if (const std::uint32_t n = set_size(release.token); n > 0) return PartOfSet{release.key, release.token, n};
    }
    if (!remove_if_held(release.key, release.token)) return NotFound{};
    return Released{};
}

Result LockTable::apply_one(std::uint64_t /*index*/, const Expire& expire) {
    return Expired{remove_if_held(expire.key, expire.token)};
}

Result LockTable::apply_one(std::uint64_t /*index*/, const Proclaim& proclaim) {
    if (!validate(proclaim).empty()) return NotFound{};
    const auto held = locks_.find(proclaim.key);
    if (held == locks_.end() || held->token != proclaim.token) return NotFound{};
    if (held->value == proclaim.value) return Proclaimed{};
    const std::uint64_t before = lock_bytes(*held);
    const std::uint64_t after = lock_bytes(held->key, held->owner, held->user, proclaim.value, held->remaining_ms != 0);
    if (after > before && bytes_ - before + after > max_bytes_) return TableFull{bytes_};
    before_change(proclaim.key);
    // The set's element is const: the node is taken out, changed and put
    // back (its key, its place, unchanged), and counted again.
    auto node = locks_.extract(held);
    account(node.value(), false);
    node.value().value = proclaim.value;
    account(node.value(), true);
    locks_.insert(std::move(node));
    return Proclaimed{};
}

Result LockTable::apply_one(std::uint64_t /*index*/, const ExpireMany& many) {
    // Invalid (validate()): a fixed outcome on every member, nothing removed.
    if (!validate(many).empty()) return ExpiredMany{0};
    std::uint32_t existed = 0;
    for (const Expire& e : many.locks) existed += remove_if_held(e.key, e.token) ? 1 : 0;
    return ExpiredMany{existed};
}

Result LockTable::apply_one(std::uint64_t index, const GrantMany& many) {
    if (!validate(many).empty()) return GrantRejected{kInvalidGrantHolder};
    for (const std::string& key : many.keys) {
        if (find(key) != nullptr) return regrant_many(many);
    }
    const Token token = grant_token(index, token_floor_);
    if (token == 0) return GrantRejected{kInvalidGrantHolder};
    std::uint64_t added = 0;
    for (const std::string& key : many.keys) added += lock_bytes(key, many.owner, many.user);
    if (bytes_ + added > max_bytes_) return TableFull{bytes_};
    if (token <= last_token_) {
        throw std::logic_error("lock table: token " + std::to_string(token) +
                               " does not exceed the last token " + std::to_string(last_token_));
    }
    for (const std::string& key : many.keys) {
        before_change(key);
        account(*locks_.emplace(Lock{key, token, many.lease_ms, many.owner, many.user}).first, true);
    }
    sets_.emplace(token, static_cast<std::uint32_t>(many.keys.size()));
    last_token_ = token;
    return Granted{token, true, many.lease_ms};
}

Result LockTable::regrant_many(const GrantMany& many) {
    const Lock* first = find(many.keys.front());
    const bool same_set = first != nullptr && regrants(*first, many.owner, many.user) &&
                          set_size(first->token) == many.keys.size() &&
                          std::all_of(many.keys.begin(), many.keys.end(), [&](const std::string& key) {
                              const Lock* held = find(key);
                              return held != nullptr && held->token == first->token;
                          });
    if (!same_set) {
        for (const std::string& key : many.keys) {
            if (const Lock* held = find(key)) return GrantRejected{held->token, key};
        }
    }
    // The set's locks agree on lease_ms (check_invariants()). Each restarts
    // at full length, as a Grant's re-grant: its checkpoint goes.
    const std::uint64_t lease_ms = std::max<std::uint64_t>(first->lease_ms, many.lease_ms);
    const Token token = first->token;
    for (const std::string& key : many.keys) restart(key, lease_ms);
    return Granted{token, false, lease_ms};
}

void LockTable::restart(std::string_view key, std::uint64_t lease_ms) {
    const auto held = locks_.find(key);
    if (held->lease_ms == lease_ms && held->remaining_ms == 0) return;
    before_change(key);
    account(*held, false);
    // The set's element is const: the node is taken out, changed and put
    // back (the key, its place, is unchanged).
    auto node = locks_.extract(held);
    // <= kMaxLeaseMs: the held lock's, or a GrantMany's validate() bounds.
    node.value().lease_ms = static_cast<std::uint32_t>(lease_ms);
    node.value().remaining_ms = 0;
    account(*locks_.insert(std::move(node)).position, true);
}

Result LockTable::apply_one(std::uint64_t /*index*/, const ReleaseMany& many) {
    if (!validate(many).empty()) return NotFound{};
    for (const std::string& key : many.keys) {
        const Lock* held = find(key);
        if (held == nullptr || held->token != many.token) return NotFound{};
    }
    // Every key holds the token and the keys are distinct: the set holds at least these.
    if (const std::uint32_t n = set_size(many.token); n != many.keys.size()) {
        return PartOfSet{many.keys.front(), many.token, n};
    }
    for (const std::string& key : many.keys) remove_if_held(key, many.token);
    return Released{};
}

Result LockTable::apply_one(std::uint64_t /*index*/, const Checkpoint& checkpoint) {
    // Invalid (validate()): a fixed outcome on every member, nothing set.
    if (!validate(checkpoint).empty()) return Checkpointed{0};
    std::uint32_t applied = 0;
    for (const LeaseCheckpoint& c : checkpoint.locks) applied += set_remaining(c) ? 1 : 0;
    return Checkpointed{applied};
}

bool LockTable::set_remaining(const LeaseCheckpoint& c) {
    auto held = locks_.find(c.key);
    if (held == locks_.end() || held->token != c.token || c.remaining_ms > held->lease_ms) return false;
    const bool grows = held->remaining_ms == 0 && c.remaining_ms != 0;
    if (grows && bytes_ + 8 > max_bytes_) return false;
    before_change(c.key);
    account(*held, false);
    auto node = locks_.extract(held);
    // <= the held lock's lease_ms (checked above), itself <= kMaxLeaseMs.
    node.value().remaining_ms = static_cast<std::uint32_t>(c.remaining_ms);
    account(*locks_.insert(std::move(node)).position, true);
    return true;
}

Result LockTable::apply_one(std::uint64_t /*index*/, const SetTokenFloor& set) {
    if (set.floor <= kMaxToken) token_floor_ = std::max(token_floor_, set.floor);
    return FloorSet{token_floor_};
}

bool LockTable::remove_if_held(std::string_view key, Token token) {
    auto held = locks_.find(key);
    if (held == locks_.end() || held->token != token) return false;
    before_change(key);
    account(*held, false);
    locks_.erase(held);
    if (auto set = sets_.find(token); set != sets_.end() && --set->second < 2) sets_.erase(set);
    return true;
}

std::uint32_t LockTable::set_size(Token token) const {
    auto set = sets_.find(token);
    return set == sets_.end() ? 0 : set->second;
}

std::vector<std::string> LockTable::set_keys(Token token) const {
    std::vector<std::string> keys;
    if (set_size(token) == 0) return keys;
    for (const Lock& lock : locks_) {
        if (lock.token == token) keys.push_back(lock.key);
    }
    return keys;
}

void LockTable::count_sets() {
    std::map<Token, std::uint32_t> counts;
    for (const Lock& lock : locks_) ++counts[lock.token];
    sets_.clear();
    for (const auto& [token, n] : counts) {
        if (n >= 2) sets_.emplace_hint(sets_.end(), token, n);
    }
}

void LockTable::account(const Lock& lock, bool add) {
    const std::uint64_t bytes = lock_bytes(lock);
    const std::size_t with_user = lock.user.empty() ? 0 : 1;
    bytes_ = add ? bytes_ + bytes : bytes_ - bytes;
    with_user_ = add ? with_user_ + with_user : with_user_ - with_user;
    const std::size_t extended = lock.extended() ? 1 : 0;
    extended_ = add ? extended_ + extended : extended_ - extended;
}

const Lock* LockTable::find(std::string_view key) const {
    auto held = locks_.find(key);
    return held == locks_.end() ? nullptr : &*held;
}

std::vector<Lock> LockTable::list() const {
    std::vector<Lock> out;
    out.reserve(locks_.size());
    for (const Lock& lock : locks_) out.push_back(lock);
    return out;
}

std::vector<Lock> LockTable::list_page(const std::vector<std::string>& prefixes, std::string_view after,
                                       std::size_t limit, bool& more) const {
    if (limit == 0) throw std::invalid_argument("LockTable::list_page: limit 0 (a page holds at least one lock)");
    std::vector<Lock> out;
    more = false;
    for (const std::string& prefix : prefixes) {
        auto it = after < prefix ? locks_.lower_bound(prefix) : locks_.upper_bound(after);
        for (; it != locks_.end() && std::string_view(it->key).starts_with(prefix); ++it) {
            if (out.size() == limit) {
                more = true;
                return out;
            }
            out.push_back(*it);
        }
    }
    return out;
}

std::string LockTable::check_invariants() const {
    if (token_floor_ > kMaxToken || last_token_ > kMaxToken) {
        return "token floor " + std::to_string(token_floor_) + " or last token " +
               std::to_string(last_token_) + " is above the maximum token";
    }
    if (applied_index_ == 0 && (token_floor_ != 0 || last_token_ != 0 || !locks_.empty())) {
        return "nothing applied (applied index 0) but the table is not empty";
    }
    if (last_token_ > token_floor_ && last_token_ - token_floor_ > applied_index_) {
        return "last token " + std::to_string(last_token_) + " exceeds applied index " +
               std::to_string(applied_index_) + " + token floor " + std::to_string(token_floor_);
    }
    // Each token's first lock (in key order) and how many hold it.
    std::map<Token, std::pair<const Lock*, std::uint32_t>> tokens;
    std::uint64_t bytes = 0;
    std::size_t with_user = 0;
    std::size_t extended = 0;
    for (const Lock& lock : locks_) {
        if (auto problem = check_lock(lock); !problem.empty()) return problem;
        auto [it, first] = tokens.try_emplace(lock.token, &lock, 0);
        ++it->second.second;
        const Lock& other = *it->second.first;
        if (!first && (other.lease_ms != lock.lease_ms || other.owner != lock.owner || other.user != lock.user)) {
            return "token " + std::to_string(lock.token) + " is held by keys " + other.key + " and " + lock.key +
                   " that differ in lease_ms, owner or user (not one set)";
        }
        bytes += lock_bytes(lock);
        with_user += lock.user.empty() ? 0 : 1;
        extended += lock.extended() ? 1 : 0;
    }
    std::size_t sets = 0;
    for (const auto& [token, held] : tokens) {
        if (held.second < 2) continue;
        ++sets;
        if (set_size(token) != held.second) {
            return "set of token " + std::to_string(token) + " counted " + std::to_string(set_size(token)) +
                   " keys, held by " + std::to_string(held.second);
        }
    }
    if (sets != sets_.size()) {
        return "sets counted " + std::to_string(sets_.size()) + ", held " + std::to_string(sets);
    }
    if (bytes != bytes_) {
        return "table bytes " + std::to_string(bytes_) + " differ from the locks' " + std::to_string(bytes);
    }
    if (with_user != with_user_) {
        return "locks with a user counted " + std::to_string(with_user_) + ", held " + std::to_string(with_user);
    }
    if (extended != extended_) {
        return "locks with a value or a checkpoint counted " + std::to_string(extended_) + ", held " +
               std::to_string(extended);
    }
    return {};
}

std::string LockTable::check_lock(const Lock& lock) const {
    if (auto problem = validate(Grant{lock.key, lock.lease_ms, lock.owner.str(), lock.user.str()});
        !problem.empty()) {
        return "invalid lock: " + problem;
    }
    if (auto problem = validate_value(lock.value); !problem.empty()) return "invalid lock: " + problem;
    if (lock.remaining_ms > lock.lease_ms) {
        return "lock " + lock.key + " has " + std::to_string(lock.remaining_ms) + " ms left at its checkpoint, " +
               "more than its lease of " + std::to_string(lock.lease_ms) + " ms";
    }
    if (lock.token == 0 || lock.token > last_token_) {
        return "lock token " + std::to_string(lock.token) + " is outside 1..last token " +
               std::to_string(last_token_);
    }
    return {};
}

}  // namespace pgfence::lock
