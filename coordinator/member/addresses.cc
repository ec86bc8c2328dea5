#include "member/addresses.h"

#include <cstdint>

#include "codec/bytes.h"

namespace pgfence::member {

namespace {
constexpr std::uint8_t kAddressesVersion = 1;
}  // namespace

std::string encode_addresses(const MemberAddresses& addresses) {
    std::string out;
    codec::put_u8(out, kAddressesVersion);
    codec::put_string(out, addresses.peer_addr, kMaxAddressBytes, "peer address");
    codec::put_string(out, addresses.client_addr, kMaxAddressBytes, "client address");
    return out;
}

std::string decode_addresses(std::string_view context, MemberAddresses& out) {
    if (context.empty()) {
        out = MemberAddresses{};
        return {};
    }
    codec::Reader in(context);
    const std::uint8_t version = in.u8();
    if (in.ok() && version != kAddressesVersion) return "member addresses version " + std::to_string(version) + " is not 1";
    MemberAddresses a;
    a.peer_addr = std::string(in.string("peer address", kMaxAddressBytes));
    a.client_addr = std::string(in.string("client address", kMaxAddressBytes));
    if (!in.ok()) return "member addresses truncated or longer than " + std::to_string(kMaxAddressBytes) + " bytes";
    if (in.remaining() != 0) return std::to_string(in.remaining()) + " trailing bytes after the member addresses";
    out = std::move(a);
    return {};
}

}  // namespace pgfence::member
