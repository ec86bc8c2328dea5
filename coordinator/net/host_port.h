// "HOST:PORT", the one spelling of an address in pgfence: --peers and
// --client-addr of fence-coordinator, --endpoints and FENCE_ENDPOINTS of the
// client, and the leader URL in a 307 Location.
//
// The port follows the last ':' and is decimal digits (leading zeros allowed)
// with a value of 1..65535; the host is everything before it and must not be
// empty. So an IPv6 host is written bare ("::1:7001"); "[::1]:7001" splits
// into host "[::1]" (brackets kept) and port 7001. Callers with a narrower
// host rule (the client refuses separators in a host) check it themselves.
//
// Pure, std only: in pgfence_net_codec, which client/ links without Asio.
#pragma once

#include <cstdint>
#include <string_view>

namespace pgfence::net {

enum class HostPortError : std::uint8_t {
    kNone,
    kNoColon,         // no ':' at all
    kEmptyHost,       // nothing before the last ':'
    kPortNotNumber,   // empty, a character other than a digit, or too large for 32 bits
    kPortOutOfRange,  // a number outside 1..65535
};

struct HostPort {
    std::string_view host;  // a view into the parsed text; set whenever it has a ':'
    std::uint16_t port = 0;  // set when error == kNone
    HostPortError error = HostPortError::kNone;

    bool ok() const { return error == HostPortError::kNone; }
};

HostPort parse_host_port(std::string_view text);

}  // namespace pgfence::net
