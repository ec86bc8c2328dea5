// Keeps one lease alive from a background thread: a KeepAlive every lease/3
// (retried sooner after a failed attempt), each cut short at the lease's
// local deadline. Once the coordinator says the lease is gone (404), or the
// local deadline passes without a successful KeepAlive, lost() turns true
// and stays true; the thread then stops.
//
// The local deadline is counted from when a request was SENT (send time +
// ttl), never from when its answer came back, so the holder gives up no later
// than the coordinator could expire it.
//
// Threading: the thread owns its own client::Client; the accessors may be
// called from any thread. Destruction stops and joins the thread (bounded by
// one KeepAlive call, itself bounded by the deadline).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "client/client.h"

namespace pgfence::worker {

class Keepalive {
  public:
    Keepalive(const client::Options& options, const client::Lease& lease);
    ~Keepalive();
    Keepalive(const Keepalive&) = delete;
    Keepalive& operator=(const Keepalive&) = delete;

    // True once the lease is known lost or its local deadline has passed.
    bool lost() const;
    std::string why_lost() const;
    int renewals() const { return renewals_.load(); }

  private:
    void run(std::stop_token stop);
    void mark_lost(std::string why);

    client::Options options_;
    std::string key_;
    std::uint64_t token_ = 0;
    client::milliseconds lease_{0};

    mutable std::mutex mu_;
    std::condition_variable_any cv_;
    client::Clock::time_point deadline_;  // guarded by mu_
    std::string why_lost_;                // guarded by mu_
    std::atomic<bool> lost_{false};
    std::atomic<int> renewals_{0};
    std::jthread thread_;  // last: started after every member above is ready
};

}  // namespace pgfence::worker
