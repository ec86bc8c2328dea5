// Raft::Impl: the core's state and the declarations of its handlers.
//
// Private header. The methods are split by topic (thesis chapters):
//   raft.cc        construction, step() dispatch and term rules, Ready/advance
//   election.cc    timers, PreVote, RequestVote, role changes (§3.4, §9.6, §6.2)
//   replication.cc propose, AppendEntries both sides, commit (§3.5, §3.6, §10.2)
//   snapshot.cc    compaction and InstallSnapshot (§5.1-5.4)
//   read_index.cc  heartbeats and ReadIndex (§6.4)
//   transfer.cc    leadership transfer (§3.10)
//   membership.cc  configurations and their changes (chapter 4)
//   invariants.cc  check_invariants()
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "raft/log.h"
#include "raft/progress.h"
#include "raft/raft.h"
#include "raft/rng.h"

namespace pgfence::raft {

// ---- Roles as types (ScyllaDB fsm style): state that only makes sense in one
// role lives in that role's struct, so it cannot outlive the role.

struct Follower {
    NodeId leader = kNoNode;  // whom we last heard from in this term
};

// Votes received in this campaign: id -> granted. Our own vote included.
using Votes = std::map<NodeId, bool>;

// §9.6: polls for pre-votes at term+1 without changing its term.
struct PreCandidate {
    Votes votes;
};

// Figure 2: term was incremented and we voted for ourselves.
struct Candidate {
    Votes votes;
    bool transfer = false;  // campaign started by TimeoutNow (§3.10)
};

struct PendingRead {
    std::uint64_t context = 0;
    Index index = 0;          // commit index when the read arrived (§6.4 step 2)
    std::uint64_t round = 0;  // heartbeat round that must reach a quorum
};

// A configuration in force from `index` on (the index of its entry; of the
// snapshot that carried it; 0 for Config::members).
struct ConfigAt {
    Index index = 0;
    Configuration config;
};

struct Leader {
    // Every member of the configuration in force except us, and removed
    // members still being told of their removal (Progress::removed_at).
    std::map<NodeId, Progress> progress;
    int heartbeat_elapsed_ticks = 0;
    NodeId transfer_target = kNoNode;  // §3.10
    int transfer_elapsed_ticks = 0;
    std::size_t uncommitted_bytes = 0;  // entry bytes proposed but not committed
    // ReadIndex (§6.4). Invariant: rounds in reads_inflight are non-decreasing.
    std::vector<std::uint64_t> reads_waiting_commit;  // until an entry of our term commits
    std::vector<PendingRead> reads_unsent;            // round starts at the next flush
    std::deque<PendingRead> reads_inflight;           // round sent, awaiting a quorum
    std::size_t pending_reads() const {
        return reads_waiting_commit.size() + reads_unsent.size() + reads_inflight.size();
    }
};

using RoleState = std::variant<Follower, PreCandidate, Candidate, Leader>;

enum class CampaignKind : std::uint8_t { kPreVote, kVote, kTransfer };

struct Raft::Impl {
    Impl(const Config& config, const Storage& storage);

    // ---- state ----
    Config cfg;
    SplitMix64 rng;
    RaftLog log;
    // Figure 2 persistent state. Invariant: log.base_index() <= commit <= log.last_index().
    Term term = 0;
    NodeId vote = kNoNode;
    Index commit = 0;
    RoleState role = Follower{};
    // The configuration in force at the snapshot point (or from
    // Config::members), then one per configuration entry after it, by
    // index; the last is in force (raft.h "Membership changes"). Never empty.
    std::vector<ConfigAt> configs;
    // The latest snapshot we hold (never null; empty() when none), shared
    // with the transfers sending it (Progress::sending), never copied for one.
    std::shared_ptr<const Snapshot> snapshot = std::make_shared<const Snapshot>();
    std::optional<Snapshot> unsent_snapshot;  // received from the leader, not yet in a Ready
    // A snapshot arriving in chunks: what came so far, from which leader and
    // term, and the offset a rejection was last sent for (none: kNotRejected).
    static constexpr std::uint64_t kNotRejected = ~std::uint64_t{0};
    Snapshot receiving;
    NodeId receiving_from = kNoNode;
    Term receiving_term = 0;
    std::uint64_t rejected_at = kNotRejected;
    Index refused_snapshot = 0;  // a snapshot larger than max_snapshot_bytes: its chunks are dropped
    Index applied = 0;        // advance()d; invariant applied <= handed_commit <= commit
    Index handed_commit = 0;  // last committed index handed out (entries or snapshot)
    HardState handed_hs;      // last hard state handed out in a Ready (or loaded)
    // The term of the last hard state advance()d (or loaded): a leader's
    // messages_now go out before its Ready is durable only in this term.
    Term durable_term = 0;
    // The commit index Ready::hard_state carries: the largest commit index
    // whose entries (or a snapshot covering them) were already durable at the
    // last advance(). A storage may write hard state before the batch's
    // entries (DurableStorage does); had we persisted `commit` itself, a crash
    // between the two writes could leave a durable commit index over a stale
    // stored entry that this batch was overwriting, and the restart would
    // apply it (State Machine Safety, Figure 3). Invariant: durable_commit <= commit.
    Index durable_commit = 0;
    int election_elapsed_ticks = 0;
    int randomized_timeout_ticks = 0;
    std::uint64_t read_round = 0;  // ReadIndex heartbeat rounds; never reset
    std::uint64_t dropped = 0;     // messages dropped by the cluster/member check
    bool told_removed = false;     // a leader answered our vote request with Removed
    bool ready_outstanding = false;
    bool outstanding_snapshot = false;  // the outstanding Ready carries a snapshot
    std::vector<Message> msgs_now;
    std::vector<Message> msgs;
    std::vector<ReadState> reads_out;
    std::vector<std::uint64_t> dropped_reads_out;

    // ---- helpers ----
    Leader* leader_state() { return std::get_if<Leader>(&role); }
    const Leader* leader_state() const { return std::get_if<Leader>(&role); }
    bool is_leader() const { return leader_state() != nullptr; }
    NodeId known_leader() const;
    Role role_kind() const;
    const Configuration& config() const { return configs.back().config; }
    std::size_t quorum() const { return config().quorum(); }
    bool is_voter(NodeId id) const { return config().is_voter(id); }
    // The leader's Progress of `id`; null for a member it does not replicate to.
    Progress* progress_of(NodeId id);
    void send(NodeId to, MessageBody body, Term msg_term);
    void send(NodeId to, MessageBody body) { send(to, std::move(body), term); }
    // A leader got a leader-only message of its own term: two leaders in one
    // term (Figure 3, Election Safety). Throws std::logic_error.
    [[noreturn]] void fail_two_leaders(const Message& m, const char* what) const;

    // raft.cc
    void step(const Message& m);
    bool step_term(const Message& m);  // false: message fully handled
    void step_current(const Message& m);
    bool has_ready() const;
    Ready ready();
    std::vector<Entry> hand_committed();  // next bounded run of durable committed entries
    std::vector<Entry> take_committed();
    std::vector<Message> take_messages_now();
    void advance(const Ready& rd);
    Status status() const;

    // election.cc
    void tick();
    void tick_election();
    void tick_leader(Leader& l);
    void reset_election_timer();
    bool in_lease() const;
    void become_follower(Term new_term, NodeId leader);
    void heard_from_leader(NodeId leader);
    void become_pre_candidate();
    void become_candidate(bool transfer);
    void become_leader();
    void campaign(CampaignKind kind);
    void handle_vote_request(const Message& m, const VoteRequest& req);
    void handle_vote_response(const Message& m, const VoteResponse& resp);

    // replication.cc
    ProposeResult propose(std::string command);
    void handle_append(const Message& m, const AppendRequest& req);
    void handle_append_response(const Message& m, const AppendResponse& resp);
    bool maybe_send_append(NodeId to, Progress& pr, bool send_if_empty);
    Index sendable_last() const;  // the last index appends may carry now
    void flush_appends(Leader& l);
    bool wants_flush(const Leader& l) const;
    bool maybe_commit();
    void on_commit_advanced(Index old_commit);

    // snapshot.cc
    void compact(Index index, std::string data, Index keep_entries);
    void compact(std::shared_ptr<const Snapshot> snap, Index keep_entries);
    std::optional<Term> compactable(Index index) const;
    std::uint64_t log_bytes_after(Index from, Index to) const;
    void send_snapshot(NodeId to, Progress& pr);
    bool live_quorum(const Leader& l, const Configuration& next) const;
    void handle_snapshot(const Message& m, const SnapshotRequest& req);
    void install_snapshot(const Message& m, Snapshot snap);  // a whole one (rules 6 and 7)
    void handle_snapshot_ack(const Message& m, const SnapshotAck& ack);
    void send_snapshot_chunks(NodeId to, Progress& pr);

    // read_index.cc
    bool read_index(std::uint64_t context);
    void bcast_heartbeat(Leader& l);
    void handle_heartbeat(const Message& m, const Heartbeat& hb);
    void handle_heartbeat_response(const Message& m, const HeartbeatResponse& resp);
    void start_read_round(Leader& l);
    void release_reads(Leader& l);
    void drop_reads(Leader& l);

    // transfer.cc
    bool transfer_leadership(NodeId target);
    void maybe_send_timeout_now(Leader& l, NodeId to);
    void abort_transfer(Leader& l);

    // membership.cc
    void restore_configs();  // from the snapshot (or Config::members) and the log
    void rebuild_configs_from(Index from);  // after the log changed at `from` and beyond
    void reset_configs(const SnapshotMeta& meta);  // a snapshot replaced the log
    Configuration first_config() const;            // Config::members with their contexts
    void compact_configs(Index index);
    const Configuration& config_at(Index index) const { return config_entry_at(index).config; }
    const ConfigAt& config_entry_at(Index index) const;
    // The configuration a snapshot carries, at the index of its entry.
    ConfigAt config_of(const SnapshotMeta& meta) const;
    void sync_progress(Leader& l);  // the leader's Progress map follows the configuration
    ProposeResult propose_config(const ConfigChange& change);
    void tick_membership(Leader& l);
    void on_ack(Progress& pr, NodeId from);  // a learner's catch-up rounds
    bool caught_up(const Progress& pr) const;
    // Before a heartbeat broadcast: starts a new heartbeat round when a
    // removed member can now be told its removal committed.
    void heartbeat_round_for_leaving(Leader& l);
    bool told_of_removal(const Progress& pr, std::uint64_t acked_round) const;

    // invariants.cc
    std::string check_invariants() const;
};

}  // namespace pgfence::raft
