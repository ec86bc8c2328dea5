// Internal to lock/: the byte-level primitives shared by the command and the
// snapshot codecs. Integers are little-endian fixed width; a string is a u32
// byte length followed by the bytes.
//
// Reader never reads past its input and never allocates more than a length it
// has already checked against both a limit and the bytes remaining. The first
// failure is kept (later ones are ignored) and names the field and the byte
// offset where it happened.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pgfence::lock::wire {

constexpr std::size_t kU8Bytes = 1;
constexpr std::size_t kU32Bytes = 4;
constexpr std::size_t kU64Bytes = 8;

void put_u8(std::string& out, std::uint8_t value);
void put_u32(std::string& out, std::uint32_t value);
void put_u64(std::string& out, std::uint64_t value);
// Throws std::length_error if `bytes` is longer than `max_bytes` (`field` names it).
void put_string(std::string& out, std::string_view bytes, std::size_t max_bytes,
                std::string_view field);

class Reader {
  public:
    // `what` prefixes every error, e.g. "command" or "snapshot".
    Reader(std::string_view bytes, std::string_view what) : bytes_(bytes), what_(what) {}

    std::optional<std::uint8_t> u8(std::string_view field);
    std::optional<std::uint32_t> u32(std::string_view field);
    std::optional<std::uint64_t> u64(std::string_view field);
    // A u32 length (checked against max_bytes and the bytes remaining) then the bytes.
    std::optional<std::string> string(std::string_view field, std::size_t max_bytes);

    // Fails unless every byte has been consumed.
    bool expect_end();
    // Records `problem` (first failure wins) at `offset`; always returns false.
    bool fail_at(std::size_t offset, std::string_view problem);

    std::size_t offset() const { return offset_; }
    std::size_t remaining() const { return bytes_.size() - offset_; }
    bool failed() const { return !error_.empty(); }
    const std::string& error() const { return error_; }

  private:
    // Consumes `count` bytes or fails naming `field`.
    std::optional<std::string_view> take(std::size_t count, std::string_view field);
    std::uint64_t little_endian(std::string_view raw) const;

    std::string_view bytes_;
    std::string_view what_;
    std::size_t offset_ = 0;
    std::string error_;
};

}  // namespace pgfence::lock::wire
