// String names for the core's enums and Ready::empty().
#include "raft/types.h"

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

bool Ready::empty() const {
    return !hard_state && !snapshot && entries.empty() && messages_now.empty() &&
           messages.empty() && committed.empty() && reads.empty() && dropped_reads.empty();
}

}  // namespace pgfence::raft
