// Peer transport frames: the unit every member-to-member TCP byte belongs to.
//
// Wire format (integers little-endian):
//   [u32 length]            bytes that follow the length field (version..payload)
//   [u8  version]           kFrameVersion; anything else is refused
//   [u64 cluster_id]        frames of another cluster are refused (two clusters never mix)
//   [u8  kind]              FrameKind
//   [payload]               length - kFrameHeaderBytes + 4 bytes
// A length above kMaxFrameBytes or below the header size closes the connection.
// A connection's first frame (its MemberInfo) may be at most
// kMaxFirstFrameBytes until it names a member (peer_links.h): nothing large
// is read from a dialer before its cluster ID and member ID are checked.
//
// Pure, std only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace pgfence::codec {
struct ReadFailure;
}  // namespace pgfence::codec

namespace pgfence::net {

constexpr std::uint8_t kFrameVersion = 1;
constexpr std::size_t kLengthPrefixBytes = 4;
constexpr std::size_t kFrameHeaderBytes = 1 + 8 + 1;         // version, cluster_id, kind
constexpr std::size_t kMaxFrameBytes = 64u << 20;            // snapshots larger than a chunk go in chunks
constexpr std::size_t kMaxFirstFrameBytes = 4096;            // a MemberInfo is at most ~320 bytes

enum class FrameKind : std::uint8_t {
    kMemberInfo = 1,  // payload: MemberInfo (member_info.h); first frame on a connection
    kRaft = 2,        // payload: one raft::Message (raft_codec.h)
    kSeedInfo = 3,    // payload: SeedInfo (seed_info.h); after the handshake, to a member not running yet
};

struct Frame {
    std::uint64_t cluster_id = 0;
    FrameKind kind = FrameKind::kRaft;
    std::string payload;
};

struct FrameError {
    std::string message;
};

// The fields before a frame's payload.
struct FrameHeader {
    std::uint64_t cluster_id = 0;
    FrameKind kind = FrameKind::kRaft;
};

// Serializes a whole frame including its length prefix.
std::string encode_frame(std::uint64_t cluster_id, FrameKind kind, std::string_view payload);

// Reads the length prefix (exactly kLengthPrefixBytes bytes) and returns the
// body length that follows, or an error for a length out of bounds.
std::variant<std::size_t, FrameError> decode_frame_length(std::string_view prefix);

// Decodes the header (exactly kFrameHeaderBytes bytes after the length
// prefix): version, cluster ID and kind, refused as decode_frame_body does.
std::variant<FrameHeader, FrameError> decode_frame_header(std::string_view header);

// Decodes a frame body (everything after the length prefix).
std::variant<Frame, FrameError> decode_frame_body(std::string_view body);

// How the peer protocol's payload decoders (member info, raft messages) word a
// failed read (a codec::Wording; `context` is unused), e.g.
//   truncated term (need 8 bytes, have 3) at byte offset 17
std::string peer_read_error(const codec::ReadFailure& failure, std::string_view context);

}  // namespace pgfence::net
