// Leader-local leases, keepalive, expiry, FIFO waiters and the leadership
// confirmation (ReadIndex round) they all rely on (DESIGN.md "Time").
#include <boost/json.hpp>

#include "net/json_text.h"
#include "net/log.h"
#include "server/member_impl.h"

namespace pgfence::server {

namespace json = boost::json;
using net::log_event;
using net::log_value;
using net::LogLevel;

namespace {

void respond_json(const ExchangePtr& ex, unsigned status, const json::object& body,
                  std::function<void(bool)> written = {}) {
    ex->respond(net::HttpResponse{status, json::serialize(body), "application/json", {}}, std::move(written));
}

// {"key":…,"token":…,"lease_ms":…,"owner":…}: what a granted acquire answers.
std::string grant_body(std::string_view key, lock::Token token, std::uint64_t lease_ms, std::string_view owner) {
    std::string out;
    out.reserve(64 + key.size() + owner.size());
    out.append("{\"key\":");
    net::append_json_string(out, key);
    out.append(",\"token\":").append(std::to_string(token));
    out.append(",\"lease_ms\":").append(std::to_string(lease_ms));
    out.append(",\"owner\":");
    net::append_json_string(out, owner);
    out.push_back('}');
    return out;
}

void respond_error(const ExchangePtr& ex, unsigned status, const char* error, const std::string& message = {}) {
    json::object o{{"error", error}};
    if (!message.empty()) o["message"] = message;
    respond_json(ex, status, o);
}

}  // namespace

// ---- leadership confirmation -------------------------------------------------
// Callbacks asked for during one event share one read_index() issued after
// them, so each is confirmed by a quorum round that started after its request.

void Member::Impl::confirm(std::function<void(bool)> cb) { confirm_batch.push_back(std::move(cb)); }

void Member::Impl::flush_confirms() {
    if (confirm_batch.empty()) return;
    auto batch = std::move(confirm_batch);
    confirm_batch.clear();
    const std::uint64_t ctx = next_read_ctx++;
    if (!raft->read_index(ctx)) {
        for (auto& cb : batch) cb(false);
        return;
    }
    confirms[ctx] = std::move(batch);
}

void Member::Impl::on_read_state(const raft::ReadState& rs) { confirmed_waiting_apply.emplace(rs.index, rs.context); }

void Member::Impl::run_confirmed_reads() {
    while (!confirmed_waiting_apply.empty() && confirmed_waiting_apply.begin()->first <= table.applied_index()) {
        const std::uint64_t ctx = confirmed_waiting_apply.begin()->second;
        confirmed_waiting_apply.erase(confirmed_waiting_apply.begin());
        auto it = confirms.find(ctx);
        if (it == confirms.end()) continue;
        auto cbs = std::move(it->second);
        confirms.erase(it);
        const bool still = is_leader();
        for (auto& cb : cbs) cb(still);
    }
}

void Member::Impl::fail_reads(std::uint64_t ctx) {
    auto it = confirms.find(ctx);
    if (it == confirms.end()) return;
    auto cbs = std::move(it->second);
    confirms.erase(it);
    for (auto& cb : cbs) cb(false);
}

// ---- leases --------------------------------------------------------------------

void Member::Impl::restart_all_leases() {
    leases.clear();
    const auto now = Clock::now();
    for (const lock::Lock& l : table.list()) {
        leases[l.key] = Lease::started(l.token, l.lease_ms, now, options.max_clock_drift_ppm);
    }
}

// A lease is expired from its expire_at (the nominal deadline plus the
// clock-rate margin, lease.h), and only after a quorum round confirms this
// member is still leader; a keepalive that restarted the lease meanwhile wins.
void Member::Impl::check_expiries() {
    const auto now = Clock::now();
    for (auto& [key, lease] : leases) {
        if (lease.expire_proposed || lease.expire_checking || now < lease.expire_at) continue;
        lease.expire_checking = true;
        confirm([this, k = key, token = lease.token](bool ok) {
            // Logged before the lookup: losing leadership clears the leases
            // before the dropped round fails this callback.
            if (!ok) {
                log_event(LogLevel::kInfo, "expire_not_confirmed",
                          {{"key", k}, {"token", log_value(token)}, {"owner", owner_of(k, token)}});
            }
            auto it = leases.find(k);
            if (it == leases.end() || it->second.token != token) return;
            Lease& l = it->second;
            l.expire_checking = false;
            if (!ok) return;
            if (l.expire_proposed || Clock::now() < l.expire_at) return;
            raft::ProposeError err = raft::ProposeError::kNone;
            if (!propose(lock::Expire{k, token}, [](const lock::Result*) {}, &err)) {
                log_event(LogLevel::kWarn, "expire_not_proposed", {{"key", k}, {"token", log_value(token)},
                                                                   {"error", raft::to_string(err)},
                                                                   {"owner", owner_of(k, token)}});
                return;
            }
            l.expire_proposed = true;
            const std::uint64_t margin_ms = expiry_margin_ms(l.lease_ms, options.max_clock_drift_ppm);
            log_event(LogLevel::kInfo, "expire_proposed", {{"key", k}, {"token", log_value(token)},
                                                           {"lease_ms", log_value(l.lease_ms)},
                                                           {"margin_ms", log_value(margin_ms)},
                                                           {"owner", owner_of(k, token)}});
        });
    }
}

void Member::Impl::keepalive(const net::ReleaseRequest& req, const ExchangePtr& ex) {
    auto usable = [this](const std::string& key, lock::Token token) {
        auto it = leases.find(key);
        return it != leases.end() && it->second.token == token && !it->second.expire_proposed;
    };
    if (!usable(req.key, req.token)) {
        ++metrics.keepalive_failures;
        respond_error(ex, 404, "not_held");
        return;
    }
    confirm([this, req, ex, usable](bool ok) {
        if (!ok) {
            redirect_or_unavailable("/v1/keepalive", ex);
            return;
        }
        if (!usable(req.key, req.token)) {
            ++metrics.keepalive_failures;
            respond_error(ex, 404, "not_held");
            return;
        }
        Lease& l = leases[req.key];
        l.restart(Clock::now(), options.max_clock_drift_ppm);
        ++metrics.keepalives;
        log_event(LogLevel::kDebug, "keepalive",
                  {{"key", req.key}, {"token", log_value(req.token)}, {"owner", owner_of(req.key, req.token)}});
        respond_json(ex, 200, {{"key", req.key}, {"token", req.token}, {"ttl_ms", l.lease_ms}});
    });
}

void Member::Impl::release(const net::ReleaseRequest& req, const ExchangePtr& ex) {
    raft::ProposeError err = raft::ProposeError::kNone;
    const bool ok = propose(lock::Release{req.key, req.token}, [this, ex](const lock::Result* r) {
        if (r == nullptr) {
            redirect_or_unavailable("/v1/release", ex);
        } else if (std::holds_alternative<lock::Released>(*r)) {
            ex->respond(net::HttpResponse{200, "{\"released\":true}", "application/json", {}});
        } else {
            respond_error(ex, 404, "not_held");
        }
    }, &err);
    if (!ok) redirect_or_unavailable("/v1/release", ex);
}

void Member::Impl::phantom_release(const std::string& key, lock::Token token) {
    ++metrics.phantom_releases;
    raft::ProposeError err = raft::ProposeError::kNone;
    const bool ok = propose(lock::Release{key, token}, [](const lock::Result*) {}, &err);
    log_event(LogLevel::kInfo, "phantom_release", {{"key", key}, {"token", log_value(token)},
                                                   {"proposed", ok ? "true" : "false"},
                                                   {"owner", owner_of(key, token)}});
}

// ---- acquire and waiters ----------------------------------------------------------

void Member::Impl::acquire(const net::AcquireRequest& req, const ExchangePtr& ex, bool from_queue) {
    if (!from_queue && req.wait_ms > 0) {
        const lock::Lock* held = table.find(req.key);
        const bool same_owner = held != nullptr && !req.owner.empty() && held->owner == req.owner;
        auto q = waiters.find(req.key);
        const bool queue_busy = (q != waiters.end() && !q->second.empty()) || waiter_grant_in_flight.count(req.key) > 0;
        if ((held != nullptr && !same_owner) || queue_busy) {
            enqueue_waiter(req, ex, false);
            return;
        }
    }
    if (from_queue) waiter_grant_in_flight.insert(req.key);
    raft::ProposeError err = raft::ProposeError::kNone;
    const bool ok = propose(lock::Grant{req.key, req.lease_ms, req.owner},
                            [this, req, ex, from_queue](const lock::Result* r) { on_grant_result(req, ex, from_queue, r); }, &err);
    if (ok) return;
    if (from_queue) waiter_grant_in_flight.erase(req.key);
    if (err == raft::ProposeError::kTooLarge) {
        respond_error(ex, 400, "bad_request", "request too large for one log entry");
    } else {
        redirect_or_unavailable("/v1/acquire", ex);
    }
}

void Member::Impl::on_grant_result(const net::AcquireRequest& req, const ExchangePtr& ex, bool from_queue,
                                   const lock::Result* r) {
    if (from_queue) waiter_grant_in_flight.erase(req.key);
    if (r == nullptr) {
        redirect_or_unavailable("/v1/acquire", ex);
        return;
    }
    if (const auto* g = std::get_if<lock::Granted>(r)) {
        const lock::Token token = g->token;
        auto lease = leases.find(req.key);
        if (lease != leases.end() && lease->second.token == token && lease->second.expire_proposed) {
            // A same-owner retry of a lock whose Expire is already proposed:
            // the lock is about to go, so this is no grant (see on_applied).
            if (req.wait_ms > 0 && is_leader()) {
                enqueue_waiter(req, ex, from_queue);
            } else {
                respond_error(ex, 409, "held", "the lease of token " + std::to_string(token) + " ran out and is being expired; retry");
            }
            return;
        }
        if (ex->client_gone()) {
            phantom_release(req.key, token);
            return;
        }
        ex->respond(net::HttpResponse{200, grant_body(req.key, token, req.lease_ms, req.owner), "application/json", {}},
                    [this, key = req.key, token](bool written) {
                        if (!written && is_leader()) phantom_release(key, token);
                    });
        return;
    }
    const auto* rej = std::get_if<lock::GrantRejected>(r);
    if (req.wait_ms > 0 && is_leader() && rej != nullptr && rej->holder_token != 0) {
        if (from_queue) {
            enqueue_waiter(req, ex, true);  // keep its place at the head
        } else {
            enqueue_waiter(req, ex, false);
        }
        return;
    }
    respond_error(ex, 409, "held", rej != nullptr && rej->holder_token != 0
                                       ? "key is held with token " + std::to_string(rej->holder_token)
                                       : "grant refused");
}

void Member::Impl::enqueue_waiter(const net::AcquireRequest& req, const ExchangePtr& ex, bool front) {
    if (!front && waiter_count() >= kMaxWaiters) {
        respond_error(ex, 409, "held", "too many waiting acquires (limit " + std::to_string(kMaxWaiters) + ")");
        return;
    }
    ex->watch_close();  // the queue asks client_gone() every tick
    auto& q = waiters[req.key];
    Waiter w{req, ex, Clock::now() + std::chrono::milliseconds(req.wait_ms)};
    if (front) {
        q.push_front(std::move(w));
    } else {
        q.push_back(std::move(w));
    }
    // The key may have been freed meanwhile (or never held): serve at once.
    if (table.find(req.key) == nullptr) serve_waiters(req.key);
}

// The key was released or expired: grant it to the head of its FIFO queue.
void Member::Impl::serve_waiters(const std::string& key) {
    if (waiter_grant_in_flight.count(key) > 0) return;
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    auto& q = it->second;
    const auto now = Clock::now();
    while (!q.empty() && (q.front().exchange->client_gone() || q.front().deadline <= now)) {
        if (!q.front().exchange->client_gone()) {
            ++metrics.waiter_timeouts;
            respond_error(q.front().exchange, 409, "held", "wait timed out");
        }
        q.pop_front();
    }
    if (q.empty()) {
        waiters.erase(it);
        return;
    }
    Waiter w = std::move(q.front());
    q.pop_front();
    if (q.empty()) waiters.erase(it);
    acquire(w.request, w.exchange, true);
}

void Member::Impl::sweep_waiters() {
    const auto now = Clock::now();
    for (auto it = waiters.begin(); it != waiters.end();) {
        auto& q = it->second;
        for (auto w = q.begin(); w != q.end();) {
            if (w->exchange->client_gone()) {
                w = q.erase(w);
            } else if (w->deadline <= now) {
                ++metrics.waiter_timeouts;
                respond_error(w->exchange, 409, "held", "wait timed out");
                w = q.erase(w);
            } else {
                ++w;
            }
        }
        it = q.empty() ? waiters.erase(it) : std::next(it);
    }
}

void Member::Impl::drop_all_waiters() {
    auto all = std::move(waiters);
    waiters.clear();
    waiter_grant_in_flight.clear();
    for (auto& [key, q] : all) {
        for (Waiter& w : q) redirect_or_unavailable("/v1/acquire", w.exchange);
    }
}

std::size_t Member::Impl::waiter_count() const {
    std::size_t n = 0;
    for (const auto& [key, q] : waiters) n += q.size();
    return n;
}

}  // namespace pgfence::server
