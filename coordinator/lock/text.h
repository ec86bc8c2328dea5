// A lock's short, often empty string field (owner, user, value; lock/table.h)
// kept in one pointer: 8 bytes where a std::string takes 32, and nothing
// else while empty (the common case: most locks have no user and no value,
// many no owner). A non-empty one is one heap block: its u32 length, then
// its bytes. The trade-off: a short one (up to 15 bytes, which a std::string
// keeps inside itself) now costs the pointer and a small allocation (some
// 32 bytes with malloc's header) where a std::string cost nothing beyond its
// 32 bytes (docs/decisions.md; bench_lock_memory's OWNER_BYTES measures it).
// Moved from, it is empty. Reads as a std::string_view. Pure: std only.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace pgfence::lock {

class Text {
public:
    Text() = default;
    Text(std::string_view s) { assign(s); }  // NOLINT(google-explicit-constructor): reads as a string
    Text(const char* s) : Text(std::string_view(s)) {}  // NOLINT(google-explicit-constructor)
    Text(const std::string& s) : Text(std::string_view(s)) {}  // NOLINT(google-explicit-constructor)
    Text(const Text& o) : Text(o.view()) {}
    Text(Text&& o) noexcept : block_(std::exchange(o.block_, nullptr)) {}
    Text& operator=(const Text& o) {
        if (this != &o) *this = Text(o);
        return *this;
    }
    Text& operator=(Text&& o) noexcept {
        if (this != &o) {
            delete[] block_;
            block_ = std::exchange(o.block_, nullptr);
        }
        return *this;
    }
    ~Text() { delete[] block_; }

    std::string_view view() const {
        if (block_ == nullptr) return {};
        std::uint32_t n = 0;
        std::memcpy(&n, block_, sizeof n);
        return {block_ + sizeof n, n};
    }
    operator std::string_view() const { return view(); }  // NOLINT(google-explicit-constructor)
    std::string str() const { return std::string(view()); }
    bool empty() const { return block_ == nullptr; }
    std::size_t size() const { return view().size(); }

    friend bool operator==(const Text& a, const Text& b) { return a.view() == b.view(); }
    friend bool operator==(const Text& a, std::string_view b) { return a.view() == b; }
    friend bool operator==(const Text& a, const std::string& b) { return a.view() == b; }
    friend bool operator==(const Text& a, const char* b) { return a.view() == b; }
    friend auto operator<=>(const Text& a, const Text& b) { return a.view() <=> b.view(); }

private:
    void assign(std::string_view s) {
        if (s.empty()) return;
        // Every field is far below 4 GiB (commands.h); a longer one is a bug.
        if (s.size() > UINT32_MAX) throw std::length_error("lock::Text: longer than 4 GiB");
        const auto n = static_cast<std::uint32_t>(s.size());
        block_ = new char[sizeof n + s.size()];
        std::memcpy(block_, &n, sizeof n);
        std::memcpy(block_ + sizeof n, s.data(), s.size());
    }
    char* block_ = nullptr;
};

inline std::ostream& operator<<(std::ostream& os, const Text& t) { return os << t.view(); }
inline std::string operator+(const std::string& a, const Text& b) { return a + std::string(b.view()); }
inline std::string operator+(const Text& a, const std::string& b) { return std::string(a.view()) + b; }
inline std::string operator+(const char* a, const Text& b) { return a + std::string(b.view()); }

}  // namespace pgfence::lock
