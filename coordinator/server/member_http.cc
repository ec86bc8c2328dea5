// The HTTP API (docs/http-api.md): the gate every
// request passes before its route's handler (routes.h: authentication,
// routing, the screen, parsing, authorization, the leader check), and the core's answers
// written as status codes and JSON — including the one path for a client that
// went away (client_left).
#include <boost/json.hpp>
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

// A lock's "value" is there when it publishes one.
json::object lock_json(const member::LockView& v) {
    const lock::Lock& l = v.lock;
    json::object o{{"key", l.key},           {"token", l.token},   {"owner", l.owner.view()},
                   {"lease_ms", l.lease_ms}, {"ttl_ms", v.ttl_ms}, {"kid", v.kid}};
    if (!l.value.empty()) o["value"] = l.value.view();
    return o;
}

// {"key":…,"token":…,"lease_ms":…,"owner":…[,"proof":…]}: what a granted
// acquire answers; the proof when the member signs (--token-signing-key-file).
// A campaign's (`election`: its name) starts {"name":…,"value":…, then the same.
std::string grant_body(const member::Granted& g, const std::string& proof, const std::string* election) {
    std::string out;
    out.reserve(64 + g.key.size() + g.owner.size() + (proof.empty() ? 0 : proof.size() + 10));
    out.push_back('{');
    if (election != nullptr) {
        out.append("\"name\":");
        net::append_json_string(out, *election);
        out.append(",\"value\":");
        net::append_json_string(out, g.value);
        out.push_back(',');
    }
    out.append("\"key\":");
    net::append_json_string(out, g.key);
    out.append(",\"token\":").append(std::to_string(g.token));
    out.append(",\"lease_ms\":").append(std::to_string(g.lease_ms));
    out.append(",\"owner\":");
    net::append_json_string(out, g.owner);
    if (!proof.empty()) out.append(",\"proof\":\"").append(proof).push_back('"');  // base64url, digits, dots
    out.push_back('}');
    return out;
}

// A set's grant: {"keys":[…],"token":…,"lease_ms":…,"owner":…[,"proofs":{key:proof,…}]}.
std::string grant_many_body(const member::Granted& g, const std::vector<std::string>& proofs) {
    json::array keys;
    for (const std::string& k : g.keys) keys.emplace_back(k);
    json::object o{{"keys", std::move(keys)}, {"token", g.token}, {"lease_ms", g.lease_ms}, {"owner", g.owner}};
    if (!proofs.empty()) {
        json::object by_key;
        for (std::size_t i = 0; i < g.keys.size() && i < proofs.size(); ++i) by_key[g.keys[i]] = proofs[i];
        o["proofs"] = std::move(by_key);
    }
    return json::serialize(o);
}

}  // namespace

void respond_error(const ExchangePtr& ex, unsigned status, const char* error, const std::string& message) {
    json::object o{{"error", error}};
    if (!message.empty()) o["message"] = message;
    respond_json(ex, status, o);
}

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
                          std::optional<Caller> reader, std::optional<ElectionCall> election) {
    const member::RequestId id = next_request++;
    outstanding.emplace(id,
                        Outstanding{ex, std::move(target), std::move(reader), std::move(election), Clock::now()});
    core->request(id, std::move(request), now());
}

// Writes a grant's answer, unless its client is gone.
void Member::Impl::write_grant(member::RequestId id, const ExchangePtr& ex, const member::Granted& g,
                               const std::string& proof, const std::string* election) {
    write_grant_body(id, ex, grant_body(g, proof, election));
}

void Member::Impl::write_grant_body(member::RequestId id, const ExchangePtr& ex, std::string body) {
    if (ex->client_gone()) {
        client_left(id, LeftAt::kGranted);
        return;
    }
    ex->respond(net::HttpResponse{200, std::move(body), "application/json", {}}, [this, id](bool written) {
        if (written) {
            core->response_written(id, true, now());
        } else {
            client_left(id, LeftAt::kGranted);
        }
    });
}

// A set's grant: one proof per key, all of its token (signed in turn, each
// as a Grant's proof of that key), then the answer.
void Member::Impl::write_grant_many(member::RequestId id, const ExchangePtr& ex, member::Granted grant) {
    if (!proof_signer) {
        write_grant_body(id, ex, grant_many_body(grant, {}));
        return;
    }
    auto state = std::make_shared<std::pair<member::Granted, std::vector<std::string>>>(std::move(grant),
                                                                                        std::vector<std::string>{});
    auto next = std::make_shared<std::function<void()>>();
    *next = [this, id, ex, state, next]() {
        auto& [g, proofs] = *state;
        if (proofs.size() == g.keys.size()) {
            write_grant_body(id, ex, grant_many_body(g, proofs));
            *next = nullptr;  // breaks the cycle
            return;
        }
        proof_signer->take(security.signer(), g.token, g.keys[proofs.size()], [state, next](std::string proof) {
            state->second.push_back(std::move(proof));
            (*next)();
        });
    };
    (*next)();
}

// The cases that end here: a waiting request whose connection closed
// (report_gone, member.cc, asks the watched ones every loop turn); a Granted
// answer for a request dropped that way; a grant whose client left before
// its answer could be written (write_grant), or whose answer failed to write.
void Member::Impl::client_left(member::RequestId id, LeftAt at) {
    outstanding.erase(id);
    if (at == LeftAt::kWaiting) {
        core->client_gone(id, now());
        return;
    }
    core->response_written(id, false, now());
    schedule_turn();
}

// One answer of the core, written. A grant whose client is gone is not
// written (client_left).
Clock::time_point Member::Impl::answer(member::RequestId id, member::Response response) {
    auto it = outstanding.find(id);
    if (it == outstanding.end()) {
        // Its client left (client_left): only a grant needs telling back.
        if (std::holds_alternative<member::Granted>(response)) client_left(id, LeftAt::kGranted);
        return {};
    }
    const Clock::time_point read_at = it->second.read_at;
    const Outstanding o = std::move(it->second);
    outstanding.erase(it);
    const ExchangePtr& ex = o.exchange;
    // A connection answered a grant or a keepalive is a holder's: it gives
    // way last when the client port is full (net/conn_ranks.h).
    if (std::holds_alternative<member::Granted>(response) || std::holds_alternative<member::KeptAlive>(response)) {
        ex->raise_class(net::ConnClass::kLease);
    }
    if (auto* g = std::get_if<member::Granted>(&response); g != nullptr && !g->keys.empty()) {
        write_grant_many(id, ex, std::move(*g));
    } else if (g != nullptr) {
        // A campaign's grant names its election.
        std::optional<std::string> name;
        if (o.election) name = o.election->name;
        if (!proof_signer) {
            write_grant(id, ex, *g, std::string(), name ? &*name : nullptr);
            return read_at;
        }
        // Signed off the loop, mostly while the grant was being committed
        // (server/proof_signer.h); the answer is written when its proof is ready.
        const lock::Token token = g->token;
        const std::string key = g->key;  // copied before the callback takes the grant
        proof_signer->take(security.signer(), token, key,
                           [this, id, ex, grant = std::move(*g), name = std::move(name)](std::string proof) {
                               write_grant(id, ex, grant, proof, name ? &*name : nullptr);
                           });
    } else if (o.election && answer_election(*o.election, ex, response)) {
        return read_at;
    } else if (std::holds_alternative<member::Released>(response)) {
        ex->respond(net::HttpResponse{200, "{\"released\":true}", "application/json", {}});
    } else if (auto* k = std::get_if<member::KeptAlive>(&response); k != nullptr && !k->keys.empty()) {
        json::array keys;
        for (const std::string& key : k->keys) keys.emplace_back(key);
        respond_json(ex, 200, json::object{{"keys", std::move(keys)}, {"token", k->token}, {"ttl_ms", k->ttl_ms}});
    } else if (k != nullptr) {
        respond_json(ex, 200, json::object{{"key", k->key}, {"token", k->token}, {"ttl_ms", k->ttl_ms}});
    } else if (auto* part = std::get_if<member::PartOfSet>(&response)) {
        ++metrics.bad_requests;
        respond_error(ex, 400, "part_of_set", part->message);
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
    return read_at;
}

// The election routes' own answers: resign {"resigned":true}; proclaim
// {"name","token","value"}; leader {"name","key","value","token","owner",
// "lease_ms","ttl_ms"} or 404 no_leader; proclaim or resign by no leader with
// that token, 404 not_leader. Others (409, 503, 307, ...) as the lock routes'.
bool Member::Impl::answer_election(const ElectionCall& election, const ExchangePtr& ex, member::Response& response) {
    using Kind = ElectionCall::Kind;
    if (std::holds_alternative<member::Released>(response)) {
        respond_json(ex, 200, json::object{{"resigned", true}});
    } else if (auto* p = std::get_if<member::Proclaimed>(&response)) {
        respond_json(ex, 200, json::object{{"name", election.name}, {"token", p->token}, {"value", p->value}});
    } else if (auto* locks = std::get_if<member::Locks>(&response); locks != nullptr && locks->one) {
        const member::LockView& v = locks->locks.front();
        respond_json(ex, 200,
                     json::object{{"name", election.name}, {"key", v.lock.key}, {"value", v.lock.value.view()},
                                  {"token", v.lock.token}, {"owner", v.lock.owner.view()}, {"lease_ms", v.lock.lease_ms},
                                  {"ttl_ms", v.ttl_ms}});
    } else if (std::holds_alternative<member::NotHeld>(response)) {
        if (election.kind == Kind::kLeader) {
            respond_error(ex, 404, "no_leader", "election '" + election.name + "' has no leader");
        } else {
            respond_error(ex, 404, "not_leader",
                          "election '" + election.name + "' is not led with that token (resigned, or its lease ended)");
        }
    } else {
        return false;
    }
    return true;
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

void Member::Impl::refused(const Call& call, const Refusal& refusal) {
    ++(refusal.status == 415 ? metrics.refused_media_type
       : std::string_view(refusal.error) == "admin_disabled" ? metrics.refused_admin
                                                             : metrics.refused_origin);
    // At most kDenialLogsPerSecond lines a second, with deny()'s (the counter sees every one).
    denial_log.log(log::LogLevel::kInfo, "http_refused",
                   {{"status", std::to_string(refusal.status)},
                    {"error", refusal.error},
                    {"path", call.path},
                    {"reason", refusal.message}});
    respond_error(call.ex, refusal.status, refusal.error, refusal.message);
}

void Member::Impl::bad_request(const ExchangePtr& ex, const std::string& message) {
    ++metrics.bad_requests;
    respond_error(ex, 400, "bad_request", message);
}

bool Member::Impl::serves(Serves s) const {
    switch (s) {
        case Serves::kAny:
            return true;
        case Serves::kLeader:
            return core->is_leader();
        case Serves::kWriter:
            return core->serves_writes();
    }
    return false;
}

bool Member::Impl::authorize(Need need, const Call& call) {
    if (!call.caller || need == Need::kNothing) return true;
    const Caller& c = *call.caller;
    if (need == Need::kAdmin) {
        if (c.policy->allowed(*c.user, auth::Permission::kAdmin, {})) return true;
        deny(call.ex, c, call.path, {}, "user '" + c.user->name + "' has no admin");
        return false;
    }
    const auth::Permission p = need == Need::kLockOnKey ? auth::Permission::kLock : auth::Permission::kRead;
    const std::string* key = key_of(call.request);
    if (const std::vector<std::string>* keys = set_keys_of(call.request)) {
        // A set: the permission on every key; the first refused is named.
        key = nullptr;
        for (const std::string& k : *keys) {
            if (!c.policy->allowed(*c.user, p, k)) {
                key = &k;
                break;
            }
        }
        if (key == nullptr) return true;
    }
    // No key: a list of every lock, which shows only the keys the caller may
    // read (answer()): some key must be.
    if (key == nullptr ? c.policy->holds_any(*c.user, p) : c.policy->allowed(*c.user, p, *key)) return true;
    std::string why = "user '" + c.user->name + "' has no " + auth::permission_name(p) + " permission on ";
    why += key == nullptr ? std::string("any key") : "key '" + *key + "'";
    deny(call.ex, c, call.path, key == nullptr ? std::string_view() : std::string_view(*key), std::move(why));
    return false;
}

void Member::Impl::handle_http(const net::HttpRequest& req, const ExchangePtr& ex) {
    Call call(req, ex);
    pass_gate(call);
    schedule_turn();
}

void Member::Impl::pass_gate(Call& call) {
    const RouteMatch match = match_route(call.req.method, call.path);
    if (match.credentials && security.auth_enabled()) {  // 1
        Caller caller = security.authenticate(call.req);
        if (!caller.user) {
            deny(call.ex, caller, call.path, {}, caller.why);
            return;
        }
        call.caller = std::move(caller);
        call.ex->raise_class(net::ConnClass::kAuthenticated);  // ranks it for shedding (net/conn_ranks.h)
    }
    if (match.route == nullptr) {  // 2
        if (match.path_known) {
            respond_error(call.ex, 405, "method_not_allowed", call.req.method + " is not allowed on " + call.path);
        } else {
            respond_error(call.ex, 404, "not_found", "no such endpoint: " + call.path);
        }
        return;
    }
    const Route& route = *match.route;
    if (auto refusal = screen(route, call.req, options)) {  // 3
        refused(call, *refusal);
        return;
    }
    const bool key_decides = call.caller && (route.need == Need::kLockOnKey || route.need == Need::kReadOnKey);
    const bool parse_early = route.parse != nullptr && (key_decides || route.parse_at == ParseAt::kFirst);
    if (parse_early && !route.parse(*this, call)) return;  // 4
    if (!authorize(route.need, call)) return;               // 5
    if (!serves(route.serves)) {                            // 6
        redirect_or_unavailable(call.req.target, call.ex);
        return;
    }
    if (route.parse != nullptr && !parse_early && !route.parse(*this, call)) return;  // 7
    route.handle(*this, call);                                                     // 8
}

}  // namespace pgfence::server
