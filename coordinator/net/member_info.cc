#include "net/member_info.h"

#include "net/bytes.h"

namespace pgfence::net {

namespace {
constexpr std::uint8_t kMemberInfoVersion = 1;
constexpr std::uint8_t kMaxRole = 3;
}  // namespace

std::string encode_member_info(const MemberInfo& info) {
    std::string out;
    ByteWriter w(out);
    w.u8(kMemberInfoVersion);
    w.u64(info.id);
    w.str(info.client_addr.substr(0, kMaxClientAddrBytes));
    w.u8(info.role);
    w.u64(info.term);
    w.u64(info.leader);
    w.u64(info.commit);
    w.u64(info.applied);
    return out;
}

std::variant<MemberInfo, std::string> decode_member_info(std::string_view bytes) {
    ByteReader r(bytes);
    const std::uint8_t version = r.u8("member info version");
    if (r.ok() && version != kMemberInfoVersion) {
        return "unsupported member info version " + std::to_string(version);
    }
    MemberInfo info;
    info.id = r.u64("member id");
    info.client_addr = r.str("client address", kMaxClientAddrBytes);
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
