// Cluster-wide safety invariants, checked as the simulation runs. Each observe_* call checks what it is told against everything
// seen so far and throws SimFailure on a violation:
//   - at most one leader per term, over the whole run          (Figure 3, Election Safety)
//   - log matching: two logs with an entry of the same index and term hold
//     the same command there and agree on the term before it (so, by
//     induction, on the whole prefix)                          (Figure 3, Log Matching)
//   - committed entries never change: an index applied by anyone is applied
//     with the same entry by everyone, forever                 (Figure 3, State Machine Safety)
//   - all members' applied state agrees at the same applied index (digest of
//     LockTable::snapshot() per index; snapshot restores included)
//   - every LockTable result equals the sequential model's (LockModel, which
//     replays the committed log), and the table's holders equal the model's
//   - new grants' tokens strictly increase in log order; at most one holder
//     per key; a Release/Expire with another token leaves the holder in place
//   - durable acks: a message that promises durable state (votes, append
//     acks, anything carrying a term) is only sent when the member's durable
//     image holds it (thesis §3.8 / DESIGN "Storage")
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lock/table.h"
#include "lock_model.h"
#include "raft/raft.h"
#include "sim_disk.h"

namespace pgfence::sim {

class SafetyChecker {
public:
    // A member's role after a step.
    void observe_role(raft::NodeId id, raft::Role role, raft::Term term);

    // `id` handed `entries` to its disk; `image` is its volatile image after
    // the write (used for the term before each entry).
    void observe_written(raft::NodeId id, const std::vector<raft::Entry>& entries, const SimStorage& image);

    // `id` is about to apply committed `entry` to `table` (before the apply).
    void before_apply(raft::NodeId id, const raft::Entry& entry, const lock::LockTable& table,
                      const SimStorage& durable);

    // `id` applied `entry` and `table` returned `result`; `prior` is the
    // holder of the command's key before the apply, `prior_last_token` the
    // table's last_token() before it.
    void after_apply(raft::NodeId id, const raft::Entry& entry, const lock::Result& result,
                     const std::optional<lock::Lock>& prior, lock::Token prior_last_token,
                     const lock::LockTable& table);

    // `id` restored `table` from a snapshot described by `meta`.
    void observe_restored(raft::NodeId id, const raft::SnapshotMeta& meta, const lock::LockTable& table);

    // `m` is about to leave member m.from whose durable image is `durable`.
    void observe_sent(const raft::Message& m, const SimStorage& durable);

    // Everything ever applied, index 1..n, in order (the linearization witness).
    const std::vector<raft::Entry>& committed() const { return committed_; }
    const LockModel& model() const { return model_; }
    std::uint64_t leaders_elected() const { return leader_by_term_.size(); }

private:
    struct Written {
        raft::EntryType type;
        std::string data;
        std::optional<raft::Term> prev_term;
    };
    void check_against_model(raft::NodeId id, const raft::Entry& entry, const lock::Result& result,
                             const lock::LockTable& table);
    void check_effect(raft::NodeId id, const lock::Command& cmd, const lock::Result& result,
                      const std::optional<lock::Lock>& prior, lock::Token prior_last_token,
                      const lock::LockTable& table);

    std::map<raft::Term, raft::NodeId> leader_by_term_;
    std::map<std::pair<raft::Index, raft::Term>, Written> written_;
    std::vector<raft::Entry> committed_;
    std::vector<std::uint64_t> state_digest_;  // per index, after applying it
    std::vector<lock::Result> results_;        // per index, from the model
    LockModel model_;
};

// A digest of the table's whole state (its snapshot encoding).
std::uint64_t digest(const lock::LockTable& table);

}  // namespace pgfence::sim
