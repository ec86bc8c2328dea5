// Simulated clients: see sim_workload.h.
#include "sim_workload.h"

#include <iterator>

#include "sim_failure.h"

namespace pgfence::sim {

Workload::Workload(int clients, std::size_t members, SimRandom random)
    : members_(members), random_(random), clients_(static_cast<std::size_t>(clients)) {
    keys_ = static_cast<int>(random_.between(1, 6));
    for (std::size_t i = 0; i < clients_.size(); ++i) {
        // Some clients have no owner name: their re-acquires are rejected, not idempotent.
        clients_[i].owner = random_.chance(0.3) ? "" : "worker-" + std::to_string(i);
        clients_[i].leader_guess = random_.index(members_);
    }
}

std::string Workload::random_key() { return "report:" + std::to_string(random_.between(0, keys_ - 1)); }

lock::Token Workload::stale_or_known_token(const std::string& key) {
    const auto& seen = tokens_seen_[key];
    if (seen.empty() || random_.chance(0.1)) return random_.between(1, 200);
    return random_.chance(0.5) ? seen.back() : seen[random_.index(seen.size())];
}

lock::Command Workload::next_command(Client& c) {
    if (c.retry && random_.chance(0.5)) {
        lock::Command again = *c.retry;
        c.retry.reset();
        return again;
    }
    c.retry.reset();
    const std::uint64_t roll = random_.between(0, 99);
    if (roll < 45) return lock::Grant{random_key(), random_.between(1'000, 30'000), c.owner};
    if (roll < 70) {
        if (!c.held.empty() && random_.chance(0.8)) {
            auto it = c.held.begin();
            std::advance(it, static_cast<std::ptrdiff_t>(random_.index(c.held.size())));
            return lock::Release{it->first, it->second};
        }
        const std::string key = random_key();
        return lock::Release{key, stale_or_known_token(key)};
    }
    if (roll < 99) {
        const std::string key = random_key();
        return lock::Expire{key, stale_or_known_token(key)};
    }
    return lock::SetTokenFloor{random_.between(0, 5'000)};
}

Workload::Send Workload::begin(int client, std::uint64_t now_us) {
    Client& c = clients_[static_cast<std::size_t>(client)];
    require(!c.waiting, "client ", client, " began an operation while waiting for one");
    c.waiting = true;
    c.attempt = 0;
    c.op = ClientOp{};
    c.op.id = next_op_id_++;
    c.op.client = client;
    c.op.invoked_us = now_us;
    if (random_.chance(0.15)) {
        c.op.kind = ClientOp::Kind::kRead;
        c.op.read_key = random_key();
    } else {
        c.op.command = next_command(c);
    }
    ++invoked_;
    return resend(c, c.leader_guess);
}

Workload::Send Workload::resend(Client& c, std::size_t member) {
    ++c.attempt;
    ClientRequest r{c.op.client, c.op.id, c.attempt, c.op.kind == ClientOp::Kind::kRead, c.op.command,
                    c.op.read_key};
    return Send{member, r};
}

Workload::Reaction Workload::on_reply(const ClientReply& reply, std::uint64_t now_us) {
    Client& c = clients_[static_cast<std::size_t>(reply.client)];
    if (!c.waiting || reply.op_id != c.op.id || reply.attempt != c.attempt) return {};
    switch (reply.kind) {
        case ClientReply::Kind::kResult:
        case ClientReply::Kind::kRead:
            record_ack(c, reply, now_us);
            c.waiting = false;
            return Reaction{Next::kDone, {}};
        case ClientReply::Kind::kRedirect:
        case ClientReply::Kind::kUnknown: break;
    }
    if (c.attempt >= kMaxAttempts) {
        on_timeout(reply.client, reply.op_id);
        return Reaction{Next::kDone, {}};
    }
    const bool hint = reply.kind == ClientReply::Kind::kRedirect && reply.leader_hint != raft::kNoNode;
    c.leader_guess = hint ? static_cast<std::size_t>(reply.leader_hint - 1) : random_.index(members_);
    return Reaction{Next::kResend, resend(c, c.leader_guess)};
}

void Workload::record_ack(Client& c, const ClientReply& reply, std::uint64_t now_us) {
    ClientOp op = c.op;
    op.acked_us = now_us;
    op.index = reply.index;
    op.term = reply.term;
    op.result = reply.result;
    op.read_token = reply.read_token;
    if (op.kind == ClientOp::Kind::kCommand) {
        if (const auto* granted = std::get_if<lock::Granted>(&op.result)) {
            const std::string& key = std::get<lock::Grant>(op.command).key;
            auto& seen = tokens_seen_[key];
            if (seen.size() >= kMaxTokensPerKey) seen.erase(seen.begin());
            seen.push_back(granted->token);
            c.held[key] = granted->token;
        } else if (std::holds_alternative<lock::Released>(op.result)) {
            c.held.erase(std::get<lock::Release>(op.command).key);
        }
    }
    acked_.push_back(std::move(op));
}

bool Workload::on_timeout(int client, std::uint64_t op_id) {
    Client& c = clients_[static_cast<std::size_t>(client)];
    if (!c.waiting || c.op.id != op_id) return false;
    c.waiting = false;
    ++unknown_;
    if (c.op.kind == ClientOp::Kind::kCommand) c.retry = c.op.command;
    return true;
}

}  // namespace pgfence::sim
