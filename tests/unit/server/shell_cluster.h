// A three-member cluster in one process, for the shell's ordering tests
// (shell_order_test.cc): real server::Members with real peer transports on
// loopback, each over a DurableLog that sleeps inside every write and records
// what it made durable and how its writes ran (DiskRecord); their peer traffic
// through a proxy that checks every Raft message on arrival against its
// sender's DiskRecord (ArrivalCheck); client threads that acquire and release
// through the client library (Load).
//
// Each member's peers dial it through the proxy: the proxy listens on a port
// of its own for each member and forwards to the member's peer port, checking
// every complete frame from the dialing member before passing its bytes on
// (the other direction carries nothing and is copied unchanged).
//
// Ports are the kernel's: the proxy listens on port 0, and each member's peer
// and HTTP ports are picked by binding port 0 and kept bound, not listening,
// with SO_REUSEADDR, so nobody else takes them before the member listens on
// them itself.
//
// Threading: each member's io_context runs on a thread of its own (its loop
// thread, which also starts it, as in fence-coordinator); the proxy has one
// thread; DiskRecord and ArrivalCheck may be read from any thread while the
// cluster runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/endpoints.h"
#include "raft/types.h"
#include "server/options.h"

namespace pgfence::server::test {

// Polls `cond` every 10 ms for up to 5 s: whether it came true.
template <class Fn>
bool eventually(Fn cond) {
    for (int i = 0; i < 500; ++i) {
        if (cond()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

// What one member's DurableLog has made durable, and how its writes ran.
struct DiskRecord {
    std::atomic<std::thread::id> loop_thread{};  // set by the loop thread before Member::start()
    std::atomic<int> writing{0};                 // persist()/adopt_snapshot() calls now running
    std::atomic<int> overlaps{0};                // calls that began while another was running
    std::atomic<int> inline_persists_with_entries{0};  // persist() on the loop thread, with entries
    std::atomic<int> writer_persists{0};               // persist() on another thread (the writer)
    std::atomic<int> saves{0};                         // adopt_snapshot() calls that returned
    std::atomic<int> writing_file{0};                  // write_snapshot_file() calls now running
    std::atomic<int> persists_beside_file{0};          // persist() calls begun while one ran
    std::atomic<bool> seen_leading{false};             // set by ArrivalCheck: it sent an append or heartbeat
    std::atomic<bool> saved_since_persist{false};      // a save returned since the last persist() began
    // Writer-thread persists that followed a save directly, by a member not
    // seen leading yet: a follower's write queued behind the save.
    std::atomic<int> writes_behind_save{0};

    // Durable state: what the persist() calls that returned wrote (recorded
    // after the write, just before persist() returns).
    mutable std::mutex mutex;
    // Highest index an entry or snapshot made durable. Never lowered (an
    // overwritten suffix is not tracked): an ack that arrives late, after its
    // entry was overwritten, must not count as early; an early ack of a
    // rewritten index goes unnoticed.
    raft::Index durable_index = 0;
    raft::Term durable_term = 0;    // highest hard-state term written
    std::set<std::pair<raft::Term, raft::NodeId>> durable_votes;  // every (term, vote) written
};

// Checks each Raft message, as it arrives, against its sender's DiskRecord
// (pre-vote messages aside: their term is the one the sender would campaign
// in). A violation:
//   - a message of term t before the sender wrote term t;
//   - a successful AppendResponse acknowledging index i before the sender's
//     log was durable up to i;
//   - a granted vote for c in term t, or candidate c's vote request in term
//     t, before the sender wrote hard state (term t, vote c).
// Called on the proxy's thread; read from any.
class ArrivalCheck {
  public:
    explicit ArrivalCheck(std::map<raft::NodeId, std::shared_ptr<DiskRecord>> records);

    void on_arrival(const raft::Message& m);
    void violation(std::string what);

    std::size_t violation_count() const;
    std::vector<std::string> violations() const;  // the first 20
    bool led(raft::NodeId id) const;              // was seen sending AppendRequest or Heartbeat

    std::atomic<int> messages_checked{0};
    std::atomic<int> acks_checked{0};
    std::atomic<int> votes_checked{0};
    std::atomic<int> vote_requests_checked{0};

  private:
    const std::map<raft::NodeId, std::shared_ptr<DiskRecord>> records_;
    mutable std::mutex mutex_;  // guards what follows
    std::vector<std::string> violations_;
    std::size_t violation_count_ = 0;
    std::set<raft::NodeId> led_;
};

// The sleeps inside each member's writes.
struct Delays {
    std::chrono::milliseconds persist;
    std::chrono::milliseconds save;
};

class Cluster {
  public:
    static constexpr int kMembers = 3;

    // Starts the proxy and the members (ids 1..kMembers); start_error() says
    // what failed, if anything did.
    // `tweak`, when set, changes each member's Options before it starts.
    // `after_checks`, when set, changes them after validate_options(): for an
    // auth file, which it refuses without peer TLS (the proxy reads the peers'
    // plaintext).
    explicit Cluster(Delays delays, std::function<void(Options&)> tweak = {},
                     std::function<void(Options&)> after_checks = {});
    ~Cluster();
    Cluster(const Cluster&) = delete;
    Cluster& operator=(const Cluster&) = delete;

    std::string start_error() const;
    raft::NodeId id(int i) const;  // of member i, 0 <= i < kMembers
    const DiskRecord& record(int i) const;
    const ArrivalCheck& check() const;
    std::vector<client::Endpoint> endpoints() const;  // the members' HTTP APIs

    // Stops the members where they are (their io_contexts stop, as in a
    // crash), then the proxy (bytes still in its sockets are dropped
    // unchecked). Idempotent.
    void stop();
    // What the members' loops threw (fence-coordinator would exit 70), after stop().
    std::string loop_errors() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Client threads, each acquiring (with a 1 s lease) and releasing a key of its
// own until stopped.
class Load {
  public:
    static constexpr int kClients = 3;

    explicit Load(const std::vector<client::Endpoint>& endpoints);
    ~Load();
    Load(const Load&) = delete;
    Load& operator=(const Load&) = delete;

    void stop();  // after the current calls; idempotent
    int acquires() const { return acquires_.load(); }

  private:
    void run(const std::vector<client::Endpoint>& endpoints, const std::string& key);

    std::atomic<bool> stopping_{false};
    std::atomic<int> acquires_{0};
    std::vector<std::thread> threads_;
};

}  // namespace pgfence::server::test
