#include "client/duration.h"

#include <array>
#include <cstdint>

namespace pgfence::client {
namespace {

struct Unit {
    std::string_view suffix;
    std::int64_t ms;
};

// Longest suffixes first so "ms" is not read as "m" followed by junk.
constexpr std::array<Unit, 4> kUnits{{{"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}}};

DurationParse fail(std::string_view text, std::string_view why) {
    return {std::nullopt, "invalid duration '" + std::string(text) + "': " + std::string(why) +
                              " (use an integer and a unit: 500ms, 10s, 2m, 1h)"};
}

}  // namespace

DurationParse parse_duration(std::string_view text) {
    if (text.empty()) return fail(text, "empty");
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0) return fail(text, "must start with a digit");
    if (digits > 12) return fail(text, "number too large");
    const std::string_view unit = text.substr(digits);
    if (unit.empty()) return fail(text, "missing unit");
    std::int64_t number = 0;
    for (std::size_t i = 0; i < digits; ++i) number = number * 10 + (text[i] - '0');
    for (const Unit& u : kUnits) {
        if (unit != u.suffix) continue;
        if (number > kMaxDuration.count() / u.ms) return fail(text, "longer than 24 days");
        return {std::chrono::milliseconds(number * u.ms), {}};
    }
    return fail(text, "unknown unit '" + std::string(unit) + "'");
}

std::string format_duration(std::chrono::milliseconds value) {
    const std::int64_t ms = value.count();
    if (ms == 0) return "0s";
    for (auto it = kUnits.rbegin(); it != kUnits.rend(); ++it) {
        if (ms % it->ms == 0) return std::to_string(ms / it->ms) + std::string(it->suffix);
    }
    return std::to_string(ms) + "ms";
}

}  // namespace pgfence::client
