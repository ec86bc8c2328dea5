// MemberInfo: what a member tells its peers about itself over the transport.
//
// Sent as the first frame on every outgoing connection (the handshake: it
// names the sender and its HTTP client address, which followers use for 307
// redirects to the leader) and again every few heartbeats so /v1/status can
// show each member's role, term, leader, commit and applied index as last
// reported.
//
// Payload (little-endian): [u8 version=1][u64 id][u32 len][client_addr]
//   [u8 role][u64 term][u64 leader][u64 commit][u64 applied]
// client_addr is at most member::kMaxAddressBytes, the bound of every
// member address (member/addresses.h). Pure, std only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "member/addresses.h"

namespace pgfence::net {

struct MemberInfo {
    std::uint64_t id = 0;
    std::string client_addr;  // "host:port" of the member's HTTP API
    std::uint8_t role = 0;    // raft::Role as a number
    std::uint64_t term = 0;
    std::uint64_t leader = 0;
    std::uint64_t commit = 0;
    std::uint64_t applied = 0;
    bool operator==(const MemberInfo&) const = default;
};

// Throws std::length_error naming the client address when it is longer
// than member::kMaxAddressBytes (never cut short: the server refuses such a
// --client-addr at start, server/options.h).
std::string encode_member_info(const MemberInfo& info);
// The info, or why the bytes are not one.
std::variant<MemberInfo, std::string> decode_member_info(std::string_view bytes);

}  // namespace pgfence::net
