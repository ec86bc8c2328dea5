// A writer thread: a member's disk work off the event loop. The member has
// two: the writer, for a leader's Ready writes and snapshot adoptions (a
// follower writes its Ready on the loop itself unless an adoption is queued:
// disk_turn.h), and the snapshot thread, for snapshot files.
//
// Jobs run in submission order; each job's `done` is posted back to the loop.
// A job may do more than disk work: the member's Ready job also sends the
// Ready's messages (Ready::messages: those that must wait until the write is
// durable) and times its persist itself (the fsync latency metric). Group
// commit comes from the core: while one Ready batch is being written the loop
// keeps stepping and proposing, and the next Ready carries everything
// accumulated meanwhile, written with one fdatasync.
//
// The queue is bounded by construction (the loop has at most one Ready and one
// snapshot job outstanding). A job that throws is fatal: the error is logged
// and the process exits (a member that cannot write must not acknowledge).
//
// Threading: submit() and stop() from the loop thread only; the jobs run on
// the Writer's own thread, one at a time; each `done` runs on the loop.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace pgfence::server {

class Writer {
public:
    using Post = std::function<void(std::function<void()>)>;  // runs a function on the loop
    using Done = std::function<void()>;

    explicit Writer(Post post);
    ~Writer();
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    void submit(std::function<void()> work, Done done);
    void stop();  // finishes queued jobs, joins

private:
    struct Job {
        std::function<void()> work;
        Done done;
    };
    void run();

    Post post_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Job> jobs_;
    bool stopping_ = false;
    std::thread thread_;
};

// Runs one piece of disk work on the calling thread under the writer's rule:
// an exception is logged (storage_write_failed) and the process exits with 74.
// Writer jobs run through it; so does a follower's inline Ready write.
void run_storage_work(const std::function<void()>& work);

}  // namespace pgfence::server
