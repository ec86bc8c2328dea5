// The HTTP API (DESIGN.md "HTTP API of every member"): requests parsed into
// the core's types, the core's answers written as status codes and JSON.
// With --auth-file every request but /healthz is authenticated first (401),
// then authorized by the policy (403) — on every member, before a follower
// redirects — and only then handed to the core (server/security.h).
#include <boost/json.hpp>
#include <charconv>
#include <chrono>

#include "storage/backup.h"

#include "log/log.h"
#include "net/json_text.h"
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

json::object lock_json(const member::LockView& v) {
    const lock::Lock& l = v.lock;
    return {{"key", l.key},           {"token", l.token},   {"owner", l.owner},
            {"lease_ms", l.lease_ms}, {"ttl_ms", v.ttl_ms}, {"kid", v.kid}};
}

// {"key":…,"token":…,"lease_ms":…,"owner":…[,"proof":…]}: what a granted
// acquire answers; the proof when the member signs (--token-signing-key-file).
std::string grant_body(const member::Granted& g, const std::string& proof) {
    std::string out;
    out.reserve(64 + g.key.size() + g.owner.size() + (proof.empty() ? 0 : proof.size() + 10));
    out.append("{\"key\":");
    net::append_json_string(out, g.key);
    out.append(",\"token\":").append(std::to_string(g.token));
    out.append(",\"lease_ms\":").append(std::to_string(g.lease_ms));
    out.append(",\"owner\":");
    net::append_json_string(out, g.owner);
    if (!proof.empty()) out.append(",\"proof\":\"").append(proof).push_back('"');  // base64url, digits, dots
    out.push_back('}');
    return out;
}

}  // namespace

void Member::Impl::redirect_or_unavailable(const std::string& target, const ExchangePtr& ex, raft::NodeId hint) {
    raft::NodeId leader = core->raft().leader();
    if (leader == raft::kNoNode || leader == options.id) leader = hint;
    const std::string addr = leader == raft::kNoNode || leader == options.id ? std::string() : client_addr_of(leader);
    if (!addr.empty()) {
        // Members of one cluster serve the same scheme: the leader's URL keeps ours.
        ex->respond(net::HttpResponse{307, json::serialize(json::object{{"error", "not_leader"}, {"leader", leader}}),
                                      "application/json",
                                      (options.client_tls() ? "https://" : "http://") + addr + target});
        return;
    }
    respond_error(ex, 503, "no_leader");
}

// The members' JSON, with the addresses this member knows where the
// configuration has none (members of a first configuration from --peers).
std::string Member::Impl::members_json(const member::Members& m, bool progress) const {
    json::array list;
    for (const member::MemberView& v : m.members) {
        auto known = book.find(v.id);
        const std::string peer = !v.peer_addr.empty() ? v.peer_addr
                                 : known != book.end() ? known->second.peer_addr
                                                       : std::string();
        const std::string client = client_addr_of(v.id, v.client_addr);
        json::object o{{"id", v.id}, {"voter", v.voter}, {"peer_addr", peer}, {"client_addr", client}};
        if (progress) o["match_index"] = v.match;
        if (progress && !v.voter) o["caught_up"] = v.caught_up;
        list.push_back(std::move(o));
    }
    json::object body{{"cluster_id", std::to_string(options.cluster_id)}, {"config_index", m.config_index}};
    if (progress) body["leader"] = core->raft().leader();
    body["members"] = std::move(list);
    return json::serialize(body);
}

void Member::Impl::submit(member::Request request, const ExchangePtr& ex, std::string target,
                          std::optional<Caller> reader) {
    const member::RequestId id = next_request++;
    outstanding.emplace(id, Outstanding{ex, std::move(target), std::move(reader)});
    core->request(id, std::move(request), now());
}

// Writes a grant's answer, or reports that its client is gone: a grant
// nobody received is released by the core (phantom release).
void Member::Impl::write_grant(member::RequestId id, const ExchangePtr& ex, const member::Granted& g,
                               const std::string& proof) {
    if (ex->client_gone()) {
        core->response_written(id, false, now());
        after_event();
        return;
    }
    ex->respond(net::HttpResponse{200, grant_body(g, proof), "application/json", {}}, [this, id](bool written) {
        core->response_written(id, written, now());
        if (!written) after_event();
    });
}

// One answer of the core, written. A grant whose client is gone already is
// not written: the core releases it (phantom release); one that could not be
// written is reported the same way.
void Member::Impl::answer(member::RequestId id, member::Response response) {
    auto it = outstanding.find(id);
    if (it == outstanding.end()) {
        // Its client left (report_gone): a grant nobody will receive is released.
        if (std::holds_alternative<member::Granted>(response)) {
            core->response_written(id, false, now());
            after_event();
        }
        return;
    }
    const Outstanding o = std::move(it->second);
    outstanding.erase(it);
    const ExchangePtr& ex = o.exchange;
    if (auto* g = std::get_if<member::Granted>(&response)) {
        if (!proof_signer) {
            write_grant(id, ex, *g, std::string());
            return;
        }
        // Signed off the loop, mostly while the grant was being committed
        // (server/proof_signer.h); the answer is written when its proof is ready.
        const lock::Token token = g->token;
        const std::string key = g->key;  // copied before the callback takes the grant
        proof_signer->take(security.signer(), token, key, [this, id, ex, grant = std::move(*g)](std::string proof) {
            write_grant(id, ex, grant, proof);
        });
    } else if (std::holds_alternative<member::Released>(response)) {
        ex->respond(net::HttpResponse{200, "{\"released\":true}", "application/json", {}});
    } else if (auto* k = std::get_if<member::KeptAlive>(&response)) {
        respond_json(ex, 200, json::object{{"key", k->key}, {"token", k->token}, {"ttl_ms", k->ttl_ms}});
    } else if (auto* locks = std::get_if<member::Locks>(&response)) {
        if (locks->one) {
            respond_json(ex, 200, lock_json(locks->locks.front()));
        } else {
            json::array arr;
            const std::optional<Caller>& r = o.reader;
            for (const member::LockView& v : locks->locks) {
                // A filtered list always has its user (authenticated before submit).
                if (!r || (r->user && r->policy->allowed(*r->user, auth::Permission::kRead, v.lock.key))) {
                    arr.push_back(lock_json(v));
                }
            }
            json::object body{{"locks", std::move(arr)}};
            if (locks->next) body["next"] = *locks->next;
            respond_json(ex, 200, std::move(body));
        }
    } else if (std::holds_alternative<member::NotHeld>(response)) {
        respond_error(ex, 404, "not_held");
    } else if (auto* h = std::get_if<member::Held>(&response)) {
        respond_error(ex, 409, "held", h->message);
    } else if (std::holds_alternative<member::TooLarge>(response)) {
        respond_error(ex, 400, "bad_request", "request too large for one log entry");
    } else if (auto* f = std::get_if<member::TableFull>(&response)) {
        respond_error(ex, 507, "table_full", f->message);
    } else if (auto* m = std::get_if<member::Members>(&response)) {
        ex->respond(net::HttpResponse{200, members_json(*m, true), "application/json", {}});
    } else if (auto* u = std::get_if<member::UnknownMember>(&response)) {
        respond_error(ex, 404, "unknown_member", "member " + std::to_string(u->id) + " is not in the configuration");
    } else if (auto* b = std::get_if<member::Backup>(&response)) {
        const auto unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch());
        ex->respond(net::HttpResponse{
            200,
            storage::encode_backup({options.cluster_id, static_cast<std::uint64_t>(unix_ms.count()), *b->snapshot}),
            "application/octet-stream",
            {}});
    } else if (auto* c = std::get_if<member::ChangeRefused>(&response)) {
        respond_error(ex, 409, "member_change_refused", c->message);
    } else {
        redirect_or_unavailable(o.target, ex, std::get<member::Unavailable>(response).leader);
    }
}

void Member::Impl::deny(const ExchangePtr& ex, const Caller& caller, const std::string& path, std::string_view key,
                        std::string message) {
    const bool unauthenticated = caller.user == nullptr;
    ++(unauthenticated ? metrics.unauthenticated : metrics.forbidden);
    // At most kDenialLogsPerSecond lines a second (the counters see every one).
    denial_log.log(log::LogLevel::kInfo, unauthenticated ? "auth_unauthenticated" : "auth_forbidden",
                   {{"user", unauthenticated ? std::string_view() : std::string_view(caller.user->name)},
                    {"path", path},
                    {"key", key},
                    {"reason", message}});
    respond_error(ex, unauthenticated ? 401 : 403, unauthenticated ? "unauthenticated" : "forbidden", message);
}

bool Member::Impl::permitted(const Access& access, auth::Permission p, std::string_view key, const ExchangePtr& ex) {
    if (!access.on || access.caller.policy->allowed(*access.caller.user, p, key)) return true;
    deny(ex, access.caller, access.path, key,
         "user '" + access.caller.user->name + "' has no " + auth::permission_name(p) +
             (p == auth::Permission::kAdmin ? std::string() : " permission on key '" + std::string(key) + "'"));
    return false;
}

void Member::Impl::bad_request(const ExchangePtr& ex, const std::string& message) {
    ++metrics.bad_requests;
    respond_error(ex, 400, "bad_request", message);
}

void Member::Impl::handle_http(const net::HttpRequest& req, const ExchangePtr& ex) {
    const std::size_t q = req.target.find('?');
    Access access;
    access.path = req.target.substr(0, q);
    const std::string& path = access.path;
    const bool get = req.method == "GET";
    const bool post = req.method == "POST";
    // With authorization on, every request but /healthz and a joining
    // member's question has a user first.
    access.on = security.auth_enabled() && path != "/healthz" && path != "/v1/members/join";
    if (access.on) {
        access.caller = security.authenticate(req);
        if (!access.caller.user) {
            deny(ex, access.caller, path, {}, access.caller.why);
            after_event();
            return;
        }
    }
    if (path == "/healthz" && get) {
        ex->respond(net::HttpResponse{200, "ok\n", "text/plain", {}});
    } else if ((path == "/metrics" || path == "/v1/status") && get && !permitted(access, auth::Permission::kAdmin, {}, ex)) {
        // answered 403
    } else if (path == "/metrics" && get) {
        ex->respond(net::HttpResponse{200, metrics_text(), "text/plain; version=0.0.4", {}});
    } else if (path == "/v1/status" && get) {
        ex->respond(net::HttpResponse{200, status_json(), "application/json", {}});
    } else if ((path == "/v1/acquire" || path == "/v1/release" || path == "/v1/keepalive") && post) {
        handle_write(req, access, ex);
    } else if (path == "/v1/locks" && get) {
        handle_list(req, q == std::string::npos ? std::string() : req.target.substr(q + 1), access, ex);
    } else if (path == "/v1/snapshot" && get) {
        if (!permitted(access, auth::Permission::kAdmin, {}, ex)) {
            // answered 403
        } else if (!core->is_leader()) {
            redirect_or_unavailable(req.target, ex);
        } else {
            submit(member::TakeBackup{}, ex, path);
        }
    } else if (path == "/v1/members/join" && get) {
        answer_join(q == std::string::npos ? std::string() : req.target.substr(q + 1), ex);
    } else if (((path == "/v1/members" && get) || ((path == "/v1/members/add" || path == "/v1/members/promote" ||
                                                     path == "/v1/members/remove") && post))) {
        if (permitted(access, auth::Permission::kAdmin, {}, ex)) handle_members(req, path, access, ex);
    } else if (path == "/v1/acquire" || path == "/v1/release" || path == "/v1/keepalive" || path == "/v1/locks" ||
               path == "/v1/status" || path == "/metrics" || path == "/healthz" || path == "/v1/members" ||
               path == "/v1/members/add" || path == "/v1/members/promote" || path == "/v1/members/remove" ||
               path == "/v1/members/join" || path == "/v1/snapshot") {
        respond_error(ex, 405, "method_not_allowed", req.method + " is not allowed on " + path);
    } else {
        respond_error(ex, 404, "not_found", "no such endpoint: " + path);
    }
    after_event();
}

void Member::Impl::handle_write(const net::HttpRequest& req, const Access& access, const ExchangePtr& ex) {
    // Without authorization a follower redirects before parsing (any body);
    // with it, the key must be known first to decide.
    if (!access.on && !core->serves_writes()) {
        redirect_or_unavailable(req.target, ex);
        return;
    }
    const std::string& path = access.path;
    if (path == "/v1/acquire") {
        auto parsed = net::parse_acquire(req.body, limits);
        if (auto* bad = std::get_if<net::BadRequest>(&parsed)) {
            bad_request(ex, bad->message);
        } else if (!permitted(access, auth::Permission::kLock, std::get<member::Acquire>(parsed).key, ex)) {
            // answered 403
        } else if (!core->serves_writes()) {
            redirect_or_unavailable(req.target, ex);
        } else {
            submit(std::move(std::get<member::Acquire>(parsed)), ex, path);
        }
        return;
    }
    auto parsed = net::parse_key_token(req.body);
    if (auto* bad = std::get_if<net::BadRequest>(&parsed)) {
        bad_request(ex, bad->message);
    } else if (!permitted(access, auth::Permission::kLock, std::get<member::Release>(parsed).key, ex)) {
        // answered 403
    } else if (!core->serves_writes()) {
        redirect_or_unavailable(req.target, ex);
    } else if (path == "/v1/release") {
        submit(std::move(std::get<member::Release>(parsed)), ex, path);
    } else {
        auto& r = std::get<member::Release>(parsed);
        submit(member::KeepAlive{std::move(r.key), r.token}, ex, path);
    }
}

void Member::Impl::handle_list(const net::HttpRequest& req, const std::string& query, const Access& access,
                               const ExchangePtr& ex) {
    if (!access.on && !core->is_leader()) {
        redirect_or_unavailable(req.target, ex);
        return;
    }
    auto parsed = net::parse_list_query(query);
    if (auto* bad = std::get_if<net::BadRequest>(&parsed)) {
        bad_request(ex, bad->message);
        return;
    }
    member::ListLocks& list = std::get<member::ListLocks>(parsed);
    if (list.key && !permitted(access, auth::Permission::kRead, *list.key, ex)) {
        // answered 403
    } else if (!list.key && access.on &&
               !access.caller.policy->holds_any(*access.caller.user, auth::Permission::kRead)) {
        deny(ex, access.caller, access.path, {},
             "user '" + access.caller.user->name + "' has no read permission on any key");
    } else if (!core->is_leader()) {
        redirect_or_unavailable(req.target, ex);
    } else {
        std::optional<Caller> reader;
        if (access.on && !list.key) {
            reader = access.caller;
            list.prefixes = access.caller.policy->readable_within(*access.caller.user, list.prefixes.front());
            if (list.prefixes.empty()) {  // nothing under the prefix is readable: an empty last page
                respond_json(ex, 200, json::object{{"locks", json::array{}}});
                return;
            }
        }
        submit(std::move(list), ex, req.target, std::move(reader));
    }
}

}  // namespace pgfence::server

namespace pgfence::server {

// Membership (admin): followers redirect to the leader, which decides.
void Member::Impl::handle_members(const net::HttpRequest& req, const std::string& path, const Access&,
                                  const ExchangePtr& ex) {
    if (!core->is_leader()) {
        redirect_or_unavailable(req.target, ex);
        return;
    }
    if (path == "/v1/members") {
        submit(member::ListMembers{}, ex, path);
        return;
    }
    if (path == "/v1/members/add") {
        auto parsed = net::parse_add_member(req.body);
        if (auto* bad = std::get_if<net::BadRequest>(&parsed)) {
            bad_request(ex, bad->message);
        } else {
            submit(std::move(std::get<member::AddMember>(parsed)), ex, path);
        }
        return;
    }
    auto id = net::parse_member_id(req.body);
    if (auto* bad = std::get_if<net::BadRequest>(&id)) {
        bad_request(ex, bad->message);
    } else if (path == "/v1/members/promote") {
        submit(member::PromoteMember{std::get<std::uint64_t>(id)}, ex, path);
    } else {
        submit(member::RemoveMember{std::get<std::uint64_t>(id)}, ex, path);
    }
}

// GET /v1/members/join?id=N: what member N, added to the configuration and
// starting with --join, needs before it can start — the cluster ID and every
// member's addresses, none of them a secret (docs/security.md) — so it is
// asked without credentials. The leader answers, from the configuration in
// force (a follower may not have applied the add yet).
void Member::Impl::answer_join(const std::string& query, const ExchangePtr& ex) {
    auto id = net::query_param(query, "id");
    if (auto* bad = std::get_if<net::BadRequest>(&id)) {
        bad_request(ex, bad->message);
        return;
    }
    const net::QueryParam& p = std::get<net::QueryParam>(id);
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(p.value.data(), p.value.data() + p.value.size(), n);
    if (!p.found || ec != std::errc() || end != p.value.data() + p.value.size() || n == 0) {
        bad_request(ex, "query parameter 'id' must be a member ID >= 1");
        return;
    }
    if (!core->is_leader()) {
        redirect_or_unavailable("/v1/members/join?" + query, ex);
        return;
    }
    const raft::Configuration& c = core->raft().configuration();
    if (!c.contains(n)) {
        respond_error(ex, 404, "unknown_member", "member " + std::to_string(n) + " is not in the configuration");
        return;
    }
    ex->respond(net::HttpResponse{200, members_json(core->members_view(), false), "application/json", {}});
}

}  // namespace pgfence::server
