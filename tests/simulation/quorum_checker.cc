// Quorums across membership changes: see quorum_checker.h.
#include "quorum_checker.h"

#include <algorithm>
#include <sstream>

#include "sim_failure.h"

namespace pgfence::sim {

raft::Configuration log_configuration(const SimStorage& image, raft::Index last, const raft::Configuration& first) {
    for (raft::Index i = std::min(last, image.last_index()); i >= image.first_index() && i > 0; --i) {
        const raft::Entry* e = image.entry_at(i);
        if (e == nullptr || e->type != raft::EntryType::kConfig) continue;
        raft::Configuration c;
        const std::string why = raft::decode_configuration(e->data, c);
        require(why.empty(), "configuration entry ", i, " in a member's log does not decode: ", why);
        return c;
    }
    const raft::SnapshotMeta& meta = image.snapshot_meta();
    if (meta.index != 0 && !meta.config.members.empty()) return meta.config;
    return first;
}

std::string describe(const raft::Configuration& config) {
    std::ostringstream out;
    out << "{";
    for (const raft::ConfigMember& m : config.members) {
        if (m.voter) out << ' ' << m.id;
    }
    bool learners = false;
    for (const raft::ConfigMember& m : config.members) {
        if (m.voter) continue;
        out << (learners ? " " : " learners ") << m.id;
        learners = true;
    }
    out << " }";
    return out.str();
}

std::string single_change(const raft::Configuration& prev, const raft::Configuration& next) {
    int added = 0, removed = 0, promoted = 0;
    std::string odd;
    for (const raft::ConfigMember& m : next.members) {
        const raft::ConfigMember* before = prev.find(m.id);
        if (before == nullptr) {
            ++added;
            if (m.voter) odd = "member " + std::to_string(m.id) + " was added as a voter, not a learner";
        } else if (before->voter != m.voter) {
            ++promoted;
            if (!m.voter) odd = "voter " + std::to_string(m.id) + " became a learner";
        } else if (before->context != m.context) {
            odd = "member " + std::to_string(m.id) + "'s context changed";
        }
    }
    for (const raft::ConfigMember& m : prev.members) removed += next.contains(m.id) ? 0 : 1;
    if (!odd.empty()) return odd;
    if (added + removed + promoted != 1) {
        return std::to_string(added) + " added, " + std::to_string(promoted) + " promoted, " +
               std::to_string(removed) + " removed (one change at a time)";
    }
    if (next.voters().empty()) return "no voter is left";
    return {};
}

QuorumChecker::QuorumChecker(raft::Configuration first)
    : committed_config_(std::move(first)), voters_min_(committed_config_.voters().size()), voters_max_(voters_min_) {}

void QuorumChecker::attach(raft::NodeId id, const SimStorage& durable) { durable_[id] = &durable; }

void QuorumChecker::delivered(const raft::Message& m) {
    const auto* v = std::get_if<raft::VoteResponse>(&m.body);
    if (v == nullptr || v->pre_vote || !v->granted) return;
    votes_[{m.term, m.to}].insert(m.from);
    while (votes_.size() > kMaxVoteRecords) votes_.erase(votes_.begin());  // the oldest terms
}

void QuorumChecker::elected(raft::NodeId id, raft::Term term, const raft::Configuration& config) {
    require(config.is_voter(id), "member ", id, " leads term ", term, " but is not a voter of its configuration ",
            describe(config));
    if (auto r = removed_.find(id); r != removed_.end()) {
        require(term <= r->second.second, "member ", id, " leads term ", term, " after its removal (index ",
                r->second.first, ", term ", r->second.second, ") committed");
    }
    const std::vector<raft::NodeId> voters = config.voters();
    std::size_t granted = 1;  // its own vote
    std::string from;
    auto it = votes_.find({term, id});
    if (it != votes_.end()) {
        for (raft::NodeId v : it->second) {
            from += " " + std::to_string(v);
            if (v != id && config.is_voter(v)) ++granted;
        }
    }
    const std::size_t quorum = voters.size() / 2 + 1;
    require(granted >= quorum, "member ", id, " leads term ", term, " with ", granted, " votes of the ",
            voters.size(), " voters of its configuration ", describe(config), " (a majority is ", quorum,
            "); granted votes delivered to it from:", from.empty() ? " none" : from);
    ++elections_checked_;
}

void QuorumChecker::committed(raft::NodeId id, raft::Term term, raft::Index commit,
                              const raft::Configuration& config) {
    std::size_t holders = 0;
    std::string who;
    for (const raft::ConfigMember& m : config.members) {
        if (!m.voter) continue;
        auto d = durable_.find(m.id);
        if (d == durable_.end()) continue;
        const SimStorage& image = *d->second;
        const bool holds = image.first_index() > commit || image.term_at(commit) == term;
        if (!holds) continue;
        ++holders;
        who += " " + std::to_string(m.id);
    }
    const std::size_t quorum = config.voters().size() / 2 + 1;
    require(holders >= quorum, "leader ", id, " of term ", term, " committed index ", commit, " but only ", holders,
            " of the voters of its configuration ", describe(config), " hold entry ", commit, " term ", term,
            " durably (a majority is ", quorum, "):", who.empty() ? " none" : who);
    highest_commit_ = std::max(highest_commit_, commit);
    ++commits_checked_;
}

void QuorumChecker::config_written(raft::NodeId id, raft::Term term, raft::Index index, raft::Index previous) {
    require(previous <= highest_commit_, "leader ", id, " of term ", term, " wrote configuration entry ", index,
            " while the configuration entry before it, at index ", previous,
            ", was not committed (the highest commit index seen is ", highest_commit_, "): one change at a time");
}

void QuorumChecker::config_applied(const raft::Entry& entry) {
    if (entry.index <= committed_config_index_) return;  // applied before, by another member
    raft::Configuration next;
    const std::string why = raft::decode_configuration(entry.data, next);
    require(why.empty(), "committed configuration entry ", entry.index, " does not decode: ", why);
    const std::string change = single_change(committed_config_, next);
    require(change.empty(), "committed configuration entry ", entry.index, " ", describe(next),
            " is not one change from the configuration committed before it ", describe(committed_config_), ": ",
            change);
    for (const raft::ConfigMember& m : committed_config_.members) {
        if (!next.contains(m.id)) removed_[m.id] = {entry.index, entry.term};
    }
    committed_config_ = std::move(next);
    committed_config_index_ = entry.index;
    voters_min_ = std::min(voters_min_, committed_config_.voters().size());
    voters_max_ = std::max(voters_max_, committed_config_.voters().size());
    ++changes_committed_;
}

void QuorumChecker::check_core_configuration(raft::NodeId id, const raft::Configuration& core_config,
                                             const SimStorage& durable, raft::Index last,
                                             const raft::Configuration& first) {
    const raft::Configuration logged = log_configuration(durable, last, first);
    require(core_config == logged, "member ", id, " says configuration ", describe(core_config),
            " is in force, but its log (durable up to index ", last, ") holds ", describe(logged));
    ++configurations_checked_;
}

}  // namespace pgfence::sim
