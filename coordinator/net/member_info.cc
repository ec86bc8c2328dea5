#include "net/member_info.h"

#include "codec/bytes.h"
#include "net/frame.h"

namespace pgfence::net {

namespace {
constexpr std::uint8_t kMemberInfoVersion = 1;
constexpr std::uint8_t kMaxRole = 3;
}  // namespace

std::string encode_member_info(const MemberInfo& info) {
    std::string out;
    codec::put_u8(out, kMemberInfoVersion);
    codec::put_u64(out, info.id);
    codec::put_string(out, info.client_addr, member::kMaxAddressBytes, "member info client address");
    codec::put_u8(out, info.role);
    codec::put_u64(out, info.term);
    codec::put_u64(out, info.leader);
    codec::put_u64(out, info.commit);
    codec::put_u64(out, info.applied);
    return out;
}

std::variant<MemberInfo, std::string> decode_member_info(std::string_view bytes) {
    codec::Reader r(bytes, peer_read_error);
    const std::uint8_t version = r.u8("member info version");
    if (r.ok() && version != kMemberInfoVersion) {
        return "unsupported member info version " + std::to_string(version);
    }
    MemberInfo info;
    info.id = r.u64("member id");
    info.client_addr = r.string("client address", member::kMaxAddressBytes);
    info.role = r.u8("role");
    info.term = r.u64("term");
    info.leader = r.u64("leader");
    info.commit = r.u64("commit");
    info.applied = r.u64("applied");
    if (!r.ok()) return "bad member info: " + r.error();
    if (r.remaining() != 0) return "member info has " + std::to_string(r.remaining()) + " trailing bytes";
    if (info.role > kMaxRole) return "member info role " + std::to_string(info.role) + " out of range";
    if (info.id == 0) return "member info id must not be 0";
    return info;
}

}  // namespace pgfence::net
