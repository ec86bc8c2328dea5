// Private state of Member, shared by member*.cc (not included elsewhere).
//
// Files: member.cc (core loop: Ready draining, apply, roles, snapshots),
// member_leases.cc (leader-local leases, keepalive, expiry, waiters,
// leadership confirmation; the Lease itself and its clock-rate margin are in
// lease.h), member_http.cc (HTTP API), member_status.cc
// (/v1/status, /metrics, member info).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lock/commands.h"
#include "lock/table.h"
#include "net/api_request.h"
#include "net/http_server.h"
#include "net/member_info.h"
#include "net/peer_transport.h"
#include "raft/raft.h"
#include "server/durable_log.h"
#include "server/lease.h"
#include "server/loop.h"
#include "server/member.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/writer.h"

namespace pgfence::server {

using ExchangePtr = std::shared_ptr<net::HttpExchange>;

constexpr std::size_t kMaxWaiters = 10000;                  // all keys together
constexpr std::size_t kMaxPendingProposals = 100000;
constexpr int kInfoEveryTicks = 5;                          // MemberInfo broadcast period
constexpr std::chrono::seconds kProposalTimeout{10};
constexpr int kMaxApplyRounds = 16;                         // take_committed() batches per event

struct Waiter {
    net::AcquireRequest request;
    ExchangePtr exchange;
    Clock::time_point deadline;
};

// A proposal this member made as leader, answered when its index applies.
// `done(nullptr)` means the entry was lost (another term's entry took the index).
struct Pending {
    raft::Term term = 0;
    Clock::time_point proposed_at;
    std::function<void(const lock::Result*)> done;
};

struct Member::Impl {
    Impl(boost::asio::io_context& io, Options o, std::unique_ptr<DurableLog> l);
    ~Impl();

    // ---- member.cc: the core loop ----
    std::string start();
    void on_tick();
    void on_peer_message(raft::Message m);
    void after_event();  // schedules drain() once per loop turn
    void drain();        // flush confirmations, observe role, pump the Ready
    void pump();
    bool needs_write(const raft::Ready& rd) const;
    void submit_ready(const std::shared_ptr<raft::Ready>& rd);     // the write on the writer thread
    std::chrono::nanoseconds persist_ready(const raft::Ready& rd);  // one fdatasync; its duration
    void apply_ready(const raft::Ready& rd);
    void apply_taken();
    // applied: rd->committed was applied at pump(). rd->messages are sent
    // before (by the writer thread after a write it ran, else by pump()).
    void finish_ready(const std::shared_ptr<raft::Ready>& rd, bool applied);
    void apply_entry(const raft::Entry& e);
    void on_applied(raft::Index index, const lock::Command& cmd, const lock::Result& result,
                    const std::string& owner);
    std::string owner_of(std::string_view key, lock::Token token) const;  // "" unless held with token
    void observe_role();
    void become_leader();
    void lose_leadership();
    void maybe_snapshot();
    bool propose(const lock::Command& cmd, std::function<void(const lock::Result*)> done,
                 raft::ProposeError* error);
    void sweep_proposals();
    void shutdown(std::function<void()> done);
    void shutdown_step(Clock::time_point give_up, std::function<void()> done);
    bool is_leader() const { return raft && raft->role() == raft::Role::kLeader; }

    // ---- member_leases.cc ----
    void confirm(std::function<void(bool)> cb);  // leadership confirmed by a quorum round
    void flush_confirms();
    void on_read_state(const raft::ReadState& rs);
    void run_confirmed_reads();
    void fail_reads(std::uint64_t ctx);
    void restart_all_leases();
    void check_expiries();
    void acquire(const net::AcquireRequest& req, const ExchangePtr& ex, bool from_queue);
    void on_grant_result(const net::AcquireRequest& req, const ExchangePtr& ex, bool from_queue,
                         const lock::Result* r);
    void enqueue_waiter(const net::AcquireRequest& req, const ExchangePtr& ex, bool front);
    void serve_waiters(const std::string& key);
    void sweep_waiters();
    void drop_all_waiters();
    void keepalive(const net::ReleaseRequest& req, const ExchangePtr& ex);
    void release(const net::ReleaseRequest& req, const ExchangePtr& ex);
    void phantom_release(const std::string& key, lock::Token token);
    std::size_t waiter_count() const;

    // ---- member_http.cc ----
    void handle_http(const net::HttpRequest& req, const ExchangePtr& ex);
    void redirect_or_unavailable(const std::string& target, const ExchangePtr& ex);
    void get_locks(const std::string& query, const ExchangePtr& ex);
    std::uint64_t ttl_ms(const std::string& key) const;

    // ---- member_status.cc ----
    std::string status_json() const;
    std::string metrics_text() const;
    net::MemberInfo my_info() const;
    void on_member_info(const net::MemberInfo& info);

    boost::asio::io_context& io;
    Options options;
    std::unique_ptr<DurableLog> log;
    Loop loop;
    Writer writer;
    std::unique_ptr<raft::Raft> raft;
    std::unique_ptr<net::PeerTransport> transport;
    std::unique_ptr<net::HttpServer> http;
    lock::LockTable table;
    Metrics metrics;
    net::RequestLimits limits;

    bool drain_posted = false;  // a drain() is queued on the loop
    bool ready_in_flight = false;
    bool applying = false;  // inside apply_ready/apply_taken (no re-entry)
    raft::HardState written_hard_state;                  // term and vote last written (inline or by the writer)
    std::optional<raft::HardState> unwritten_hard_state;  // commit-only change not written yet
    bool snapshot_in_flight = false;
    std::atomic<bool> disk_busy{false};  // a persist or snapshot save is running (DiskTurn)
    raft::Index last_snapshot_index = 0;
    raft::Term applied_term = 0;

    raft::Role last_role = raft::Role::kFollower;
    raft::Term leader_term = 0;  // term of our current leadership (0: not leader)
    raft::NodeId last_leader = raft::kNoNode;
    std::uint64_t ticks = 0;

    std::map<raft::Index, Pending> proposals;
    std::map<std::string, Lease, std::less<>> leases;  // leader only; restarted with options.max_clock_drift_ppm
    std::map<std::string, std::deque<Waiter>, std::less<>> waiters;
    std::set<std::string, std::less<>> waiter_grant_in_flight;

    std::uint64_t next_read_ctx = 1;
    std::vector<std::function<void(bool)>> confirm_batch;
    std::map<std::uint64_t, std::vector<std::function<void(bool)>>> confirms;  // by read ctx
    std::multimap<raft::Index, std::uint64_t> confirmed_waiting_apply;         // read index -> ctx

    std::map<raft::NodeId, net::MemberInfo> infos;  // last MemberInfo per peer
    bool shutting_down = false;
};

}  // namespace pgfence::server
