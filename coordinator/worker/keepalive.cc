#include "worker/keepalive.h"

#include <algorithm>

namespace pgfence::worker {

Keepalive::Keepalive(const client::Options& options, const client::Lease& lease, EventLog* log, bool background)
    : options_(options),
      key_(lease.key),
      token_(lease.token),
      lease_(lease.lease),
      log_(log),
      deadline_(lease.deadline()) {
    if (background) thread_ = std::jthread([this](std::stop_token stop) { run(std::move(stop)); });
}

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

void Keepalive::log_request(client::Clock::time_point sent_at, client::Clock::time_point acked_at,
                            const char* outcome, std::int64_t ttl_ms) {
    if (log_ == nullptr) return;
    log_->write(Event{"keepalive", key_, token_, sent_at, acked_at, "", outcome, ttl_ms});
}

void Keepalive::note_wakeup(client::Clock::time_point due, client::Clock::time_point woke) {
    if (log_ == nullptr || woke - due < lease_ / 3) return;
    const auto late_ms = std::chrono::duration_cast<client::milliseconds>(woke - due).count();
    log_->write(Event{"stall", key_, token_, due, woke, "", "", late_ms});
}

void Keepalive::renew_now(client::Client& client) {
    if (!lost_.load()) attempt(client);
}

bool Keepalive::attempt(client::Client& client) {
    const client::milliseconds interval = std::max(lease_ / 3, client::milliseconds(10));
    client::Clock::time_point deadline;
    {
        std::lock_guard lock(mu_);
        deadline = deadline_;
    }
    if (const auto now = client::Clock::now(); now >= deadline) {
        if (log_ != nullptr) log_->write(Event{"deadline", key_, token_, deadline, now, "", "", 0});
        mark_lost("no successful KeepAlive before the lease deadline");
        return false;
    }
    const client::Clock::time_point called_at = client::Clock::now();
    auto r = client.keepalive(key_, token_, deadline);
    const client::Clock::time_point returned_at = client::Clock::now();
    if (r) {
        {
            std::lock_guard lock(mu_);
            deadline_ = std::max(deadline_, r.value().deadline());
        }
        renewals_.fetch_add(1);
        log_request(r.value().sent_at, returned_at, "ok", r.value().ttl.count());
        next_ = client::Clock::now() + interval;
        return true;
    }
    // An error with an HTTP status had an answer; so had one where a member
    // answered 503 (no leader: `unavailable`); the others (no member answered
    // by the deadline) had none.
    const bool unavailable = r.error().kind == client::ErrorKind::kUnavailable && r.error().member_answered;
    const bool answered = r.error().http_status != 0 || unavailable;
    const bool gone = r.error().kind == client::ErrorKind::kNotHeld;
    log_request(called_at, answered ? returned_at : client::Clock::time_point{},
                gone ? "not_held" : unavailable ? "unavailable" : "error", 0);
    if (gone) {
        mark_lost("the coordinator says the lease is gone: " + r.error().message);
        return false;
    }
    next_ = client::Clock::now() + interval / 4;  // retry sooner
    return true;
}

void Keepalive::run(std::stop_token stop) {
    client::Client client(options_);
    next_ = client::Clock::now() + std::max(lease_ / 3, client::milliseconds(10));
    // Bounded: each pass either renews (deadline moves forward), or fails and
    // ends the loop at the deadline at the latest.
    while (!stop.stop_requested()) {
        {
            std::unique_lock lock(mu_);
            cv_.wait_until(lock, stop, next_, [] { return false; });
            if (stop.stop_requested()) return;
        }
        note_wakeup(next_, client::Clock::now());
        if (!attempt(client)) return;
    }
}

}  // namespace pgfence::worker
