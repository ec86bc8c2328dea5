// Lease safety in real time: see lease_checker.h.
#include "lease_checker.h"

#include <algorithm>

#include "sim_failure.h"

namespace pgfence::sim {

std::uint64_t LeaseChecker::usable_us(std::uint64_t lease_ms) const {
    return lease_ms * 1000 * (1'000'000 - std::min<std::uint64_t>(rho_ppm_, 1'000'000)) / 1'000'000;
}

void LeaseChecker::granted(int client, const std::string& key, lock::Token token, std::uint64_t lease_ms,
                           std::uint64_t sent_us, std::uint64_t now_us) {
    auto& tokens = held_[key];
    std::uint64_t released_us = UINT64_MAX;
    if (auto e = early_releases_.find(key); e != early_releases_.end()) {
        if (auto r = e->second.find(token); r != e->second.end()) released_us = r->second;
    }
    std::uint64_t expire_us = 0;
    if (auto e = early_expires_.find(key); e != early_expires_.end()) {
        if (auto x = e->second.find(token); x != e->second.end()) expire_us = x->second;
    }
    auto [it, fresh] = tokens.try_emplace(
        token, Held{client, now_us, std::min(sent_us + usable_us(lease_ms), released_us), released_us, expire_us, sent_us, {}});
    tell(it->second, fresh ? "granted" : "re-granted", sent_us, lease_ms);
    if (fresh) {
        ++intervals_;
        if (tokens.size() > kTokensPerKey) tokens.erase(tokens.begin());
    } else {
        // An idempotent re-grant: the latest answered acquire decides, with its
        // own lease (the leader restarted the lease with it too).
        it->second.until_us = std::min(sent_us + usable_us(lease_ms), it->second.released_us);
        it->second.promised_us = sent_us;
    }
    check(key, token);
}

LeaseChecker::Held* LeaseChecker::find(const std::string& key, lock::Token token) {
    auto k = held_.find(key);
    if (k == held_.end()) return nullptr;
    auto it = k->second.find(token);
    return it == k->second.end() ? nullptr : &it->second;
}

void LeaseChecker::kept_alive(int client, const std::string& key, lock::Token token, std::uint64_t lease_ms,
                              std::uint64_t sent_us) {
    Held* h = find(key, token);
    if (h == nullptr || h->client != client) return;
    h->until_us = std::min(sent_us + usable_us(lease_ms), h->released_us);  // the latest keepalive decides
    h->promised_us = sent_us;
    tell(*h, "kept alive", sent_us, lease_ms);
    check(key, token);
}

void LeaseChecker::reacquiring(int client, const std::string& key, lock::Token token, std::uint64_t lease_ms,
                               std::uint64_t sent_us) {
    Held* h = find(key, token);
    if (h == nullptr || h->client != client) return;
    h->until_us = std::min(h->until_us, sent_us + usable_us(lease_ms));
    tell(*h, "re-acquiring", sent_us, lease_ms);
}

void LeaseChecker::tell(Held& h, std::string_view what, std::uint64_t at_us, std::uint64_t lease_ms) {
    if (h.story.size() > 300) return;
    h.story.append(h.story.empty() ? "" : ", ").append(what).append(" (sent ").append(std::to_string(at_us));
    h.story.append("us, lease ").append(std::to_string(lease_ms)).append("ms)");
}

void LeaseChecker::released(const std::string& key, lock::Token token, std::uint64_t sent_us) {
    if (Held* h = find(key, token)) {
        h->released_us = std::min(h->released_us, sent_us);
        h->until_us = std::min(h->until_us, sent_us);
        tell(*h, "released", sent_us, 0);
        return;
    }
    auto& early = early_releases_[key];
    early.try_emplace(token, sent_us);
    if (early.size() > 4 * kTokensPerKey) early.erase(early.begin());
}

void LeaseChecker::expire_proposed(const std::string& key, lock::Token token, std::uint64_t now_us) {
    Held* h = find(key, token);
    if (h == nullptr) {
        auto& early = early_expires_[key];
        early[token] = now_us;
        if (early.size() > 4 * kTokensPerKey) early.erase(early.begin());
        return;
    }
    h->expire_us = std::max(h->expire_us, now_us);
    check(key, token);
}

void LeaseChecker::check(const std::string& key, lock::Token token) {
    const auto& tokens = held_[key];
    const Held& mine = tokens.at(token);
    if (mine.from_us >= mine.until_us) return;
    if (mine.expire_us != 0 && mine.expire_us >= mine.promised_us) {
        ++expires_checked_;
        require(!strict_ || mine.expire_us >= mine.until_us, "lease cut early: key ", key, " token ", token,
                " answered to client ", mine.client, " for [", mine.from_us, "us, ", mine.until_us,
                "us), but a leader proposed its Expire at ", mine.expire_us, "us, before its deadline: ", mine.story);
    }
    for (const auto& [other, h] : tokens) {
        if (other == token || h.from_us >= h.until_us) continue;
        ++pairs_checked_;
        const std::uint64_t from = std::max(mine.from_us, h.from_us);
        const std::uint64_t until = std::min(mine.until_us, h.until_us);
        if (from < until && !strict_) {
            overlapping_.insert({std::min(token, other), std::max(token, other)});
            continue;
        }
        require(from >= until, "lease safety: key ", key, " held by client ", mine.client, " with token ", token,
                " over [", mine.from_us, "us, ", mine.until_us, "us) and by client ", h.client, " with token ", other,
                " over [", h.from_us, "us, ", h.until_us, "us): both from ", from, "us to ", until, "us; token ", token,
                ": ", mine.story, "; token ", other, ": ", h.story);
    }
}

}  // namespace pgfence::sim
