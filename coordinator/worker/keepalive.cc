#include "worker/keepalive.h"

#include <algorithm>

namespace pgfence::worker {

Keepalive::Keepalive(const client::Options& options, const client::Lease& lease)
    : options_(options),
      key_(lease.key),
      token_(lease.token),
      lease_(lease.lease),
      deadline_(lease.deadline()),
      thread_([this](std::stop_token stop) { run(std::move(stop)); }) {}

Keepalive::~Keepalive() {
    thread_.request_stop();
    cv_.notify_all();
}

bool Keepalive::lost() const {
    if (lost_.load()) return true;
    std::lock_guard lock(mu_);
    return client::Clock::now() >= deadline_;
}

std::string Keepalive::why_lost() const {
    std::lock_guard lock(mu_);
    if (!why_lost_.empty()) return why_lost_;
    return client::Clock::now() >= deadline_ ? "the local lease deadline passed" : "";
}

void Keepalive::mark_lost(std::string why) {
    std::lock_guard lock(mu_);
    if (why_lost_.empty()) why_lost_ = std::move(why);
    lost_.store(true);
}

void Keepalive::run(std::stop_token stop) {
    client::Client client(options_);
    const client::milliseconds interval = std::max(lease_ / 3, client::milliseconds(10));
    client::Clock::time_point next = client::Clock::now() + interval;
    // Bounded: each pass either renews (deadline moves forward), or fails and
    // ends the loop at the deadline at the latest.
    while (!stop.stop_requested()) {
        client::Clock::time_point deadline;
        {
            std::unique_lock lock(mu_);
            cv_.wait_until(lock, stop, next, [] { return false; });
            if (stop.stop_requested()) return;
            deadline = deadline_;
        }
        if (client::Clock::now() >= deadline) {
            mark_lost("no successful KeepAlive before the lease deadline");
            return;
        }
        auto r = client.keepalive(key_, token_, deadline);
        if (r) {
            std::lock_guard lock(mu_);
            deadline_ = std::max(deadline_, r.value().deadline());
            renewals_.fetch_add(1);
            next = client::Clock::now() + interval;
        } else if (r.error().kind == client::ErrorKind::kNotHeld) {
            mark_lost("the coordinator says the lease is gone: " + r.error().message);
            return;
        } else {
            next = client::Clock::now() + interval / 4;  // retry sooner
        }
    }
}

}  // namespace pgfence::worker
