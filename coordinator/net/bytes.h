// Little-endian fixed-width byte writing and bounds-checked reading for the
// wire formats in net/ (frames, raft messages, member info).
//
// Pure, std only. ByteReader never reads past its input: every read checks the
// remaining length first and records the first failure (with its offset) so a
// decoder can bail out with a message instead of crashing on hostile bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pgfence::net {

class ByteWriter {
public:
    explicit ByteWriter(std::string& out) : out_(out) {}
    void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
    void u32(std::uint32_t v) { put(v, 4); }
    void u64(std::uint64_t v) { put(v, 8); }
    // u32 length, then the bytes. Callers bound `s` beforehand.
    void str(std::string_view s) {
        u32(static_cast<std::uint32_t>(s.size()));
        out_.append(s);
    }

private:
    void put(std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    std::string& out_;
};

class ByteReader {
public:
    explicit ByteReader(std::string_view in) : in_(in) {}

    bool ok() const { return error_.empty(); }
    const std::string& error() const { return error_; }
    std::size_t offset() const { return pos_; }
    std::size_t remaining() const { return in_.size() - pos_; }

    std::uint8_t u8(const char* what) { return static_cast<std::uint8_t>(get(1, what)); }
    std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(get(4, what)); }
    std::uint64_t u64(const char* what) { return get(8, what); }

    // A u32-length-prefixed string of at most `max_bytes` bytes.
    std::string str(const char* what, std::size_t max_bytes);

    // Marks the input bad (keeps the first failure).
    void fail(const std::string& message);

private:
    std::uint64_t get(std::size_t n, const char* what);
    std::string_view in_;
    std::size_t pos_ = 0;
    std::string error_;
};

}  // namespace pgfence::net
