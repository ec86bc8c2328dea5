// Private state of Member, the Asio shell around the member core
// (member/core.h): shared by member*.cc and routes.cc, not included elsewhere.
//
// The shell decides nothing about locks: it turns sockets, timers and disk
// completions into the core's inputs, and carries out the core's effects
// (member.cc: sends, the Persist and the snapshot save where DiskTurn says,
// log lines), answering requests over HTTP (routes.h: the routes;
// member_http.cc: the gate before them and the core's answers). Status,
// metrics and the MemberInfo it tells peers: member_status.cc.
//
// What the core knows (role, configuration in force, ticks, shutting down,
// removed) is asked of the core, never kept here a second time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "log/log.h"
#include "member/core.h"
#include "net/api_request.h"
#include "net/http_server.h"
#include "net/member_info.h"
#include "net/peer_transport.h"
#include "server/commit_phases.h"
#include "server/disk_turn.h"
#include "server/durable_log.h"
#include "server/loop.h"
#include "server/member.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/security.h"
#include "server/proof_signer.h"
#include "server/routes.h"
#include "server/watchers.h"
#include "server/writer.h"

namespace pgfence::server {

using Clock = std::chrono::steady_clock;

constexpr int kInfoEveryTicks = 5;  // MemberInfo broadcast period

// A request handed to the core and not yet answered.
// An election route's request (routes.cc): its answer is written in the
// election's words (docs/http-api.md "Elections"), not the lock route's.
struct ElectionCall {
    enum class Kind : std::uint8_t { kCampaign, kProclaim, kResign, kLeader };
    Kind kind = Kind::kCampaign;
    std::string name;
};

struct Outstanding {
    ExchangePtr exchange;
    std::string target;  // where a 307 to the leader points
    // A list of every lock, with authorization on: only what this caller may read.
    std::optional<Caller> reader;
    std::optional<ElectionCall> election;
    Clock::time_point read_at;  // handed to the core (CommitPhases' "queue" begins); zero once it waits in a queue
};

// Where a request stood when its client left (Member::Impl::client_left).
enum class LeftAt : std::uint8_t {
    // Not answered yet (a queued acquire, a grant being committed): the core
    // drops it from its queue, or answers its grant by ending it at once.
    kWaiting,
    // Answered Granted, and the answer not received (the client left first,
    // or it could not be written): the core expires the lease at once (a phantom grant).
    kGranted,
};

// Denial log lines per second at most (member_http.cc; the metrics count all).
constexpr int kDenialLogsPerSecond = 20;

// Threading: owned by the loop thread. Every method runs there but the
// jobs handed to the writer, snapshot and signing threads: they read only
// what they were given, `log` (one write at a time: DiskTurn) and the
// thread-safe transport->send().
struct Member::Impl {
    Impl(boost::asio::io_context& io, Options o, StartPlan p, std::unique_ptr<DurableLog> l);
    ~Impl();

    // ---- member.cc: inputs and effects ----
    std::string start();
    void on_tick();
    void on_peer_message(raft::Message m);
    void raise_open_files();  // RLIMIT_NOFILE for --max-connections (open_files.h)
    // One loop turn: every input schedules it (schedule_turn(), at most one
    // queued); run_turn() runs the core's turn and carries out its effects.
    void schedule_turn();
    void run_turn();
    void report_gone();  // tells the core of watched requests whose client left
    void execute(member::Effects& fx);
    void run_persist(const std::shared_ptr<const raft::Ready>& rd);  // on the loop or the writer: DiskTurn
    // One DiskTurn step, and the snapshot work it calls for begun (a
    // Persist's place is run_persist's to act on). A broken rule is fatal.
    DiskTurn::Action disk_step(const DiskTurn::Event& event);
    void write_snapshot_file(std::shared_ptr<const raft::Snapshot> snap);  // on the snapshot thread
    void adopt_snapshot(std::shared_ptr<const raft::Snapshot> snap);       // on the writer thread
    std::chrono::nanoseconds persist_ready(const raft::Ready& rd);  // one fdatasync; its duration
    // A leader's batch taken (run_persist): CommitPhases told (and, when no
    // follower's ack is needed, of its send: the batch's own write commits
    // it); its last index, or 0 when not timed.
    raft::Index time_batch(const raft::Ready& rd);
    // The followers' acks that make a quorum with the leader's own log:
    // quorum() - 1, a leader being a voter (raft/invariants.cc); were it
    // not, a quorum of followers.
    std::size_t followers_needed() const;
    // A leader's sends of one execute(): CommitPhases told of the
    // highest entry their AppendRequests carry, if any.
    void time_sends(const std::vector<raft::Message>& sent);
    // The configuration in force changed: its members' addresses are
    // learnt, and the transport dials its members (member_status.cc).
    void apply_configuration(const raft::Configuration& config);
    // `warn`: log the members whose peer address is not known.
    std::vector<net::PeerAddress> peers_to_dial(bool warn = false) const;
    // Where member `id` serves the HTTP API ("" when not known), decided
    // here alone for redirects, /v1/status and /v1/members: this member's
    // own --client-addr; for another, the address it last reported itself
    // (MemberInfo), so clients go where it listens now; else `in_config`
    // (its configuration entry's, when the caller holds it); else the one
    // learnt from the configuration or a join answer.
    std::string client_addr_of(raft::NodeId id, std::string_view in_config = {}) const;
    // The outgoing peer connection to `id` is up and its MemberInfo (sent
    // every kInfoEveryTicks) arrived within the last reachable_ticks(): both
    // directions work and the peer runs. /v1/status "reachable" and the
    // metric pgfence_peers_reachable.
    bool peer_reachable(raft::NodeId id) const;
    std::uint64_t reachable_ticks() const;
    void shutdown(std::function<void()> done);
    void shutdown_step(Clock::time_point give_up, std::function<void()> done);
    // Reads both clocks: tells the core the wall clock (member::Core::wall_clock,
    // before the input this reading goes with) and returns the monotonic one.
    member::Time now() {
        if (core) {
            const auto wall = std::chrono::system_clock::now().time_since_epoch();
            const auto wall_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wall).count();
            core->wall_clock(wall_ms > 0 ? static_cast<std::uint64_t>(wall_ms) : 0);
        }
        return Clock::now().time_since_epoch();
    }

    // ---- member_http.cc: the gate (routes.h), answers ----
    void handle_http(const net::HttpRequest& req, const ExchangePtr& ex);
    void pass_gate(Call& call);  // handle_http's steps 1-8 (routes.h)
    // Step 3's refusal (screen()), answered, logged and counted.
    void refused(const Call& call, const Refusal& refusal);
    // Step 5: true when the call's caller may (or authorization is off); else answers 403.
    bool authorize(Need need, const Call& call);
    bool serves(Serves s) const;
    void bad_request(const ExchangePtr& ex, const std::string& message);  // 400, counted
    // Hands `request` to the core; its answer is written by answer().
    // `target`: where a 307 points if the core answers Unavailable.
    void submit(member::Request request, const ExchangePtr& ex, std::string target,
                std::optional<Caller> reader = std::nullopt, std::optional<ElectionCall> election = std::nullopt);
    // An election route's answer (answer() hands it those it words its own way); false: not one of them.
    bool answer_election(const ElectionCall& election, const ExchangePtr& ex, member::Response& response);
    // 401 (no user) or 403 (user without the permission), logged and counted.
    void deny(const ExchangePtr& ex, const Caller& caller, const std::string& path, std::string_view key,
              std::string message);
    // SIGHUP: certificates, keys and the auth file loaded again (member.cc).
    void reload_security();
    // Returns the request's read time (zero when its client left or it is
    // not to be timed: commit_phases.h).
    Clock::time_point answer(member::RequestId id, member::Response response);
    // `election`: the campaign's name, when the grant answers one.
    void write_grant(member::RequestId id, const ExchangePtr& ex, const member::Granted& g, const std::string& proof,
                     const std::string* election = nullptr);
    void write_grant_body(member::RequestId id, const ExchangePtr& ex, std::string body);
    void write_grant_many(member::RequestId id, const ExchangePtr& ex, member::Granted grant);
    // The client of request `id` went away: every such case ends here, and
    // the core hears of it once. Drops the request; `at`: what the core had done.
    void client_left(member::RequestId id, LeftAt at);
    // 307 to the leader's client address with `target`, or 503 no_leader
    // when no leader other than this member is known. `hint`: a member the
    // core named as (about to be) leader, used when this member knows no other leader.
    void redirect_or_unavailable(const std::string& target, const ExchangePtr& ex,
                                 raft::NodeId hint = raft::kNoNode);
    // GET /v1/members' body; without `progress` (the join answer, asked
    // without credentials) no leader, match_index or caught_up.
    std::string members_json(const member::Members& m, bool progress) const;

    // ---- member_status.cc ----
    std::string status_json() const;
    std::string metrics_text() const;
    net::MemberInfo my_info() const;
    void on_member_info(const net::MemberInfo& info);

    boost::asio::io_context& io;
    Options options;
    StartPlan plan;
    std::unique_ptr<DurableLog> log;
    Loop loop;
    Writer writer;
    Writer snapshot_writer;  // snapshot files, beside the writer's Persists
    std::unique_ptr<member::Core> core;
    // The open watches (GET /v1/watch), on the core's history: made with the
    // core, gone before it.
    std::unique_ptr<Watchers> watchers;
    std::unique_ptr<net::PeerTransport> transport;
    std::unique_ptr<net::HttpServer> http;
    Metrics metrics;
    CommitPhases commit_phases;  // the leader's commit path, timed (commit_phases.h)
    raft::Term phases_term = 0;  // the term commit_phases' batches are of
    net::RequestLimits limits;
    Security security;
    // Signs the proofs of grants, off the loop (null without --token-signing-key-file).
    std::unique_ptr<ProofSigner> proof_signer;
    member::Effects effects;  // the batch being carried out (kept for its capacity)

    bool turn_scheduled = false;  // a run_turn() is queued on the loop
    DiskTurn disk_turn;           // where the Persist and the snapshot save run, and when
    LogWriteCheck log_writes;     // the same rule checked on the threads (member.cc, LogWrite)

    member::RequestId next_request = 1;
    std::unordered_map<member::RequestId, Outstanding> outstanding;
    std::set<member::RequestId> watched;  // outstanding requests whose close the core wants to hear of

    std::map<raft::NodeId, net::MemberInfo> infos;  // last MemberInfo per peer
    std::map<raft::NodeId, std::uint64_t> info_heard_tick;  // core->ticks() when it arrived
    // Every member's addresses as known: the plan's (--peers, the join
    // answer), then what configurations' contexts say (they win).
    std::map<raft::NodeId, Addresses> book;
    // The configuration start() announced (logged, dialed), until the core
    // reports one for the first time: the same one then is not announced
    // again. The configuration in force is core->raft().configuration().
    std::optional<raft::Configuration> announced_at_start;
    // Removed members a leader is answering with raft::Removed: dialed (from
    // `book`) until the tick given, so that the answer reaches them.
    std::map<raft::NodeId, std::uint64_t> telling_removed;
    log::Limiter denial_log{kDenialLogsPerSecond};  // deny()'s lines
};

}  // namespace pgfence::server
