// Validation of the HTTP API's JSON request bodies (docs/http-api.md).
//
// Each parse_* turns a request body into a typed request or a BadRequest whose
// message names the offending field and says what was wrong with its value;
// the server answers it as 400 {"error":"bad_request","message":...}.
// Unknown fields are ignored (forward compatibility). Boost.JSON stays in the .cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "member/api.h"
#include "member/lease.h"

namespace pgfence::net {

// What parse_acquire() accepts: the server's --min-lease, --max-lease and
// --max-wait, whose defaults these are (member/lease.h).
struct RequestLimits {
    std::uint64_t min_lease_ms = member::kDefaultMinLeaseMs;
    std::uint64_t max_lease_ms = member::kDefaultMaxLeaseMs;
    std::uint64_t max_wait_ms = member::kDefaultMaxWaitMs;
};

// The member core's request types (member/api.h).
using AcquireRequest = member::Acquire;
// A key and the token it is held with: the body of /v1/release and of /v1/keepalive.
using KeyToken = member::Release;

struct BadRequest {
    std::string message;
};

// "" or why a set acquire does not fit lock::kMaxGrantManyBytes with its
// owner and user (the shell checks again once it knows the user).
std::string check_set_size(const member::Acquire& req);

// POST /v1/acquire {"key"|"keys","lease_ms"[,"wait_ms"][,"owner"]}: lease_ms and
// wait_ms within `limits`, a valid key (or a set: 2..64 distinct valid
// keys, check_set_size()) and owner.
std::variant<AcquireRequest, BadRequest> parse_acquire(std::string_view body,
                                                       const RequestLimits& limits);
// POST /v1/release and /v1/keepalive {"key"|"keys","token"}: a valid key (or
// a set's keys, as for an acquire), token >= 1.
std::variant<KeyToken, BadRequest> parse_key_token(std::string_view body);

// The election routes (member/api.h election_key()): the request types of
// the lock routes, with the key made of the election's name.
// "" or why `name` is no election name (1..member::kMaxElectionNameBytes, the key's text rule).
std::string check_election_name(std::string_view name);
// POST /v1/election/campaign {"name","value"?,"lease_ms","wait_ms"?,"owner"?}:
// an acquire of election_key(name) whose lock publishes `value` (0..4096 bytes).
std::variant<AcquireRequest, BadRequest> parse_campaign(std::string_view body, const RequestLimits& limits);
// POST /v1/election/proclaim {"name","token","value"}.
std::variant<member::Proclaim, BadRequest> parse_proclaim(std::string_view body);
// POST /v1/election/resign {"name","token"}: a release of the election's key.
std::variant<KeyToken, BadRequest> parse_resign(std::string_view body);
// GET /v1/election/leader?name=N: the election's one lock.
std::variant<member::ListLocks, BadRequest> parse_leader_query(std::string_view query);

// POST /v1/members/add {"id","peer_addr","client_addr"}: id >= 1, both
// addresses HOST:PORT (net/host_port.h) of at most member::kMaxAddressBytes.
std::variant<member::AddMember, BadRequest> parse_add_member(std::string_view body);
// POST /v1/members/promote and /v1/members/remove {"id"}: id >= 1.
std::variant<std::uint64_t, BadRequest> parse_member_id(std::string_view body);

// The value of `name` in a query string ("key=a%2Fb&x=1"), percent-decoded;
// empty optional-like result: {found, value}. Bad %-escapes → BadRequest.
struct QueryParam {
    bool found = false;
    std::string value;
};
std::variant<QueryParam, BadRequest> query_param(std::string_view query, std::string_view name);

// At most `max_bytes` of `text` for an error message, as printable ASCII: a
// byte outside '!'..'~' is written %XX (as a still-encoded path segment
// shows it), so no raw (or cut UTF-8) byte reaches an answer; "..." ends a
// longer text.
std::string printable_excerpt(std::string_view text, std::size_t max_bytes);

// A path segment, percent-decoded ('+' is itself); a bad %-escape names the segment.
std::variant<std::string, BadRequest> decode_path_segment(std::string_view segment);

// GET /v1/locks's query (member/api.h ListLocks): key=K alone (one lock), or
// any of prefix=P, after=A (each empty or a valid key), limit=N (a decimal
// 1..member::kMaxListLimit). BadRequest names the parameter and the bad value;
// key with any of the others is refused too.
std::variant<member::ListLocks, BadRequest> parse_list_query(std::string_view query);

// Checks a key (delegates to lock::validate_key); empty string when valid.
std::string check_key(std::string_view key);

}  // namespace pgfence::net
