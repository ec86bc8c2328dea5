// check_invariants(): the debug invariant checker (LogCabin's
// RaftConsensusInvariants). Each check names the rule it guards.
#include <string>

#include "raft/core.h"

namespace pgfence::raft {

namespace {
std::string num(std::uint64_t v) {
    return std::to_string(v);
}
}  // namespace

std::string Raft::Impl::check_invariants() const {
    if (std::string s = log.check(); !s.empty()) return s;
    if (configs.empty()) return "no configuration";
    for (std::size_t i = 1; i < configs.size(); ++i) {
        if (configs[i].index <= configs[i - 1].index) return "configuration indexes not increasing";
        if (configs[i].index < log.first_index() || configs[i].index > log.last_index() ||
            log.at(configs[i].index).type != EntryType::kConfig) {
            return "configuration at " + num(configs[i].index) + " is not a configuration entry of the log";
        }
    }
    // §5.1: a snapshot covers only committed, applied state.
    if (commit < log.base_index()) {
        return "commit " + num(commit) + " < log base " + num(log.base_index());
    }
    if (commit < snapshot->meta.index) {
        return "commit " + num(commit) + " < snapshot index " + num(snapshot->meta.index);
    }
    if (commit > log.last_index()) {
        return "commit " + num(commit) + " > last index " + num(log.last_index());
    }
    if (!(applied <= handed_commit && handed_commit <= commit)) {
        return "want applied " + num(applied) + " <= handed " + num(handed_commit) + " <= commit " +
               num(commit);
    }
    // A leader's messages go out before its Ready is durable only in a term
    // already written (raft.cc ready(), take_messages_now()).
    if (durable_term > term) {
        return "durable term " + num(durable_term) + " > current term " + num(term);
    }
    if (!ready_outstanding && durable_term != handed_hs.term) {
        return "no Ready outstanding, durable term " + num(durable_term) +
               " != handed hard state's term " + num(handed_hs.term);
    }
    if (durable_commit > commit) {
        return "durable commit " + num(durable_commit) + " > commit " + num(commit);
    }
    if (handed_commit > log.stable() && handed_commit > snapshot->meta.index) {
        return "committed entries handed out up to " + num(handed_commit) +
               " beyond durable index " + num(log.stable());
    }
    if (log.last_term() > term) {
        return "last log term " + num(log.last_term()) + " > current term " + num(term);
    }
    if (randomized_timeout_ticks < cfg.election_ticks ||
        randomized_timeout_ticks >= 2 * cfg.election_ticks) {
        return "randomized election timeout " + std::to_string(randomized_timeout_ticks) +
               " outside [election_ticks, 2*election_ticks)";
    }
    if (std::holds_alternative<Candidate>(role) && vote != cfg.id) {
        return "candidate did not vote for itself (vote " + num(vote) + ")";
    }
    const Leader* l = leader_state();
    if (l == nullptr) return "";
    // Figure 2: a leader voted for itself in its term and its log holds an
    // entry of its term (the no-op, §6.4).
    if (vote != cfg.id) return "leader's vote is " + num(vote) + ", not itself";
    if (log.last_term() != term) return "leader has no entry of its term " + num(term);
    for (const ConfigMember& m : config().members) {
        if (m.id != cfg.id && l->progress.count(m.id) == 0) return "leader has no progress for member " + num(m.id);
    }
    for (const auto& [id, pr] : l->progress) {
        if (config().contains(id) == (pr.removed_at != 0)) {
            return "peer " + num(id) + (pr.removed_at != 0 ? " is a member but marked removed" : " is no member but not marked removed");
        }
    }
    if (!is_voter(cfg.id)) return "leader " + num(cfg.id) + " is not a voter of its configuration";
    // One change at a time: of this leader's own term, at most one
    // configuration entry is uncommitted (an earlier term's may be too, as
    // the commit index restored at start lags).
    std::size_t uncommitted_configs = 0;
    for (const ConfigAt& c : configs) {
        uncommitted_configs += c.index > commit && c.index >= log.first_index() && log.at(c.index).term == term ? 1 : 0;
    }
    if (uncommitted_configs > 1) return num(uncommitted_configs) + " configuration entries of this term uncommitted";
    const std::size_t byte_bound =
        cfg.max_inflight_bytes + std::max(cfg.max_append_bytes, cfg.max_entry_bytes);
    for (const auto& [id, pr] : l->progress) {
        if (std::string s = pr.check(cfg.max_inflight_appends, byte_bound); !s.empty()) {
            return "peer " + num(id) + ": " + s;
        }
        if (pr.match > log.last_index()) {
            return "peer " + num(id) + " match " + num(pr.match) + " > leader last index " +
                   num(log.last_index());
        }
    }
    if (l->pending_reads() > kMaxPendingReads) return "too many pending reads";
    if (l->transfer_target != kNoNode && l->transfer_elapsed_ticks >= cfg.election_ticks) {
        return "leadership transfer outlived an election timeout";
    }
    return "";
}

}  // namespace pgfence::raft
