#include "net/api_request.h"

#include <algorithm>
#include <boost/json.hpp>
#include <optional>

#include "lock/commands.h"
#include "member/addresses.h"
#include "net/host_port.h"

namespace pgfence::net {

namespace json = boost::json;

namespace {

std::variant<json::object, BadRequest> parse_object(std::string_view body) {
    json::error_code ec;
    json::value v = json::parse(body, ec);
    if (ec) return BadRequest{"body is not valid JSON: " + ec.message()};
    if (!v.is_object()) return BadRequest{"body must be a JSON object"};
    return std::move(v.as_object());
}

// A required or optional string field.
std::variant<std::string, BadRequest> get_string(const json::object& o, const char* name,
                                                 bool required) {
    const json::value* v = o.if_contains(name);
    if (v == nullptr || v->is_null()) {
        if (required) return BadRequest{std::string("field '") + name + "' is required"};
        return std::string();
    }
    if (!v->is_string()) return BadRequest{std::string("field '") + name + "' must be a string"};
    return std::string(v->as_string());
}

// A non-negative integer field; `fallback` when absent and not required.
std::variant<std::uint64_t, BadRequest> get_uint(const json::object& o, const char* name,
                                                 bool required, std::uint64_t fallback) {
    const json::value* v = o.if_contains(name);
    if (v == nullptr || v->is_null()) {
        if (required) return BadRequest{std::string("field '") + name + "' is required"};
        return fallback;
    }
    if (v->is_uint64()) return v->as_uint64();
    if (v->is_int64()) {
        if (v->as_int64() < 0) {
            return BadRequest{std::string("field '") + name + "' must not be negative, got " +
                              std::to_string(v->as_int64())};
        }
        return static_cast<std::uint64_t>(v->as_int64());
    }
    return BadRequest{std::string("field '") + name + "' must be a non-negative integer"};
}

std::string key_problem(const std::string& key) {
    const std::string why = check_key(key);
    return why.empty() ? why : "field 'key' is invalid: " + why;
}

// Exactly one of "key" (one key) and "keys" (a set: 2..lock::kMaxGrantManyKeys
// distinct valid keys, docs/http-api.md "Several keys under one lease"),
// into `key` or `keys`.
std::optional<BadRequest> get_key_or_keys(const json::object& o, std::string& key, std::vector<std::string>& keys) {
    const json::value* list = o.if_contains("keys");
    if (list == nullptr || list->is_null()) {
        auto one = get_string(o, "key", true);
        if (auto* bad = std::get_if<BadRequest>(&one)) {
            if (o.if_contains("key") != nullptr) return *bad;
            return BadRequest{"field 'key' is required (or 'keys', for a set of keys)"};
        }
        key = std::get<std::string>(one);
        if (auto why = key_problem(key); !why.empty()) return BadRequest{why};
        return std::nullopt;
    }
    if (const json::value* one = o.if_contains("key"); one != nullptr && !one->is_null()) {
        return BadRequest{"fields 'key' and 'keys' are exclusive: name one key or a set"};
    }
    if (!list->is_array()) return BadRequest{"field 'keys' must be an array of strings"};
    const json::array& a = list->as_array();
    if (a.size() < lock::kMinGrantManyKeys || a.size() > lock::kMaxGrantManyKeys) {
        return BadRequest{"field 'keys' names " + std::to_string(a.size()) + " keys; a set has " +
                          std::to_string(lock::kMinGrantManyKeys) + ".." + std::to_string(lock::kMaxGrantManyKeys) +
                          " (one key: use 'key')"};
    }
    keys.reserve(a.size());
    for (const json::value& v : a) {
        if (!v.is_string()) return BadRequest{"field 'keys' must hold only strings"};
        std::string k(v.as_string());
        if (auto why = check_key(k); !why.empty()) return BadRequest{"key '" + k + "' in 'keys' is invalid: " + why};
        if (std::find(keys.begin(), keys.end(), k) != keys.end()) {
            return BadRequest{"key '" + k + "' is named twice in 'keys' (keys must be distinct)"};
        }
        keys.push_back(std::move(k));
    }
    return std::nullopt;
}

}  // namespace

std::string check_key(std::string_view key) { return lock::validate_key(key); }

std::string check_set_size(const member::Acquire& req) {
    if (req.keys.empty()) return {};
    const lock::GrantMany many{req.keys, req.lease_ms, req.owner, req.user};
    if (const std::size_t bytes = lock::encoded_bytes(many); bytes > lock::kMaxGrantManyBytes) {
        return "the set takes " + std::to_string(bytes) + " bytes (its keys with 4 bytes each, owner and user); " +
               "the limit is " + std::to_string(lock::kMaxGrantManyBytes) + ": ask for fewer or shorter keys";
    }
    return {};
}

namespace {

// lease_ms, wait_ms and owner of an acquire or a campaign, into `req`.
std::optional<BadRequest> acquire_fields(const json::object& o, const RequestLimits& limits, AcquireRequest& req) {
    auto lease = get_uint(o, "lease_ms", true, 0);
    if (auto* bad = std::get_if<BadRequest>(&lease)) return *bad;
    req.lease_ms = std::get<std::uint64_t>(lease);
    if (req.lease_ms < limits.min_lease_ms || req.lease_ms > limits.max_lease_ms) {
        return BadRequest{"field 'lease_ms' is " + std::to_string(req.lease_ms) +
                          ", must be within [" + std::to_string(limits.min_lease_ms) + ", " +
                          std::to_string(limits.max_lease_ms) + "]"};
    }
    auto wait = get_uint(o, "wait_ms", false, 0);
    if (auto* bad = std::get_if<BadRequest>(&wait)) return *bad;
    req.wait_ms = std::get<std::uint64_t>(wait);
    if (req.wait_ms > limits.max_wait_ms) {
        return BadRequest{"field 'wait_ms' is " + std::to_string(req.wait_ms) +
                          ", must be at most " + std::to_string(limits.max_wait_ms)};
    }
    auto owner = get_string(o, "owner", false);
    if (auto* bad = std::get_if<BadRequest>(&owner)) return *bad;
    req.owner = std::get<std::string>(owner);
    if (req.owner.size() > lock::kMaxOwnerBytes) {
        return BadRequest{"field 'owner' is " + std::to_string(req.owner.size()) +
                          " bytes, must be at most " + std::to_string(lock::kMaxOwnerBytes)};
    }
    // Control characters would otherwise reach the log and be refused at
    // apply (409 "grant refused") instead of here.
    if (auto why = lock::validate_owner(req.owner); !why.empty()) {
        return BadRequest{"field 'owner' is invalid: " + why};
    }
    return std::nullopt;
}

// The election's name, checked, as its key.
std::variant<std::string, BadRequest> election_key_of(const json::object& o) {
    auto name = get_string(o, "name", true);
    if (auto* bad = std::get_if<BadRequest>(&name)) return *bad;
    if (auto why = check_election_name(std::get<std::string>(name)); !why.empty()) return BadRequest{why};
    return member::election_key(std::get<std::string>(name));
}

std::variant<std::string, BadRequest> value_of(const json::object& o, bool required) {
    auto value = get_string(o, "value", required);
    if (auto* bad = std::get_if<BadRequest>(&value)) return *bad;
    if (auto why = lock::validate_value(std::get<std::string>(value)); !why.empty()) {
        return BadRequest{"field 'value' is invalid: " + why};
    }
    return value;
}

std::variant<lock::Token, BadRequest> token_of(const json::object& o) {
    auto token = get_uint(o, "token", true, 0);
    if (auto* bad = std::get_if<BadRequest>(&token)) return *bad;
    if (std::get<std::uint64_t>(token) == 0) return BadRequest{"field 'token' must be a positive integer, got 0"};
    return std::get<std::uint64_t>(token);
}

}  // namespace

std::variant<AcquireRequest, BadRequest> parse_acquire(std::string_view body,
                                                       const RequestLimits& limits) {
    auto obj = parse_object(body);
    if (auto* bad = std::get_if<BadRequest>(&obj)) return *bad;
    const json::object& o = std::get<json::object>(obj);
    AcquireRequest req;
    if (auto bad = get_key_or_keys(o, req.key, req.keys)) return *bad;
    if (auto bad = acquire_fields(o, limits, req)) return *bad;
    if (auto why = check_set_size(req); !why.empty()) return BadRequest{why};
    return req;
}

std::string check_election_name(std::string_view name) {
    if (name.empty() || name.size() > member::kMaxElectionNameBytes) {
        return "field 'name' is " + std::to_string(name.size()) + " bytes; it must be 1.." +
               std::to_string(member::kMaxElectionNameBytes) + " bytes";
    }
    const std::string why = check_key(member::election_key(name));
    return why.empty() ? why : "field 'name' is invalid: " + why;
}

std::variant<AcquireRequest, BadRequest> parse_campaign(std::string_view body, const RequestLimits& limits) {
    auto obj = parse_object(body);
    if (auto* bad = std::get_if<BadRequest>(&obj)) return *bad;
    const json::object& o = std::get<json::object>(obj);
    AcquireRequest req;
    auto key = election_key_of(o);
    if (auto* bad = std::get_if<BadRequest>(&key)) return *bad;
    req.key = std::move(std::get<std::string>(key));
    auto value = value_of(o, false);
    if (auto* bad = std::get_if<BadRequest>(&value)) return *bad;
    req.value = std::move(std::get<std::string>(value));
    if (auto bad = acquire_fields(o, limits, req)) return *bad;
    return req;
}

std::variant<member::Proclaim, BadRequest> parse_proclaim(std::string_view body) {
    auto obj = parse_object(body);
    if (auto* bad = std::get_if<BadRequest>(&obj)) return *bad;
    const json::object& o = std::get<json::object>(obj);
    member::Proclaim req;
    auto key = election_key_of(o);
    if (auto* bad = std::get_if<BadRequest>(&key)) return *bad;
    req.key = std::move(std::get<std::string>(key));
    auto token = token_of(o);
    if (auto* bad = std::get_if<BadRequest>(&token)) return *bad;
    req.token = std::get<lock::Token>(token);
    auto value = value_of(o, true);
    if (auto* bad = std::get_if<BadRequest>(&value)) return *bad;
    req.value = std::move(std::get<std::string>(value));
    return req;
}

std::variant<KeyToken, BadRequest> parse_resign(std::string_view body) {
    auto obj = parse_object(body);
    if (auto* bad = std::get_if<BadRequest>(&obj)) return *bad;
    const json::object& o = std::get<json::object>(obj);
    KeyToken req;
    auto key = election_key_of(o);
    if (auto* bad = std::get_if<BadRequest>(&key)) return *bad;
    req.key = std::move(std::get<std::string>(key));
    auto token = token_of(o);
    if (auto* bad = std::get_if<BadRequest>(&token)) return *bad;
    req.token = std::get<lock::Token>(token);
    return req;
}

std::variant<member::ListLocks, BadRequest> parse_leader_query(std::string_view query) {
    auto name = query_param(query, "name");
    if (auto* bad = std::get_if<BadRequest>(&name)) return *bad;
    const QueryParam& p = std::get<QueryParam>(name);
    if (!p.found) return BadRequest{"query parameter 'name' is required"};
    if (auto why = check_election_name(p.value); !why.empty()) {
        return BadRequest{"query parameter " + why.substr(std::string_view("field ").size())};
    }
    member::ListLocks req;
    req.key = member::election_key(p.value);
    return req;
}

std::variant<KeyToken, BadRequest> parse_key_token(std::string_view body) {
    auto obj = parse_object(body);
    if (auto* bad = std::get_if<BadRequest>(&obj)) return *bad;
    const json::object& o = std::get<json::object>(obj);
    KeyToken req;
    if (auto bad = get_key_or_keys(o, req.key, req.keys)) return *bad;
    auto token = get_uint(o, "token", true, 0);
    if (auto* bad = std::get_if<BadRequest>(&token)) return *bad;
    req.token = std::get<std::uint64_t>(token);
    if (req.token == 0) return BadRequest{"field 'token' must be a positive integer, got 0"};
    return req;
}

namespace {

std::variant<std::uint64_t, BadRequest> member_id_of(const json::object& o) {
    auto id = get_uint(o, "id", true, 0);
    if (auto* bad = std::get_if<BadRequest>(&id)) return *bad;
    if (std::get<std::uint64_t>(id) == 0) return BadRequest{"field 'id' must be a member ID >= 1, got 0"};
    return id;
}

// "" or why the field's value is not a HOST:PORT a member can be reached at.
std::string address_problem(const char* name, const std::string& value) {
    if (value.size() > member::kMaxAddressBytes) {
        return std::string("field '") + name + "' is " + std::to_string(value.size()) + " bytes, must be at most " +
               std::to_string(member::kMaxAddressBytes);
    }
    if (!parse_host_port(value).ok()) return std::string("field '") + name + "' is '" + value + "', not HOST:PORT";
    return {};
}

}  // namespace

std::variant<member::AddMember, BadRequest> parse_add_member(std::string_view body) {
    auto obj = parse_object(body);
    if (auto* bad = std::get_if<BadRequest>(&obj)) return *bad;
    const json::object& o = std::get<json::object>(obj);
    member::AddMember req;
    auto id = member_id_of(o);
    if (auto* bad = std::get_if<BadRequest>(&id)) return *bad;
    req.id = std::get<std::uint64_t>(id);
    for (auto [name, field] : {std::pair{"peer_addr", &req.peer_addr}, std::pair{"client_addr", &req.client_addr}}) {
        auto v = get_string(o, name, true);
        if (auto* bad = std::get_if<BadRequest>(&v)) return *bad;
        *field = std::get<std::string>(v);
        if (auto why = address_problem(name, *field); !why.empty()) return BadRequest{why};
    }
    return req;
}

std::variant<std::uint64_t, BadRequest> parse_member_id(std::string_view body) {
    auto obj = parse_object(body);
    if (auto* bad = std::get_if<BadRequest>(&obj)) return *bad;
    return member_id_of(std::get<json::object>(obj));
}

namespace {
int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::variant<std::string, BadRequest> percent_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') {
            out.push_back(' ');
        } else if (s[i] == '%') {
            if (i + 2 >= s.size()) return BadRequest{"query string has a truncated %-escape"};
            const int hi = hex_value(s[i + 1]);
            const int lo = hex_value(s[i + 2]);
            if (hi < 0 || lo < 0) return BadRequest{"query string has a bad %-escape"};
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}
}  // namespace

std::string printable_excerpt(std::string_view text, std::size_t max_bytes) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    const std::string_view head = text.substr(0, max_bytes);
    for (const char c : head) {
        const auto b = static_cast<unsigned char>(c);
        if (b > 0x20 && b < 0x7f) {
            out.push_back(c);
        } else {
            out.push_back('%');
            out.push_back(kHex[b >> 4]);
            out.push_back(kHex[b & 0xf]);
        }
    }
    if (text.size() > max_bytes) out += "...";
    return out;
}

std::variant<std::string, BadRequest> decode_path_segment(std::string_view segment) {
    std::string out;
    out.reserve(segment.size());
    for (std::size_t i = 0; i < segment.size(); ++i) {
        if (segment[i] != '%') {
            out.push_back(segment[i]);
            continue;
        }
        const int hi = i + 2 < segment.size() ? hex_value(segment[i + 1]) : -1;
        const int lo = i + 2 < segment.size() ? hex_value(segment[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            return BadRequest{"path segment '" + printable_excerpt(segment, 200) + "' has a bad %-escape at byte " +
                              std::to_string(i)};
        }
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
    }
    return out;
}

std::variant<QueryParam, BadRequest> query_param(std::string_view query, std::string_view name) {
    while (!query.empty()) {
        const std::size_t amp = query.find('&');
        const std::string_view part = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        const std::size_t eq = part.find('=');
        if (part.substr(0, eq) != name) continue;
        if (eq == std::string_view::npos) return QueryParam{true, {}};
        auto value = percent_decode(part.substr(eq + 1));
        if (auto* bad = std::get_if<BadRequest>(&value)) return *bad;
        return QueryParam{true, std::get<std::string>(value)};
    }
    return QueryParam{};
}

std::variant<member::ListLocks, BadRequest> parse_list_query(std::string_view query) {
    member::ListLocks list;
    bool paged = false;
    for (const char* name : {"key", "prefix", "after", "limit"}) {
        auto param = query_param(query, name);
        if (auto* bad = std::get_if<BadRequest>(&param)) return *bad;
        QueryParam& p = std::get<QueryParam>(param);
        if (!p.found) continue;
        const std::string_view n = name;
        if (n == "limit") {
            const auto& v = p.value;
            std::size_t limit = 0;
            const bool digits = !v.empty() && v.size() <= 6 &&
                                v.find_first_not_of("0123456789") == std::string::npos;
            if (digits) limit = std::stoul(v);
            if (!digits || limit < 1 || limit > member::kMaxListLimit) {
                return BadRequest{"query parameter 'limit' must be an integer 1.." +
                                  std::to_string(member::kMaxListLimit) + ", got '" + v.substr(0, 32) + "'"};
            }
            list.limit = limit;
            paged = true;
            continue;
        }
        // A key, or (prefix, after) empty or a valid key.
        if (n == "key" || !p.value.empty()) {
            if (std::string why = check_key(p.value); !why.empty()) {
                return BadRequest{"query parameter '" + std::string(n) + "' is invalid: " + why};
            }
        }
        if (n == "key") {
            list.key = std::move(p.value);
        } else {
            if (n == "prefix") {
                list.prefixes = {std::move(p.value)};
            } else {
                list.after = std::move(p.value);
            }
            paged = true;
        }
    }
    if (list.key && paged) return BadRequest{"query parameter 'key' cannot be combined with prefix, after or limit"};
    return list;
}

}  // namespace pgfence::net
