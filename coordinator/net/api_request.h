// Validation of the HTTP API's JSON request bodies (DESIGN.md "HTTP API").
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

namespace pgfence::net {

struct RequestLimits {
    std::uint64_t min_lease_ms = 1000;
    std::uint64_t max_lease_ms = 60000;
    std::uint64_t max_wait_ms = 300000;
};

// The member core's request types (member/api.h).
using AcquireRequest = member::Acquire;
using ReleaseRequest = member::Release;  // also the body of /v1/keepalive

struct BadRequest {
    std::string message;
};

std::variant<AcquireRequest, BadRequest> parse_acquire(std::string_view body,
                                                       const RequestLimits& limits);
std::variant<ReleaseRequest, BadRequest> parse_release(std::string_view body);

// The value of `name` in a query string ("key=a%2Fb&x=1"), percent-decoded;
// empty optional-like result: {found, value}. Bad %-escapes → BadRequest.
struct QueryParam {
    bool found = false;
    std::string value;
};
std::variant<QueryParam, BadRequest> query_param(std::string_view query, std::string_view name);

// Checks a key (delegates to lock::validate_key); empty string when valid.
std::string check_key(std::string_view key);

}  // namespace pgfence::net
