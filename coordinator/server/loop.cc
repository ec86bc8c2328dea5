#include "server/loop.h"

#include <boost/asio.hpp>
#include <list>

namespace pgfence::server {

namespace asio = boost::asio;

struct Loop::Timers {
    std::list<asio::steady_timer> timers;
    bool stopped = false;
};

Loop::Loop(asio::io_context& io) : io_(io), timers_(std::make_shared<Timers>()) {}

Loop::~Loop() { stop_timers(); }

void Loop::post(std::function<void()> fn) {
    asio::post(io_, [fn = std::move(fn), alive = std::weak_ptr<void>(timers_)] {
        if (!alive.expired()) fn();
    });
}

namespace {
void arm(asio::steady_timer& t, std::chrono::milliseconds period, std::function<void()> fn,
         std::weak_ptr<void> alive) {
    t.expires_after(period);
    t.async_wait([&t, period, fn = std::move(fn), alive](const boost::system::error_code& ec) {
        if (ec || alive.expired()) return;
        fn();
        arm(t, period, fn, alive);
    });
}
}  // namespace

void Loop::every(std::chrono::milliseconds period, std::function<void()> fn) {
    timers_->timers.emplace_back(io_);
    arm(timers_->timers.back(), period, std::move(fn), timers_);
}

void Loop::after(std::chrono::milliseconds delay, std::function<void()> fn) {
    auto t = std::make_shared<asio::steady_timer>(io_, delay);
    t->async_wait([t, fn = std::move(fn), alive = std::weak_ptr<void>(timers_)](const boost::system::error_code& ec) {
        if (!ec && !alive.expired()) fn();
    });
}

void Loop::stop_timers() {
    for (auto& t : timers_->timers) t.cancel();
    timers_->stopped = true;
}

}  // namespace pgfence::server
