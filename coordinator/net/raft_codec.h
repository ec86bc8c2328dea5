// Binary encoding of raft::Message for the peer transport (the payload of a
// kRaft frame; the cluster ID travels in the frame header, not here).
//
// Format (integers little-endian, fixed width):
//   [u8 version=1][u64 from][u64 to][u64 term][u8 tag][body]
//   tag 1 VoteRequest      [u8 pre_vote][u64 last_log_index][u64 last_log_term][u8 transfer]
//   tag 2 VoteResponse     [u8 pre_vote][u8 granted]
//   tag 3 AppendRequest    [u64 prev_log_index][u64 prev_log_term][u64 leader_commit]
//                          [u32 count] count x Entry
//   tag 4 AppendResponse   [u8 success][u64 match][u64 reject_index][u64 reject_hint][u64 hint_term]
//   tag 5 SnapshotRequest  Snapshot1, whole (a configuration of voters without
//                          contexts, which the release before learners reads too)
//   tag 9 SnapshotRequest  Snapshot (any other configuration)
//   tag 10 SnapshotRequest [u64 offset][u8 done] Snapshot: one chunk of a larger
//                          snapshot (its data bytes from offset; done on the last)
//   tag 13 SnapshotRequest [u64 offset][u8 done][u64 config_index] Snapshot: a
//                          snapshot (whole: offset 0, done) or a chunk of one whose
//                          configuration a log entry made (0 < config_index <= index;
//                          tags 5, 9 and 10 carry the first configuration, index 0)
//   tag 11 SnapshotAck     [u64 index][u64 received][u8 rejected]
//   tag 12 Removed         (empty)
//   tag 6 Heartbeat        [u64 commit][u64 read_round]
//   tag 7 HeartbeatResponse[u64 read_round]
//   tag 8 TimeoutNow       (empty)
//   Entry    = [u64 term][u64 index][u8 type 0..2][u32 len][data]
//   Snapshot = [u64 index][u64 term][u32 len][configuration][u32 len][data]
//              (configuration: raft::encode_configuration)
//   Snapshot1 = [u64 index][u64 term][u32 n] n x u64 member [u32 len][data]
//              (n voters, no learners, no contexts)
// Booleans must be 0 or 1; no trailing bytes. Every count and length is checked
// against the bytes actually present before anything is allocated, so hostile
// input yields a CodecError, never a crash or a huge allocation.
//
// Pure, std only (no Boost).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "raft/types.h"

namespace pgfence::net {

constexpr std::uint8_t kRaftCodecVersion = 1;
constexpr std::size_t kMaxMembers = 255;

struct CodecError {
    std::string message;  // what was wrong and at which byte offset
};

std::string encode_message(const raft::Message& m);

// `cluster_id` comes from the frame header and is stored into the message.
std::variant<raft::Message, CodecError> decode_message(std::string_view bytes,
                                                       std::uint64_t cluster_id);

}  // namespace pgfence::net
