// fence-worker's CSV event log (--log FILE), one line per event, flushed at
// once so that a worker paused or killed mid-run leaves every finished line:
//
//   worker,event,key,token,send_ns,ack_ns,path,outcome,value
//
// event:   acquire | advance | write | replay | forge | release | keepalive
//          (one line per KeepAlive request the keepalive thread makes) |
//          work (one piece of --work: send_ns its start, ack_ns its end,
//          value its length asked for in ms) | stall (a timer of the worker
//          woke at least lease/3 late: send_ns when it was due, ack_ns when
//          it woke, value the delay in ms; the process did not run) |
//          deadline (the lease's local deadline passed without a successful
//          KeepAlive: send_ns the deadline, ack_ns when it was noticed). An
//          advance is --advance's publish of the token before the work. A
//          replay is the sequenced path's first write sent again after the
//          later ones; a forge, one forged or misdirected proof of --forge (its
//          key and token are what was sent).
// send_ns: CLOCK_MONOTONIC (steady_clock) nanoseconds when the request was
//          sent: an acquire's first request (for one that failed: when the
//          call began, and ack_ns when it gave up); a keepalive's request (taken
//          just before the call when it failed); a release's call; a write's
//          or an advance's transaction (0 when it was not tried: lease_lost,
//          or no database connection). ack_ns: when its answer arrived (a
//          release, a write or an advance: when the call returned; a
//          keepalive `unavailable`: when the call gave up, a member having
//          answered 503), 0 when none did.
//          Every process on one machine reads the same clock, so the end-to-end
//          checker can order acquires across workers.
// path:    the write path for acquire and write; PATH:KIND for forge (KIND:
//          corrupt, other_key, other_token, untrusted, missing); empty for
//          advance, release and keepalive.
// outcome: acquire ok|held|unavailable|error; advance published|stale|error;
//          write, replay and forge accepted|stale|bad_proof (55F02)|not_found|
//          error (write also lease_lost); release ok|not_held|error;
//          keepalive ok|not_held|unavailable (members answered 503 only: no
//          leader)|error; work done; stall and deadline empty.
// value:   the counter after an accepted write; a replay's sequence number;
//          an advance's number of resources;
//          a keepalive's ttl in ms when ok; else 0.
//
// Threading: open() before any other thread uses the log; write() may be
// called from any thread (the worker's main thread and its keepalive
// thread): a mutex makes each line one fwrite + fflush, never interleaved.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace pgfence::worker {

struct Event {
    std::string event, key;
    std::uint64_t token = 0;
    std::chrono::steady_clock::time_point sent_at{}, acked_at{};
    std::string path, outcome;
    std::int64_t value = 0;
};

class EventLog {
  public:
    EventLog() = default;
    ~EventLog();
    EventLog(const EventLog&) = delete;
    EventLog& operator=(const EventLog&) = delete;

    // Opens `path` for appending (no-op when empty). Returns "" or why not.
    std::string open(const std::string& path, const std::string& worker);
    void write(const Event& e);

  private:
    std::mutex mu_;                // held for each line's fwrite + fflush
    std::FILE* file_ = nullptr;   // set by open(), then read-only
    std::string worker_;          // set by open(), then read-only
};

}  // namespace pgfence::worker
