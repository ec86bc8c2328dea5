// Lease safety, in the simulation's real time: a key is held by one client
// at a time while every clock runs within rho of real time (the rule of
// coordinator/member/lease.h, docs/guarantees.md "Clocks").
//
// A client holds token T of key K from the arrival of the answer that
// granted it until the send time of its last successful acquire or
// keepalive of T plus lease * (1 - rho), as the client library counts it
// (client.h, Lease::deadline()): the latest answered one decides, with its
// own lease. The interval ends earlier when a release of
// T is sent, by the holder or by any client that knows T (the API lets any
// token bearer release; the lease is then over for everyone), and when the
// holder sends an acquire of the key it holds: with its owner that is an
// idempotent re-grant that sets the lock's lease to the new one if it
// applies, answered or not, so the holder counts on no more than that send
// plus the new lease (a client that re-acquires a key it holds must shorten
// its own deadline likewise).
// Clients' clocks run at real time. Every change of a held interval is
// checked against the other tokens' intervals of the same key: two that
// overlap are a SimFailure, or, when the clocks run beyond rho (not strict),
// counted: there leases may overlap and only the fencing token protects the data.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "lock/commands.h"

namespace pgfence::sim {

class LeaseChecker {
public:
    explicit LeaseChecker(std::uint64_t rho_ppm, bool strict = true) : rho_ppm_(rho_ppm), strict_(strict) {}

    // `client` was told Granted (or KeptAlive) for token at now_us, for a
    // request it sent at sent_us with that lease.
    void granted(int client, const std::string& key, lock::Token token, std::uint64_t lease_ms, std::uint64_t sent_us,
                 std::uint64_t now_us);
    // Only the holder's own keepalive extends what it holds: another client
    // that keeps the token alive does not tell the holder anything.
    void kept_alive(int client, const std::string& key, lock::Token token, std::uint64_t lease_ms,
                    std::uint64_t sent_us);
    // The holder sent an acquire of a key it holds (with its owner: an
    // idempotent re-grant, which keeps the longer of the lock's lease and
    // this one if it applies, answered or not): from then on it counts on no
    // more than sent_us + this lease, which asks less of the cluster than it
    // promises.
    void reacquiring(int client, const std::string& key, lock::Token token, std::uint64_t lease_ms,
                     std::uint64_t sent_us);
    // A release of the token was sent at sent_us (by anyone).
    void released(const std::string& key, lock::Token token, std::uint64_t sent_us);
    // A leader proposed Expire{key, token} at now_us. A lease answered to a
    // client is never cut before its deadline: an Expire proposed after the
    // send of the answered request that set the token's interval must come
    // at or after the interval's end (strict only: beyond rho a leader's
    // clock may run out early). An Expire proposed before that send (by a
    // deposed leader, never committed) promised nothing about it.
    void expire_proposed(const std::string& key, lock::Token token, std::uint64_t now_us);
    std::uint64_t expires_checked() const { return expires_checked_; }  // Expire proposals checked against intervals

    std::uint64_t intervals() const { return intervals_; }  // held intervals seen
    std::uint64_t pairs_checked() const { return pairs_checked_; }  // pairs of live intervals of one key checked
    std::uint64_t overlaps() const { return overlapping_.size(); }  // pairs of tokens held at once (not strict)

private:
    struct Held {
        int client = 0;
        std::uint64_t from_us = 0;
        std::uint64_t until_us = 0;  // from_us >= until_us: empty
        std::uint64_t released_us = UINT64_MAX;  // the first release sent: nothing is held past it
        std::uint64_t expire_us = 0;             // the latest Expire proposed for the token (0: none)
        std::uint64_t promised_us = 0;           // the send of the answered request that set until_us
        std::string story;           // what set the interval, for a failure's message
    };
    static constexpr std::size_t kTokensPerKey = 64;  // older intervals ended long ago
    std::uint64_t usable_us(std::uint64_t lease_ms) const;
    Held* find(const std::string& key, lock::Token token);  // nullptr: no interval for it
    void check(const std::string& key, lock::Token token);
    static void tell(Held& h, std::string_view what, std::uint64_t at_us, std::uint64_t lease_ms);

    std::uint64_t rho_ppm_;
    bool strict_;
    std::map<std::string, std::map<lock::Token, Held>> held_;
    std::set<std::pair<lock::Token, lock::Token>> overlapping_;  // (lower, higher): tokens are unique across keys
    // Releases sent for a token whose grant no client had been told of yet
    // (a stale guess may hit a token granted meanwhile): first send, by key.
    std::map<std::string, std::map<lock::Token, std::uint64_t>> early_releases_;
    // Expire proposals for a token no client had been told of yet, by key.
    std::map<std::string, std::map<lock::Token, std::uint64_t>> early_expires_;
    std::uint64_t expires_checked_ = 0;
    std::uint64_t intervals_ = 0;
    std::uint64_t pairs_checked_ = 0;
};

}  // namespace pgfence::sim
