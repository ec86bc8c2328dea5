// The byte codec under every binary format of pgfence: the lock commands and
// snapshot (lock/), the write-ahead log and metadata files (storage/), the
// peer frames, member info and raft messages (net/). Integers are little-endian
// fixed width (u8, u32, u64); a string is a u32 byte length then the bytes.
//
// Why a module of its own, at the bottom: lock/ is pure (std only) and sits
// below storage/ and net/, so the one codec all three use must sit below
// lock/. It is not inside lock/ because it knows nothing of locks: storage/
// and net/ would depend on the lock module only for bytes. Pure, std only,
// header-only: every function is inline, so the hot paths (raft messages, WAL
// records) pay no call per field.
//
// Reader never reads past its input and never allocates on success: string()
// and bytes() return views into the input, after checking the length against
// the limit and the bytes remaining. The first failure is kept; every later
// read returns 0 (or an empty view) and consumes nothing, so a decoder can
// read a whole record and check ok() once, and offset() stays where the
// failure was. Each format words its own errors, as its operators see them in
// logs and startup errors: a Reader given a Wording turns its first failure
// into error(); without one it records only that, and where, it failed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pgfence::codec {

inline constexpr std::size_t kU8Bytes = 1;
inline constexpr std::size_t kU32Bytes = 4;
inline constexpr std::size_t kU64Bytes = 8;

// ---- writing ---------------------------------------------------------------

namespace detail {
template <std::size_t Width>
inline void put_le(std::string& out, std::uint64_t value) {
    char bytes[Width];
    for (std::size_t i = 0; i < Width; ++i) {
        bytes[i] = static_cast<char>((value >> (8 * i)) & 0xFFu);
    }
    out.append(bytes, Width);
}
}  // namespace detail

inline void put_u8(std::string& out, std::uint8_t value) {
    out.push_back(static_cast<char>(value));
}
inline void put_u32(std::string& out, std::uint32_t value) {
    detail::put_le<kU32Bytes>(out, value);
}
inline void put_u64(std::string& out, std::uint64_t value) {
    detail::put_le<kU64Bytes>(out, value);
}

// A u32 length, then the bytes. The caller has bounded `bytes` to its
// format's limit (which is below 4 GiB).
inline void put_string(std::string& out, std::string_view bytes) {
    put_u32(out, static_cast<std::uint32_t>(bytes.size()));
    out.append(bytes);
}

// put_string for a caller that has not bounded `bytes`: throws
// std::length_error naming `field` when it is longer than `max_bytes`.
inline void put_string(std::string& out, std::string_view bytes, std::size_t max_bytes,
                       std::string_view field) {
    if (bytes.size() > max_bytes || bytes.size() > std::numeric_limits<std::uint32_t>::max()) {
        throw std::length_error(std::string(field) + " is " + std::to_string(bytes.size()) +
                                " bytes, over the limit of " + std::to_string(max_bytes));
    }
    put_string(out, bytes);
}

// Writes `value` over out[pos, pos + 4): a length or CRC filled in after the
// bytes it covers. The caller has written those 4 bytes already.
inline void poke_u32(std::string& out, std::size_t pos, std::uint32_t value) {
    for (std::size_t i = 0; i < kU32Bytes; ++i) {
        out[pos + i] = static_cast<char>((value >> (8 * i)) & 0xFFu);
    }
}

// ---- reading at a known position (the caller has checked the bounds) -------

namespace detail {
template <std::size_t Width>
inline std::uint64_t load_le(std::string_view in, std::size_t pos) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < Width; ++i) {
        value |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
    }
    return value;
}
}  // namespace detail

inline std::uint32_t peek_u32(std::string_view in, std::size_t pos) {
    return static_cast<std::uint32_t>(detail::load_le<kU32Bytes>(in, pos));
}
inline std::uint64_t peek_u64(std::string_view in, std::size_t pos) {
    return detail::load_le<kU64Bytes>(in, pos);
}

// ---- reading untrusted bytes in sequence -----------------------------------

// A Reader's first failure, for its Wording to put into words. `field` is the
// name the decoder gave the read (kProblem: the decoder's own complaint).
struct ReadFailure {
    enum class Kind : std::uint8_t {
        kShort,        // a fixed-width field, or a string's u32 length, runs past the end
        kShortString,  // the bytes of a string (or of bytes()) run past the end
        kTooLong,      // a string's length is over its limit
        kProblem,      // fail() / fail_at(): the decoder found the value wrong
    };
    Kind kind = Kind::kProblem;
    std::string_view field;
    bool length_prefix = false;  // kShort: it was the u32 length of string `field`
    std::uint64_t size = 0;      // kShort: bytes needed; kShortString, kTooLong: the length read
    std::uint64_t limit = 0;     // kShort, kShortString: bytes remaining; kTooLong: the limit
    std::size_t offset = 0;      // where the read began (kTooLong: where its length prefix began)
};

// Turns a failure into the message error() returns; `context` is what the
// Reader was given (e.g. which record is being decoded). Called once, at the
// failure, so the views in `failure` need live only for the call.
using Wording = std::string (*)(const ReadFailure& failure, std::string_view context);

class Reader {
  public:
    explicit Reader(std::string_view in, Wording wording = nullptr, std::string_view context = {})
        : in_(in), wording_(wording), context_(context) {}

    std::uint8_t u8(std::string_view field = {}) {
        return static_cast<std::uint8_t>(fixed<kU8Bytes>(field));
    }
    std::uint32_t u32(std::string_view field = {}) {
        return static_cast<std::uint32_t>(fixed<kU32Bytes>(field));
    }
    std::uint64_t u64(std::string_view field = {}) { return fixed<kU64Bytes>(field); }

    // A u32 length (at most `max_bytes`), then that many bytes.
    std::string_view string(std::string_view field, std::size_t max_bytes) {
        const std::size_t length_at = pos_;
        const std::uint64_t length = fixed<kU32Bytes>(field, /*length_prefix=*/true);
        if (failed_) return {};
        if (length > max_bytes) {
            record({ReadFailure::Kind::kTooLong, field, false, length, max_bytes, length_at});
            return {};
        }
        return take(length, field);
    }

    // The next `count` bytes.
    std::string_view bytes(std::size_t count, std::string_view field = {}) {
        if (failed_) return {};
        return take(count, field);
    }

    // Records the decoder's own complaint about what it read (first failure wins).
    void fail(std::string_view problem) { fail_at(pos_, problem); }
    void fail_at(std::size_t offset, std::string_view problem) {
        record({ReadFailure::Kind::kProblem, problem, false, 0, 0, offset});
    }
    // Fails unless every byte has been read: "N trailing bytes after <after>".
    bool expect_end(std::string_view after) {
        if (!failed_ && remaining() != 0) {
            fail(std::to_string(remaining()) + " trailing bytes after " + std::string(after));
        }
        return !failed_;
    }

    bool ok() const { return !failed_; }
    // The first failure in the Wording's words; empty while ok() or without a Wording.
    const std::string& error() const { return error_; }
    std::size_t offset() const { return pos_; }
    std::size_t remaining() const { return in_.size() - pos_; }

  private:
    template <std::size_t Width>
    std::uint64_t fixed(std::string_view field, bool length_prefix = false) {
        if (failed_ || remaining() < Width) [[unlikely]] {
            record({ReadFailure::Kind::kShort, field, length_prefix, Width, remaining(), pos_});
            return 0;
        }
        const std::uint64_t value = detail::load_le<Width>(in_, pos_);
        pos_ += Width;
        return value;
    }

    std::string_view take(std::uint64_t count, std::string_view field) {
        if (count > remaining()) {
            record({ReadFailure::Kind::kShortString, field, false, count, remaining(), pos_});
            return {};
        }
        const std::string_view out = in_.substr(pos_, count);
        pos_ += count;
        return out;
    }

    void record(const ReadFailure& failure) {
        if (failed_) return;
        failed_ = true;
        if (wording_ != nullptr) error_ = wording_(failure, context_);
    }

    std::string_view in_;
    std::size_t pos_ = 0;
    bool failed_ = false;
    Wording wording_;
    std::string_view context_;
    std::string error_;
};

}  // namespace pgfence::codec
