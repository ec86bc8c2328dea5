#include "member/token_history.h"

#include <algorithm>
#include <stdexcept>

namespace pgfence::member {

namespace {
// A heap block of n bytes as an allocator takes it: glibc's malloc adds an
// 8-byte header, rounds to 16 and takes 32 at least (jemalloc, which the
// coordinator is linked with, takes no more).
constexpr std::uint64_t alloc(std::uint64_t n) {
    return n == 0 ? 0 : std::max<std::uint64_t>(32, (n + 8 + 15) / 16 * 16);
}
// A string's heap block, 0 while it fits its inline buffer.
std::uint64_t heap_bytes(const std::string& s) {
    return s.capacity() > std::string().capacity() ? alloc(s.capacity() + 1) : 0;
}
// Nodes: std::map's carries 3 pointers and a colour; std::unordered_map's a
// next pointer (and the hash of a string key), plus a bucket pointer each at
// a load factor of 1.
constexpr std::uint64_t kMapNodeHeader = 32;
constexpr std::uint64_t kHashNodeHeader = 8;
constexpr std::uint64_t kBucket = 8;
// A token's slot in a key's list: a vector grown by doubling is up to half empty.
constexpr std::uint64_t kKeySlotBytes = 2 * sizeof(lock::Token);
}  // namespace

const char* to_string(TokenEnd end) {
    switch (end) {
        case TokenEnd::kHeld: return "held";
        case TokenEnd::kReleased: return "released";
        case TokenEnd::kExpired: return "expired";
        case TokenEnd::kPhantom: return "phantom";
        case TokenEnd::kRestore: return "restore";
        case TokenEnd::kSuperseded: return "superseded";
    }
    return "unknown";
}

bool TokenRecord::same_derived(const TokenRecord& o) const {
    // A phantom here is an expiry elsewhere: both ended by the same Expire.
    auto log_end = [](TokenEnd e) { return e == TokenEnd::kPhantom ? TokenEnd::kExpired : e; };
    return token == o.token && keys == o.keys && keys_held == o.keys_held && owner == o.owner && lease_ms == o.lease_ms &&
           granted_index == o.granted_index && granted_wall_ms == o.granted_wall_ms && log_end(end) == log_end(o.end) &&
           ended_index == o.ended_index && ended_wall_ms == o.ended_wall_ms && next_token == o.next_token;
    // next_unknown is not compared: only a member that restored has it.
}

std::uint64_t token_bytes(const TokenRecord& r) {
    std::uint64_t bytes = alloc(kMapNodeHeader + sizeof(std::pair<const lock::Token, TokenRecord>)) +
                          heap_bytes(r.owner) + alloc(r.keys.capacity() * sizeof(std::string));
    for (const std::string& k : r.keys) bytes += heap_bytes(k) + kKeySlotBytes;
    return bytes;
}

std::uint64_t key_index_bytes(const std::string& key) {
    // The node holds its own copy of the key (of the key's size: no spare capacity).
    // Its token list's first block too (a key is indexed with a token).
    const std::uint64_t copy = key.size() > std::string().capacity() ? alloc(key.size() + 1) : 0;
    return alloc(kHashNodeHeader + sizeof(std::string) + sizeof(std::vector<lock::Token>) + sizeof(std::size_t) +
                 sizeof(std::size_t)) +
           kBucket + copy + alloc(sizeof(lock::Token));
}

std::uint64_t keepalive_bytes(const TokenKeepalives& k) {
    return alloc(kHashNodeHeader + sizeof(std::pair<const lock::Token, TokenKeepalives>)) + kBucket +
           heap_bytes(k.last_refused_reason);
}

TokenHistory::TokenHistory(std::size_t max_tokens, std::uint64_t max_bytes)
    : max_tokens_(max_tokens), max_bytes_(max_bytes) {
    if (max_tokens_ == 0) throw std::invalid_argument("token history: max_tokens must be at least 1");
    if (max_bytes_ == 0) throw std::invalid_argument("token history: max_bytes must be at least 1");
}

TokenRecord* TokenHistory::find(lock::Token token) {
    auto it = records_.find(token);
    return it == records_.end() ? nullptr : &it->second;
}

void TokenHistory::granted(raft::Index index, std::optional<std::uint64_t> wall_ms, lock::Token token,
                           std::vector<std::string> keys, std::string owner, std::uint64_t lease_ms) {
    if (index <= last_index_) {
        throw std::logic_error("token history: grant at index " + std::to_string(index) + " after index " +
                               std::to_string(last_index_));
    }
    if (keys.empty()) throw std::logic_error("token history: grant of token " + std::to_string(token) + " without keys");
    last_index_ = index;
    for (const std::string& key : keys) {
        auto it = by_key_.find(key);
        if (it == by_key_.end() || it->second.begin == it->second.tokens.size()) continue;
        TokenRecord* prev = find(it->second.tokens.back());
        if (prev == nullptr) continue;
        if (prev->next_token == 0 && !prev->next_unknown) prev->next_token = token;
        // One key, still held here: its end was not applied here. (A set
        // may hold its other keys still: a key of it expired alone.)
        if (prev->end == TokenEnd::kHeld && prev->keys.size() == 1) {
            prev->end = TokenEnd::kSuperseded;
            prev->keys_held = 0;
        }
    }
    TokenRecord r;
    r.token = token;
    r.keys = std::move(keys);
    r.owner = std::move(owner);
    r.lease_ms = lease_ms;
    r.keys_held = static_cast<std::uint32_t>(r.keys.size());
    r.granted_index = index;
    r.granted_wall_ms = wall_ms;
    insert(std::move(r));
}

void TokenHistory::insert(TokenRecord r) {
    const lock::Token token = r.token;
    bytes_ += token_bytes(r);
    for (const std::string& key : r.keys) index_key(key, token);
    records_.insert_or_assign(token, std::move(r));
    trim();
}

void TokenHistory::trim() {
    while (!records_.empty() && (records_.size() > max_tokens_ || bytes_ > max_bytes_)) drop_oldest();
}

// Tokens grow with the log: a new one goes last, except a restored lock's
// below a kept one (kept in order all the same).
void TokenHistory::index_key(const std::string& key, lock::Token token) {
    auto [it, added] = by_key_.try_emplace(key);
    if (added) bytes_ += key_index_bytes(key);
    KeyTokens& kt = it->second;
    if (kt.tokens.size() == kt.begin || kt.tokens.back() < token) {
        kt.tokens.push_back(token);
        return;
    }
    const auto first = kt.tokens.begin() + static_cast<std::ptrdiff_t>(kt.begin);
    kt.tokens.insert(std::lower_bound(first, kt.tokens.end(), token), token);
}

void TokenHistory::drop_oldest() {
    auto it = records_.begin();
    const TokenRecord& r = it->second;
    for (const std::string& key : r.keys) {
        auto k = by_key_.find(key);
        if (k == by_key_.end()) continue;
        KeyTokens& kt = k->second;
        // The lowest token overall is the lowest of each of its keys.
        if (kt.begin < kt.tokens.size() && kt.tokens[kt.begin] == r.token) ++kt.begin;
        if (kt.begin == kt.tokens.size()) {
            bytes_ -= key_index_bytes(k->first);
            by_key_.erase(k);
        } else if (kt.begin * 2 > kt.tokens.size()) {
            kt.tokens.erase(kt.tokens.begin(), kt.tokens.begin() + static_cast<std::ptrdiff_t>(kt.begin));
            kt.begin = 0;
        }
    }
    bytes_ -= token_bytes(r);
    oldest_token_ = std::max(oldest_token_, r.token + 1);
    if (auto k = keepalives_.find(r.token); k != keepalives_.end()) {
        bytes_ -= keepalive_bytes(k->second);
        keepalives_.erase(k);
    }
    records_.erase(it);
    ++dropped_;
}

void TokenHistory::regranted(lock::Token token, std::uint64_t lease_ms) {
    TokenRecord* r = find(token);
    if (r == nullptr) return;
    r->lease_ms = lease_ms;
    r->phantom = false;  // a retry's re-grant was answered: no longer a phantom
}

void TokenHistory::ended(lock::Token token, TokenEnd how, raft::Index index, std::optional<std::uint64_t> wall_ms,
                         std::uint32_t keys) {
    if (how != TokenEnd::kReleased && how != TokenEnd::kExpired) {
        throw std::logic_error(std::string("token history: an entry cannot end a token as ") + to_string(how));
    }
    TokenRecord* r = find(token);
    if (r == nullptr || r->end != TokenEnd::kHeld) return;
    r->keys_held -= std::min(keys, r->keys_held);
    if (r->keys_held > 0) return;
    r->end = how == TokenEnd::kExpired && r->phantom ? TokenEnd::kPhantom : how;
    r->ended_index = index;
    r->ended_wall_ms = wall_ms;
}

void TokenHistory::restored(raft::Index index, const lock::LockTable& table) {
    // Each held lock's token, with its keys (a set's in key order).
    std::map<lock::Token, TokenRecord> held;
    table.for_each([&](const lock::Lock& l) {
        TokenRecord& r = held[l.token];
        if (r.keys.empty()) {
            r.token = l.token;
            r.owner = l.owner;
            r.lease_ms = l.lease_ms;
        }
        r.keys.push_back(l.key);
        ++r.keys_held;
    });
    for (auto& [token, r] : records_) {
        auto in_table = held.find(token);
        // Still held: the lease in force (a re-grant among the entries skipped may have raised it).
        if (in_table != held.end()) {
            r.lease_ms = in_table->second.lease_ms;
            r.keys_held = static_cast<std::uint32_t>(in_table->second.keys.size());
        }
        if (r.end == TokenEnd::kHeld && in_table == held.end()) {
            r.end = TokenEnd::kRestore;
            r.keys_held = 0;
        }
        // A key it no longer holds may have been granted again in the entries skipped.
        if (r.keys_held < r.keys.size() && r.next_token == 0) r.next_unknown = true;
    }
    for (auto& [token, r] : held) {
        if (records_.contains(token)) continue;
        insert(std::move(r));
    }
    last_index_ = std::max(last_index_, index);
    const lock::Token floor = table.token_floor();
    const lock::Token issued_max = floor > lock::kMaxToken - index ? lock::kMaxToken : index + floor;
    oldest_token_ = std::max(oldest_token_, issued_max + 1);
}

void TokenHistory::keepalive_ok(lock::Token token, std::uint64_t wall_ms) {
    TokenRecord* r = find(token);
    if (r == nullptr) return;
    r->phantom = false;  // its holder has it
    TokenKeepalives& k = keepalives_of(token);
    ++k.ok;
    k.last_ok_wall_ms = wall_ms;
    trim();
}

void TokenHistory::keepalive_refused(lock::Token token, std::uint64_t wall_ms, std::string_view reason) {
    if (!records_.contains(token)) return;
    TokenKeepalives& k = keepalives_of(token);
    ++k.refused;
    k.last_refused_wall_ms = wall_ms;
    set_reason(k, reason);
    trim();
}

TokenKeepalives& TokenHistory::keepalives_of(lock::Token token) {
    auto [it, added] = keepalives_.try_emplace(token);
    if (added) bytes_ += keepalive_bytes(it->second);
    return it->second;
}

void TokenHistory::set_reason(TokenKeepalives& k, std::string_view reason) {
    bytes_ -= heap_bytes(k.last_refused_reason);
    k.last_refused_reason = std::string(reason);
    bytes_ += heap_bytes(k.last_refused_reason);
}

void TokenHistory::phantom(lock::Token token) {
    if (TokenRecord* r = find(token); r != nullptr && r->end == TokenEnd::kHeld) r->phantom = true;
}

void TokenHistory::leading_from(raft::Index applied) {
    if (!leaderships_.empty() && leaderships_.back().until == 0) return;
    if (leaderships_.size() >= kMaxLeaderships) leaderships_.erase(leaderships_.begin());
    leaderships_.push_back(Leadership{applied + 1, 0});
}

void TokenHistory::led_until(raft::Index applied) {
    if (leaderships_.empty() || leaderships_.back().until != 0) return;
    // A leadership in which nothing applied is an empty range.
    leaderships_.back().until = std::max(applied, leaderships_.back().from - 1);
}

bool TokenHistory::led_while_held(const TokenRecord& r) const {
    constexpr raft::Index kNever = ~raft::Index{0};
    const raft::Index held_until = r.ended_index != 0 ? r.ended_index : kNever;
    for (const Leadership& l : leaderships_) {
        const raft::Index until = l.until != 0 ? l.until : kNever;
        if (l.from <= until && r.granted_index <= until && l.from <= held_until) return true;
    }
    return false;
}

TokenHistory::Lookup TokenHistory::lookup(lock::Token token) const {
    auto it = records_.find(token);
    if (it != records_.end()) return {&it->second, false};
    return {nullptr, token < oldest_token_};
}

const TokenKeepalives* TokenHistory::keepalives(lock::Token token) const {
    auto it = keepalives_.find(token);
    return it == keepalives_.end() ? nullptr : &it->second;
}

std::vector<const TokenRecord*> TokenHistory::of_key(std::string_view key, std::size_t limit) const {
    std::vector<const TokenRecord*> out;
    auto it = by_key_.find(std::string(key));
    if (it == by_key_.end()) return out;
    const KeyTokens& kt = it->second;
    for (std::size_t i = kt.tokens.size(); i > kt.begin && out.size() < limit; --i) {
        auto r = records_.find(kt.tokens[i - 1]);
        if (r != records_.end()) out.push_back(&r->second);
    }
    return out;
}

}  // namespace pgfence::member
