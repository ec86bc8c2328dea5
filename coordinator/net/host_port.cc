#include "net/host_port.h"

#include <charconv>

namespace pgfence::net {

HostPort parse_host_port(std::string_view text) {
    HostPort out;
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
        out.error = HostPortError::kNoColon;
        return out;
    }
    out.host = text.substr(0, colon);
    if (out.host.empty()) {
        out.error = HostPortError::kEmptyHost;
        return out;
    }
    const std::string_view digits = text.substr(colon + 1);
    std::uint32_t port = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
        out.error = HostPortError::kPortNotNumber;
        return out;
    }
    if (port == 0 || port > 65535) {
        out.error = HostPortError::kPortOutOfRange;
        return out;
    }
    out.port = static_cast<std::uint16_t>(port);
    return out;
}

}  // namespace pgfence::net
