// The cluster's operator: see sim_admin.h.
#include "sim_admin.h"

#include <string>

#include "sim_failure.h"

namespace pgfence::sim {

namespace {

std::string address(raft::NodeId id, int port) { return "10.0.0." + std::to_string(id) + ":" + std::to_string(port); }

member::AddMember add_request(raft::NodeId id) { return member::AddMember{id, address(id, 7000), address(id, 8000)}; }

}  // namespace

std::string describe(const member::Request& request) {
    if (const auto* a = std::get_if<member::AddMember>(&request)) return "add " + std::to_string(a->id);
    if (const auto* p = std::get_if<member::PromoteMember>(&request)) return "promote " + std::to_string(p->id);
    if (const auto* r = std::get_if<member::RemoveMember>(&request)) return "remove " + std::to_string(r->id);
    if (std::holds_alternative<member::ListMembers>(request)) return "list";
    return "a lock request";
}

Admin::Admin(int first_voters, SimRandom random) : random_(random), next_id_(static_cast<raft::NodeId>(first_voters) + 1) {
    for (int i = 1; i <= first_voters; ++i) view_.push_back(Seen{static_cast<raft::NodeId>(i), true, false});
}

std::size_t Admin::voters() const {
    std::size_t n = 0;
    for (const Seen& s : view_) n += s.voter ? 1 : 0;
    return n;
}

// One change at a time, within the bounds, by weights that pull the number
// of voters back into 2..4 from the edges; a list when the view is stale or
// nothing else fits.
member::Request Admin::choose() {
    if (view_stale_ || random_.chance(0.2)) return member::ListMembers{};
    if (joining_ != raft::kNoNode) return add_request(joining_);  // asked again until listed
    std::vector<raft::NodeId> voters_seen, learners, caught_up;
    for (const Seen& s : view_) {
        (s.voter ? voters_seen : learners).push_back(s.id);
        if (!s.voter && s.caught_up) caught_up.push_back(s.id);
    }
    const std::size_t v = voters_seen.size();
    const bool can_add = view_.size() < kMaxMembers && joiners_ < kMaxJoiners && learners.empty();
    // A learner not yet seen caught up: a list tells (the operator waits for it).
    const std::uint64_t w_list = caught_up.size() < learners.size() ? 4 : 0;
    const std::uint64_t w_promote = !caught_up.empty() && v < kMaxVoters ? 4 : 0;
    const std::uint64_t w_add = can_add ? (v <= 2 ? 5 : 3) : 0;
    const std::uint64_t w_remove = v >= 4 ? 5 : v == 3 ? 2 : v == 2 ? 1 : 0;
    const std::uint64_t w_drop_learner = learners.empty() ? 0 : 1;
    const std::uint64_t total = w_list + w_promote + w_add + w_remove + w_drop_learner;
    if (total == 0) return member::ListMembers{};
    std::uint64_t roll = random_.between(0, total - 1);
    if (roll < w_list) return member::ListMembers{};
    roll -= w_list;
    if (roll < w_promote) return member::PromoteMember{caught_up[random_.index(caught_up.size())]};
    roll -= w_promote;
    if (roll < w_add) {
        joining_ = next_id_++;
        ++joiners_;
        return add_request(joining_);
    }
    roll -= w_add;
    if (roll < w_remove) return member::RemoveMember{voters_seen[random_.index(v)]};
    return member::RemoveMember{learners[random_.index(learners.size())]};
}

Admin::Start Admin::begin(std::size_t members) {
    require(!waiting_, "the admin began a request while waiting for one");
    waiting_ = true;
    attempt_ = 0;
    ++op_id_;
    handed_over_ = false;
    const raft::NodeId joining_before = joining_;
    request_ = choose();
    Start s;
    if (joining_ != joining_before) s.join = joining_;  // a new member: started before it is added
    if (leader_guess_ == raft::kNoNode || leader_guess_ > members) leader_guess_ = 1 + random_.index(members);
    s.send = resend(leader_guess_ - 1);
    return s;
}

Admin::Send Admin::resend(std::size_t member) {
    ++attempt_;
    return Send{member, ClientRequest{kClient, op_id_, attempt_, request_}};
}

Admin::Reaction Admin::on_reply(const ClientReply& reply, std::size_t members) {
    if (!waiting_ || reply.op_id != op_id_ || reply.attempt != attempt_) return {};
    raft::NodeId hint = raft::kNoNode;
    if (reply.kind == ClientReply::Kind::kAnswer) {
        if (const auto* u = std::get_if<member::Unavailable>(&reply.answer.response)) {
            hint = u->leader;
            if (reply.handover) {
                handed_over_ = true;
                ++counts_.handovers;
            }
        } else {
            record(reply.answer, reply.from);
            waiting_ = false;
            return Reaction{Next::kDone, {}};
        }
    }
    if (attempt_ >= kMaxAttempts) {
        on_timeout(op_id_);
        return Reaction{Next::kDone, {}};
    }
    leader_guess_ = hint != raft::kNoNode && hint <= members ? hint : 1 + random_.index(members);
    return Reaction{Next::kResend, resend(leader_guess_ - 1)};
}

void Admin::record(const member::Answer& answer, raft::NodeId from) {
    const member::Response& r = answer.response;
    if (const auto* m = std::get_if<member::Members>(&r)) {
        leader_guess_ = from;
        view_.clear();
        for (const member::MemberView& v : m->members) view_.push_back(Seen{v.id, v.voter, v.caught_up});
        view_stale_ = false;
        auto find = [this](raft::NodeId id) -> const Seen* {
            for (const Seen& s : view_) {
                if (s.id == id) return &s;
            }
            return nullptr;
        };
        if (joining_ != raft::kNoNode && find(joining_) != nullptr) joining_ = raft::kNoNode;
        if (const auto* a = std::get_if<member::AddMember>(&request_); a && find(a->id) != nullptr) ++counts_.adds;
        if (const auto* p = std::get_if<member::PromoteMember>(&request_)) {
            const Seen* s = find(p->id);
            if (s != nullptr && s->voter) ++counts_.promotions;
        }
        if (const auto* d = std::get_if<member::RemoveMember>(&request_); d && find(d->id) == nullptr) {
            ++counts_.removals;
            if (handed_over_) ++counts_.leader_removals;
        }
        if (std::holds_alternative<member::ListMembers>(request_)) ++counts_.lists;
        return;
    }
    require(std::holds_alternative<member::ChangeRefused>(r) || std::holds_alternative<member::UnknownMember>(r),
            "the admin's membership request was answered with something else than a member list, a refusal or "
            "Unavailable (response type ", r.index(), ")");
    ++counts_.refused;
    view_stale_ = true;  // the leader's configuration is not what the admin thought
}

bool Admin::on_timeout(std::uint64_t op_id) {
    if (!waiting_ || op_id != op_id_) return false;
    waiting_ = false;
    view_stale_ = true;
    leader_guess_ = raft::kNoNode;  // it may be down, or stopped for good: another next time
    ++counts_.unknown;
    return true;
}

}  // namespace pgfence::sim
