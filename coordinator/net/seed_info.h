// SeedInfo: what the seed of a cluster (the lowest ID in its first
// configuration) tells a member that is not running yet, over the peer port
// (server/ask_seed.h): the first configuration it started with and, for a
// cluster restored from a backup or forced from a member's directory (a new
// generation), where the state came from and the token floor it chose. The
// cluster ID is the frame's.
//
// Sent (FrameKind::kSeedInfo) right after the handshake on each outgoing
// connection of the seed to a member it has not heard a handshake from since
// it started: a member that is running dials the seed itself, so the frame
// reaches only members that are still waiting for it (and, once, a member of
// an older release that dialed late, which refuses the frame kind and
// reconnects). A running member ignores the frame.
//
// Payload (little-endian): [u8 version=1][u64 member_id]
//   [u32 len][configuration (raft::encode_configuration)]
//   [u8 restored (0|1)][u64 from_cluster][u64 from_index][u64 token_floor]
// Pure, std only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "raft/types.h"

namespace pgfence::net {

struct SeedInfo {
    std::uint64_t member_id = 0;
    raft::Configuration first_config;
    bool restored = false;  // the three below are set
    std::uint64_t from_cluster = 0;
    std::uint64_t from_index = 0;
    std::uint64_t token_floor = 0;
    bool operator==(const SeedInfo&) const = default;
};

std::string encode_seed_info(const SeedInfo& info);
// Error string is empty on success.
std::variant<SeedInfo, std::string> decode_seed_info(std::string_view bytes);

}  // namespace pgfence::net
