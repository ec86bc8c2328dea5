// Reaching etcd 3.4 through its gRPC API: a channel per logical connection,
// and the few blocking calls made outside a timed loop (lease grant and
// revoke, the raft term), plus LeaseKeeper, which keeps leases alive.
//
// Endpoints are "host:port" (plaintext) or "https://host:port" (TLS, the
// member's certificate verified against --cacert, for its IP or name).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/endpoints.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace pgfence::bench::etcd {

using Clock = std::chrono::steady_clock;

// Bound on any one RPC outside the load loops' own timeouts.
constexpr auto kSetupTimeout = std::chrono::seconds(5);

// Where the cluster is and how to reach it.
struct Target {
    std::vector<client::Endpoint> endpoints;  // 1..client::kMaxEndpoints
    std::string ca_pem;                       // for https:// endpoints; "" when none is
};

// Reads `cacert_path` into t.ca_pem; "" or the error (naming the file).
std::string load_ca(const std::string& cacert_path, Target& t);

// A channel to `at` that shares no TCP connection with any other channel of
// this process: each gets its own subchannel pool and a distinct
// GRPC_ARG_CHANNEL_POOL_DOMAIN (`domain`), so C channels are C connections,
// as the HTTP load's C sockets are. gRPC's own retries are off (a failed RPC
// is the caller's to count). Connects lazily (on the first RPC).
std::shared_ptr<grpc::Channel> open_channel(const Target& t, const client::Endpoint& at,
                                            const std::string& domain);

// "CODE: message" of a failed status.
std::string describe(const grpc::Status& s);

// One asynchronous unary call's client side: the reader its Finish() was
// given, and the answer it fills in. Both must outlive the call's completion.
template <class Response>
struct AsyncCall {
    std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader;
    Response response;
};

// Fresh context with a deadline `timeout` from now.
std::unique_ptr<grpc::ClientContext> context_for(std::chrono::milliseconds timeout);

// Blocking LeaseGrant of `ttl_s`; the lease ID (> 0), or 0 with `error` set.
std::int64_t grant_lease(etcdserverpb::Lease::Stub& lease, std::int64_t ttl_s, std::string& error);

// Blocking LeaseRevoke of each of `ids` (their keys are deleted with them);
// the first failure, or "".
std::string revoke_leases(etcdserverpb::Lease::Stub& lease, const std::vector<std::int64_t>& ids);

// The raft term: the largest Maintenance.Status raftTerm among the members
// that answer within kSetupTimeout; 0 with `error` set if none does.
std::uint64_t raft_term(const Target& t, std::string& error);

// Keeps leases alive from a thread of its own, over one LeaseKeepAlive stream
// on its own channel (as etcd's clientv3 multiplexes a client's leases on one
// stream): every ttl/3 it sends one request per lease and reads the answer.
// A lease answered with TTL 0 (gone) or a broken stream is an error; the
// stream is reopened on the next round. Threading: the constructor starts the
// thread, the destructor stops and joins it; error() may be called from any
// thread.
class LeaseKeeper {
  public:
    LeaseKeeper(std::shared_ptr<grpc::Channel> channel, std::vector<std::int64_t> ids,
                std::int64_t ttl_s);
    ~LeaseKeeper();
    LeaseKeeper(const LeaseKeeper&) = delete;
    LeaseKeeper& operator=(const LeaseKeeper&) = delete;

    std::string error() const;  // the first failure, or ""

  private:
    void run();
    bool keep_all();  // one round over one stream; false on failure (recorded)
    void fail(const std::string& why);

    std::unique_ptr<etcdserverpb::Lease::Stub> stub_;
    const std::vector<std::int64_t> ids_;
    const std::chrono::milliseconds period_;
    mutable std::mutex mu_;  // guards the fields below
    std::condition_variable wake_;
    bool stop_ = false;
    grpc::ClientContext* stream_ctx_ = nullptr;  // the open stream's, to cancel it
    std::string error_;
    std::thread thread_;  // last: started after the fields above exist
};

}  // namespace pgfence::bench::etcd
