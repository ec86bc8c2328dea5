// One-line key=value logging to stderr:
//   ts=2024-01-02T03:04:05.678Z level=info event=grant key=report:7 token=41 owner=a
// Values containing spaces, quotes or '=' are double-quoted with escapes.
// Buffering: debug and info lines are collected and written by log_flush()
// (the member calls it at the end of every loop event, so one write(2) carries
// all the lines of a batch), or once kLogBufferBytes are pending. A warn or
// error line is written at once, together with everything logged before it.
// Threading: the buffer is guarded by a mutex (the writer thread logs too).
//
// A module of its own under net/ and server/, which both log; not pure (a
// mutex, the wall clock, stderr), so the pure layers report events instead
// (member::Effects::logs) and the server writes them here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace pgfence::log {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Parses "debug|info|warn|error"; false when unknown.
bool parse_log_level(std::string_view text, LogLevel& out);
void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);

// Values are views: a temporary (log_value(...)) lives until the call returns.
using LogField = std::pair<std::string_view, std::string_view>;

void log_event(LogLevel level, std::string_view event, std::initializer_list<LogField> fields);
void log_event(LogLevel level, std::string_view event, const LogField* fields, std::size_t count);

// A limit on lines whoever can reach a port can cause (refused handshakes,
// denied requests): at most `per_second` lines in each one-second window; the
// rest are dropped and counted, and the next line let through carries
// `suppressed_before=N`. Not synchronised: one limiter per thread.
class Limiter {
public:
    explicit Limiter(int per_second) : per_second_(per_second) {}
    // Logs the line unless this window's lines are used up (at most 15 fields).
    void log(LogLevel level, std::string_view event, std::initializer_list<LogField> fields);
    // The same at a given steady-clock time (ns), which must not go back.
    void log_at(std::int64_t now_ns, LogLevel level, std::string_view event, std::initializer_list<LogField> fields);

private:
    int per_second_;
    std::int64_t window_start_ns_ = -1;  // steady clock; -1: no line yet
    int in_window_ = 0;
    std::uint64_t dropped_ = 0;
};

// Writes out the buffered lines (cheap when there are none).
void log_flush();

constexpr std::size_t kLogBufferBytes = 16u << 10;

inline std::string log_value(std::uint64_t v) { return std::to_string(v); }

}  // namespace pgfence::log
