// Configurations and their changes (thesis chapter 4; the rules are in
// raft.h "Membership changes").
//
// Invariants: configs is never empty and its indexes strictly increase; every
// entry after configs.front() is a kConfig entry of the log at that index; on
// a leader at most one configuration entry is uncommitted, and its Progress
// map holds exactly the configuration's members but itself, plus removed
// members still being told (removed_at != 0).
#include <algorithm>
#include <stdexcept>

#include "raft/core.h"

namespace pgfence::raft {

namespace {

Configuration decode_entry(const Entry& e) {
    Configuration c;
    if (std::string why = decode_configuration(e.data, c); !why.empty()) {
        // Entries are checksummed on disk and on the wire: this is a bug.
        throw std::logic_error("Raft: configuration entry " + std::to_string(e.index) + " is malformed: " + why);
    }
    return c;
}

}  // namespace

Progress* Raft::Impl::progress_of(NodeId id) {
    Leader* l = leader_state();
    if (l == nullptr) return nullptr;
    auto it = l->progress.find(id);
    return it == l->progress.end() ? nullptr : &it->second;
}

void Raft::Impl::restore_configs() {
    configs.clear();
    if (!snapshot->empty() && !snapshot->meta.config.members.empty()) {
        configs.push_back(config_of(snapshot->meta));
    } else {
        configs.push_back(ConfigAt{0, first_config()});
    }
    rebuild_configs_from(log.first_index());
}

void Raft::Impl::rebuild_configs_from(Index from) {
    while (configs.size() > 1 && configs.back().index >= from) configs.pop_back();
    for (Index i = std::max(from, log.first_index()); i <= log.last_index(); ++i) {
        const Entry& e = log.at(i);
        if (e.type == EntryType::kConfig && e.index > configs.back().index) {
            configs.push_back(ConfigAt{e.index, decode_entry(e)});
        }
    }
}

void Raft::Impl::reset_configs(const SnapshotMeta& meta) {
    configs.clear();
    configs.push_back(config_of(meta));
}

void Raft::Impl::compact_configs(Index index) {
    // Keep the last configuration at or before `index` (in force there) and
    // everything after it.
    std::size_t keep = 0;
    while (keep + 1 < configs.size() && configs[keep + 1].index <= index) ++keep;
    configs.erase(configs.begin(), configs.begin() + static_cast<std::ptrdiff_t>(keep));
}

const ConfigAt& Raft::Impl::config_entry_at(Index index) const {
    const ConfigAt* found = &configs.front();
    for (const ConfigAt& c : configs) {
        if (c.index <= index) found = &c;
    }
    return *found;
}

// A snapshot written or sent by a release that did not record the index
// has config_index 0 whatever its configuration: taken as the first
// configuration when it is that one (Config::members and contexts), else
// as made at the snapshot's index (the latest it can have been made at).
ConfigAt Raft::Impl::config_of(const SnapshotMeta& meta) const {
    if (meta.config_index > meta.index) {
        throw std::logic_error("Raft: snapshot at " + std::to_string(meta.index) + " has configuration index " +
                               std::to_string(meta.config_index) + " beyond it");
    }
    if (meta.config_index != 0 || meta.config == first_config()) return ConfigAt{meta.config_index, meta.config};
    return ConfigAt{meta.index, meta.config};
}

Configuration Raft::Impl::first_config() const {
    Configuration first = Configuration::of_voters(cfg.members);
    for (ConfigMember& m : first.members) {
        if (auto it = cfg.contexts.find(m.id); it != cfg.contexts.end()) m.context = it->second;
    }
    return first;
}

void Raft::Impl::sync_progress(Leader& l) {
    for (const ConfigMember& m : config().members) {
        if (m.id == cfg.id) continue;
        auto [it, added] = l.progress.try_emplace(m.id);
        Progress& pr = it->second;
        if (!added && pr.removed_at != 0) {  // added again while being told of its removal:
            pr = Progress{};                 // nothing it acknowledged before counts
            added = true;
        }
        if (added) pr.next = log.last_index() + 1;  // Figure 2; probing walks it back
        if (!m.voter && pr.round_end == 0) {
            pr.round_end = log.last_index();  // §4.2.1: the first catch-up round
            pr.round_ticks = 0;
        }
    }
    for (auto& [id, pr] : l.progress) {
        if (!config().contains(id) && pr.removed_at == 0) {
            pr.removed_at = configs.back().index;
            pr.leaving_ticks = 0;
            pr.final_round = 0;
        }
    }
    if (l.transfer_target != kNoNode && !is_voter(l.transfer_target)) abort_transfer(l);
}

// Whether the voters of `next` heard from lately (this election period or
// the one before; the leader itself) are a quorum of them: a removal that
// leaves fewer would wedge the cluster until a member down comes back
// (etcd's strict reconfiguration check).
bool Raft::Impl::live_quorum(const Leader& l, const Configuration& next) const {
    std::size_t live = 0;
    for (const ConfigMember& m : next.members) {
        if (!m.voter) continue;
        if (m.id == cfg.id) {
            ++live;
        } else if (auto it = l.progress.find(m.id);
                   it != l.progress.end() && (it->second.recently_active || it->second.active_last_period)) {
            ++live;
        }
    }
    return live >= next.quorum();
}

ProposeResult Raft::Impl::propose_config(const ConfigChange& change) {
    Leader* l = leader_state();
    if (l == nullptr) return {ProposeError::kNotLeader, 0, 0};
    if (l->transfer_target != kNoNode) return {ProposeError::kTransferring, 0, 0};
    if (configs.back().index > commit) return {ProposeError::kConfigPending, 0, 0};
    if (log.term(commit) != term) return {ProposeError::kNotReady, 0, 0};
    if (change.id == kNoNode || change.context.size() > kMaxMemberContextBytes) {
        return {ProposeError::kInvalid, 0, 0};
    }
    Configuration next = config();
    auto it = std::lower_bound(next.members.begin(), next.members.end(), change.id,
                               [](const ConfigMember& m, NodeId v) { return m.id < v; });
    const bool present = it != next.members.end() && it->id == change.id;
    switch (change.type) {
        case ConfigChangeType::kAddLearner:
            if (present) return {ProposeError::kAlreadyMember, 0, 0};
            if (next.members.size() >= kMaxConfigMembers) return {ProposeError::kInvalid, 0, 0};
            next.members.insert(it, ConfigMember{change.id, false, change.context});
            break;
        case ConfigChangeType::kPromote:
            if (!present) return {ProposeError::kUnknownMember, 0, 0};
            if (it->voter) return {ProposeError::kNotLearner, 0, 0};
            if (!caught_up(l->progress.at(change.id))) return {ProposeError::kNotCaughtUp, 0, 0};
            it->voter = true;
            break;
        case ConfigChangeType::kRemove:
            if (!present) return {ProposeError::kUnknownMember, 0, 0};
            if (change.id == cfg.id) return {ProposeError::kRemoveLeader, 0, 0};
            next.members.erase(it);
            if (!live_quorum(*l, next)) return {ProposeError::kNoQuorumLeft, 0, 0};
            break;
    }
    std::string data = encode_configuration(next);
    if (l->uncommitted_bytes + data.size() > cfg.max_uncommitted_bytes) return {ProposeError::kBacklog, 0, 0};
    l->uncommitted_bytes += data.size();
    const Index index = log.last_index() + 1;
    log.append(Entry{term, index, EntryType::kConfig, std::move(data)});
    configs.push_back(ConfigAt{index, std::move(next)});  // in force once appended (§4.1)
    sync_progress(*l);
    return {ProposeError::kNone, index, term};
}

bool Raft::Impl::caught_up(const Progress& pr) const {
    return pr.last_round_fast && pr.round_ticks < cfg.election_ticks;
}

void Raft::Impl::tick_membership(Leader& l) {
    for (auto it = l.progress.begin(); it != l.progress.end();) {
        Progress& pr = it->second;
        if (pr.removed_at != 0) {
            // Told for at most two election timeouts after the removal
            // committed, and not at all once only a snapshot could reach it.
            const bool needs_snapshot = !log.term(pr.next - 1);
            if (needs_snapshot || (commit >= pr.removed_at && ++pr.leaving_ticks >= 2 * cfg.election_ticks)) {
                it = l.progress.erase(it);
                continue;
            }
        } else if (!is_voter(it->first)) {
            ++pr.round_ticks;
        }
        ++it;
    }
}

void Raft::Impl::on_ack(Progress& pr, NodeId from) {
    if (pr.removed_at == 0 && !is_voter(from) && pr.match >= pr.round_end) {
        // §4.2.1: a round ended; the next one aims at our last index now (a
        // learner holding all of it ends a round with every ack).
        pr.last_round_fast = pr.round_ticks < cfg.election_ticks;
        pr.round_end = log.last_index();
        pr.round_ticks = 0;
    }
}

bool Raft::Impl::told_of_removal(const Progress& pr, std::uint64_t acked_round) const {
    return pr.removed_at != 0 && pr.final_round != 0 && acked_round >= pr.final_round;
}

void Raft::Impl::heartbeat_round_for_leaving(Leader& l) {
    // A removed member that holds the entry removing it, once that entry is
    // committed, gets a heartbeat whose commit index covers it, in a round of
    // its own: its ack of that round (or a later one) says it knows.
    bool new_round = false;
    for (auto& [id, pr] : l.progress) {
        if (pr.removed_at != 0 && pr.final_round == 0 && commit >= pr.removed_at && pr.match >= pr.removed_at) {
            pr.final_round = read_round + 1;
            new_round = true;
        }
    }
    if (new_round) ++read_round;
}

}  // namespace pgfence::raft
