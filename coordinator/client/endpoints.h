// Coordinator endpoints: "host:port" lists as given to --endpoints or
// FENCE_ENDPOINTS, and the leader URL a follower puts in a 307 Location. An
// endpoint written https://host:port is reached over TLS; host:port and
// http://host:port in plaintext.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgfence::client {

// Bound on endpoints in one list: a cluster has 3 or 5 members.
constexpr std::size_t kMaxEndpoints = 16;

struct Endpoint {
    std::string host;
    std::uint16_t port = 0;
    bool tls = false;  // https://

    std::string authority() const { return host + ":" + std::to_string(port); }
    // host:port, or https://host:port for a TLS endpoint.
    std::string to_string() const { return (tls ? "https://" : "") + authority(); }
    bool operator==(const Endpoint&) const = default;
};

struct EndpointsParse {
    std::vector<Endpoint> endpoints;
    std::string error;  // non-empty on failure; names the bad entry
};

// Parses one "host:port", "http://host:port" or "https://host:port"
// (net/host_port.h; a host without ' ', '/', '\t' or ',').
std::optional<Endpoint> parse_endpoint(std::string_view text, std::string* error);

// Parses "host:port,host:port,...": at least one entry, at most kMaxEndpoints,
// no empty entries; duplicates are dropped.
EndpointsParse parse_endpoints(std::string_view text);

// Endpoint of an absolute "http://host:port/..." or "https://host:port/..."
// URL (a 307 Location header).
std::optional<Endpoint> endpoint_of_url(std::string_view url);

// Default when neither --endpoints nor FENCE_ENDPOINTS is given.
constexpr std::string_view kDefaultEndpoints = "127.0.0.1:7501,127.0.0.1:7502,127.0.0.1:7503";
constexpr std::string_view kEndpointsEnv = "FENCE_ENDPOINTS";

}  // namespace pgfence::client
