// Little-endian integer encoding for the storage formats, and a bounds-checked
// reader that never reads past its input (every decoder is fed untrusted bytes:
// a file may be torn, bit-flipped or hostile).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pgfence::storage {

inline void put_u8(std::string& out, std::uint8_t v) {
    out.push_back(static_cast<char>(v));
}

inline void put_u32(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

inline void put_u64(std::string& out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

// Writes v at out[pos..pos+4) (used to fill in a length or CRC after the fact).
inline void poke_u32(std::string& out, std::size_t pos, std::uint32_t v) {
    for (std::size_t i = 0; i < 4; ++i) out[pos + i] = static_cast<char>((v >> (8 * i)) & 0xFFu);
}

inline std::uint32_t peek_u32(std::string_view in, std::size_t pos) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) {
        v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
    }
    return v;
}

inline std::uint64_t peek_u64(std::string_view in, std::size_t pos) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) {
        v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
    }
    return v;
}

// Sequential reader; every get_* returns false (and reads nothing) when fewer
// bytes remain than it needs.
class ByteReader {
  public:
    explicit ByteReader(std::string_view in) : in_(in) {}

    bool get_u8(std::uint8_t& v) {
        if (remaining() < 1) return false;
        v = static_cast<std::uint8_t>(in_[pos_]);
        pos_ += 1;
        return true;
    }
    bool get_u32(std::uint32_t& v) {
        if (remaining() < 4) return false;
        v = peek_u32(in_, pos_);
        pos_ += 4;
        return true;
    }
    bool get_u64(std::uint64_t& v) {
        if (remaining() < 8) return false;
        v = peek_u64(in_, pos_);
        pos_ += 8;
        return true;
    }
    bool get_bytes(std::size_t n, std::string_view& v) {
        if (remaining() < n) return false;
        v = in_.substr(pos_, n);
        pos_ += n;
        return true;
    }
    std::size_t remaining() const { return in_.size() - pos_; }
    std::size_t position() const { return pos_; }

  private:
    std::string_view in_;
    std::size_t pos_ = 0;
};

}  // namespace pgfence::storage
