// fence-worker's CSV event log (--log FILE), one line per event, flushed at
// once so that a worker paused or killed mid-run leaves every finished line:
//
//   worker,event,key,token,send_ns,ack_ns,path,outcome,value
//
// event:   acquire | write | release
// send_ns: CLOCK_MONOTONIC (steady_clock) nanoseconds when the acquire's first
//          request was sent; ack_ns: when its answer arrived (acquire only, else 0).
//          Every process on one machine reads the same clock, so the end-to-end
//          checker can order acquires across workers.
// outcome: acquire ok|held|unavailable|error; write accepted|stale|not_found|
//          error|lease_lost; release ok|not_held|error.
// value:   the counter after an accepted write, else 0.
//
// Threading: used by the worker's main thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
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
    std::FILE* file_ = nullptr;
    std::string worker_;
};

}  // namespace pgfence::worker
