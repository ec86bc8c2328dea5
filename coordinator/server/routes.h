// The HTTP API's routes, as data: one row per endpoint says its method and
// path, who may call it, which member serves it, how its request is parsed
// and which handler answers it (routes.cc holds the table and the handlers).
// Nothing else lists paths: a 404 or 405 is derived from the table.
//
// The gate (member_http.cc, Member::Impl::handle_http and pass_gate) takes every request
// through these steps in order; the first that answers ends it:
//   1. authenticate (401): with --auth-file, every request but one whose path
//      only has routes that need nothing (Need::kNothing: /healthz,
//      /v1/members/join). A path no route has is authenticated too. A
//      request that authenticates raises its connection's class to
//      authenticated; an answer of a grant or a keepalive (answer()) to lease
//      (net/conn_ranks.h: which connection gives way at --max-connections).
//   2. match (404 "no such endpoint: PATH", 405 "METHOD is not allowed on PATH").
//   3. screen (screen() below: 403, 415): a request from a web page (an
//      Origin header not in --allowed-origin) is refused on every route; a
//      route that changes state (its method is not GET) takes only
//      Content-Type: application/json; an admin route is off without
//      authentication unless --admin-without-auth.
//   4. parse early (400), when the key decides authorization (kLockOnKey,
//      kReadOnKey, with a caller to authorize) or the row says ParseAt::kFirst.
//   5. authorize (403).
//   6. the leader check: a route not served here (Serves) is answered 307 to
//      the leader, or 503 when none is known.
//   7. parse (400), when not done in step 4.
//   8. the handler: it answers now, or submits the request to the core,
//      whose answer member_http.cc writes (Member::Impl::answer).
// So, without --auth-file, a follower redirects an acquire whatever its
// body; with it, the body's key is parsed and authorized first.
//
// Step 6 is the shell's one leadership decision for a request as it arrives.
// The core decides again only for what it holds: a request it answers
// Unavailable (leadership lost while it waited or committed, or a membership
// change asked of a leader that is shutting down) is answered by the same
// 307-or-503 (Member::Impl::redirect_or_unavailable).
//
// Threading: the event loop's thread only, as Member::Impl.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "member/api.h"
#include "net/http_server.h"
#include "raft/types.h"
#include "server/member.h"
#include "server/options.h"
#include "server/security.h"
#include "server/watchers.h"

namespace pgfence::server {

using ExchangePtr = std::shared_ptr<net::HttpExchange>;

// Who may call a route, with --auth-file (without it, anyone may).
enum class Need : std::uint8_t {
    kNothing,    // no credentials are asked for
    kAdmin,      // the admin permission
    kLockOnKey,  // lock permission on the key the parsed body names (on every key of a set)
    // Read permission on the key the parsed query names; a request naming no
    // key (a list) needs read permission on some key, and its answer shows
    // only the keys the caller may read.
    kReadOnKey,
};

// Which member serves a route; any other answers 307 to the leader (503
// when it knows none).
enum class Serves : std::uint8_t {
    kAny,     // every member
    kLeader,  // the leader
    kWriter,  // the leader, unless it is shutting down (member::Core::serves_writes)
};

// When a route's parser runs, if authorization does not need it earlier
// (step 3 above).
enum class ParseAt : std::uint8_t {
    kLast,   // after the leader check: a follower redirects whatever the request says
    kFirst,  // before the leader check: a bad request is answered 400 on every member
};

// One request on its way through the gate to its handler.
struct Call {
    Call(const net::HttpRequest& request_in, const ExchangePtr& exchange);  // splits the target

    const net::HttpRequest& req;
    const ExchangePtr& ex;
    std::string path;   // req.target without its query: what is routed, and logged on a denial
    std::string query;  // what follows '?' in req.target ("" when nothing does)
    // With --auth-file and a route that needs credentials: who asks
    // (authenticated, so its user is set). Unset: authorization is off.
    std::optional<Caller> caller;
    member::Request request;   // what the route's parser made of the body or query
    raft::NodeId joining = 0;  // GET /v1/members/join: the member that asks
    // GET /v1/watch: what it asks for (`request` holds a ListLocks of its
    // key, or of no key for a prefix, so that authorization is a list's).
    WatchSpec watch;
    // GET /v1/tokens/{token}: the token asked for. GET /v1/keys/{key}/history:
    // the key (in `request`'s ListLocks) and how many tokens at most.
    lock::Token token = 0;
    std::size_t history_limit = 0;
};

// A parser fills call.request (or call.joining) and returns true, or answers
// 400 (Member::Impl::bad_request) and returns false.
using Parser = bool (*)(Member::Impl&, Call&);
// A handler answers the call, now or through the core.
using Handler = void (*)(Member::Impl&, Call&);

struct Route {
    std::string_view method;
    // Matched exactly, but for a segment written {name}, which matches one
    // non-empty segment (no '/'): the parser reads it (path_segment()).
    std::string_view path;
    Need need;
    Serves serves;
    Parser parse;  // null: the request has nothing to parse
    ParseAt parse_at;
    Handler handle;
};

// Every route, each (method, path) once.
std::span<const Route> routes();

// What the table says of a request's method and path.
struct RouteMatch {
    const Route* route = nullptr;  // null: 404, or 405 when path_known
    bool path_known = false;       // some route has this path
    // Step 1 applies (with --auth-file): false only for a route that needs
    // nothing, or a method not allowed on a path whose routes all need nothing.
    bool credentials = true;
};
RouteMatch match_route(std::string_view method, std::string_view path);
// Whether `path` matches a route's `pattern` (above).
bool path_matches(std::string_view pattern, std::string_view path);
// The `n`th segment of `path` (0: the one after the leading '/'), "" when it has fewer.
std::string_view path_segment(std::string_view path, std::size_t n);

// A route changes state unless its method is GET: only such a request
// must carry a JSON body (step 3). Every GET route only reads.
bool changes_state(const Route& route);

// Why the gate's step 3 refuses a request, as its answer.
struct Refusal {
    unsigned status = 0;
    const char* error = "";
    std::string message;  // names the Origin, the Content-Type or the flag
};

// Step 3 for a request matched to `route`, in this order (the first that
// applies answers):
//   | the request                                            | answer                         |
//   | an Origin header not in options.allowed_origins        | 403 origin_not_allowed         |
//   | changes_state(route), Content-Type not application/json | 415 unsupported_media_type     |
//   |   (parameters after ';' allowed; case and spaces ignored) |                              |
//   | Need::kAdmin, !auth_configured(), !admin_without_auth  | 403 admin_disabled             |
// Nothing applies: nullopt. Pure: no I/O, no state.
std::optional<Refusal> screen(const Route& route, const net::HttpRequest& req, const Options& options);

// Answers `status` {"error":ERROR[,"message":MESSAGE]} (member_http.cc).
void respond_error(const ExchangePtr& ex, unsigned status, const char* error, const std::string& message = {});

// The key a parsed request names, on which authorization decides: its
// `key` field (a std::string, or a std::optional<std::string> left empty by
// a list of every lock); null for a request type without one (a membership
// change).
const std::string* key_of(const member::Request& request);
// The keys of a set a parsed request names (acquire, release, keepalive
// with "keys"): authorization decides on each; null otherwise.
const std::vector<std::string>* set_keys_of(const member::Request& request);

}  // namespace pgfence::server
