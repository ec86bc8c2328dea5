// Leadership transfer (thesis §3.10).
//
// The leader stops accepting proposals, brings the target's log up to date,
// then sends TimeoutNow; the target campaigns at once (skipping PreVote, its
// VoteRequest flagged `transfer` so followers' leader stickiness lets it
// through). If the transfer has not completed within an election timeout the
// leader aborts it and accepts proposals again.
#include "raft/core.h"

namespace pgfence::raft {

bool Raft::Impl::transfer_leadership(NodeId target) {
    Leader* l = leader_state();
    if (l == nullptr || target == cfg.id || !is_voter(target)) return false;
    if (l->transfer_target == target) return true;  // already under way
    l->transfer_target = target;
    l->transfer_elapsed_ticks = 0;
    drop_reads(*l);  // we are about to stop being leader
    maybe_send_timeout_now(*l, target);
    return true;
}

// Sends TimeoutNow once the target holds our whole log (durably: match comes
// from its acks, which it sends after persisting). Otherwise flush_appends
// catches it up and the ack that completes it triggers this again.
void Raft::Impl::maybe_send_timeout_now(Leader& l, NodeId to) {
    if (l.progress.at(to).match == log.last_index()) send(to, TimeoutNow{});
}

void Raft::Impl::abort_transfer(Leader& l) {
    l.transfer_target = kNoNode;
    l.transfer_elapsed_ticks = 0;
}

}  // namespace pgfence::raft
