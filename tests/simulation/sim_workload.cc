// Simulated clients: see sim_workload.h.
#include "sim_workload.h"

#include <algorithm>
#include <iterator>

#include "sim_failure.h"

namespace pgfence::sim {

Workload::Workload(int clients, std::size_t members, std::uint64_t tick_us, std::uint64_t rho_ppm, bool strict_leases,
                   const LockModel& model, SimRandom random)
    : members_(members), stopped_(members, false), tick_ms_(std::max<std::uint64_t>(1, tick_us / 1000)), random_(random),
      clients_(static_cast<std::size_t>(clients)), model_(model), leases_(rho_ppm, strict_leases) {
    keys_ = static_cast<int>(random_.between(1, 6));
    for (std::size_t i = 0; i < clients_.size(); ++i) {
        // Some clients have no owner name: their re-acquires are rejected, not idempotent.
        clients_[i].owner = random_.chance(0.3) ? "" : "worker-" + std::to_string(i);
        // Most clients authenticate (as one of two users); the rest send no user.
        clients_[i].user = random_.chance(0.3) ? "" : "user-" + std::to_string(i % 2);
        clients_[i].leader_guess = random_.index(members_);
    }
}

std::size_t Workload::guess() {
    if (!any_stopped_) return random_.index(members_);
    std::vector<std::size_t> live;
    for (std::size_t i = 0; i < members_; ++i) {
        if (!stopped_[i]) live.push_back(i);
    }
    return live.empty() ? random_.index(members_) : live[random_.index(live.size())];
}

void Workload::member_stopped(std::size_t position) {
    require(position < members_, "workload: member ", position + 1, " stopped, but only ", members_, " started");
    stopped_[position] = true;
    any_stopped_ = true;
}

std::string Workload::random_key() { return "report:" + std::to_string(random_.between(0, keys_ - 1)); }

std::string Workload::election_value() {
    const std::uint64_t pick = election_random_.between(0, 3);
    return pick == 0 ? std::string() : "leader-" + std::to_string(pick);
}

std::vector<std::string> Workload::random_set() {
    std::vector<std::string> keys;
    const std::size_t want = std::min<std::size_t>(static_cast<std::size_t>(keys_), random_.between(2, 3));
    while (keys.size() < want) {
        std::string key = random_key();
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(std::move(key));
    }
    return keys;
}

lock::Token Workload::stale_or_known_token(const std::string& key) {
    const auto& seen = tokens_seen_[key];
    if (seen.empty() || random_.chance(0.1)) return random_.between(1, 200);
    return random_.chance(0.5) ? seen.back() : seen[random_.index(seen.size())];
}

member::Request Workload::next_request(Client& c) {
    if (c.retry && random_.chance(0.5)) {
        member::Request again = *c.retry;
        c.retry.reset();
        return again;
    }
    c.retry.reset();
    std::uint64_t roll = random_.between(0, 99);
    // Keeping alive: a holder's roll lands mostly on the keepalives (75..99).
    if (keepalive_heavy_ && !c.held.empty() && roll < 80) roll = 75 + roll % 25;
    if (roll < 45) {
        const std::uint64_t wait_ms = random_.chance(0.3) ? tick_ms_ * random_.between(1, 40) : 0;
        const std::uint64_t lease_ticks = keepalive_heavy_ ? random_.between(20, 60) : random_.between(2, 60);
        member::Acquire a{random_key(), tick_ms_ * lease_ticks, wait_ms, c.owner, c.user};
        if (elections_) a.value = election_value();
        if (keys_ >= 2 && random_.chance(0.25)) {
            a.key.clear();
            a.keys = random_set();
        }
        return a;
    }
    std::string key;
    lock::Token token = 0;
    if (!c.held.empty() && random_.chance(0.8)) {
        auto it = c.held.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(random_.index(c.held.size())));
        key = it->first;
        token = it->second;
    } else {
        key = random_key();
        token = stale_or_known_token(key);
    }
    // A key of a held set: mostly the whole set, sometimes the key alone (part_of_set).
    std::vector<std::string> keys;
    if (auto set = c.sets.find(token); set != c.sets.end() && random_.chance(0.85)) {
        keys = set->second;
        key.clear();
    }
    if (roll < 75) return member::Release{key, token, keys};
    if (keys.empty() && elections_ && election_random_.chance(0.3)) {
        return member::Proclaim{key, token, election_value()};
    }
    return member::KeepAlive{key, token, keys};
}

// What the request proposes when the leader takes it (the history's command).
namespace {
lock::Command command_of(const member::Request& r) {
    if (const auto* a = std::get_if<member::Acquire>(&r)) {
        if (!a->keys.empty()) return lock::GrantMany{a->keys, a->lease_ms, a->owner, a->user};
        return lock::Grant{a->key, a->lease_ms, a->owner, a->user, a->value};
    }
    if (const auto* p = std::get_if<member::Proclaim>(&r)) return lock::Proclaim{p->key, p->token, p->value};
    const auto& rel = std::get<member::Release>(r);
    if (!rel.keys.empty()) return lock::ReleaseMany{rel.keys, rel.token};
    return lock::Release{rel.key, rel.token};
}

// The keys a request names: its one key or its set's.
template <typename R>
std::vector<std::string> keys_of(const R& r) {
    return r.keys.empty() ? std::vector<std::string>{r.key} : r.keys;
}

// A grant as the token checker tells grants apart: its key, or its set's
// keys sorted (a set is granted the same token whatever the order asked).
std::string grant_name(std::vector<std::string> keys) {
    std::sort(keys.begin(), keys.end());
    std::string name;
    for (const std::string& k : keys) name += (name.empty() ? "" : ",") + k;
    return name;
}
}  // namespace

Workload::Send Workload::begin(int client, std::uint64_t now_us) {
    Client& c = clients_[static_cast<std::size_t>(client)];
    require(!c.waiting, "client ", client, " began an operation while waiting for one");
    c.waiting = true;
    c.attempt = 0;
    c.op = ClientOp{};
    c.op.id = next_op_id_++;
    c.op.client = client;
    c.op.invoked_us = now_us;
    if (stopped_[c.leader_guess]) c.leader_guess = guess();  // a removed member answers nobody
    if (random_.chance(0.15)) {
        c.op.kind = ClientOp::Kind::kRead;
        c.op.read_key = random_key();
        member::ListLocks read;
        read.key = c.op.read_key;
        c.request = std::move(read);
    } else {
        c.request = next_request(c);
        if (!std::holds_alternative<member::KeepAlive>(c.request)) c.op.command = command_of(c.request);
        // A release ends the token's held interval when it is sent: by its
        // holder, which stops using the lock then, or by any client that
        // knows the token (the API lets it; the holder's lease is then over).
        // (A release of one key of a set is refused: the set's keys stay held.)
        if (const auto* r = std::get_if<member::Release>(&c.request)) {
            const bool part = r->keys.empty() && c.sets.count(r->token) > 0;
            for (const std::string& key : keys_of(*r)) {
                if (!part) leases_.released(key, r->token, now_us);
            }
        }
        // A holder re-acquiring (same owner) counts on the lease it asks for
        // from now (the lock keeps the longer one).
        if (const auto* a = std::get_if<member::Acquire>(&c.request); a != nullptr && !c.owner.empty()) {
            for (const std::string& key : keys_of(*a)) {
                if (auto it = c.held.find(key); it != c.held.end()) {
                    leases_.reacquiring(client, key, it->second, a->lease_ms, now_us);
                }
            }
        }
    }
    ++invoked_;
    const auto* twin = std::get_if<member::Acquire>(&c.request);
    if (twin == nullptr || c.owner.empty() || twin_share_ == 0 || !twin_random_.chance(twin_share_)) {
        return resend(c, c.leader_guess, now_us);
    }
    const int twin_attempt = ++c.attempt;  // abandoned: its answer is ignored, as any earlier attempt's
    Send send = resend(c, c.leader_guess, now_us);
    send.twin_attempt = twin_attempt;
    send.twin_gone_first = twin_random_.chance(0.3);
    return send;
}

Workload::Send Workload::resend(Client& c, std::size_t member, std::uint64_t now_us) {
    ++c.attempt;
    c.sent_us = now_us;
    return Send{member, ClientRequest{c.op.client, c.op.id, c.attempt, c.request}};
}

Workload::Reaction Workload::on_reply(const ClientReply& reply, std::uint64_t now_us) {
    Client& c = clients_[static_cast<std::size_t>(reply.client)];
    if (!c.waiting || reply.op_id != c.op.id || reply.attempt != c.attempt) return {};
    raft::NodeId hint = raft::kNoNode;
    if (reply.kind == ClientReply::Kind::kAnswer) {
        if (const auto* u = std::get_if<member::Unavailable>(&reply.answer.response)) {
            hint = u->leader;
        } else {
            Reaction done{Next::kDone, {}, record_answer(c, reply.answer, now_us)};
            c.waiting = false;
            return done;
        }
    }
    if (c.attempt >= kMaxAttempts) {
        on_timeout(reply.client, reply.op_id);
        return Reaction{Next::kDone, {}, std::nullopt};
    }
    c.leader_guess = hint != raft::kNoNode ? static_cast<std::size_t>(hint - 1) : guess();
    return Reaction{Next::kResend, resend(c, c.leader_guess, now_us), std::nullopt};
}

namespace {

// What the client was told must be what the log decided (the witness); and
// every answer the log decides must carry its witness.
void check_told(const member::Request& request, const member::Answer& a) {
    const bool keepalive = std::holds_alternative<member::KeepAlive>(request);
    const bool list = std::holds_alternative<member::ListLocks>(request);
    const auto& r = a.response;
    if (const auto* g = std::get_if<member::Granted>(&r)) {
        const auto* ok = std::get_if<lock::Granted>(&a.result);
        require(a.index != 0 && ok != nullptr && ok->token == g->token, "answer Granted{token ", g->token,
                "} but its witness (index ", a.index, ") says ", lock::describe(a.result));
    } else if (std::holds_alternative<member::Released>(r)) {
        require(a.index != 0 && std::holds_alternative<lock::Released>(a.result), "answer Released but its witness (index ",
                a.index, ") says ", lock::describe(a.result));
    } else if (std::holds_alternative<member::Proclaimed>(r)) {
        require(a.index != 0 && std::holds_alternative<lock::Proclaimed>(a.result),
                "answer Proclaimed but its witness (index ", a.index, ") says ", lock::describe(a.result));
    } else if (std::holds_alternative<member::NotHeld>(r) && !keepalive) {
        require(a.index != 0, "a NotHeld answer to a ", list ? "list" : "release", " carries no witness");
        require(list || !std::holds_alternative<lock::Released>(a.result),
                "answer NotHeld but its witness (index ", a.index, ") released the lock");
    } else if (std::holds_alternative<member::Locks>(r)) {
        require(a.index != 0, "a list answer carries no witness");
    } else if (std::holds_alternative<member::PartOfSet>(r)) {
        require(keepalive || (a.index != 0 && std::holds_alternative<lock::PartOfSet>(a.result)),
                "answer PartOfSet but its witness (index ", a.index, ") says ", lock::describe(a.result));
    } else if (std::holds_alternative<member::Held>(r) && a.index != 0) {
        // Refused by the table, or an idempotent re-grant of a lease already
        // being expired (the table says Granted; the client is told Held).
        require(std::holds_alternative<lock::GrantRejected>(a.result) || std::holds_alternative<lock::Granted>(a.result),
                "answer Held but its witness (index ", a.index, ") says ", lock::describe(a.result));
    }
}

}  // namespace

std::optional<Workload::Write> Workload::record_answer(Client& c, const member::Answer& answer, std::uint64_t now_us) {
    check_told(c.request, answer);
    std::optional<Write> write;
    if (const auto* g = std::get_if<member::Granted>(&answer.response)) {
        const std::vector<std::string> keys = keys_of(*g);
        const bool fresh = answer.index <= 1 || model_.token_at(keys.front(), answer.index - 1) != g->token;
        tokens_.granted(grant_name(keys), g->token, g->owner, fresh, c.op.invoked_us, now_us);
        for (const std::string& key : keys) {
            auto& seen = tokens_seen_[key];
            if (seen.size() >= kMaxTokensPerKey) seen.erase(seen.begin());
            seen.push_back(g->token);
            c.held[key] = g->token;
            leases_.granted(c.op.client, key, g->token, g->lease_ms, c.sent_us, now_us);
            resource_.granted(key, g->token);
        }
        if (!g->keys.empty()) c.sets[g->token] = g->keys;
        // Within its lease, or (a third of the time) paused past it; to one key of a set.
        const std::uint64_t lease_us = g->lease_ms * 1000;
        write = Write{keys[random_.index(keys.size())], g->token,
                      random_.chance(0.33) ? random_.between(lease_us, 3 * lease_us)
                                           : random_.between(0, lease_us / 2)};
    } else if (const auto* k = std::get_if<member::KeptAlive>(&answer.response)) {
        for (const std::string& key : keys_of(*k)) leases_.kept_alive(c.op.client, key, k->token, k->ttl_ms, c.sent_us);
    } else if (std::holds_alternative<member::Released>(answer.response)) {
        const auto& r = std::get<member::Release>(c.request);
        for (const std::string& key : keys_of(r)) c.held.erase(key);
        c.sets.erase(r.token);
    } else if (std::holds_alternative<member::Proclaimed>(answer.response)) {
        ++proclaimed_;
    } else if (std::holds_alternative<member::NotHeld>(answer.response) &&
               !std::holds_alternative<member::ListLocks>(c.request)) {
        // A release, keepalive or proclaim: the keys it named and its token.
        std::vector<std::string> keys;
        lock::Token token = 0;
        std::visit(
            [&](const auto& r) {
                if constexpr (requires { r.keys; r.token; }) {
                    keys = keys_of(r);
                    token = r.token;
                } else if constexpr (requires { r.token; }) {
                    keys = {r.key};
                    token = r.token;
                }
            },
            c.request);
        // Not held with that token: the client lost the token it asked
        // about; one it holds under another token it still holds (its
        // re-acquire of the key must still shorten that lease, below).
        for (const std::string& key : keys) {
            if (auto it = c.held.find(key); it != c.held.end() && it->second == token) c.held.erase(it);
        }
        // A set is held whole or not at all, as far as the client knows.
        if (auto set = c.sets.find(token); set != c.sets.end()) {
            for (const std::string& key : set->second) {
                if (auto it = c.held.find(key); it != c.held.end() && it->second == token) c.held.erase(it);
            }
            c.sets.erase(set);
        }
    }
    const bool held_but_granted = std::holds_alternative<member::Held>(answer.response) &&
                                  std::holds_alternative<lock::Granted>(answer.result);
    if (answer.index == 0 || std::holds_alternative<member::KeepAlive>(c.request) || held_but_granted) {
        ++unlogged_;  // not decided by the log (a keepalive, a wait that timed out), or told otherwise
        return write;
    }
    ClientOp op = c.op;
    op.acked_us = now_us;
    op.index = answer.index;
    op.term = answer.term;
    op.result = answer.result;
    if (op.kind == ClientOp::Kind::kRead) {
        const auto* locks = std::get_if<member::Locks>(&answer.response);
        op.read_token = locks != nullptr && !locks->locks.empty() ? locks->locks.front().lock.token : 0;
    }
    acked_.push_back(std::move(op));
    return write;
}

bool Workload::on_timeout(int client, std::uint64_t op_id) {
    Client& c = clients_[static_cast<std::size_t>(client)];
    if (!c.waiting || c.op.id != op_id) return false;
    c.waiting = false;
    ++unknown_;
    if (c.op.kind == ClientOp::Kind::kCommand) c.retry = c.request;
    return true;
}

}  // namespace pgfence::sim
