// Private state of Member, the Asio shell around the member core
// (member/core.h): shared by member*.cc, not included elsewhere.
//
// The shell decides nothing about locks: it turns sockets, timers and disk
// completions into the core's inputs, and carries out the core's effects
// (member.cc: sends, the Persist on the loop or the writer thread, snapshot
// saves, log lines), answering requests over HTTP (member_http.cc). Status,
// metrics and the MemberInfo it tells peers: member_status.cc.
#pragma once

#include <atomic>
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
#include "server/durable_log.h"
#include "server/loop.h"
#include "server/member.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/security.h"
#include "server/proof_signer.h"
#include "server/writer.h"

namespace pgfence::server {

using ExchangePtr = std::shared_ptr<net::HttpExchange>;
using Clock = std::chrono::steady_clock;

constexpr int kInfoEveryTicks = 5;  // MemberInfo broadcast period

// A request handed to the core and not yet answered.
struct Outstanding {
    ExchangePtr exchange;
    std::string target;  // where a 307 to the leader points
    // A list of every lock, with authorization on: only what this caller may read.
    std::optional<Caller> reader;
};

// One HTTP request's authorization (member_http.cc).
struct Access {
    std::string path;  // the target without its query: what a denial logs
    bool on = false;   // authorization applies (--auth-file, and not /healthz)
    Caller caller;     // when on: the authenticated caller
};

// Denial log lines per second at most (member_http.cc; the metrics count all).
constexpr int kDenialLogsPerSecond = 20;

struct Member::Impl {
    Impl(boost::asio::io_context& io, Options o, StartPlan p, std::unique_ptr<DurableLog> l);
    ~Impl();

    // ---- member.cc: inputs and effects ----
    std::string start();
    void on_tick();
    void on_peer_message(raft::Message m);
    void raise_open_files();  // RLIMIT_NOFILE for --max-connections (open_files.h)
    void after_event();  // schedules drain() once per loop turn
    void drain();        // pump the core, carry out its effects
    void report_gone();  // tells the core of watched requests whose client left
    void execute(member::Effects& fx);
    void run_persist(const std::shared_ptr<const raft::Ready>& rd);
    void run_save(const std::shared_ptr<const raft::Snapshot>& snap);
    void start_save();  // run_save's step 1, once no Persist is outstanding
    std::chrono::nanoseconds persist_ready(const raft::Ready& rd);  // one fdatasync; its duration
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
    static member::Time now() { return Clock::now().time_since_epoch(); }

    // ---- member_http.cc ----
    void handle_http(const net::HttpRequest& req, const ExchangePtr& ex);
    void handle_write(const net::HttpRequest& req, const Access& access, const ExchangePtr& ex);  // acquire, release, keepalive
    void handle_list(const net::HttpRequest& req, const std::string& query, const Access& access, const ExchangePtr& ex);
    // True when authorization is off or grants `p` on `key`; else answers 403.
    bool permitted(const Access& access, auth::Permission p, std::string_view key, const ExchangePtr& ex);
    void bad_request(const ExchangePtr& ex, const std::string& message);  // 400, counted
    void submit(member::Request request, const ExchangePtr& ex, std::string target,
                std::optional<Caller> reader = std::nullopt);
    // 401 (no user) or 403 (user without the permission), logged and counted.
    void deny(const ExchangePtr& ex, const Caller& caller, const std::string& path, std::string_view key,
              std::string message);
    // SIGHUP: certificates, keys and the auth file loaded again (member.cc).
    void reload_security();
    void answer(member::RequestId id, member::Response response);
    void write_grant(member::RequestId id, const ExchangePtr& ex, const member::Granted& g, const std::string& proof);
    // `hint`: a member the core named as (about to be) leader, used when
    // this member knows no other leader.
    void redirect_or_unavailable(const std::string& target, const ExchangePtr& ex,
                                 raft::NodeId hint = raft::kNoNode);
    void handle_members(const net::HttpRequest& req, const std::string& path, const Access& access,
                        const ExchangePtr& ex);
    void answer_join(const std::string& query, const ExchangePtr& ex);
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
    Writer snapshot_writer;  // the snapshot file (run_save's step 1), beside the writer's Persists
    std::unique_ptr<member::Core> core;
    std::unique_ptr<net::PeerTransport> transport;
    std::unique_ptr<net::HttpServer> http;
    Metrics metrics;
    net::RequestLimits limits;
    Security security;
    // Signs the proofs of grants, off the loop (null without --token-signing-key-file).
    std::unique_ptr<ProofSigner> proof_signer;
    member::Effects effects;  // the batch being carried out (kept for its capacity)

    bool drain_posted = false;  // a drain() is queued on the loop
    // A snapshot's adoption was handed to the writer thread and has not
    // finished: a follower's Persist then queues behind it there instead of
    // running on the loop (one log write at a time).
    bool save_queued = false;
    // A SaveSnapshot taken from the core whose file is not being written
    // yet: it waits until no Persist is outstanding (run_save).
    std::shared_ptr<const raft::Snapshot> pending_save;
    std::atomic<bool> disk_busy{false};  // a persist or snapshot adoption is running (DiskTurn)

    member::RequestId next_request = 1;
    std::unordered_map<member::RequestId, Outstanding> outstanding;
    std::set<member::RequestId> watched;  // outstanding requests whose close the core wants to hear of
    std::uint64_t ticks = 0;

    std::map<raft::NodeId, net::MemberInfo> infos;  // last MemberInfo per peer
    std::map<raft::NodeId, std::uint64_t> info_heard_tick;  // `ticks` when it arrived
    // Every member's addresses as known: the plan's (--peers, the join
    // answer), then what configurations' contexts say (they win).
    std::map<raft::NodeId, Addresses> book;
    raft::Configuration config;  // in force, as the core last reported it (empty: joining)
    bool configured = false;     // apply_configuration() ran
    // Removed members a leader is answering with raft::Removed: dialed (from
    // `book`) until the tick given, so that the answer reaches them.
    std::map<raft::NodeId, std::uint64_t> telling_removed;
    log::Limiter denial_log{kDenialLogsPerSecond};  // deny()'s lines
    bool shutting_down = false;
    bool removed = false;  // this member's removal applied: it stops for good
};

}  // namespace pgfence::server
