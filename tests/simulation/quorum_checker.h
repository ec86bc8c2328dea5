// Quorums across membership changes (coordinator/raft/raft.h "Membership
// changes"), checked from outside the cores on what they do. Each check
// throws SimFailure:
//   - elections: when a member first leads a term, the granted votes
//     delivered to it in that term from voters of its configuration in force
//     (its own included, being one) are a majority of those voters, and it is
//     one of them. A learner's, a removed member's or a stranger's vote
//     counts for nothing: a core that counted one elects without a majority
//     of voters and fails here;
//   - commits: when the leader of term T moves its commit index to c, entry
//     (c, T) is durable on a majority of the voters of its configuration in
//     force (on each member's simulated disk: that entry, or a snapshot at or
//     past c). Only voters are counted, so an ack of a learner or of a removed
//     member that made the difference fails here. The entries below c are then
//     durable there too (Log Matching, safety_checker.h);
//   - committed configurations, in log order: each is the one before it
//     (the cluster's first, at the start) changed by one single-server change
//     (one learner added, one learner promoted, or one member removed), with
//     a voter left;
//   - one change at a time: a leader writes a configuration entry of its
//     term only once the configuration entry before it in its log is
//     committed (a leader was seen to commit that index);
//   - a member whose removal committed in term R never leads a term after R
//     (an old term's leadership that completes late is harmless and allowed);
//   - the configuration a core says is in force is the one its own log holds
//     (log_configuration below), checked when its whole log is durable.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "raft/raft.h"
#include "sim_disk.h"

namespace pgfence::sim {

// The configuration that `image`'s log puts in force at `last` (at most its
// last index): its last configuration entry at or before `last`, else its
// snapshot's configuration, else `first` (the member's Config::members as
// voters; empty for a member that joins).
raft::Configuration log_configuration(const SimStorage& image, raft::Index last, const raft::Configuration& first);

class QuorumChecker {
public:
    // `first`: the cluster's configuration before any change (its first voters).
    explicit QuorumChecker(raft::Configuration first);

    // Member `id`'s durable image, for the commit check (it outlives the checker's use).
    void attach(raft::NodeId id, const SimStorage& durable);

    // A message delivered to its receiver (before the receiver's core steps
    // it): granted votes are remembered.
    void delivered(const raft::Message& m);

    // Member `id` leads `term` for the first time; `config` is its
    // configuration in force then.
    void elected(raft::NodeId id, raft::Term term, const raft::Configuration& config);

    // The leader of `term`, `id`, moved its commit index to `commit` with
    // `config` in force.
    void committed(raft::NodeId id, raft::Term term, raft::Index commit, const raft::Configuration& config);

    // Leader `id` of `term` writes its configuration entry `index`; the
    // configuration entry before it in its log is at `previous` (0: none,
    // the one in force comes from its snapshot or its first members).
    void config_written(raft::NodeId id, raft::Term term, raft::Index index, raft::Index previous);

    // A configuration entry applied (by any member; the first apply of an
    // index is the one that counts: committed entries never change, the
    // safety checker checks that).
    void config_applied(const raft::Entry& entry);

    // Member `id`'s core says `core_config` is in force while its whole log,
    // up to `last`, is durable in `durable`; `first` as for log_configuration.
    void check_core_configuration(raft::NodeId id, const raft::Configuration& core_config, const SimStorage& durable,
                                  raft::Index last, const raft::Configuration& first);

    const raft::Configuration& committed_configuration() const { return committed_config_; }
    std::uint64_t elections_checked() const { return elections_checked_; }
    std::uint64_t commits_checked() const { return commits_checked_; }
    std::uint64_t config_changes_committed() const { return changes_committed_; }
    std::uint64_t configurations_checked() const { return configurations_checked_; }
    // Fewest and most voters of the committed configurations (the first included).
    std::size_t voters_min() const { return voters_min_; }
    std::size_t voters_max() const { return voters_max_; }

private:
    static constexpr std::size_t kMaxVoteRecords = 512;  // (term, candidate) pairs remembered

    std::map<raft::NodeId, const SimStorage*> durable_;
    std::map<std::pair<raft::Term, raft::NodeId>, std::set<raft::NodeId>> votes_;  // (term, candidate) -> granted by
    raft::Index highest_commit_ = 0;  // the highest commit index a leader was seen to reach
    raft::Configuration committed_config_;
    raft::Index committed_config_index_ = 0;
    std::map<raft::NodeId, std::pair<raft::Index, raft::Term>> removed_;  // id -> its removal's (index, term)
    std::uint64_t elections_checked_ = 0;
    std::uint64_t commits_checked_ = 0;
    std::uint64_t changes_committed_ = 0;
    std::uint64_t configurations_checked_ = 0;
    std::size_t voters_min_ = 0;
    std::size_t voters_max_ = 0;
};

// "" when `next` is `prev` changed by one single-server change, else what is wrong.
std::string single_change(const raft::Configuration& prev, const raft::Configuration& next);

// "{1 2 3 learners 4}": for failure messages.
std::string describe(const raft::Configuration& config);

}  // namespace pgfence::sim
