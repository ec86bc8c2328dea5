// Durations as users type them: "500ms", "10s", "2m", "1h".
//
// Strict: one non-negative integer followed by exactly one unit, nothing else
// (no spaces, no fractions, no sign, no compound "1m30s"). Errors name the
// bad value and list the accepted forms.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace pgfence::client {

// Upper bound on any parsed duration (about 24 days); larger values are errors
// rather than silent overflow.
constexpr std::chrono::milliseconds kMaxDuration{std::chrono::hours(24 * 24)};

struct DurationParse {
    std::optional<std::chrono::milliseconds> value;
    std::string error;  // set when value is empty
};

// Parses "<digits><unit>" with unit one of ms, s, m, h.
DurationParse parse_duration(std::string_view text);

// Formats as the largest unit that represents the value exactly ("1500ms", "10s", "2m").
std::string format_duration(std::chrono::milliseconds value);

}  // namespace pgfence::client
