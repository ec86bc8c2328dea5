#include "client/client.h"

#include "client/duration.h"
#include "client/exit_codes.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "client/transport.h"
#include "storage/backup.h"
#include "net/tls.h"

namespace pgfence::client {
namespace json = boost::json;

const char* to_string(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::kHeld: return "held";
        case ErrorKind::kNotHeld: return "not_held";
        case ErrorKind::kNotFound: return "not_found";
        case ErrorKind::kBadRequest: return "bad_request";
        case ErrorKind::kUnavailable: return "unavailable";
        case ErrorKind::kProtocol: return "protocol";
        case ErrorKind::kNotPgfence: return "not_pgfence";
        case ErrorKind::kNotAuthorized: return "not_authorized";
        case ErrorKind::kUnknownMember: return "unknown_member";
        case ErrorKind::kRefused: return "refused";
        case ErrorKind::kCompacted: return "compacted";
        case ErrorKind::kUnknownToken: return "unknown_token";
        case ErrorKind::kNotApplied: return "not_applied";
    }
    return "unknown";
}

int exit_code_of(ErrorKind kind, bool lease_call) {
    switch (kind) {
        case ErrorKind::kHeld: return kExitHeld;
        case ErrorKind::kNotHeld: return lease_call ? kExitLostLease : kExitNotFound;
        case ErrorKind::kNotFound: return kExitNotFound;
        case ErrorKind::kBadRequest: return kExitUsage;
        case ErrorKind::kUnavailable: return kExitUnavailable;
        case ErrorKind::kProtocol: return kExitOther;
        case ErrorKind::kNotAuthorized: return kExitNotAuthorized;
        case ErrorKind::kUnknownMember: return kExitUnknownMember;
        case ErrorKind::kRefused: return kExitRefused;
        case ErrorKind::kNotPgfence: return kExitNotPgfence;
        case ErrorKind::kCompacted: return kExitCompacted;
        case ErrorKind::kUnknownToken: return kExitNoSuchToken;
        case ErrorKind::kNotApplied: return kExitUnavailable;
    }
    return kExitOther;
}

namespace {

// The numbers after `prefix` in `text`: "... [500, 300000]" -> 500, 300000.
std::vector<std::uint64_t> numbers_after(const std::string& text, const std::string& prefix) {
    std::vector<std::uint64_t> out;
    auto at = text.find(prefix);
    if (at == std::string::npos) return out;
    const char* p = text.data() + at + prefix.size();
    const char* end = text.data() + text.size();
    while (p < end) {
        if (*p < '0' || *p > '9') {
            ++p;
            continue;
        }
        std::uint64_t n = 0;
        const auto [next, ec] = std::from_chars(p, end, n);
        if (ec != std::errc()) break;
        out.push_back(n);
        p = next;
    }
    return out;
}

}  // namespace

std::string in_flag_terms(const Error& error, milliseconds lease, milliseconds wait) {
    if (error.kind != ErrorKind::kBadRequest) return error.message;
    const auto ms = [](std::uint64_t n) { return format_duration(milliseconds(static_cast<std::int64_t>(n))); };
    // "field 'lease_ms' is N, must be within [LOW, HIGH]" (net/api_request.cc)
    if (const auto n = numbers_after(error.message, "field 'lease_ms' is "); n.size() == 3) {
        return "--lease " + format_duration(lease) + " is " + (n[0] < n[1] ? "shorter" : "longer") +
               " than the cluster allows: it grants leases from " + ms(n[1]) + " to " + ms(n[2]) +
               " (fence-coordinator --min-lease and --max-lease)";
    }
    // "field 'wait_ms' is N, must be at most MAX"
    if (const auto n = numbers_after(error.message, "field 'wait_ms' is "); n.size() == 2) {
        return "--wait " + format_duration(wait) + " is longer than the cluster allows: it waits at most " + ms(n[1]) +
               " (fence-coordinator --max-wait)";
    }
    return error.message;
}

EndpointsParse endpoints_from(const std::string& flag) {
    if (!flag.empty()) return parse_endpoints(flag);
    if (const char* env = std::getenv(std::string(kEndpointsEnv).c_str()); env && *env) {
        EndpointsParse parsed = parse_endpoints(env);
        if (!parsed.error.empty()) parsed.error = std::string(kEndpointsEnv) + ": " + parsed.error;
        return parsed;
    }
    return parse_endpoints(kDefaultEndpoints);
}

std::string load_credentials(const std::string& ca_file, const std::string& cert_file, const std::string& key_file,
                             const std::string& bearer_file, Options& options) {
    auto pick = [](const std::string& given, std::string_view env) {
        if (!given.empty()) return given;
        const char* v = std::getenv(std::string(env).c_str());
        return std::string(v ? v : "");
    };
    options.ca_file = pick(ca_file, kCaFileEnv);
    options.cert_file = pick(cert_file, kCertFileEnv);
    options.key_file = pick(key_file, kKeyFileEnv);
    if (options.cert_file.empty() != options.key_file.empty()) {
        return "a client certificate needs its key and a key its certificate (--cert and --key, or " +
               std::string(kCertFileEnv) + " and " + std::string(kKeyFileEnv) + ")";
    }
    if (!options.ca_file.empty() || !options.cert_file.empty()) {
        // Loaded now so that a wrong path or a key readable by others is a
        // usage error naming the file, not an unreachable cluster later.
        net::TlsContextPtr probe;
        if (auto err = net::make_tls_context({options.cert_file, options.key_file, options.ca_file},
                                             net::TlsSide::kClient, probe);
            !err.empty()) {
            return "TLS: " + err;
        }
    }
    const std::string path = pick(bearer_file, kBearerFileEnv);
    if (path.empty()) return {};
    std::string text;
    if (auto why = net::read_small_file(path, "bearer file", 4096, text); !why.empty()) return why;
    text = text.substr(0, text.find('\n'));
    const std::size_t first = text.find_first_not_of(" \t\r");
    const std::size_t last = text.find_last_not_of(" \t\r");
    text = first == std::string::npos ? std::string() : text.substr(first, last - first + 1);
    if (text.empty()) return "bearer file '" + path + "' is empty";
    options.bearer = std::move(text);
    return {};
}

namespace {

constexpr int kStatusOk = 200;
constexpr int kStatusBadRequest = 400;
constexpr int kStatusUnauthorized = 401;
constexpr int kStatusForbidden = 403;
constexpr int kStatusNotFound = 404;
constexpr int kStatusConflict = 409;
constexpr int kStatusGone = 410;  // watch: compacted
constexpr int kStatusInsufficientStorage = 507;  // acquire: the lock table is full

// A set's keys as the JSON array of "keys".
json::array keys_json(const std::vector<std::string>& keys) {
    json::array out;
    for (const std::string& k : keys) out.emplace_back(k);
    return out;
}

// Any JSON scalar as text: ids and leaders may be numbers or strings; null is "".
std::string scalar_text(const json::value* v) {
    if (!v || v->is_null()) return "";
    if (v->is_string()) return std::string(v->get_string());
    if (v->is_int64()) return std::to_string(v->get_int64());
    if (v->is_uint64()) return std::to_string(v->get_uint64());
    if (v->is_bool()) return v->get_bool() ? "true" : "false";
    return json::serialize(*v);
}

struct Parsed {
    json::object object;
    std::string error;  // non-empty when the body is not a JSON object
};

Parsed parse_object(const std::string& body) {
    boost::system::error_code ec;
    json::value v = json::parse(body, ec);
    if (ec) return {{}, "answer is not JSON (" + ec.message() + "): " + body.substr(0, 200)};
    if (!v.is_object()) return {{}, "answer is not a JSON object: " + body.substr(0, 200)};
    return {std::move(v.get_object()), {}};
}

// Reads an unsigned integer field; false when missing or of another type.
bool get_u64(const json::object& o, const char* name, std::uint64_t& out) {
    const json::value* v = o.if_contains(name);
    if (!v) return false;
    if (v->is_uint64()) out = v->get_uint64();
    else if (v->is_int64() && v->get_int64() >= 0) out = static_cast<std::uint64_t>(v->get_int64());
    else return false;
    return true;
}

std::string get_string(const json::object& o, const char* name) { return scalar_text(o.if_contains(name)); }

Error protocol_error(const std::string& what) { return {ErrorKind::kProtocol, what, 0}; }

// Every answer of a pgfence member's API is a JSON object, and every error it
// answers names its `error`: anything else came from something that is not a
// member (a web server, a proxy's error page, a JSON gateway).
Error not_pgfence(const CallResult& r) {
    const std::string& body = r.response.body;
    std::string shown;
    for (const char c : body.substr(0, 80)) shown.push_back(static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
    return {ErrorKind::kNotPgfence,
            r.answered_by + " is not a pgfence member: it answered HTTP " + std::to_string(r.response.status) +
                (body.empty() ? std::string(" with an empty body")
                              : " with \"" + shown + (body.size() > 80 ? "...\"" : "\"")) +
                " (check the endpoints)",
            r.response.status};
}

// The JSON object of a 200 answer, or the Error of an answer that is none.
Result<json::object> body_of(const CallResult& r) {
    Parsed p = parse_object(r.response.body);
    if (!p.error.empty()) return not_pgfence(r);
    return std::move(p.object);
}

Result<LockInfo> lock_info_of(const json::object& o) {
    LockInfo info;
    std::uint64_t lease_ms = 0, ttl_ms = 0;
    info.key = get_string(o, "key");
    info.owner = get_string(o, "owner");
    info.kid = get_string(o, "kid");
    if (!get_u64(o, "token", info.token)) return protocol_error("lock without a numeric 'token'");
    get_u64(o, "lease_ms", lease_ms);
    get_u64(o, "ttl_ms", ttl_ms);
    info.lease = milliseconds(lease_ms);
    info.ttl = milliseconds(ttl_ms);
    return info;
}

std::vector<Endpoint> member_endpoints_of(const json::value* members) {
    std::vector<Endpoint> out;
    if (!members || !members->is_array()) return out;
    for (const json::value& m : members->get_array()) {
        std::string text;
        if (m.is_string()) text = std::string(m.get_string());
        for (const char* field : {"client_url", "client_addr", "client", "url", "addr"}) {
            if (text.empty() && m.is_object()) text = get_string(m.get_object(), field);
        }
        std::optional<Endpoint> e = endpoint_of_url(text);
        if (!e) e = parse_endpoint(text, nullptr);
        if (e && out.size() < kMaxEndpoints) out.push_back(*e);
    }
    return out;
}

Result<MemberStatus> member_status_of(const json::object& o, const std::string& body, const Endpoint& asked) {
    MemberStatus s;
    s.endpoint = asked.to_string();
    s.id = get_string(o, "id");
    s.role = get_string(o, "role");
    s.leader = get_string(o, "leader");
    get_u64(o, "term", s.term);
    get_u64(o, "commit_index", s.commit_index);
    get_u64(o, "applied_index", s.applied_index);
    if (const json::value* v = o.if_contains("voter"); v && v->is_bool()) s.voter = v->get_bool();
    s.member_endpoints = member_endpoints_of(o.if_contains("members"));
    s.json = body;
    return s;
}

Result<MemberList> member_list_of(const json::object& answer, const std::string& body) {
    MemberList out;
    const std::string cluster = get_string(answer, "cluster_id");
    if (!cluster.empty()) {
        const auto [end, ec] = std::from_chars(cluster.data(), cluster.data() + cluster.size(), out.cluster_id);
        if (ec != std::errc() || end != cluster.data() + cluster.size()) {
            return protocol_error("members answer with a bad 'cluster_id': " + cluster);
        }
    }
    get_u64(answer, "config_index", out.config_index);
    get_u64(answer, "leader", out.leader);
    const json::value* members = answer.if_contains("members");
    if (!members || !members->is_array()) return protocol_error("members answer without a 'members' array");
    for (const json::value& v : members->get_array()) {
        if (!v.is_object()) return protocol_error("'members' holds a non-object");
        const json::object& o = v.get_object();
        MemberEntry e;
        if (!get_u64(o, "id", e.id) || e.id == 0) return protocol_error("member without a numeric 'id'");
        const json::value* voter = o.if_contains("voter");
        e.voter = voter && voter->is_bool() && voter->get_bool();
        const json::value* caught = o.if_contains("caught_up");
        e.caught_up = caught && caught->is_bool() && caught->get_bool();
        e.peer_addr = get_string(o, "peer_addr");
        e.client_addr = get_string(o, "client_addr");
        get_u64(o, "match_index", e.match_index);
        out.members.push_back(std::move(e));
    }
    out.json = body;
    return out;
}

// An optional unsigned field: nullopt when missing, null or not a number.
std::optional<std::uint64_t> get_opt_u64(const json::object& o, const char* name) {
    std::uint64_t v = 0;
    if (!get_u64(o, name, v)) return std::nullopt;
    return v;
}

const json::object* object_field(const json::object& o, const char* name) {
    const json::value* v = o.if_contains(name);
    return v != nullptr && v->is_object() ? &v->get_object() : nullptr;
}

Result<TokenLife> token_life_of_json(const json::object& o, const std::string& endpoint) {
    TokenLife t;
    if (!get_u64(o, "token", t.token)) return protocol_error("token answer without a numeric 'token'");
    t.key = get_string(o, "key");
    if (const json::value* keys = o.if_contains("keys"); keys != nullptr && keys->is_array()) {
        for (const json::value& k : keys->get_array()) {
            if (k.is_string()) t.keys.emplace_back(k.get_string());
        }
    }
    if (t.keys.empty()) t.keys.push_back(t.key);
    t.owner = get_string(o, "owner");
    std::uint64_t lease_ms = 0;
    get_u64(o, "lease_ms", lease_ms);
    t.lease = milliseconds(lease_ms);
    if (const json::object* g = object_field(o, "granted")) {
        t.granted.index = get_opt_u64(*g, "index");
        t.granted.wall_ms = get_opt_u64(*g, "wall_ms");
    }
    const json::object* e = object_field(o, "ended");
    if (e == nullptr) return protocol_error("token answer without an 'ended' object");
    t.ended.how = get_string(*e, "how");
    t.ended.index = get_opt_u64(*e, "index");
    t.ended.wall_ms = get_opt_u64(*e, "wall_ms");
    t.ended.last_keepalive_wall_ms = get_opt_u64(*e, "last_keepalive_wall_ms");
    t.next_token = get_opt_u64(o, "next_token");
    if (const json::object* k = object_field(o, "keepalives")) {
        get_u64(*k, "observed_by", t.keepalives.observed_by);
        const json::value* leader = k->if_contains("while_leader");
        t.keepalives.while_leader = leader != nullptr && leader->is_bool() && leader->get_bool();
        get_u64(*k, "ok", t.keepalives.ok);
        t.keepalives.last_ok_wall_ms = get_opt_u64(*k, "last_ok_wall_ms");
        get_u64(*k, "refused", t.keepalives.refused);
        t.keepalives.last_refused_wall_ms = get_opt_u64(*k, "last_refused_wall_ms");
        t.keepalives.last_refused_reason = get_string(*k, "last_refused_reason");
    }
    t.endpoint = endpoint;
    t.json = json::serialize(o);
    return t;
}

Result<KeyHistory> key_history_of_json(const json::object& o, const std::string& body, const std::string& endpoint) {
    KeyHistory h;
    h.key = get_string(o, "key");
    const json::value* tokens = o.if_contains("tokens");
    if (tokens == nullptr || !tokens->is_array()) return protocol_error("key history answer without a 'tokens' array");
    for (const json::value& v : tokens->get_array()) {
        if (!v.is_object()) return protocol_error("'tokens' holds a non-object");
        Result<TokenLife> t = token_life_of_json(v.get_object(), endpoint);
        if (!t) return t.error();
        h.tokens.push_back(std::move(t.value()));
    }
    h.endpoint = endpoint;
    h.json = body;
    return h;
}

}  // namespace

// Maps a non-200 final answer to an Error. `not_found_kind` distinguishes get from release/keepalive.
Error error_of(const CallResult& call, ErrorKind not_found_kind) {
    const HttpResponse& r = call.response;
    const Parsed p = parse_object(r.body);
    const std::string code = p.error.empty() ? get_string(p.object, "error") : "";
    if (code.empty()) return not_pgfence(call);
    std::string detail = get_string(p.object, "message");
    if (detail.empty()) detail = code;
    switch (r.status) {
        case kStatusBadRequest: return {ErrorKind::kBadRequest, "bad request: " + detail, r.status};
        case kStatusNotFound:
            if (code == "unknown_member") return {ErrorKind::kUnknownMember, detail, r.status};
            if (code == "unknown_token") return {ErrorKind::kUnknownToken, detail, r.status};
            if (code == "not_applied") {
                Error e{ErrorKind::kNotApplied, detail, r.status};
                get_u64(p.object, "applied_token", e.applied_token);
                return e;
            }
            return {not_found_kind, detail.empty() ? "not found" : detail, r.status};
        case kStatusConflict:
            if (code == "member_change_refused") return {ErrorKind::kRefused, detail, r.status};
            return {ErrorKind::kHeld, detail.empty() ? "held" : detail, r.status};
        case kStatusUnauthorized:
            return {ErrorKind::kNotAuthorized, "not authenticated: " + detail, r.status};
        case kStatusForbidden: return {ErrorKind::kNotAuthorized, "not authorized: " + detail, r.status};
        case kStatusGone:
            if (code == "compacted") {
                Error e{ErrorKind::kCompacted, "compacted: " + detail, r.status};
                get_u64(p.object, "oldest_revision", e.oldest_revision);
                get_u64(p.object, "oldest_token", e.oldest_token);
                return e;
            }
            return {ErrorKind::kProtocol, "unexpected HTTP status 410: " + detail, r.status};
        case kStatusInsufficientStorage: return {ErrorKind::kProtocol, "lock table full: " + detail, r.status};
        default:
            return {ErrorKind::kProtocol,
                    "unexpected HTTP status " + std::to_string(r.status) + ": " + detail, r.status};
    }
}

class Client::Impl {
public:
    explicit Impl(Options options) : transport_(std::move(options)) {}

    CallResult post(const std::string& path, const json::object& body,
                    std::optional<Clock::time_point> deadline = std::nullopt) {
        const Options& o = transport_.options();
        const bool keepalive = path == "/v1/keepalive" && o.keepalive_attempt_timeout.count() > 0;
        const milliseconds attempt = keepalive ? o.keepalive_attempt_timeout : o.attempt_timeout;
        Call call;
        const std::string text = json::serialize(body);
        call.make = [&] { return Attempt{{"POST", path, text}, attempt}; };
        call.deadline = Clock::now() + o.timeout;
        if (deadline) call.deadline = std::min(call.deadline, *deadline);
        return transport_.perform(call);
    }

    CallResult get(const std::string& target) {
        const Options& o = transport_.options();
        Call call;
        call.make = [&] { return Attempt{{"GET", target, {}}, o.attempt_timeout}; };
        call.deadline = Clock::now() + o.timeout;
        return transport_.perform(call);
    }

    Result<Lease> acquire(const AcquireRequest& req) {
        json::object fields;
        if (req.keys.empty()) {
            fields["key"] = req.key;
        } else {
            fields["keys"] = keys_json(req.keys);
        }
        return grant("/v1/acquire", fields, req);
    }

    Result<Lease> campaign(const CampaignRequest& c) {
        json::object fields{{"name", c.name}, {"value", c.value}};
        Result<Lease> lease = grant("/v1/election/campaign", fields, AcquireRequest{"", c.lease, c.wait, c.owner});
        if (!lease) return lease;
        lease.value().name = c.name;
        return lease;
    }

    Result<Proclaimed> proclaim(const std::string& name, std::uint64_t token, const std::string& value) {
        CallResult r = post("/v1/election/proclaim", {{"name", name}, {"token", token}, {"value", value}});
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotHeld);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        Proclaimed out{name, token, get_string(p.value(), "value")};
        if (!get_u64(p.value(), "token", out.token)) return protocol_error("proclaim answer without 'token'");
        return out;
    }

    Result<Released> resign(const std::string& name, std::uint64_t token) {
        CallResult r = post("/v1/election/resign", {{"name", name}, {"token", token}});
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotHeld);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        const json::value* resigned = p.value().if_contains("resigned");
        if (resigned == nullptr || !resigned->is_bool() || !resigned->get_bool()) return not_pgfence(r);
        return Released{};
    }

    Result<LeaderInfo> leader(const std::string& name) {
        CallResult r = get("/v1/election/leader?name=" + url_encode(name));
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotFound);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        const json::object& o = p.value();
        LeaderInfo info;
        std::uint64_t lease_ms = 0, ttl_ms = 0;
        info.name = get_string(o, "name");
        info.key = get_string(o, "key");
        info.value = get_string(o, "value");
        info.owner = get_string(o, "owner");
        if (!get_u64(o, "token", info.token)) return protocol_error("leader answer without a numeric 'token'");
        get_u64(o, "lease_ms", lease_ms);
        get_u64(o, "ttl_ms", ttl_ms);
        info.lease = milliseconds(lease_ms);
        info.ttl = milliseconds(ttl_ms);
        return info;
    }

    // An acquire (path /v1/acquire, `fields` the key) or a campaign (its
    // name and value): the lease and wait of `req`, answered as a Lease.
    Result<Lease> grant(const char* path, const json::object& fields, const AcquireRequest& req) {
        const Options& o = transport_.options();
        const auto wait_end = Clock::now() + req.wait;
        Call call;
        call.make = [&] {
            // A retry asks only for the wait that is left, so the whole call stays within it.
            const auto left = std::max(milliseconds(0),
                                       std::chrono::duration_cast<milliseconds>(wait_end - Clock::now()));
            json::object body = fields;
            body["lease_ms"] = req.lease.count();
            body["wait_ms"] = left.count();
            if (!req.owner.empty()) body["owner"] = req.owner;
            return Attempt{{"POST", path, json::serialize(body)}, o.attempt_timeout + left};
        };
        call.deadline = Clock::now() + o.timeout + req.wait;
        CallResult r = transport_.perform(call);
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotFound);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        const json::object& o_body = p.value();
        Lease lease;
        std::uint64_t lease_ms = 0;
        if (!get_u64(o_body, "token", lease.token)) return protocol_error("acquire answer without 'token'");
        if (!get_u64(o_body, "lease_ms", lease_ms)) lease_ms = static_cast<std::uint64_t>(req.lease.count());
        lease.key = get_string(o_body, "key");  // a set's answer names its "keys" instead
        if (lease.key.empty()) lease.key = req.keys.empty() ? req.key : req.keys.front();
        lease.keys = req.keys.empty() ? std::vector<std::string>{lease.key} : req.keys;
        lease.value = get_string(o_body, "value");
        lease.owner = get_string(o_body, "owner");
        lease.proof = get_string(o_body, "proof");
        if (const json::value* proofs = o_body.if_contains("proofs"); proofs != nullptr && proofs->is_object()) {
            for (const std::string& k : lease.keys) {
                const json::value* one = proofs->as_object().if_contains(k);
                lease.proofs.push_back(one != nullptr && one->is_string() ? std::string(one->as_string()) : "");
            }
            lease.proof = lease.proofs.front();
        }
        lease.lease = milliseconds(lease_ms);
        lease.sent_at = r.first_sent_at;
        lease.received_at = Clock::now();
        lease.max_clock_drift_ppm = o.max_clock_drift_ppm;
        return lease;
    }

    Result<Released> release(const std::vector<std::string>& keys, std::uint64_t token) {
        json::object body{{"token", token}};
        if (keys.size() == 1) {
            body["key"] = keys.front();
        } else {
            body["keys"] = keys_json(keys);
        }
        CallResult r = post("/v1/release", body);
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotHeld);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        const json::value* released = p.value().if_contains("released");
        if (released == nullptr || !released->is_bool() || !released->get_bool()) return not_pgfence(r);
        return Released{};
    }

    Result<KeepaliveResult> keepalive(const std::vector<std::string>& keys, std::uint64_t token,
                                      std::optional<Clock::time_point> deadline) {
        json::object body{{"token", token}};
        if (keys.size() == 1) {
            body["key"] = keys.front();
        } else {
            body["keys"] = keys_json(keys);
        }
        CallResult r = post("/v1/keepalive", body, deadline);
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotHeld);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        KeepaliveResult k;
        std::uint64_t ttl_ms = 0;
        if (!get_u64(p.value(), "ttl_ms", ttl_ms)) return protocol_error("keepalive answer without 'ttl_ms'");
        k.keys = keys;
        k.key = keys.front();
        k.token = token;
        k.ttl = milliseconds(ttl_ms);
        k.sent_at = r.sent_at;
        k.max_clock_drift_ppm = transport_.options().max_clock_drift_ppm;
        return k;
    }

    Result<LockInfo> get_lock(const std::string& key) {
        CallResult r = get("/v1/locks?key=" + url_encode(key));
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotFound);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        return lock_info_of(p.value());
    }

    Result<std::vector<LockInfo>> list(const std::string& prefix) {
        std::vector<LockInfo> out;
        std::string after;
        for (;;) {
            CallResult r = get("/v1/locks?prefix=" + url_encode(prefix) + "&after=" + url_encode(after) +
                               "&limit=" + std::to_string(kListPageSize));
            if (!r.answered) return r.error;
            if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotFound);
            Result<json::object> p = body_of(r);
            if (!p) return p.error();
            const json::value* locks = p.value().if_contains("locks");
            if (!locks || !locks->is_array()) return protocol_error("list answer without a 'locks' array");
            for (const json::value& v : locks->get_array()) {
                if (!v.is_object()) return protocol_error("'locks' holds a non-object");
                Result<LockInfo> info = lock_info_of(v.get_object());
                if (!info) return info.error();
                // A member that does not page answers every lock: keep the prefix's.
                if (info.value().key.starts_with(prefix)) out.push_back(std::move(info.value()));
            }
            const json::value* next = p.value().if_contains("next");
            if (next == nullptr) return out;
            // The next page starts after this one's last key: it must move on.
            if (!next->is_string() || next->get_string().empty() || std::string(next->get_string()) <= after) {
                return protocol_error("list answer with a 'next' that is not a key after '" + after + "'");
            }
            if (out.size() > kMaxListedLocks) {
                return protocol_error("list answer of more than " + std::to_string(kMaxListedLocks) + " locks");
            }
            after = std::string(next->get_string());
        }
    }

    Result<MemberStatus> status_of(const Endpoint& endpoint) {
        const Options& o = transport_.options();
        Call call;
        call.make = [&] { return Attempt{{"GET", "/v1/status", {}}, o.attempt_timeout}; };
        call.deadline = Clock::now() + std::min(o.timeout, o.attempt_timeout);
        call.follow_redirects = false;
        call.retry = false;
        CallResult r = transport_.perform_at(endpoint, call);
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotFound);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        return member_status_of(p.value(), r.response.body, endpoint);
    }

    // GET `target` at `endpoint` alone (no redirect, no retry), or from the
    // first member that answers when `endpoint` is null.
    CallResult get_at(const Endpoint* endpoint, const std::string& target) {
        if (endpoint == nullptr) return get(target);
        const Options& o = transport_.options();
        Call call;
        call.make = [&] { return Attempt{{"GET", target, {}}, o.attempt_timeout}; };
        call.deadline = Clock::now() + std::min(o.timeout, o.attempt_timeout);
        call.follow_redirects = false;
        call.retry = false;
        return transport_.perform_at(*endpoint, call);
    }

    // From `endpoint` alone, or (null) from the first member that answers;
    // one that has not applied the token yet (not_applied) sends it on to
    // every endpoint in turn: the first that knows the token answers, else a
    // member that applied past it and says unknown_token, else not_applied.
    Result<TokenLife> token_life(const Endpoint* endpoint, std::uint64_t token) {
        Result<TokenLife> first = token_life_once(endpoint, token);
        if (endpoint != nullptr || first || first.error().kind != ErrorKind::kNotApplied) return first;
        Result<TokenLife> out = first;
        for (const Endpoint& e : transport_.options().endpoints) {
            Result<TokenLife> r = token_life_once(&e, token);
            if (r) return r;
            const ErrorKind kind = r.error().kind;
            if (kind == ErrorKind::kUnknownToken ||
                (kind == ErrorKind::kCompacted && out.error().kind != ErrorKind::kUnknownToken)) {
                out = std::move(r);
            }
        }
        return out;
    }

    Result<TokenLife> token_life_once(const Endpoint* endpoint, std::uint64_t token) {
        CallResult r = get_at(endpoint, "/v1/tokens/" + std::to_string(token));
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kProtocol);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        return token_life_of_json(p.value(), r.answered_by);
    }

    Result<KeyHistory> key_history(const Endpoint* endpoint, const std::string& key, std::size_t limit) {
        CallResult r = get_at(endpoint, "/v1/keys/" + url_encode(key) + "/history?limit=" + std::to_string(limit));
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kProtocol);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        return key_history_of_json(p.value(), r.response.body, r.answered_by);
    }

    Result<MemberStatus> status() {
        Error last{ErrorKind::kUnavailable, "no endpoints", 0};
        for (const Endpoint& e : transport_.options().endpoints) {
            Result<MemberStatus> s = status_of(e);
            if (s) return s;
            last = s.error();
        }
        return last;
    }

    Result<MemberList> members_call(CallResult r) {
        if (!r.answered) return r.error;
        // 404 unknown_member is mapped by error_of; any other 404 (an older
        // release without these endpoints) is not an answer about a member.
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kProtocol);
        Result<json::object> p = body_of(r);
        if (!p) return p.error();
        return member_list_of(p.value(), r.response.body);
    }

    Result<std::string> snapshot(milliseconds timeout) {
        Call call;
        call.make = [&] {
            HttpRequest req{"GET", "/v1/snapshot", {}};
            req.max_response_bytes = storage::kMaxBackupBytes;  // the largest backup a member writes
            return Attempt{std::move(req), timeout};
        };
        call.deadline = Clock::now() + timeout;
        CallResult r = transport_.perform(call);
        if (!r.answered) return r.error;
        if (r.response.status != kStatusOk) return error_of(r, ErrorKind::kNotFound);
        return std::move(r.response.body);
    }

    Result<MemberList> members() { return members_call(get("/v1/members")); }
    Result<MemberList> join_info(std::uint64_t id) {
        return members_call(get("/v1/members/join?id=" + std::to_string(id)));
    }
    Result<MemberList> change(const std::string& path, const json::object& body) {
        return members_call(post(path, body));
    }

    const Options& options() const { return transport_.options(); }
    Transport& transport() { return transport_; }

private:
    Transport transport_;
};

Client::Client(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;

Result<Lease> Client::acquire(const AcquireRequest& request) { return impl_->acquire(request); }
Result<Lease> Client::acquire_many(const std::vector<std::string>& keys, AcquireRequest request) {
    request.keys = keys;
    return impl_->acquire(request);
}
Result<Released> Client::release(const std::string& key, std::uint64_t token) {
    return impl_->release({key}, token);
}
Result<Released> Client::release(const std::vector<std::string>& keys, std::uint64_t token) {
    return impl_->release(keys, token);
}
Result<KeepaliveResult> Client::keepalive(const std::vector<std::string>& keys, std::uint64_t token,
                                          std::optional<Clock::time_point> deadline) {
    return impl_->keepalive(keys, token, deadline);
}
Result<KeepaliveResult> Client::keepalive(const std::string& key, std::uint64_t token,
                                          std::optional<Clock::time_point> deadline) {
    return impl_->keepalive({key}, token, deadline);
}
Result<LockInfo> Client::get(const std::string& key) { return impl_->get_lock(key); }
Result<Lease> Client::campaign(const CampaignRequest& request) { return impl_->campaign(request); }
Result<Proclaimed> Client::proclaim(const std::string& name, std::uint64_t token, const std::string& value) {
    return impl_->proclaim(name, token, value);
}
Result<Released> Client::resign(const std::string& name, std::uint64_t token) { return impl_->resign(name, token); }
Result<LeaderInfo> Client::leader(const std::string& name) { return impl_->leader(name); }
Result<Released> Client::observe(const std::string& name, milliseconds interval, Clock::time_point until,
                                 const std::function<bool(const std::optional<LeaderInfo>&)>& changed) {
    interval = std::max(interval, kMinObserveInterval);
    bool first = true;
    std::optional<std::pair<std::uint64_t, std::string>> last;  // (token, value) last reported
    while (Clock::now() < until) {
        auto now = impl_->leader(name);
        if (!now && now.error().kind != ErrorKind::kNotFound) return now.error();
        std::optional<LeaderInfo> leader;
        if (now) leader = std::move(now.value());
        std::optional<std::pair<std::uint64_t, std::string>> seen;
        if (leader) seen.emplace(leader->token, leader->value);
        if (first || seen != last) {
            first = false;
            last = seen;
            if (!changed(leader)) return Released{};
        }
        std::this_thread::sleep_for(std::min<Clock::duration>(interval, std::max<Clock::duration>(
                                                                            until - Clock::now(), Clock::duration::zero())));
    }
    return Released{};
}
Result<std::vector<LockInfo>> Client::list(const std::string& prefix) { return impl_->list(prefix); }
Result<MemberStatus> Client::status() { return impl_->status(); }
Result<MemberStatus> Client::status_of(const Endpoint& endpoint) { return impl_->status_of(endpoint); }

Result<TokenLife> Client::token_life(std::uint64_t token) { return impl_->token_life(nullptr, token); }

Result<TokenLife> Client::token_life_of(const Endpoint& endpoint, std::uint64_t token) {
    return impl_->token_life(&endpoint, token);
}

Result<KeyHistory> Client::key_history(const std::string& key, std::size_t limit) {
    return impl_->key_history(nullptr, key, limit);
}

Result<KeyHistory> Client::key_history_of(const Endpoint& endpoint, const std::string& key, std::size_t limit) {
    return impl_->key_history(&endpoint, key, limit);
}
Result<std::string> Client::snapshot(milliseconds timeout) { return impl_->snapshot(timeout); }
Result<MemberList> Client::members() { return impl_->members(); }
Result<MemberList> Client::add_member(std::uint64_t id, const std::string& peer_addr, const std::string& client_addr) {
    return impl_->change("/v1/members/add", {{"id", id}, {"peer_addr", peer_addr}, {"client_addr", client_addr}});
}
Result<MemberList> Client::promote_member(std::uint64_t id) { return impl_->change("/v1/members/promote", {{"id", id}}); }
Result<MemberList> Client::remove_member(std::uint64_t id) { return impl_->change("/v1/members/remove", {{"id", id}}); }
Result<MemberList> Client::join_info(std::uint64_t id) { return impl_->join_info(id); }
Result<WatchEnd> Client::watch(const WatchRequest& request, const WatchCallback& on_event) {
    return run_watch(impl_->transport(), request, on_event);
}
const Options& Client::options() const { return impl_->options(); }

}  // namespace pgfence::client
