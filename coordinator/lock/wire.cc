#include "lock/wire.h"

#include <limits>
#include <stdexcept>

namespace pgfence::lock::wire {

namespace {

void put_le(std::string& out, std::uint64_t value, std::size_t width) {
    for (std::size_t i = 0; i < width; ++i) {
        out.push_back(static_cast<char>((value >> (8 * i)) & 0xffu));
    }
}

}  // namespace

void put_u8(std::string& out, std::uint8_t value) {
    put_le(out, value, kU8Bytes);
}
void put_u32(std::string& out, std::uint32_t value) {
    put_le(out, value, kU32Bytes);
}
void put_u64(std::string& out, std::uint64_t value) {
    put_le(out, value, kU64Bytes);
}

void put_string(std::string& out, std::string_view bytes, std::size_t max_bytes,
                std::string_view field) {
    if (bytes.size() > max_bytes || bytes.size() > std::numeric_limits<std::uint32_t>::max()) {
        throw std::length_error(std::string(field) + " is " + std::to_string(bytes.size()) +
                                " bytes, over the limit of " + std::to_string(max_bytes));
    }
    put_u32(out, static_cast<std::uint32_t>(bytes.size()));
    out.append(bytes);
}

bool Reader::fail_at(std::size_t offset, std::string_view problem) {
    if (error_.empty()) {
        error_ = std::string(what_) + ": " + std::string(problem) + " (at byte offset " +
                 std::to_string(offset) + ")";
    }
    return false;
}

std::optional<std::string_view> Reader::take(std::size_t count, std::string_view field) {
    if (failed()) return std::nullopt;
    if (count > remaining()) {
        fail_at(offset_, std::string(field) + " needs " + std::to_string(count) +
                             " bytes but only " + std::to_string(remaining()) + " remain");
        return std::nullopt;
    }
    std::string_view raw = bytes_.substr(offset_, count);
    offset_ += count;
    return raw;
}

std::uint64_t Reader::little_endian(std::string_view raw) const {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < raw.size(); ++i) {
        value |= static_cast<std::uint64_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
    }
    return value;
}

std::optional<std::uint8_t> Reader::u8(std::string_view field) {
    auto raw = take(kU8Bytes, field);
    if (!raw) return std::nullopt;
    return static_cast<std::uint8_t>(little_endian(*raw));
}

std::optional<std::uint32_t> Reader::u32(std::string_view field) {
    auto raw = take(kU32Bytes, field);
    if (!raw) return std::nullopt;
    return static_cast<std::uint32_t>(little_endian(*raw));
}

std::optional<std::uint64_t> Reader::u64(std::string_view field) {
    auto raw = take(kU64Bytes, field);
    if (!raw) return std::nullopt;
    return little_endian(*raw);
}

std::optional<std::string> Reader::string(std::string_view field, std::size_t max_bytes) {
    const std::size_t length_offset = offset_;
    auto length = u32(std::string(field) + " length");
    if (!length) return std::nullopt;
    if (*length > max_bytes) {
        fail_at(length_offset, std::string(field) + " length " + std::to_string(*length) +
                                   " exceeds the limit of " + std::to_string(max_bytes) + " bytes");
        return std::nullopt;
    }
    auto raw = take(*length, field);  // checks the bytes remaining before anything is copied
    if (!raw) return std::nullopt;
    return std::string(*raw);
}

bool Reader::expect_end() {
    if (failed()) return false;
    if (remaining() != 0) {
        return fail_at(offset_, std::to_string(remaining()) + " trailing bytes after the end");
    }
    return true;
}

}  // namespace pgfence::lock::wire
