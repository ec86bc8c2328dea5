#include "net/bytes.h"

namespace pgfence::net {

void ByteReader::fail(const std::string& message) {
    if (error_.empty()) error_ = message + " at byte offset " + std::to_string(pos_);
}

std::uint64_t ByteReader::get(std::size_t n, const char* what) {
    if (!ok()) return 0;
    if (remaining() < n) {
        fail(std::string("truncated ") + what + " (need " + std::to_string(n) + " bytes, have " +
             std::to_string(remaining()) + ")");
        return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
        v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
    }
    pos_ += n;
    return v;
}

std::string ByteReader::str(const char* what, std::size_t max_bytes) {
    const std::uint32_t len = u32(what);
    if (!ok()) return {};
    if (len > max_bytes) {
        fail(std::string(what) + " length " + std::to_string(len) + " exceeds limit " +
             std::to_string(max_bytes));
        return {};
    }
    if (remaining() < len) {
        fail(std::string("truncated ") + what + " (length " + std::to_string(len) + ", have " +
             std::to_string(remaining()) + ")");
        return {};
    }
    std::string s(in_.substr(pos_, len));
    pos_ += len;
    return s;
}

}  // namespace pgfence::net
