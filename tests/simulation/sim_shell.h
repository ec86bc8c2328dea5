// One simulated member: the member core that fence-coordinator runs
// (coordinator/member/core.h), its simulated disk, and the simulation's
// part of the shell — the same effects carried out on simulated time,
// network and disk, in the server's order:
//   turn -> take effects: send, save (the disk compacts at once), the
//   Persist (written to the disk as pending writes), answers
//   ... persist_started(): a leader applies and answers its batch ...
//   the cluster schedules the fsync: sync -> send the Ready's messages
//   ... advance later (a leader's writer thread posts it back), or at
//   once (a follower writes inline, unless a snapshot save is queued) ...
//   persisted()
// No lock rule lives here: this file only moves bytes and time. The
// checkers hear of every entry applied and snapshot restored through the
// core's ApplyObserver, and of every message before it leaves; the leader
// checker (leader_checker.h) of what the core proposes, answers, queues and
// logs, and of every message as it arrives; the quorum checker
// (quorum_checker.h) of the votes it receives, each leadership it begins,
// each commit index it reaches as leader, every configuration entry it
// applies, and of the configuration it says is in force once its whole log
// is durable. Effects::removed stops it for good, as the server does
// (removed() then says so; the cluster calls stop()).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lock/table.h"
#include "member/core.h"
#include "raft/raft.h"
#include "leader_checker.h"
#include "quorum_checker.h"
#include "safety_checker.h"
#include "sim_disk.h"

namespace pgfence::sim {

struct ClientRequest {
    int client = 0;
    std::uint64_t op_id = 0;
    int attempt = 0;  // replies to an earlier attempt are ignored
    member::Request request;
};

struct ClientReply {
    enum class Kind : std::uint8_t { kAnswer, kUnknown };
    int client = 0;
    std::uint64_t op_id = 0;
    int attempt = 0;
    raft::NodeId from = raft::kNoNode;  // the member that answered
    Kind kind = Kind::kUnknown;
    member::Answer answer;  // kAnswer
    // An Unavailable from a leader asked to remove itself, which began
    // handing its leadership over (its core logged the transfer with it).
    bool handover = false;
};

struct Outbox {
    std::vector<raft::Message> messages;
    std::vector<ClientReply> replies;
    std::vector<std::pair<std::string, lock::Token>> expires_proposed;  // (key, token), for the lease checker
};

struct MemberStats {
    std::uint64_t applied_entries = 0;
    std::uint64_t snapshots_restored = 0;
    std::uint64_t compactions = 0;
    std::uint64_t grants_to_gone = 0;  // Granted answers for a client that had left
    std::uint64_t twin_grants_unwritten = 0;  // of those, a twin acquire's (its connection abandoned)
    std::uint64_t handovers = 0;       // leaderships handed over because the leader was asked to remove itself
};

class Member final : public member::ApplyObserver {
public:
    // `config.raft` names the member and the cluster; `clock_us` is the
    // simulation's clock (the core's time is this member's reading of it).
    Member(member::Config config, bool hard_state_first, SafetyChecker& checker, LeaderChecker& leader_checker,
           QuorumChecker& quorum_checker, const std::uint64_t& clock_us, double clock_rate);

    raft::NodeId id() const { return config_.raft.id; }
    bool up() const { return core_ != nullptr; }
    // Its core told it its removal applied (Effects::removed): stop it.
    bool removed() const { return removed_; }
    bool stopped() const { return stopped_; }
    const raft::Raft& raft() const { return core_->raft(); }
    const member::Core& core() const { return *core_; }
    const lock::LockTable& table() const { return core_->table(); }
    const SimDisk& disk() const { return disk_; }
    bool persisting() const { return in_flight_ != nullptr; }
    const MemberStats& stats() const { return stats_; }

    // Builds a new core from the durable image only (first start or restart).
    void start(std::uint64_t random_seed);

    // Power loss: the core, the Ready being persisted, pending answers are
    // gone; the disk keeps what crash() keeps.
    CrashLoss crash(SimRandom& random);
    // After removed(): the member stops for good, gracefully (its pending
    // write completes); it is never started again.
    void stop();

    void tick(Outbox& out);
    // A peer's message, sent at sent_us (the simulation's clock).
    void step(const raft::Message& m, std::uint64_t sent_us, Outbox& out);
    void handle_client(const ClientRequest& request, Outbox& out);
    // A twin acquire (sim_workload.h, Workload::Send::twin_attempt): `twin`
    // and `request` read in one turn, `twin`'s connection closed at once.
    // Its answer is reported unwritten; the core hears client_gone for it
    // before anything applies when `gone_first`, else never (the failed
    // write tells it).
    void handle_twins(const ClientRequest& twin, const ClientRequest& request, bool gone_first, Outbox& out);
    // The client of op_id left: its requests here are reported gone.
    void client_gone(int client, std::uint64_t op_id, Outbox& out);
    bool transfer(raft::NodeId target);
    raft::ProposeResult propose_raw(const lock::Command& cmd);

    // Pumps the core and carries out its effects; returns true when a
    // Persist began (the cluster schedules persist_durable()).
    bool begin_persist(Outbox& out);

    // The fsync completed: the disk is synced and the Ready's messages sent
    // (the writer thread's part). Inline (a follower's write on its loop) it
    // also finishes at once; otherwise finish_persist() is a later event.
    void persist_durable(Outbox& out);
    bool durable_not_advanced() const { return durable_; }
    bool persisting_inline() const { return in_flight_ != nullptr && inline_; }
    void finish_persist(Outbox& out);

    // member::ApplyObserver
    void before_apply(const raft::Entry& entry, const lock::LockTable& table) override;
    void after_apply(const raft::Entry& entry, const lock::Result& result, const lock::LockTable& table) override;
    void restored(const raft::SnapshotMeta& meta, const lock::LockTable& table) override;
    void proposed(raft::Index index, const lock::Command& cmd) override;

private:
    struct Pending {
        int client;
        std::uint64_t op_id;
        int attempt;
        std::vector<std::string> acquire_keys;  // the keys an acquire asks for (none for other requests)
    };

    member::Time now() const;
    void tell_wall_clock();
    void end_process();  // crash() and stop(): everything but the disk is gone
    void carry_out(Outbox& out);  // the core's effects, except a Persist's start (begin_persist)
    void carry_out_batch(Outbox& out);
    void after_input(Outbox& out);
    void send(const raft::Message& m, Outbox& out);
    void check_restart() const;
    void check_core();
    void check_quorums();  // the leader's election and commits, the configuration in force
    raft::Index previous_config_entry(raft::Index index) const;
    void tell_leader_checker(Outbox& out);  // the batch's log lines, queued ids and answers

    member::Config config_;
    SafetyChecker& checker_;
    LeaderChecker& leader_checker_;
    QuorumChecker& quorum_checker_;
    raft::Configuration first_config_;  // Config::members as voters (empty: it joined)
    const std::uint64_t& clock_us_;
    double clock_rate_;  // this member's clock runs at clock_rate_ x the simulation's

    std::unique_ptr<member::Core> core_;  // null while crashed
    SimDisk disk_;
    std::shared_ptr<const raft::Ready> in_flight_;  // the Persist being written
    bool inline_ = false;           // written inline (a follower's, no save queued)
    bool durable_ = false;          // synced and its messages sent, not yet persisted()
    bool saving_snapshot_ = false;  // a save came since the last Persist began (the server's
                                    // is still on its writer thread: the next Persist queues behind it)
    member::Effects effects_;
    std::map<member::RequestId, Pending> pending_;
    std::set<member::RequestId> gone_;  // reported gone, possibly still answered (a few per client timeout)
    std::set<member::RequestId> twins_;  // of gone_, twin acquires' (counted apart)
    member::RequestId next_request_ = 1;

    // For the checkers: the holder of the applying command's key before it.
    std::optional<lock::Lock> prior_;
    lock::Token prior_last_token_ = 0;
    // A leader's Expire and ExpireMany entries since the batch of effects
    // began (the core logs one line per entry, not per lock): proposed, by
    // index, their locks; applied, by index, the locks named and those it
    // removed (held with the token before, not after). The applying entry's
    // locks and whether each was held with its token before it.
    using KeyToken = std::pair<std::string, lock::Token>;
    struct AppliedExpire {
        std::size_t locks = 0;
        std::vector<KeyToken> removed;
    };
    std::map<raft::Index, std::vector<KeyToken>> expires_proposed_;
    std::map<raft::Index, AppliedExpire> expires_applied_;
    std::vector<std::pair<KeyToken, bool>> expire_before_;

    // Durable-ack records: the last append ack and granted vote sent.
    std::optional<std::pair<raft::Index, raft::Term>> acked_entry_;
    std::optional<std::pair<raft::Term, raft::NodeId>> acked_vote_;

    // Quorum checks: the term this incarnation was last seen leading, and
    // its commit index then; a configuration check waiting for the whole
    // log to be durable.
    raft::Term led_term_ = 0;
    raft::Index led_commit_ = 0;
    bool configuration_check_due_ = false;
    raft::Index last_config_written_ = 0;  // the highest index of a configuration entry it wrote
    bool removed_ = false;
    bool stopped_ = false;

    MemberStats stats_;
};

}  // namespace pgfence::sim
