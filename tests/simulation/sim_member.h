// One simulated cluster member: a Raft core, its simulated disk and its lock
// table, driven through the Ready contract of raft.h:
//   ready() -> write to disk (pending), send messages_now at once
//   ... persistence completes later (the cluster schedules it) ...
//   sync -> send messages -> restore snapshot, apply committed -> advance()
// Between ready() and advance() the member keeps ticking and stepping. Eager
// (the server's order): a leader's committed entries are applied when the
// write begins, and advance() is a later event than the sync and the sends,
// as in the server, where the writer thread sends and the event loop
// advances; a follower's (or candidate's) Ready is written inline, as the
// server's event loop does: the cluster completes it in the same event, with
// no input in between (only a crash may cut the write short). The first Ready
// after a compaction is written as a leader's is, as in the server, where it
// queues behind the snapshot save on the writer thread.
//
// The member also plays the server's part for clients: a leader proposes
// their commands and answers once it applies the proposal's index with the
// proposal's term; it serves reads through read_index(). Everything it sends
// goes to an Outbox the cluster drains.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lock/commands.h"
#include "lock/table.h"
#include "raft/raft.h"
#include "safety_checker.h"
#include "sim_disk.h"

namespace pgfence::sim {

struct ClientRequest {
    int client = 0;
    std::uint64_t op_id = 0;
    int attempt = 0;  // replies to an earlier attempt are ignored
    bool is_read = false;
    lock::Command command;  // !is_read
    std::string read_key;   // is_read
};

struct ClientReply {
    enum class Kind : std::uint8_t { kResult, kRead, kUnknown, kRedirect };
    int client = 0;
    std::uint64_t op_id = 0;
    int attempt = 0;
    Kind kind = Kind::kUnknown;
    raft::NodeId leader_hint = raft::kNoNode;  // kRedirect
    raft::Index index = 0;
    raft::Term term = 0;
    lock::Result result;
    lock::Token read_token = 0;
};

struct Outbox {
    std::vector<raft::Message> messages;
    std::vector<ClientReply> replies;
};

struct MemberStats {
    std::uint64_t applied_entries = 0;
    std::uint64_t snapshots_restored = 0;
    std::uint64_t compactions = 0;
};

class Member {
public:
    Member(raft::Config config, std::uint64_t compact_every_entries, std::uint64_t keep_entries,
           bool hard_state_first, bool eager, SafetyChecker& checker);

    raft::NodeId id() const { return config_.id; }
    bool up() const { return raft_ != nullptr; }
    raft::Raft& raft() { return *raft_; }
    const raft::Raft& raft() const { return *raft_; }
    const lock::LockTable& table() const { return table_; }
    const SimDisk& disk() const { return disk_; }
    bool persisting() const { return in_flight_.has_value(); }
    const MemberStats& stats() const { return stats_; }

    // Builds a new core from the durable image only (first start or restart).
    void start(std::uint64_t random_seed);

    // Power loss: the core, the Ready being persisted, proposals and reads
    // are gone; the disk keeps what crash() keeps.
    CrashLoss crash(SimRandom& random);

    void tick(Outbox& out);
    void step(const raft::Message& m, Outbox& out);
    void handle_client(const ClientRequest& request, Outbox& out);
    // transfer_leadership / propose for the cluster's own needs (liveness).
    bool transfer(raft::NodeId target);
    raft::ProposeResult propose_raw(const lock::Command& cmd);

    // If no Ready is being persisted and the core has one: takes it, writes
    // it to the disk, sends messages_now. Returns true when a persist started
    // (the cluster schedules persist_durable()).
    bool begin_persist(Outbox& out);

    // The persist's fsync completed. Eager (the server's order): the disk is
    // synced and the Ready's messages sent (the writer thread's part); the
    // rest waits for finish_persist(), which the cluster schedules as a later
    // event, so inputs may arrive in between. Otherwise (not eager, or
    // inline) it calls finish_persist() itself.
    void persist_durable(Outbox& out);
    bool durable_not_advanced() const { return durable_; }
    // Eager and not leader when the persist began: the cluster syncs it at
    // once (persist_durable() then finishes it too).
    bool persisting_inline() const { return in_flight_.has_value() && inline_; }

    // The rest of the Ready contract: apply (unless applied early), advance.
    void finish_persist(Outbox& out);

private:
    struct Proposal {
        int client;
        std::uint64_t op_id;
        int attempt;
        raft::Term term;
    };
    struct PendingRead {
        int client;
        std::uint64_t op_id;
        int attempt;
        std::string key;
        std::optional<raft::Index> read_index;  // set once confirmed
    };

    void after_input(Outbox& out);
    void send(const raft::Message& m, Outbox& out);
    void apply_ready(const raft::Ready& ready, Outbox& out);
    void apply_entry(const raft::Entry& e, Outbox& out);
    void restore(const raft::Snapshot& snap);
    void serve_reads(Outbox& out);
    void fail_pending(Outbox& out);
    void maybe_compact();
    void check_restart() const;
    void check_core();

    raft::Config config_;
    std::uint64_t compact_every_entries_;
    std::uint64_t keep_entries_;
    bool eager_;  // take_committed() while persisting, Ready applied when its write begins
    bool applied_early_ = false;  // the Ready in flight was applied when its write began
    bool inline_ = false;         // the Ready in flight is a follower's, written inline (eager)
    bool saving_snapshot_ = false;  // compacted since the last begin_persist (the server's save
                                    // is still on its writer thread: the next Ready queues behind it)
    bool durable_ = false;        // the Ready in flight is synced and its messages sent
    SafetyChecker& checker_;

    std::unique_ptr<raft::Raft> raft_;  // null while crashed
    SimDisk disk_;
    lock::LockTable table_;
    std::optional<raft::Ready> in_flight_;  // the Ready being persisted
    raft::Term leader_term_ = 0;            // term of our leadership, 0 when not leader
    std::map<raft::Index, Proposal> proposals_;
    std::map<std::uint64_t, PendingRead> reads_;  // by read context
    std::uint64_t next_read_context_ = 1;

    // Durable-ack records (issue 4): the last append ack and granted vote sent.
    std::optional<std::pair<raft::Index, raft::Term>> acked_entry_;
    std::optional<std::pair<raft::Term, raft::NodeId>> acked_vote_;

    MemberStats stats_;
};

}  // namespace pgfence::sim
