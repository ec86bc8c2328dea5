// The member's single-threaded event loop (a Boost.Asio io_context), seen
// through a small Asio-free interface so the member's files stay light.
//
// Threading: owned by the loop thread (the one running io.run()); post()
// may be called from any thread, everything else from the loop thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

namespace boost::asio {
class io_context;
}

namespace pgfence::server {

class Loop {
public:
    explicit Loop(boost::asio::io_context& io);
    ~Loop();
    Loop(const Loop&) = delete;
    Loop& operator=(const Loop&) = delete;

    boost::asio::io_context& io() { return io_; }
    // Runs `fn` on the loop thread; callable from any thread. Dropped if the
    // Loop is destroyed first (like every timer of it).
    void post(std::function<void()> fn);
    // Runs `fn` every `period` (rescheduled from when it ran: after a pause
    // such as SIGSTOP it does not fire a burst of catch-up calls).
    void every(std::chrono::milliseconds period, std::function<void()> fn);
    // Runs `fn` once after `delay`.
    void after(std::chrono::milliseconds delay, std::function<void()> fn);
    void stop_timers();

private:
    struct Timers;
    boost::asio::io_context& io_;
    std::shared_ptr<Timers> timers_;
};

}  // namespace pgfence::server
