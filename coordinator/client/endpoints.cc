#include "client/endpoints.h"

#include <algorithm>

#include "net/host_port.h"

namespace pgfence::client {

std::optional<Endpoint> parse_endpoint(std::string_view text, std::string* error) {
    auto fail = [&](std::string_view why) -> std::optional<Endpoint> {
        if (error) {
            *error = "invalid endpoint '" + std::string(text) + "': " + std::string(why) +
                     " (expected HOST:PORT, e.g. 127.0.0.1:7001)";
        }
        return std::nullopt;
    };
    using net::HostPortError;
    const net::HostPort parsed = net::parse_host_port(text);
    if (parsed.error == HostPortError::kNoColon) return fail("missing ':PORT'");
    if (parsed.error == HostPortError::kEmptyHost) return fail("empty host");
    // Separators of an endpoint list or a URL are no part of a host.
    if (parsed.host.find_first_of(" /\t,") != std::string_view::npos) {
        return fail("bad character in host");
    }
    if (parsed.error == HostPortError::kPortNotNumber) return fail("port is not a number");
    if (parsed.error == HostPortError::kPortOutOfRange) return fail("port out of range 1-65535");
    return Endpoint{std::string(parsed.host), parsed.port};
}

EndpointsParse parse_endpoints(std::string_view text) {
    EndpointsParse out;
    if (text.empty()) {
        out.error = "empty endpoint list (expected HOST:PORT[,HOST:PORT...])";
        return out;
    }
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string_view item = text.substr(start, comma - start);
        if (item.empty()) {
            out.error = "empty entry in endpoint list '" + std::string(text) + "'";
            out.endpoints.clear();
            return out;
        }
        auto endpoint = parse_endpoint(item, &out.error);
        if (!endpoint) {
            out.endpoints.clear();
            return out;
        }
        if (std::find(out.endpoints.begin(), out.endpoints.end(), *endpoint) ==
            out.endpoints.end()) {
            if (out.endpoints.size() == kMaxEndpoints) {
                out.error = "too many endpoints (at most " + std::to_string(kMaxEndpoints) + ")";
                out.endpoints.clear();
                return out;
            }
            out.endpoints.push_back(std::move(*endpoint));
        }
        start = comma + 1;
    }
    return out;
}

std::optional<Endpoint> endpoint_of_url(std::string_view url) {
    constexpr std::string_view kScheme = "http://";
    if (!url.starts_with(kScheme)) return std::nullopt;
    url.remove_prefix(kScheme.size());
    const std::size_t slash = url.find('/');
    const std::string_view authority = url.substr(0, slash);
    return parse_endpoint(authority, nullptr);
}

}  // namespace pgfence::client
