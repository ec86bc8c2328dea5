// What the cluster keeps about each member in its configuration
// (raft::ConfigMember::context): the addresses other members dial and
// clients are redirected to. Pure, std only.
//
// Format: u8 version (1), then the peer and the client address, each a
// u32-length string of at most kMaxAddressBytes. An empty context is a
// member the configuration names without addresses (one from the first
// configuration, whose addresses come from --peers).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pgfence::member {

constexpr std::size_t kMaxAddressBytes = 261;  // a DNS name (253) ':' and a port

struct MemberAddresses {
    std::string peer_addr;    // HOST:PORT of its peer port
    std::string client_addr;  // HOST:PORT of its HTTP API

    bool operator==(const MemberAddresses&) const = default;
};

std::string encode_addresses(const MemberAddresses& addresses);
// "" and `out` set, or why the context is not one (`out` unchanged).
std::string decode_addresses(std::string_view context, MemberAddresses& out);

}  // namespace pgfence::member
