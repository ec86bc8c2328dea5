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
    bool tls = false;
    std::string_view rest = text;
    if (rest.starts_with("https://")) {
        tls = true;
        rest.remove_prefix(8);
    } else if (rest.starts_with("http://")) {
        rest.remove_prefix(7);
    } else if (rest.find("://") != std::string_view::npos) {
        return fail("unknown scheme (use http:// or https://)");
    }
    const net::HostPort parsed = net::parse_host_port(rest);
    if (parsed.error == HostPortError::kNoColon) return fail("missing ':PORT'");
    if (parsed.error == HostPortError::kEmptyHost) return fail("empty host");
    // Separators of an endpoint list or a URL are no part of a host.
    if (parsed.host.find_first_of(" /\t,") != std::string_view::npos) {
        return fail("bad character in host");
    }
    if (parsed.error == HostPortError::kPortNotNumber) return fail("port is not a number");
    if (parsed.error == HostPortError::kPortOutOfRange) return fail("port out of range 1-65535");
    return Endpoint{std::string(parsed.host), parsed.port, tls};
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
    const std::size_t scheme_end = url.starts_with("https://") ? 8 : url.starts_with("http://") ? 7 : 0;
    if (scheme_end == 0) return std::nullopt;
    const std::size_t slash = url.find('/', scheme_end);
    return parse_endpoint(url.substr(0, slash), nullptr);
}

}  // namespace pgfence::client
