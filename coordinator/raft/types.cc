// String names for the core's enums and Ready::empty().
#include "raft/types.h"

#include <algorithm>

#include "codec/bytes.h"
#include "raft/raft.h"

namespace pgfence::raft {

const char* to_string(Role role) {
    switch (role) {
        case Role::kFollower:
            return "follower";
        case Role::kPreCandidate:
            return "precandidate";
        case Role::kCandidate:
            return "candidate";
        case Role::kLeader:
            return "leader";
    }
    return "unknown-role";
}

const char* to_string(ProposeError err) {
    switch (err) {
        case ProposeError::kNone:
            return "none";
        case ProposeError::kNotLeader:
            return "not leader";
        case ProposeError::kTransferring:
            return "leadership transfer in progress";
        case ProposeError::kTooLarge:
            return "command larger than max_entry_bytes";
        case ProposeError::kBacklog:
            return "uncommitted backlog above max_uncommitted_bytes";
        case ProposeError::kConfigPending:
            return "a configuration change is not committed yet";
        case ProposeError::kNotReady:
            return "the leader has not committed an entry of its term yet";
        case ProposeError::kUnknownMember:
            return "no such member";
        case ProposeError::kAlreadyMember:
            return "already a member";
        case ProposeError::kNotLearner:
            return "not a learner";
        case ProposeError::kNotCaughtUp:
            return "the learner has not caught up with the leader's log";
        case ProposeError::kNoQuorumLeft:
            return "the voters left would not have a quorum of members heard from in the last two election periods";
        case ProposeError::kRemoveLeader:
            return "the leader cannot remove itself: transfer leadership first";
        case ProposeError::kInvalid:
            return "invalid configuration change";
    }
    return "unknown-error";
}

const char* to_string(ReplicationState state) {
    switch (state) {
        case ReplicationState::kProbe:
            return "probe";
        case ReplicationState::kReplicate:
            return "replicate";
        case ReplicationState::kSnapshot:
            return "snapshot";
    }
    return "unknown-state";
}

const char* to_string(ConfigChangeType type) {
    switch (type) {
        case ConfigChangeType::kAddLearner:
            return "add learner";
        case ConfigChangeType::kPromote:
            return "promote";
        case ConfigChangeType::kRemove:
            return "remove";
    }
    return "unknown-change";
}

const ConfigMember* Configuration::find(NodeId id) const {
    auto it = std::lower_bound(members.begin(), members.end(), id,
                               [](const ConfigMember& m, NodeId v) { return m.id < v; });
    return it != members.end() && it->id == id ? &*it : nullptr;
}

bool Configuration::is_voter(NodeId id) const {
    const ConfigMember* m = find(id);
    return m != nullptr && m->voter;
}

std::size_t Configuration::quorum() const {
    std::size_t voters = 0;
    for (const ConfigMember& m : members) voters += m.voter ? 1 : 0;
    return voters / 2 + 1;
}

std::vector<NodeId> Configuration::voters() const {
    std::vector<NodeId> out;
    for (const ConfigMember& m : members) {
        if (m.voter) out.push_back(m.id);
    }
    return out;
}

Configuration Configuration::of_voters(const std::vector<NodeId>& ids) {
    Configuration c;
    for (NodeId id : ids) c.members.push_back(ConfigMember{id, true, {}});
    std::sort(c.members.begin(), c.members.end(),
              [](const ConfigMember& a, const ConfigMember& b) { return a.id < b.id; });
    return c;
}

bool Configuration::voters_only() const {
    return std::all_of(members.begin(), members.end(),
                       [](const ConfigMember& m) { return m.voter && m.context.empty(); });
}

std::string Configuration::check() const {
    if (members.size() > kMaxConfigMembers) {
        return std::to_string(members.size()) + " members, over the limit of " + std::to_string(kMaxConfigMembers);
    }
    bool any_voter = false;
    for (std::size_t i = 0; i < members.size(); ++i) {
        const ConfigMember& m = members[i];
        if (m.id == kNoNode) return "member id 0";
        if (i > 0 && members[i - 1].id >= m.id) return "member ids not sorted and unique at " + std::to_string(m.id);
        if (m.context.size() > kMaxMemberContextBytes) {
            return "member " + std::to_string(m.id) + "'s context is " + std::to_string(m.context.size()) +
                   " bytes, over the limit of " + std::to_string(kMaxMemberContextBytes);
        }
        any_voter = any_voter || m.voter;
    }
    if (!any_voter) return "no voter";
    return {};
}

namespace {
constexpr std::uint8_t kConfigurationVersion = 1;
}  // namespace

std::string encode_configuration(const Configuration& config) {
    std::string out;
    codec::put_u8(out, kConfigurationVersion);
    codec::put_u32(out, static_cast<std::uint32_t>(config.members.size()));
    for (const ConfigMember& m : config.members) {
        codec::put_u64(out, m.id);
        codec::put_u8(out, m.voter ? 1 : 0);
        codec::put_string(out, m.context, kMaxMemberContextBytes, "member context");
    }
    return out;
}

std::string decode_configuration(std::string_view bytes, Configuration& out) {
    codec::Reader in(bytes);
    const std::uint8_t version = in.u8();
    if (in.ok() && version != kConfigurationVersion) return "configuration version " + std::to_string(version) + " is not 1";
    const std::uint32_t count = in.u32();
    if (!in.ok()) return "configuration truncated";
    if (count > kMaxConfigMembers) return std::to_string(count) + " members, over the limit of " + std::to_string(kMaxConfigMembers);
    Configuration c;
    for (std::uint32_t i = 0; i < count && in.ok(); ++i) {
        ConfigMember m;
        m.id = in.u64();
        const std::uint8_t voter = in.u8();
        if (in.ok() && voter > 1) return "member voter flag " + std::to_string(voter) + " is not 0 or 1";
        m.voter = voter == 1;
        m.context = std::string(in.string("member context", kMaxMemberContextBytes));
        c.members.push_back(std::move(m));
    }
    if (!in.ok()) return "configuration truncated or a context over " + std::to_string(kMaxMemberContextBytes) + " bytes";
    if (in.remaining() != 0) return std::to_string(in.remaining()) + " trailing bytes after the configuration";
    if (!c.members.empty()) {
        if (std::string why = c.check(); !why.empty()) return why;
    }
    out = std::move(c);
    return {};
}

std::string check_config_entry(std::string_view data) {
    Configuration c;
    if (std::string why = decode_configuration(data, c); !why.empty()) return why;
    if (c.members.empty()) return "a configuration without members";
    return {};
}

bool Ready::empty() const {
    return !hard_state && !snapshot && entries.empty() && messages_now.empty() &&
           messages.empty() && committed.empty() && reads.empty() && dropped_reads.empty();
}

}  // namespace pgfence::raft
