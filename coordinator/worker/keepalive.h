// Keeps one lease alive from a background thread: a KeepAlive every lease/3
// (retried sooner after a failed attempt), each cut short at the lease's
// local deadline. Once the coordinator says the lease is gone (404), or the
// local deadline passes without a successful KeepAlive, lost() turns true
// and stays true; the thread then stops.
//
// The local deadline is the client's deadline(): counted from when a request
// was SENT, never from when its answer came back, and shortened by the
// clock-rate bound (send time + ttl x (1 - rho), client.h), so the holder
// gives up no later than the coordinator could expire it.
//
// Every KeepAlive request is logged to the EventLog, if one is given, as a
// `keepalive` line (event_log.h): its send and answer times, ok | not_held |
// unavailable (a member answered 503) | error, and the ttl on success. When
// the thread's timed wait returns at least lease/3 after it was due (the
// process did not run: stopped, starved, swapped out), a `stall` line
// records when it was due and when it
// woke: the evidence of a pause that `fencectl explain` reads.
//
// Without the thread (`background` false, fence-worker --renew between) the
// worker renews itself with renew_now(), and the same rules apply to it.
//
// Threading: the thread owns its own client::Client and writes to the
// EventLog (whose write() is thread-safe); the accessors may be called from
// any thread. Destruction stops and joins the thread (bounded by one
// KeepAlive call, itself bounded by the deadline). The EventLog must outlive
// the Keepalive.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "client/client.h"
#include "worker/event_log.h"

namespace pgfence::worker {

class Keepalive {
  public:
    // `log` may be null: nothing is logged. `background` false: no thread,
    // the caller renews with renew_now().
    Keepalive(const client::Options& options, const client::Lease& lease, EventLog* log, bool background = true);
    ~Keepalive();
    Keepalive(const Keepalive&) = delete;
    Keepalive& operator=(const Keepalive&) = delete;

    // True once the lease is known lost or its local deadline has passed,
    // checked at each call (also without the thread, after the last
    // renew_now: --renew between's last piece). Only a renewal attempt logs
    // a `deadline` line; lost() logs nothing.
    bool lost() const;
    std::string why_lost() const;
    int renewals() const { return renewals_.load(); }

    // One KeepAlive now, with `client`, unless the lease is already lost.
    // Only without the thread (`background` false): it shares next_ with it.
    void renew_now(client::Client& client);
    // Logs a `stall` line when `woke` is at least lease/3 after `due` (any thread).
    void note_wakeup(client::Clock::time_point due, client::Clock::time_point woke);

  private:
    void run(std::stop_token stop);
    // One KeepAlive attempt; false when the lease is lost (stop renewing).
    bool attempt(client::Client& client);
    void mark_lost(std::string why);
    void log_request(client::Clock::time_point sent_at, client::Clock::time_point acked_at,
                     const char* outcome, std::int64_t ttl_ms);

    client::Options options_;
    std::string key_;
    std::uint64_t token_ = 0;
    client::milliseconds lease_{0};
    EventLog* log_ = nullptr;

    mutable std::mutex mu_;
    std::condition_variable_any cv_;
    client::Clock::time_point deadline_;  // guarded by mu_
    std::string why_lost_;                // guarded by mu_
    std::atomic<bool> lost_{false};
    std::atomic<int> renewals_{0};
    client::Clock::time_point next_;  // the thread's (or renew_now's caller's) next attempt
    std::jthread thread_;  // last: started after every member above is ready
};

}  // namespace pgfence::worker
