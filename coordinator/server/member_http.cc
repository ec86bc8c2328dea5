// The HTTP API (DESIGN.md "HTTP API of every member").
#include <boost/json.hpp>

#include "net/log.h"
#include "server/member_impl.h"

namespace pgfence::server {

namespace json = boost::json;

namespace {

void respond_json(const ExchangePtr& ex, unsigned status, const json::value& body) {
    ex->respond(net::HttpResponse{status, json::serialize(body), "application/json", {}});
}

void respond_error(const ExchangePtr& ex, unsigned status, const char* error, const std::string& message = {}) {
    json::object o{{"error", error}};
    if (!message.empty()) o["message"] = message;
    respond_json(ex, status, o);
}

json::object lock_json(const lock::Lock& l, std::uint64_t ttl) {
    return {{"key", l.key}, {"token", l.token}, {"owner", l.owner}, {"lease_ms", l.lease_ms}, {"ttl_ms", ttl}};
}

}  // namespace

void Member::Impl::redirect_or_unavailable(const std::string& target, const ExchangePtr& ex) {
    const raft::NodeId leader = raft->leader();
    auto it = infos.find(leader);
    if (leader != raft::kNoNode && leader != options.id && it != infos.end() && !it->second.client_addr.empty()) {
        ex->respond(net::HttpResponse{307, json::serialize(json::object{{"error", "not_leader"}, {"leader", leader}}),
                                      "application/json", "http://" + it->second.client_addr + target});
        return;
    }
    respond_error(ex, 503, "no_leader");
}

std::uint64_t Member::Impl::ttl_ms(const std::string& key) const {
    auto it = leases.find(key);
    if (it == leases.end()) return 0;
    const auto left = it->second.deadline - Clock::now();
    if (left.count() <= 0) return 0;
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
}

void Member::Impl::get_locks(const std::string& query, const ExchangePtr& ex) {
    auto key = net::query_param(query, "key");
    if (auto* bad = std::get_if<net::BadRequest>(&key)) {
        ++metrics.bad_requests;
        respond_error(ex, 400, "bad_request", bad->message);
        return;
    }
    const net::QueryParam k = std::get<net::QueryParam>(key);
    if (k.found) {
        if (auto why = net::check_key(k.value); !why.empty()) {
            ++metrics.bad_requests;
            respond_error(ex, 400, "bad_request", "query parameter 'key' is invalid: " + why);
            return;
        }
    }
    const std::string target = "/v1/locks" + (query.empty() ? std::string() : "?" + query);
    confirm([this, k, ex, target](bool ok) {
        if (!ok) {
            redirect_or_unavailable(target, ex);
            return;
        }
        if (k.found) {
            const lock::Lock* l = table.find(k.value);
            if (l == nullptr) {
                respond_error(ex, 404, "not_held");
            } else {
                respond_json(ex, 200, lock_json(*l, ttl_ms(l->key)));
            }
            return;
        }
        json::array arr;
        for (const lock::Lock& l : table.list()) arr.push_back(lock_json(l, ttl_ms(l.key)));
        respond_json(ex, 200, json::object{{"locks", std::move(arr)}});
    });
}

void Member::Impl::handle_http(const net::HttpRequest& req, const ExchangePtr& ex) {
    const std::size_t q = req.target.find('?');
    const std::string path = req.target.substr(0, q);
    const std::string query = q == std::string::npos ? std::string() : req.target.substr(q + 1);
    const bool get = req.method == "GET";
    const bool post = req.method == "POST";
    if (path == "/healthz" && get) {
        ex->respond(net::HttpResponse{200, "ok\n", "text/plain", {}});
    } else if (path == "/metrics" && get) {
        ex->respond(net::HttpResponse{200, metrics_text(), "text/plain; version=0.0.4", {}});
    } else if (path == "/v1/status" && get) {
        ex->respond(net::HttpResponse{200, status_json(), "application/json", {}});
    } else if ((path == "/v1/acquire" || path == "/v1/release" || path == "/v1/keepalive") && post) {
        if (!is_leader() || shutting_down) {
            redirect_or_unavailable(req.target, ex);
        } else if (path == "/v1/acquire") {
            auto parsed = net::parse_acquire(req.body, limits);
            if (auto* bad = std::get_if<net::BadRequest>(&parsed)) {
                ++metrics.bad_requests;
                respond_error(ex, 400, "bad_request", bad->message);
            } else {
                acquire(std::get<net::AcquireRequest>(parsed), ex, false);
            }
        } else {
            auto parsed = net::parse_release(req.body);
            if (auto* bad = std::get_if<net::BadRequest>(&parsed)) {
                ++metrics.bad_requests;
                respond_error(ex, 400, "bad_request", bad->message);
            } else if (path == "/v1/release") {
                release(std::get<net::ReleaseRequest>(parsed), ex);
            } else {
                keepalive(std::get<net::ReleaseRequest>(parsed), ex);
            }
        }
    } else if (path == "/v1/locks" && get) {
        if (!is_leader()) {
            redirect_or_unavailable(req.target, ex);
        } else {
            get_locks(query, ex);
        }
    } else if (path == "/v1/acquire" || path == "/v1/release" || path == "/v1/keepalive" || path == "/v1/locks" ||
               path == "/v1/status" || path == "/metrics" || path == "/healthz") {
        respond_error(ex, 405, "method_not_allowed", req.method + " is not allowed on " + path);
    } else {
        respond_error(ex, 404, "not_found", "no such endpoint: " + path);
    }
    after_event();
}

}  // namespace pgfence::server
