// Cluster-wide safety invariants: see safety_checker.h.
#include "safety_checker.h"

#include <functional>
#include <string_view>
#include <type_traits>

#include "sim_failure.h"

namespace pgfence::sim {

std::uint64_t digest(const lock::LockTable& table) {
    return std::hash<std::string_view>{}(table.snapshot());
}

void SafetyChecker::observe_role(raft::NodeId id, raft::Role role, raft::Term term) {
    if (role != raft::Role::kLeader) return;
    auto [it, inserted] = leader_by_term_.emplace(term, id);
    require(inserted || it->second == id, "two leaders in term ", term, ": member ", it->second, " and member ",
            id, " (Election Safety)");
}

void SafetyChecker::observe_written(raft::NodeId id, const std::vector<raft::Entry>& entries,
                                    const SimStorage& image) {
    for (const auto& e : entries) {
        std::optional<raft::Term> prev = e.index > 0 ? image.term_at(e.index - 1) : std::optional<raft::Term>{};
        auto [it, inserted] = written_.try_emplace({e.index, e.term}, Written{e.type, e.data, prev});
        if (inserted) continue;
        Written& w = it->second;
        require(w.type == e.type && w.data == e.data, "log matching broken: member ", id, " wrote entry ",
                e.index, " term ", e.term, " with a different command than another log holds there");
        if (w.prev_term && prev) {
            require(*w.prev_term == *prev, "log matching broken: member ", id, " wrote entry ", e.index, " term ",
                    e.term, " after an entry of term ", *prev, ", another log has term ", *w.prev_term,
                    " before it");
        } else if (prev) {
            w.prev_term = prev;
        }
    }
}

void SafetyChecker::before_apply(raft::NodeId id, const raft::Entry& entry, const lock::LockTable& table,
                                 const SimStorage& durable) {
    require(entry.index == table.applied_index() + 1, "member ", id, " is given committed entry ", entry.index,
            " but has applied up to ", table.applied_index(), " (Ready::committed must be contiguous)");
    const auto durable_term = durable.term_at(entry.index);
    require(durable_term && *durable_term == entry.term, "member ", id, " is told to apply entry ", entry.index,
            " term ", entry.term, " that is not durable on it (Ready::committed promises durable entries)");
}

void SafetyChecker::after_apply(raft::NodeId id, const raft::Entry& entry, const lock::Result& result,
                                const std::optional<lock::Lock>& prior, lock::Token prior_last_token,
                                const lock::LockTable& table) {
    if (entry.index <= committed_.size()) {
        const raft::Entry& first = committed_[entry.index - 1];
        require(first == entry, "committed entry changed: member ", id, " applied index ", entry.index, " term ",
                entry.term, " but index ", entry.index, " was applied before with term ", first.term,
                first.data == entry.data ? " (same data)" : " (different data)", " (State Machine Safety)");
        require(results_[entry.index - 1] == result, "member ", id, " got ", lock::describe(result),
                " applying index ", entry.index, ", the sequential model gives ",
                lock::describe(results_[entry.index - 1]));
        require(state_digest_[entry.index - 1] == digest(table), "applied state diverged: member ", id,
                " at index ", entry.index, " has a lock table different from the first member to apply it");
    } else {
        require(entry.index == committed_.size() + 1, "member ", id, " applied index ", entry.index,
                " but nobody has applied index ", committed_.size() + 1, " yet");
        if (entry.type == raft::EntryType::kNormal) {
            auto decoded = lock::decode_command(entry.data);
            const auto* cmd = std::get_if<lock::Command>(&decoded);
            require(cmd != nullptr, "committed entry ", entry.index, " does not decode as a lock command");
            check_effect(id, *cmd, result, prior, prior_last_token, table);
        }
        committed_.push_back(entry);
        check_against_model(id, entry, result, table);
        state_digest_.push_back(digest(table));
    }
}

void SafetyChecker::check_against_model(raft::NodeId id, const raft::Entry& entry, const lock::Result& result,
                                        const lock::LockTable& table) {
    lock::Result expected = lock::Noop{};
    if (entry.type != raft::EntryType::kNormal) {  // a leader's no-op, a configuration: nothing for the table
        expected = model_.apply_noop(entry.index);
    } else {
        auto decoded = lock::decode_command(entry.data);
        const auto* cmd = std::get_if<lock::Command>(&decoded);
        expected = cmd ? model_.apply(entry.index, *cmd) : model_.apply_noop(entry.index);
    }
    results_.push_back(expected);
    require(expected == result, "member ", id, " got ", lock::describe(result), " applying index ", entry.index,
            ", the sequential model gives ", lock::describe(expected));
    const std::vector<lock::Lock> locks = table.list();
    require(locks.size() == model_.holders().size(), "member ", id, " holds ", locks.size(),
            " locks after index ", entry.index, ", the model ", model_.holders().size());
    for (std::size_t i = 0; i < locks.size(); ++i) {
        require(i == 0 || locks[i - 1].key < locks[i].key, "member ", id, " lists key ", locks[i].key,
                " twice or out of order (at most one holder per key)");
        auto it = model_.holders().find(locks[i].key);
        require(it != model_.holders().end() && it->second.token == locks[i].token &&
                    it->second.owner == locks[i].owner && it->second.user == locks[i].user &&
                    it->second.remaining_ms == locks[i].remaining_ms,
                "member ", id, " has key ", locks[i].key, " held with token ", locks[i].token,
                " after index ", entry.index, ", the model disagrees");
    }
}

void SafetyChecker::check_effect(raft::NodeId id, const lock::Command& cmd, const lock::Result& result,
                                 const std::optional<lock::Lock>& prior, lock::Token prior_last_token,
                                 const lock::LockTable& table) {
    std::visit(
        [&](const auto& c) {
            using C = std::decay_t<decltype(c)>;
            if constexpr (std::is_same_v<C, lock::Grant>) {
                const auto* granted = std::get_if<lock::Granted>(&result);
                if (granted == nullptr) return;
                if (prior) {
                    require(granted->token == prior->token, "member ", id, " re-granted key ", c.key,
                            " with token ", granted->token, " instead of the holder's ", prior->token);
                } else {
                    require(granted->token > prior_last_token, "token went backwards: member ", id,
                            " granted key ", c.key, " token ", granted->token, " after token ",
                            prior_last_token);
                }
            } else if constexpr (std::is_same_v<C, lock::Release> || std::is_same_v<C, lock::Expire>) {
                // A Release of one key of a set removes nothing (the model checks it is one).
                if (std::holds_alternative<lock::PartOfSet>(result)) return;
                const lock::Lock* now = table.find(c.key);
                if (prior && prior->token != c.token) {
                    require(now != nullptr && now->token == prior->token, "a stale ",
                            std::is_same_v<C, lock::Release> ? "Release" : "Expire", " with token ", c.token,
                            " removed key ", c.key, " held by another grant (token ", prior->token, ") on member ",
                            id);
                } else if (prior) {
                    require(now == nullptr, "member ", id, " kept key ", c.key, " after a matching ",
                            std::is_same_v<C, lock::Release> ? "Release" : "Expire", " of token ", c.token);
                }
            }
            if constexpr (std::is_same_v<C, lock::Proclaim>) {
                // Only the value of the lock held with the token changes.
                const lock::Lock* now = table.find(c.key);
                if (std::holds_alternative<lock::Proclaimed>(result)) {
                    require(prior && prior->token == c.token && now != nullptr && now->token == c.token &&
                                now->value == c.value,
                            "member ", id, " proclaimed on key ", c.key, " token ", c.token,
                            " but the lock does not publish its value");
                } else if (prior) {
                    require(now != nullptr && now->token == prior->token && now->value == prior->value,
                            "member ", id, " changed key ", c.key, " on a refused proclaim of token ", c.token);
                }
            }
            // ExpireMany, GrantMany, ReleaseMany: the sequential model,
            // compared with the whole table after every entry
            // (check_against_model), checks each lock.
        },
        cmd);
}

void SafetyChecker::observe_restored(raft::NodeId id, const raft::SnapshotMeta& meta,
                                     const lock::LockTable& table) {
    require(table.applied_index() == meta.index, "member ", id, " restored a snapshot of index ", meta.index,
            " whose table says applied index ", table.applied_index());
    if (meta.index == 0) return;
    require(meta.index <= committed_.size(), "member ", id, " restored a snapshot at index ", meta.index,
            " beyond everything ever applied (", committed_.size(), ")");
    require(committed_[meta.index - 1].term == meta.term, "member ", id, " restored a snapshot at index ",
            meta.index, " term ", meta.term, " but the committed entry there has term ",
            committed_[meta.index - 1].term);
    require(state_digest_[meta.index - 1] == digest(table), "member ", id, " restored a snapshot at index ",
            meta.index, " whose lock table differs from the applied state at that index");
}

void SafetyChecker::observe_sent(const raft::Message& m, const SimStorage& durable) {
    const auto* vreq = std::get_if<raft::VoteRequest>(&m.body);
    const auto* vresp = std::get_if<raft::VoteResponse>(&m.body);
    if ((vreq && vreq->pre_vote) || (vresp && vresp->pre_vote)) return;
    const raft::HardState hs = durable.hard_state();
    require(hs.term >= m.term, "member ", m.from, " sent a message of term ", m.term, " to member ", m.to,
            " while its durable term is ", hs.term, " (term must be persisted first)");
    if (vresp && vresp->granted) {
        require(hs.term > m.term || hs.vote == m.to, "member ", m.from, " granted its term-", m.term,
                " vote to member ", m.to, " before persisting it (durable vote: ", hs.vote, ")");
    }
    if (vreq) {
        require(hs.term > m.term || hs.vote == m.from, "member ", m.from, " asked for votes in term ", m.term,
                " before persisting its vote for itself (durable vote: ", hs.vote, ")");
    }
    if (const auto* aresp = std::get_if<raft::AppendResponse>(&m.body); aresp && aresp->success) {
        require(aresp->match_index <= durable.last_index(), "member ", m.from, " acknowledged entries up to ",
                aresp->match_index, " to member ", m.to, " but only ", durable.last_index(), " are durable");
    }
}

}  // namespace pgfence::sim
