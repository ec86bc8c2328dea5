// Membership requests (add, promote, remove, list) and what a configuration
// change means for this member: the peer transport's new member list, and its
// own removal. The rules of a change are the Raft core's (raft.h
// "Membership changes"); this file maps requests onto them and their refusals
// onto answers.
#include <algorithm>

#include "member/addresses.h"
#include "member/core.h"

namespace pgfence::member {

raft::NodeId Core::handover_target(const std::vector<raft::NodeId>* reachable) const {
    // Voters heard from in this election period first (without `reachable`,
    // that is what says one is alive), and among them the most caught-up.
    raft::NodeId best = raft::kNoNode;
    raft::Index best_match = 0;
    bool best_active = false;
    for (const raft::PeerStatus& p : raft_->status().peers) {
        if (!p.voter || p.leaving || p.id == config_.raft.id) continue;
        if (reachable != nullptr &&
            std::find(reachable->begin(), reachable->end(), p.id) == reachable->end())
            continue;
        const bool active = reachable != nullptr || p.recently_active;
        if (best == raft::kNoNode || (active && !best_active) || (active == best_active && p.match > best_match)) {
            best = p.id;
            best_match = p.match;
            best_active = active;
        }
    }
    return best;
}

void Core::change_members(RequestId id, const Request& req, Time now) {
    raft::ConfigChange change;
    if (const auto* a = std::get_if<AddMember>(&req)) {
        change = {raft::ConfigChangeType::kAddLearner, a->id,
                  encode_addresses({a->peer_addr, a->client_addr})};
    } else if (const auto* p = std::get_if<PromoteMember>(&req)) {
        change = {raft::ConfigChangeType::kPromote, p->id, {}};
    } else {
        change = {raft::ConfigChangeType::kRemove, std::get<RemoveMember>(req).id, {}};
    }
    if (change.type == raft::ConfigChangeType::kRemove && change.id == config_.raft.id) {
        // The leader does not remove itself: it hands over, and the client's
        // retry reaches the new leader, which removes it.
        const raft::NodeId target = handover_target(nullptr);
        if (target == raft::kNoNode) {
            respond(id, ChangeRefused{"remove of member " + std::to_string(change.id) +
                                      " refused: it leads, and no other voter can take over"});
            return;
        }
        if (!raft_->transfer_leadership(target)) {
            respond(id, Unavailable{raft_->leader()});
            return;
        }
        log(LogLevel::kInfo, "leadership_transfer",
            {{"target", std::to_string(target)}, {"reason", "removing the leader"}});
        respond(id, Unavailable{target});
        return;
    }
    if (proposals_.size() >= config_.max_proposals) {
        unavailable(id);
        return;
    }
    const raft::ProposeResult r = raft_->propose_config(change);
    switch (r.error) {
        case raft::ProposeError::kNone:
            log(LogLevel::kInfo, "member_change_proposed",
                {{"change", raft::to_string(change.type)},
                 {"id", std::to_string(change.id)},
                 {"index", std::to_string(r.index)}});
            proposals_[r.index] = Proposal{r.term, now, [this, id](const Witness* applied, Time) {
                                               if (applied == nullptr) {
                                                   unavailable(id);
                                               } else {
                                                   respond(id, members_view(), *applied);
                                               }
                                           }};
            note_configuration();  // in force at once (raft.h)
            return;
        case raft::ProposeError::kUnknownMember:
            respond(id, UnknownMember{change.id});
            return;
        case raft::ProposeError::kConfigPending:
        case raft::ProposeError::kAlreadyMember:
        case raft::ProposeError::kNotLearner:
        case raft::ProposeError::kNotCaughtUp:
        case raft::ProposeError::kInvalid:
        case raft::ProposeError::kRemoveLeader:
        case raft::ProposeError::kNoQuorumLeft:
            respond(id, ChangeRefused{std::string(raft::to_string(change.type)) + " of member " +
                                      std::to_string(change.id) +
                                      " refused: " + raft::to_string(r.error)});
            return;
        case raft::ProposeError::kNotReady:  // a new leader, about to commit its first entry: a retry succeeds
        case raft::ProposeError::kNotLeader:
        case raft::ProposeError::kTransferring:
        case raft::ProposeError::kTooLarge:
        case raft::ProposeError::kBacklog:
            unavailable(id);
            return;
    }
}

Members Core::members_view() const {
    Members out;
    out.config_index = raft_->configuration_index();
    const raft::Status st = raft_->status();
    for (const raft::ConfigMember& m : raft_->configuration().members) {
        MemberView v;
        v.id = m.id;
        v.voter = m.voter;
        MemberAddresses addresses;
        if (decode_addresses(m.context, addresses).empty()) {
            v.peer_addr = std::move(addresses.peer_addr);
            v.client_addr = std::move(addresses.client_addr);
        }
        if (m.id == config_.raft.id) {
            v.match = st.last_index;
        }
        for (const raft::PeerStatus& p : st.peers) {
            if (p.id != m.id) continue;
            v.match = p.match;
            v.caught_up = p.caught_up;
        }
        out.members.push_back(std::move(v));
    }
    return out;
}

void Core::note_configuration() {
    // The configuration itself is compared, not its index: a truncated entry
    // may be replaced by another configuration at the same index.
    if (reported_config_ && *reported_config_ == raft_->configuration()) return;
    reported_config_ = raft_->configuration();
    effects_.configuration = *reported_config_;
}

void Core::note_told_removed() {
    if (removed_ || !raft_->told_removed()) return;
    removed_ = true;
    effects_.removed = true;
    log(LogLevel::kWarn, "removed_from_cluster", {{"index", "0"}, {"told_by", "the leader"}});
}

void Core::on_config_applied(const raft::Entry& e) {
    // Removed: this entry drops us from a configuration that had us. (A
    // member added later applies earlier entries that never named it.)
    const raft::NodeId self = config_.raft.id;
    const bool was_member = raft_->configuration_at(e.index - 1).contains(self);
    const bool is_member = raft_->configuration_at(e.index).contains(self);
    if (is_member) removed_ = false;  // (added again under the same id)
    if (!was_member || is_member || removed_) return;
    removed_ = true;
    effects_.removed = true;
    log(LogLevel::kWarn, "removed_from_cluster", {{"index", std::to_string(e.index)}});
}

}  // namespace pgfence::member
