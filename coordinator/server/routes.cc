// The route table and its handlers (routes.h); the gate and the answers
// written from the core are in member_http.cc.
#include "server/routes.h"

#include <algorithm>
#include <charconv>
#include <concepts>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "auth/policy.h"
#include "net/api_request.h"
#include "net/json_text.h"
#include "pgfence_version.h"
#include "server/member_impl.h"

namespace pgfence::server {

namespace {

using Impl = Member::Impl;

// ---- parsers ----------------------------------------------------------------

// `parsed` (a net/api_request.h result) into call.request, or 400.
template <class T>
bool take(Impl& m, Call& call, std::variant<T, net::BadRequest> parsed) {
    if (auto* bad = std::get_if<net::BadRequest>(&parsed)) {
        m.bad_request(call.ex, bad->message);
        return false;
    }
    call.request = std::move(std::get<T>(parsed));
    return true;
}

static_assert(auth::kMaxNameBytes <= lock::kMaxUserBytes, "every user name fits a Grant's user");

// With a caller (--auth-file), the acquire carries its user: an owner is
// bound to the user that made it (lock::regrants()).
bool parse_acquire(Impl& m, Call& call) {
    if (!take(m, call, net::parse_acquire(call.req.body, m.limits))) return false;
    auto& acquire = std::get<member::Acquire>(call.request);
    if (call.caller) acquire.user = call.caller->user->name;
    if (auto why = net::check_set_size(acquire); !why.empty()) {
        m.bad_request(call.ex, why);
        return false;
    }
    return true;
}
bool parse_release(Impl& m, Call& call) { return take(m, call, net::parse_key_token(call.req.body)); }
// A keepalive's body is a release's: a key and a token (net::parse_key_token).
bool parse_keepalive(Impl& m, Call& call) {
    if (!parse_release(m, call)) return false;
    auto& r = std::get<member::Release>(call.request);
    call.request = member::KeepAlive{std::move(r.key), r.token, std::move(r.keys)};
    return true;
}
// A campaign carries its caller's user, as an acquire.
bool parse_campaign(Impl& m, Call& call) {
    if (!take(m, call, net::parse_campaign(call.req.body, m.limits))) return false;
    if (call.caller) std::get<member::Acquire>(call.request).user = call.caller->user->name;
    return true;
}
bool parse_proclaim(Impl& m, Call& call) { return take(m, call, net::parse_proclaim(call.req.body)); }
bool parse_resign(Impl& m, Call& call) { return take(m, call, net::parse_resign(call.req.body)); }
bool parse_leader(Impl& m, Call& call) { return take(m, call, net::parse_leader_query(call.query)); }
bool parse_list(Impl& m, Call& call) { return take(m, call, net::parse_list_query(call.query)); }
bool parse_add(Impl& m, Call& call) { return take(m, call, net::parse_add_member(call.req.body)); }

template <class Change>
bool parse_member_id(Impl& m, Call& call) {
    auto id = net::parse_member_id(call.req.body);
    if (auto* bad = std::get_if<net::BadRequest>(&id)) {
        m.bad_request(call.ex, bad->message);
        return false;
    }
    call.request = Change{std::get<std::uint64_t>(id)};
    return true;
}

// ?id=N, a member ID >= 1.
bool parse_join(Impl& m, Call& call) {
    auto id = net::query_param(call.query, "id");
    if (auto* bad = std::get_if<net::BadRequest>(&id)) {
        m.bad_request(call.ex, bad->message);
        return false;
    }
    const net::QueryParam& p = std::get<net::QueryParam>(id);
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(p.value.data(), p.value.data() + p.value.size(), n);
    if (!p.found || ec != std::errc() || end != p.value.data() + p.value.size() || n == 0) {
        m.bad_request(call.ex, "query parameter 'id' must be a member ID >= 1");
        return false;
    }
    call.joining = n;
    return true;
}

// ?key=K | ?prefix=P, [&rev=N] (N >= 1), [&progress=1]. P is "" or a valid
// key. The request is a ListLocks of the key (or none), for authorization.
bool parse_watch(Impl& m, Call& call) {
    std::optional<std::string> values[4];
    const char* names[4] = {"key", "prefix", "rev", "progress"};
    for (std::size_t i = 0; i < 4; ++i) {
        auto param = net::query_param(call.query, names[i]);
        if (auto* bad = std::get_if<net::BadRequest>(&param)) {
            m.bad_request(call.ex, bad->message);
            return false;
        }
        auto& p = std::get<net::QueryParam>(param);
        if (p.found) values[i] = std::move(p.value);
    }
    auto& [key, prefix, rev, progress] = values;
    if (key.has_value() == prefix.has_value()) {
        m.bad_request(call.ex, "GET /v1/watch needs exactly one of the query parameters 'key' and 'prefix'");
        return false;
    }
    const std::string& named = key ? *key : *prefix;
    if (key || !named.empty()) {
        if (std::string why = net::check_key(named); !why.empty()) {
            m.bad_request(call.ex, std::string("query parameter '") + (key ? "key" : "prefix") + "' is invalid: " + why);
            return false;
        }
    }
    WatchSpec spec;
    if (rev) {
        std::uint64_t n = 0;
        const auto [end, ec] = std::from_chars(rev->data(), rev->data() + rev->size(), n);
        if (ec != std::errc() || end != rev->data() + rev->size() || n == 0) {
            m.bad_request(call.ex, "query parameter 'rev' must be a revision >= 1, got '" + rev->substr(0, 32) + "'");
            return false;
        }
        spec.from_revision = n;
    }
    if (progress) {
        if (*progress != "1" && *progress != "0" && *progress != "true" && *progress != "false") {
            m.bad_request(call.ex, "query parameter 'progress' must be 1, 0, true or false, got '" + progress->substr(0, 32) + "'");
            return false;
        }
        spec.progress = *progress == "1" || *progress == "true";
    }
    member::ListLocks list;
    if (key) {
        spec.key = *key;
        list.key = *key;
    } else {
        spec.prefixes = {*prefix};
        list.prefixes = {*prefix};
    }
    call.watch = std::move(spec);
    call.request = std::move(list);
    return true;
}

// May the caller (none: authorization is off) read `key`?
bool may_read(const Call& call, std::string_view key) {
    return !call.caller || call.caller->policy->allowed(*call.caller->user, auth::Permission::kRead, key);
}

// GET /v1/tokens/{token}: a token 1..lock::kMaxToken. The request is a
// ListLocks of the first of the token's keys the caller may read (of no key
// when it is not kept here), for authorization: read on some key of the
// token, else 403 (naming none of its keys).
bool parse_token(Impl& m, Call& call) {
    const std::string_view text = path_segment(call.path, 2);
    lock::Token token = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), token);
    if (ec != std::errc() || end != text.data() + text.size() || token == 0 || token > lock::kMaxToken) {
        ++m.metrics.bad_requests;
        // The segment as it came (still percent-encoded), escaped into JSON.
        respond_error(call.ex, 400, "bad_token",
                      "token '" + net::printable_excerpt(text, 64) + "' is not a token: a decimal number 1.." +
                          std::to_string(lock::kMaxToken));
        return false;
    }
    call.token = token;
    member::ListLocks list;
    if (const member::TokenRecord* r = m.core->token_history().lookup(token).record) {
        for (const std::string& k : r->keys) {
            if (may_read(call, k)) {
                list.key = k;
                break;
            }
        }
        if (!list.key) {
            m.deny(call.ex, *call.caller, call.path, {},
                   "user '" + call.caller->user->name + "' has no read permission on any key of token " +
                       std::to_string(token));
            return false;
        }
    }
    call.request = std::move(list);
    return true;
}

// GET /v1/keys/{key}/history[?limit=N]: the key percent-encoded, a valid
// key; N 1..member::kMaxKeyHistoryTokens (default 100). The request is a
// ListLocks of the key, for authorization.
bool parse_key_history(Impl& m, Call& call) {
    auto decoded = net::decode_path_segment(path_segment(call.path, 2));
    if (auto* bad = std::get_if<net::BadRequest>(&decoded)) {
        m.bad_request(call.ex, "key: " + bad->message);
        return false;
    }
    std::string& key = std::get<std::string>(decoded);
    if (std::string why = net::check_key(key); !why.empty()) {
        // The segment as it came (still percent-encoded), not the decoded bytes.
        m.bad_request(call.ex, "key '" + net::printable_excerpt(path_segment(call.path, 2), 64) +
                                   "' in the path is invalid: " + why);
        return false;
    }
    auto param = net::query_param(call.query, "limit");
    if (auto* bad = std::get_if<net::BadRequest>(&param)) {
        m.bad_request(call.ex, bad->message);
        return false;
    }
    const auto& limit = std::get<net::QueryParam>(param);
    call.history_limit = member::kDefaultKeyHistoryTokens;
    if (limit.found) {
        std::size_t n = 0;
        const auto [end, ec] = std::from_chars(limit.value.data(), limit.value.data() + limit.value.size(), n);
        if (ec != std::errc() || end != limit.value.data() + limit.value.size() || n == 0 ||
            n > member::kMaxKeyHistoryTokens) {
            m.bad_request(call.ex, "query parameter 'limit' must be 1.." + std::to_string(member::kMaxKeyHistoryTokens) +
                                       ", got '" + net::printable_excerpt(limit.value, 32) + "'");
            return false;
        }
        call.history_limit = n;
    }
    member::ListLocks list;
    list.key = std::move(key);
    call.request = std::move(list);
    return true;
}

// GET /v1/election/observe?name=N: a watch of the election's key from now,
// which first tells the lock as it is (WatchSpec::state).
bool parse_observe(Impl& m, Call& call) {
    auto param = net::query_param(call.query, "name");
    if (auto* bad = std::get_if<net::BadRequest>(&param)) {
        m.bad_request(call.ex, bad->message);
        return false;
    }
    const auto& name = std::get<net::QueryParam>(param);
    if (!name.found) {
        m.bad_request(call.ex, "GET /v1/election/observe needs the query parameter 'name'");
        return false;
    }
    if (std::string why = net::check_election_name(name.value); !why.empty()) {
        m.bad_request(call.ex, "query parameter " + why.substr(std::string_view("field ").size()));
        return false;
    }
    WatchSpec spec;
    spec.key = member::election_key(name.value);
    spec.progress = true;
    spec.state = true;
    member::ListLocks list;
    list.key = *spec.key;
    call.watch = std::move(spec);
    call.request = std::move(list);
    return true;
}

// ---- handlers ---------------------------------------------------------------

void respond(const Call& call, std::string body, const char* content_type = "application/json") {
    call.ex->respond(net::HttpResponse{200, std::move(body), content_type, {}});
}

void get_healthz(Impl&, Call& call) { respond(call, "ok\n", "text/plain"); }
void get_metrics(Impl& m, Call& call) { respond(call, m.metrics_text(), "text/plain; version=0.0.4"); }
void get_status(Impl& m, Call& call) { respond(call, m.status_json()); }
// {"version":"X.Y.Z"}: the release this member runs (also pgfence_build_info in /metrics).
void get_version(Impl&, Call& call) { respond(call, "{\"version\":\"" PGFENCE_VERSION "\"}"); }

// The parsed request, to the core. A 307 it asks for later points at the
// path: the body carries the request.
void ask_core(Impl& m, Call& call) { m.submit(std::move(call.request), call.ex, call.path); }

// An election route: the lock request its parser made, answered in the
// election's words (Member::Impl::answer_election). The name is the key's
// tail (member::election_key()).
template <ElectionCall::Kind kKind>
void ask_election(Impl& m, Call& call) {
    const std::string* key = key_of(call.request);
    std::string name = key != nullptr ? key->substr(member::kElectionPrefix.size()) : std::string();
    // A 307 the core asks for later keeps the query (the leader's name).
    const std::string& target = kKind == ElectionCall::Kind::kLeader ? call.req.target : call.path;
    m.submit(std::move(call.request), call.ex, target, std::nullopt, ElectionCall{kKind, std::move(name)});
}

void get_snapshot(Impl& m, Call& call) { m.submit(member::TakeBackup{}, call.ex, call.path); }
void get_members(Impl& m, Call& call) { m.submit(member::ListMembers{}, call.ex, call.path); }

// One lock (?key=K) or a page of the list. With a caller, a page covers only
// the parts of its prefix the caller may read (auth::Policy::readable_within)
// and shows only readable keys (answer()). A 307 the core asks for later
// keeps the query.
void get_locks(Impl& m, Call& call) {
    auto& list = std::get<member::ListLocks>(call.request);
    std::optional<Caller> reader;
    if (call.caller && !list.key) {
        reader = call.caller;
        list.prefixes = reader->policy->readable_within(*reader->user, list.prefixes.front());
        if (list.prefixes.empty()) {  // nothing under the prefix is readable: an empty last page
            respond(call, "{\"locks\":[]}");
            return;
        }
    }
    m.submit(std::move(list), call.ex, call.req.target, std::move(reader));
}

// A stream of the lock events this member applied (server/watchers.h). With
// a caller, a prefix watch streams only the parts of its prefix the caller
// may read (as a list of locks), and the empty prefix needs every key.
void get_watch(Impl& m, Call& call) {
    WatchSpec& spec = call.watch;
    if (m.core->shutting_down()) {
        respond_error(call.ex, 503, "shutting_down", "this member is shutting down: watch through another member");
        return;
    }
    if (m.watchers->full()) {
        respond_error(call.ex, 503, "too_many_watchers",
                      "this member serves " + std::to_string(m.options.max_watchers) +
                          " watches at most (--max-watchers): retry later, or watch through another member");
        return;
    }
    if (call.caller && !spec.key) {
        const std::string prefix = spec.prefixes.front();
        spec.prefixes = call.caller->policy->readable_within(*call.caller->user, prefix);
        const bool every = prefix.empty() && spec.prefixes == std::vector<std::string>{std::string()};
        if (spec.prefixes.empty() || (prefix.empty() && !every)) {
            m.deny(call.ex, *call.caller, call.path, prefix,
                   "user '" + call.caller->user->name + "' has no read permission on " +
                       (prefix.empty() ? std::string("every key (the empty prefix)") : "any key under '" + prefix + "'"));
            return;
        }
    }
    const member::WatchHistory& history = m.core->watch_history();
    if (spec.from_revision && *spec.from_revision < history.oldest_revision()) {
        const std::string oldest = std::to_string(history.oldest_revision());
        call.ex->respond(net::HttpResponse{
            410,
            "{\"error\":\"compacted\",\"message\":\"revision " + std::to_string(*spec.from_revision) +
                " is older than the oldest this member keeps (" + oldest +
                "): its events were compacted; watch from revision " + oldest +
                " (after reading the current locks) or ask another member\",\"oldest_revision\":" + oldest + "}",
            "application/json",
            {}});
        return;
    }
    std::shared_ptr<net::HttpStream> stream = call.ex->open_stream(200, "application/x-ndjson", m.options.watch_buffer_bytes);
    if (!stream) return;
    const lock::Lock* held = spec.state && spec.key ? m.core->table().find(*spec.key) : nullptr;
    m.watchers->open(std::move(stream), spec, m.core->table().applied_index(), held);
}

// ---- token history ------------------------------------------------------------

void append_u64_or_null(std::string& out, const char* name, std::optional<std::uint64_t> v) {
    out += ",\"";
    out += name;
    out += "\":";
    out += v ? std::to_string(*v) : std::string("null");
}

std::optional<std::uint64_t> known(std::uint64_t v) { return v != 0 ? std::optional<std::uint64_t>(v) : std::nullopt; }

// One token's object (docs/http-api.md "GET /v1/tokens/{token}"). Of a
// set's keys it names only those the caller may read (`key` is the first of
// them; the caller may read at least one, authorize() saw to it), and counts
// the others in hidden_keys.
void append_token_json(std::string& out, const Impl& m, const Call& call, const member::TokenRecord& r) {
    const member::TokenHistory& history = m.core->token_history();
    std::vector<const std::string*> shown;
    for (const std::string& k : r.keys) {
        if (may_read(call, k)) shown.push_back(&k);
    }
    out += "{\"token\":" + std::to_string(r.token) + ",\"key\":";
    net::append_json_string(out, shown.empty() ? std::string_view() : std::string_view(*shown.front()));
    if (r.keys.size() > 1) {
        out += ",\"keys\":[";
        for (std::size_t i = 0; i < shown.size(); ++i) {
            if (i > 0) out += ',';
            net::append_json_string(out, *shown[i]);
        }
        out += ']';
        if (shown.size() < r.keys.size()) out += ",\"hidden_keys\":" + std::to_string(r.keys.size() - shown.size());
    }
    out += ",\"owner\":";
    net::append_json_string(out, r.owner);
    out += ",\"lease_ms\":" + std::to_string(r.lease_ms) + ",\"granted\":{";
    out += "\"index\":" + (r.granted_index != 0 ? std::to_string(r.granted_index) : std::string("null"));
    append_u64_or_null(out, "wall_ms", r.granted_wall_ms);
    out += "},\"ended\":{\"how\":\"";
    out += member::to_string(r.end);
    out += '"';
    append_u64_or_null(out, "index", known(r.ended_index));
    append_u64_or_null(out, "wall_ms", r.ended_wall_ms);
    const member::TokenKeepalives* k = history.keepalives(r.token);
    const bool expired = r.end == member::TokenEnd::kExpired || r.end == member::TokenEnd::kPhantom;
    append_u64_or_null(out, "last_keepalive_wall_ms", expired && k != nullptr ? k->last_ok_wall_ms : std::nullopt);
    out += '}';
    append_u64_or_null(out, "next_token", known(r.next_token));
    out += ",\"keepalives\":{\"observed_by\":" + std::to_string(m.options.id);
    out += ",\"while_leader\":";
    out += history.led_while_held(r) ? "true" : "false";
    out += ",\"ok\":" + std::to_string(k != nullptr ? k->ok : 0);
    append_u64_or_null(out, "last_ok_wall_ms", k != nullptr ? k->last_ok_wall_ms : std::nullopt);
    out += ",\"refused\":" + std::to_string(k != nullptr ? k->refused : 0);
    append_u64_or_null(out, "last_refused_wall_ms", k != nullptr ? k->last_refused_wall_ms : std::nullopt);
    out += ",\"last_refused_reason\":";
    if (k != nullptr && k->refused > 0) {
        net::append_json_string(out, k->last_refused_reason);
    } else {
        out += "null";
    }
    out += "}}";
}

// A token's life as this member applied it, from its token history: 404
// for a token never issued, 410 for one older than the history keeps.
void get_token(Impl& m, Call& call) {
    const member::TokenHistory& history = m.core->token_history();
    const member::TokenHistory::Lookup found = history.lookup(call.token);
    const std::string token = std::to_string(call.token);
    if (found.record != nullptr) {
        std::string body;
        append_token_json(body, m, call, *found.record);
        respond(call, std::move(body));
    } else if (found.compacted) {
        const std::string oldest = std::to_string(history.oldest_token());
        call.ex->respond(net::HttpResponse{
            410,
            "{\"error\":\"compacted\",\"message\":\"token " + token +
                " is older than this member's token history, which keeps every token from " + oldest +
                " on (--token-history-events, --token-history-bytes, or a snapshot installed): ask another member "
                "that applied it\",\"oldest_token\":" + oldest + "}",
            "application/json",
            {}});
    } else {
        // A token above applied + floor can only come from an entry this
        // member has not applied yet (every later entry's index and floor are
        // at least these): not "never issued" but not known here yet.
        const lock::LockTable& table = m.core->table();
        const std::uint64_t applied_token = table.applied_index() + table.token_floor();
        if (call.token > applied_token) {
            call.ex->respond(net::HttpResponse{
                404,
                "{\"error\":\"not_applied\",\"message\":\"token " + token +
                    " is above every token this member applied (it applied the log up to index " +
                    std::to_string(table.applied_index()) + ", tokens up to " + std::to_string(applied_token) +
                    "): it may be issued in an entry not applied here yet; ask the leader or another member\","
                    "\"applied_token\":" + std::to_string(applied_token) + "}",
                "application/json",
                {}});
            return;
        }
        respond_error(call.ex, 404, "unknown_token",
                      "no token " + token + " was issued (this member applied the log up to index " +
                          std::to_string(table.applied_index()) + " and keeps every token from " +
                          std::to_string(history.oldest_token()) + " on)");
    }
}

// The tokens of one key this member keeps, newest first.
void get_key_history(Impl& m, Call& call) {
    const std::string& key = *std::get<member::ListLocks>(call.request).key;
    std::string body = "{\"key\":";
    net::append_json_string(body, key);
    body += ",\"oldest_token\":" + std::to_string(m.core->token_history().oldest_token()) + ",\"tokens\":[";
    bool first = true;
    for (const member::TokenRecord* r : m.core->token_history().of_key(key, call.history_limit)) {
        if (!first) body += ',';
        first = false;
        append_token_json(body, m, call, *r);
    }
    body += "]}";
    respond(call, std::move(body));
}

// What member N, added to the configuration and starting with --join, needs
// before it can start: the cluster ID and every member's addresses, none of
// them a secret (docs/security.md), so asked without credentials. The leader
// answers, from the configuration in force (a follower may not have applied
// the add yet).
void get_members_join(Impl& m, Call& call) {
    if (!m.core->raft().configuration().contains(call.joining)) {
        respond_error(call.ex, 404, "unknown_member",
                        "member " + std::to_string(call.joining) + " is not in the configuration");
        return;
    }
    respond(call, m.members_json(m.core->members_view(), false));
}

// ---- the table --------------------------------------------------------------

// clang-format off
constexpr Route kRoutes[] = {
//   method  path                   need              serves           parser                                  parse at         handler
    {"GET",  "/healthz",            Need::kNothing,   Serves::kAny,    nullptr,                                ParseAt::kLast,  get_healthz},
    {"GET",  "/metrics",            Need::kAdmin,     Serves::kAny,    nullptr,                                ParseAt::kLast,  get_metrics},
    {"GET",  "/v1/status",          Need::kAdmin,     Serves::kAny,    nullptr,                                ParseAt::kLast,  get_status},
    {"GET",  "/v1/version",         Need::kAdmin,     Serves::kAny,    nullptr,                                ParseAt::kLast,  get_version},
    {"POST", "/v1/acquire",         Need::kLockOnKey, Serves::kWriter, parse_acquire,                          ParseAt::kLast,  ask_core},
    {"POST", "/v1/release",         Need::kLockOnKey, Serves::kWriter, parse_release,                          ParseAt::kLast,  ask_core},
    {"POST", "/v1/keepalive",       Need::kLockOnKey, Serves::kWriter, parse_keepalive,                        ParseAt::kLast,  ask_core},
    {"GET",  "/v1/locks",           Need::kReadOnKey, Serves::kLeader, parse_list,                             ParseAt::kLast,  get_locks},
    {"GET",  "/v1/watch",           Need::kReadOnKey, Serves::kAny,    parse_watch,                            ParseAt::kLast,  get_watch},
    {"GET",  "/v1/tokens/{token}",  Need::kReadOnKey, Serves::kAny,    parse_token,                            ParseAt::kFirst, get_token},
    {"GET",  "/v1/keys/{key}/history", Need::kReadOnKey, Serves::kAny, parse_key_history,                      ParseAt::kFirst, get_key_history},
    {"POST", "/v1/election/campaign", Need::kLockOnKey, Serves::kWriter, parse_campaign,                       ParseAt::kLast,  ask_election<ElectionCall::Kind::kCampaign>},
    {"POST", "/v1/election/proclaim", Need::kLockOnKey, Serves::kWriter, parse_proclaim,                       ParseAt::kLast,  ask_election<ElectionCall::Kind::kProclaim>},
    {"POST", "/v1/election/resign", Need::kLockOnKey, Serves::kWriter, parse_resign,                           ParseAt::kLast,  ask_election<ElectionCall::Kind::kResign>},
    {"GET",  "/v1/election/leader", Need::kReadOnKey, Serves::kLeader, parse_leader,                           ParseAt::kLast,  ask_election<ElectionCall::Kind::kLeader>},
    {"GET",  "/v1/election/observe", Need::kReadOnKey, Serves::kAny,   parse_observe,                          ParseAt::kLast,  get_watch},
    {"GET",  "/v1/snapshot",        Need::kAdmin,     Serves::kLeader, nullptr,                                ParseAt::kLast,  get_snapshot},
    {"GET",  "/v1/members",         Need::kAdmin,     Serves::kLeader, nullptr,                                ParseAt::kLast,  get_members},
    {"POST", "/v1/members/add",     Need::kAdmin,     Serves::kLeader, parse_add,                              ParseAt::kLast,  ask_core},
    {"POST", "/v1/members/promote", Need::kAdmin,     Serves::kLeader, parse_member_id<member::PromoteMember>, ParseAt::kLast,  ask_core},
    {"POST", "/v1/members/remove",  Need::kAdmin,     Serves::kLeader, parse_member_id<member::RemoveMember>,  ParseAt::kLast,  ask_core},
    {"GET",  "/v1/members/join",    Need::kNothing,   Serves::kLeader, parse_join,                             ParseAt::kFirst, get_members_join},
};
// clang-format on

}  // namespace

Call::Call(const net::HttpRequest& request_in, const ExchangePtr& exchange)
    : req(request_in), ex(exchange), path(req.target.substr(0, req.target.find('?'))) {
    if (path.size() < req.target.size()) query = req.target.substr(path.size() + 1);
}

std::span<const Route> routes() { return kRoutes; }

RouteMatch match_route(std::string_view method, std::string_view path) {
    RouteMatch m;
    bool path_needs_credentials = false;
    for (const Route& r : kRoutes) {
        if (!path_matches(r.path, path)) continue;
        m.path_known = true;
        path_needs_credentials = path_needs_credentials || r.need != Need::kNothing;
        if (r.method == method) m.route = &r;
    }
    if (m.route != nullptr) {
        m.credentials = m.route->need != Need::kNothing;
    } else if (m.path_known) {
        m.credentials = path_needs_credentials;
    }
    return m;
}

bool changes_state(const Route& route) { return route.method != "GET"; }

bool path_matches(std::string_view pattern, std::string_view path) {
    if (pattern.find('{') == std::string_view::npos) return pattern == path;
    for (;;) {
        const std::size_t p_end = pattern.find('/');
        const std::size_t q_end = path.find('/');
        const std::string_view want = pattern.substr(0, p_end);
        const std::string_view got = path.substr(0, q_end);
        const bool any = want.size() >= 2 && want.front() == '{' && want.back() == '}';
        if (any ? got.empty() : want != got) return false;
        if ((p_end == std::string_view::npos) != (q_end == std::string_view::npos)) return false;
        if (p_end == std::string_view::npos) return true;
        pattern.remove_prefix(p_end + 1);
        path.remove_prefix(q_end + 1);
    }
}

std::string_view path_segment(std::string_view path, std::size_t n) {
    if (path.empty() || path.front() != '/') return n == 0 ? path : std::string_view();
    std::size_t start = 1;
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t slash = path.find('/', start);
        if (slash == std::string_view::npos) return {};
        start = slash + 1;
    }
    const std::size_t end = path.find('/', start);
    return path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

namespace {

// True when a Content-Type value's media type (what precedes ';', without
// surrounding spaces or tabs) is application/json, in any case. No allocation:
// it runs for every request that changes state.
bool is_json(std::string_view content_type) {
    std::string_view t = content_type.substr(0, content_type.find(';'));
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    constexpr std::string_view kJson = "application/json";
    if (t.size() != kJson.size()) return false;
    for (std::size_t i = 0; i < t.size(); ++i) {
        const char c = t[i] >= 'A' && t[i] <= 'Z' ? static_cast<char>(t[i] - 'A' + 'a') : t[i];
        if (c != kJson[i]) return false;
    }
    return true;
}

// At most 200 bytes of a request's header value, for an error message.
std::string quoted(std::string_view value) {
    constexpr std::size_t kMax = 200;
    std::string out = "'" + std::string(value.substr(0, kMax)) + "'";
    if (value.size() > kMax) out += "...";
    return out;
}

}  // namespace

std::optional<Refusal> screen(const Route& route, const net::HttpRequest& req, const Options& options) {
    auto what = [&route] { return std::string(route.method) + " " + std::string(route.path); };
    if (req.origin) {
        const auto& allowed = options.allowed_origins;
        if (std::find(allowed.begin(), allowed.end(), *req.origin) == allowed.end()) {
            return Refusal{403, "origin_not_allowed",
                           "Origin " + quoted(*req.origin) +
                               " is not allowed: requests from web pages are refused unless the member is started "
                               "with --allowed-origin for that origin"};
        }
    }
    if (changes_state(route) && !is_json(req.content_type)) {
        return Refusal{415, "unsupported_media_type",
                       "Content-Type " + (req.content_type.empty() ? std::string("(none)") : quoted(req.content_type)) +
                           " is not accepted: " + what() + " takes application/json"};
    }
    if (route.need == Need::kAdmin && !options.auth_configured() && !options.admin_without_auth) {
        return Refusal{403, "admin_disabled",
                       what() + " is an admin endpoint, off without authentication: start the member with "
                              "--auth-file or --client-cert-auth, or with --admin-without-auth to serve it to "
                              "anyone on the client network"};
    }
    return std::nullopt;
}

const std::string* key_of(const member::Request& request) {
    return std::visit(
        [](const auto& r) -> const std::string* {
            if constexpr (requires { { r.key } -> std::same_as<const std::string&>; }) {
                return &r.key;
            } else if constexpr (requires { { r.key } -> std::same_as<const std::optional<std::string>&>; }) {
                return r.key ? &*r.key : nullptr;
            } else {
                return nullptr;
            }
        },
        request);
}

const std::vector<std::string>* set_keys_of(const member::Request& request) {
    return std::visit(
        [](const auto& r) -> const std::vector<std::string>* {
            if constexpr (requires { { r.keys } -> std::same_as<const std::vector<std::string>&>; }) {
                return r.keys.empty() ? nullptr : &r.keys;
            } else {
                return nullptr;
            }
        },
        request);
}

}  // namespace pgfence::server
