#include "net/frame.h"

#include "net/bytes.h"

namespace pgfence::net {

std::string encode_frame(std::uint64_t cluster_id, FrameKind kind, std::string_view payload) {
    std::string out;
    out.reserve(kLengthPrefixBytes + kFrameHeaderBytes + payload.size());
    ByteWriter w(out);
    w.u32(static_cast<std::uint32_t>(kFrameHeaderBytes + payload.size()));
    w.u8(kFrameVersion);
    w.u64(cluster_id);
    w.u8(static_cast<std::uint8_t>(kind));
    out.append(payload);
    return out;
}

std::variant<std::size_t, FrameError> decode_frame_length(std::string_view prefix) {
    if (prefix.size() != kLengthPrefixBytes) {
        return FrameError{"frame length prefix must be 4 bytes, got " +
                          std::to_string(prefix.size())};
    }
    ByteReader r(prefix);
    const std::size_t len = r.u32("frame length");
    if (len < kFrameHeaderBytes) {
        return FrameError{"frame length " + std::to_string(len) + " is below the header size " +
                          std::to_string(kFrameHeaderBytes)};
    }
    if (len > kMaxFrameBytes) {
        return FrameError{"frame length " + std::to_string(len) + " exceeds kMaxFrameBytes " +
                          std::to_string(kMaxFrameBytes)};
    }
    return len;
}

std::variant<Frame, FrameError> decode_frame_body(std::string_view body) {
    if (body.size() < kFrameHeaderBytes || body.size() > kMaxFrameBytes) {
        return FrameError{"frame body of " + std::to_string(body.size()) + " bytes is out of bounds"};
    }
    ByteReader r(body);
    const std::uint8_t version = r.u8("frame version");
    if (version != kFrameVersion) {
        return FrameError{"unsupported frame version " + std::to_string(version) + " (expected " +
                          std::to_string(kFrameVersion) + ")"};
    }
    Frame f;
    f.cluster_id = r.u64("cluster id");
    const std::uint8_t kind = r.u8("frame kind");
    if (kind != static_cast<std::uint8_t>(FrameKind::kMemberInfo) &&
        kind != static_cast<std::uint8_t>(FrameKind::kRaft)) {
        return FrameError{"unknown frame kind " + std::to_string(kind)};
    }
    f.kind = static_cast<FrameKind>(kind);
    f.payload.assign(body.substr(kFrameHeaderBytes));
    return f;
}

}  // namespace pgfence::net
