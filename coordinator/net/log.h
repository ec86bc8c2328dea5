// One-line key=value logging to stderr:
//   ts=2024-01-02T03:04:05.678Z level=info event=grant key=report:7 token=41 owner=a
// Values containing spaces, quotes or '=' are double-quoted with escapes.
// Threading: each line is written with one fwrite under a mutex (the writer
// thread logs too).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace pgfence::net {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Parses "debug|info|warn|error"; false when unknown.
bool parse_log_level(std::string_view text, LogLevel& out);
void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);

using LogField = std::pair<std::string_view, std::string>;

void log_event(LogLevel level, std::string_view event, std::initializer_list<LogField> fields);

inline std::string log_value(std::uint64_t v) { return std::to_string(v); }

}  // namespace pgfence::net
