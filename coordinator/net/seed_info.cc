#include "net/seed_info.h"

#include "codec/bytes.h"
#include "net/frame.h"

namespace pgfence::net {

namespace {
constexpr std::uint8_t kSeedInfoVersion = 1;
}  // namespace

std::string encode_seed_info(const SeedInfo& info) {
    std::string out;
    codec::put_u8(out, kSeedInfoVersion);
    codec::put_u64(out, info.member_id);
    codec::put_string(out, raft::encode_configuration(info.first_config));
    codec::put_u8(out, info.restored ? 1 : 0);
    codec::put_u64(out, info.from_cluster);
    codec::put_u64(out, info.from_index);
    codec::put_u64(out, info.token_floor);
    return out;
}

std::variant<SeedInfo, std::string> decode_seed_info(std::string_view bytes) {
    codec::Reader r(bytes, peer_read_error);
    const std::uint8_t version = r.u8("seed info version");
    if (r.ok() && version != kSeedInfoVersion) return "unsupported seed info version " + std::to_string(version);
    SeedInfo info;
    info.member_id = r.u64("member id");
    const std::string_view config = r.string("first configuration", kMaxFrameBytes);
    const std::uint8_t restored = r.u8("restored");
    info.from_cluster = r.u64("from cluster");
    info.from_index = r.u64("from index");
    info.token_floor = r.u64("token floor");
    if (!r.ok()) return "bad seed info: " + r.error();
    if (r.remaining() != 0) return "seed info has " + std::to_string(r.remaining()) + " trailing bytes";
    if (restored > 1) return "seed info 'restored' is " + std::to_string(restored);
    if (info.member_id == 0) return "seed info member id must not be 0";
    if (std::string why = raft::decode_configuration(config, info.first_config); !why.empty()) {
        return "seed info first configuration: " + why;
    }
    info.restored = restored == 1;
    return info;
}

}  // namespace pgfence::net
