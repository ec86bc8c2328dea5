#include "net/frame.h"

#include "codec/bytes.h"

namespace pgfence::net {

std::string encode_frame(std::uint64_t cluster_id, FrameKind kind, std::string_view payload) {
    std::string out;
    out.reserve(kLengthPrefixBytes + kFrameHeaderBytes + payload.size());
    codec::put_u32(out, static_cast<std::uint32_t>(kFrameHeaderBytes + payload.size()));
    codec::put_u8(out, kFrameVersion);
    codec::put_u64(out, cluster_id);
    codec::put_u8(out, static_cast<std::uint8_t>(kind));
    out.append(payload);
    return out;
}

std::variant<std::size_t, FrameError> decode_frame_length(std::string_view prefix) {
    if (prefix.size() != kLengthPrefixBytes) {
        return FrameError{"frame length prefix must be 4 bytes, got " +
                          std::to_string(prefix.size())};
    }
    const std::size_t len = codec::peek_u32(prefix, 0);
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

std::variant<FrameHeader, FrameError> decode_frame_header(std::string_view header) {
    if (header.size() != kFrameHeaderBytes) {
        return FrameError{"frame header must be " + std::to_string(kFrameHeaderBytes) + " bytes, got " +
                          std::to_string(header.size())};
    }
    codec::Reader r(header);  // the size is checked: no read below can fail
    const std::uint8_t version = r.u8("frame version");
    if (version != kFrameVersion) {
        return FrameError{"unsupported frame version " + std::to_string(version) + " (expected " +
                          std::to_string(kFrameVersion) + ")"};
    }
    FrameHeader h;
    h.cluster_id = r.u64("cluster id");
    const std::uint8_t kind = r.u8("frame kind");
    if (kind < static_cast<std::uint8_t>(FrameKind::kMemberInfo) ||
        kind > static_cast<std::uint8_t>(FrameKind::kSeedInfo)) {
        return FrameError{"unknown frame kind " + std::to_string(kind)};
    }
    h.kind = static_cast<FrameKind>(kind);
    return h;
}

std::variant<Frame, FrameError> decode_frame_body(std::string_view body) {
    if (body.size() < kFrameHeaderBytes || body.size() > kMaxFrameBytes) {
        return FrameError{"frame body of " + std::to_string(body.size()) + " bytes is out of bounds"};
    }
    auto header = decode_frame_header(body.substr(0, kFrameHeaderBytes));
    if (auto* err = std::get_if<FrameError>(&header)) return std::move(*err);
    Frame f;
    f.cluster_id = std::get<FrameHeader>(header).cluster_id;
    f.kind = std::get<FrameHeader>(header).kind;
    f.payload.assign(body.substr(kFrameHeaderBytes));
    return f;
}

std::string peer_read_error(const codec::ReadFailure& failure, std::string_view /*context*/) {
    using Kind = codec::ReadFailure::Kind;
    const std::string field(failure.field);
    const std::string size = std::to_string(failure.size);
    const std::string limit = std::to_string(failure.limit);
    std::size_t offset = failure.offset;
    std::string problem;
    switch (failure.kind) {
        case Kind::kShort:
            problem = "truncated " + field + " (need " + size + " bytes, have " + limit + ")";
            break;
        case Kind::kShortString:
            problem = "truncated " + field + " (length " + size + ", have " + limit + ")";
            break;
        case Kind::kTooLong:
            problem = field + " length " + size + " exceeds limit " + limit;
            offset += codec::kU32Bytes;  // this wording gives the offset just past the length
            break;
        case Kind::kProblem:
            problem = field;
            break;
    }
    return problem + " at byte offset " + std::to_string(offset);
}

}  // namespace pgfence::net
