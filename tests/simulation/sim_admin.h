// The cluster's operator: one admin client of the member core's membership
// requests (member/api.h: AddMember, PromoteMember, RemoveMember,
// ListMembers), as an operator with `fencectl` would use them. In a seed
// that changes its membership it asks for one thing at a time, at times
// the cluster draws:
//   add      a new member: the cluster starts a fresh one (the next id, an
//            empty member list: it joins) and the admin asks the leader to
//            add it as a learner; an add whose answer was lost is asked again
//            (the same id) until a list shows the member;
//   promote  a learner that the leader lists as caught up becomes a voter;
//   remove   a voter (a follower, or the leader: it hands its leadership over
//            and answers Unavailable{target}, and the retry at the target
//            removes it) or a learner;
//   list     the members: what a lost answer did, and who is caught up.
// It keeps 1..kMaxVoters voters and at most kMaxMembers members (by its
// latest view: the leader's configuration in its latest answer), and starts
// at most kMaxJoiners members. Like the clients it follows Unavailable{leader}
// hints and gives up after kMaxAttempts or its timeout (the outcome then
// unknown: its next request is a list).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "member/api.h"
#include "raft/types.h"
#include "sim_random.h"
#include "sim_shell.h"

namespace pgfence::sim {

struct AdminCounts {
    std::uint64_t adds = 0;        // answered with the new learner listed
    std::uint64_t promotions = 0;  // answered with the learner a voter
    std::uint64_t removals = 0;    // answered with the member gone (the leader's included)
    std::uint64_t leader_removals = 0;  // of those, of a leader that had handed over for it
    std::uint64_t handovers = 0;   // Unavailable{target} from a leader asked to remove itself
    std::uint64_t refused = 0;     // ChangeRefused or UnknownMember
    std::uint64_t lists = 0;
    std::uint64_t unknown = 0;     // gave up without an answer
};

class Admin {
public:
    static constexpr int kMaxVoters = 5;
    static constexpr std::size_t kMaxMembers = 7;
    static constexpr int kMaxJoiners = 10;
    static constexpr int kClient = 1'000'000;  // its client number on the network (not a workload client)

    // `first_voters`: ids 1..n; new members get n+1, n+2, ...
    Admin(int first_voters, SimRandom random);

    struct Send {
        std::size_t member = 0;  // position (id - 1) of the member to send to
        ClientRequest request;
    };
    struct Start {
        raft::NodeId join = raft::kNoNode;  // a member to start (joining) before the request goes out
        Send send;
    };

    bool idle() const { return !waiting_; }
    // The next request (the admin must be idle). `members`: how many members
    // the cluster has started (ids 1..members), for a guess of the leader.
    Start begin(std::size_t members);

    enum class Next : std::uint8_t { kIgnore, kResend, kDone };
    struct Reaction {
        Next next = Next::kIgnore;
        Send send;  // kResend
    };
    Reaction on_reply(const ClientReply& reply, std::size_t members);
    // The deadline of op_id passed: gives up if still waiting on it.
    bool on_timeout(std::uint64_t op_id);

    const AdminCounts& counts() const { return counts_; }

private:
    static constexpr int kMaxAttempts = 12;

    struct Seen {  // one member of the latest view
        raft::NodeId id = raft::kNoNode;
        bool voter = false;
        bool caught_up = false;
    };

    member::Request choose();
    void record(const member::Answer& answer, raft::NodeId from);
    Send resend(std::size_t member);
    std::size_t voters() const;

    SimRandom random_;
    std::vector<Seen> view_;
    bool view_stale_ = false;           // an outcome is unknown: list before changing anything
    raft::NodeId joining_ = raft::kNoNode;  // started, not yet listed as a member
    raft::NodeId next_id_ = 0;
    int joiners_ = 0;

    bool waiting_ = false;
    std::uint64_t op_id_ = 0;
    int attempt_ = 0;
    member::Request request_;
    raft::NodeId leader_guess_ = 1;  // kNoNode: none (a random member next)
    bool handed_over_ = false;  // this remove was answered Unavailable{target} by the member it removes
    AdminCounts counts_;
};

// "add 6", "promote 6", "remove 2", "list": for traces.
std::string describe(const member::Request& request);

}  // namespace pgfence::sim
