#include "log/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace pgfence::log {

namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mutex;
std::string g_pending;  // lines not yet written (guarded by g_mutex)

const char* level_name(LogLevel level) {
    switch (level) {
        case LogLevel::kDebug:
            return "debug";
        case LogLevel::kInfo:
            return "info";
        case LogLevel::kWarn:
            return "warn";
        case LogLevel::kError:
            return "error";
    }
    return "info";
}

void append_value(std::string& line, std::string_view v) {
    const bool quote = v.empty() || v.find_first_of(" \"=\t\n\r\\") != std::string_view::npos;
    if (!quote) {
        line.append(v);
        return;
    }
    line.push_back('"');
    for (char c : v) {
        if (c == '"' || c == '\\') line.push_back('\\');
        if (c == '\n') {
            line.append("\\n");
            continue;
        }
        if (static_cast<unsigned char>(c) < 0x20) {
            line.push_back('?');
            continue;
        }
        line.push_back(c);
    }
    line.push_back('"');
}

// Appends the wall-clock time as 2024-01-02T03:04:05.678Z. The part up to the
// seconds is formatted once per second (per thread).
void append_timestamp(std::string& line) {
    thread_local std::time_t cached_secs = -1;
    thread_local char cached[96];
    const auto now = std::chrono::system_clock::now();
    const std::time_t secs = std::chrono::system_clock::to_time_t(now);
    const int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
        1000);
    if (secs != cached_secs) {
        std::tm tm{};
        gmtime_r(&secs, &tm);
        std::snprintf(cached, sizeof cached, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        cached_secs = secs;
    }
    line.append(cached);
    const char tail[] = {'.', static_cast<char>('0' + ms / 100),
                         static_cast<char>('0' + ms / 10 % 10), static_cast<char>('0' + ms % 10),
                         'Z'};
    line.append(tail, sizeof tail);
}

// Caller holds g_mutex.
void write_pending() {
    std::fwrite(g_pending.data(), 1, g_pending.size(), stderr);
    std::fflush(stderr);
    g_pending.clear();
}

}  // namespace

bool parse_log_level(std::string_view text, LogLevel& out) {
    if (text == "debug")
        out = LogLevel::kDebug;
    else if (text == "info")
        out = LogLevel::kInfo;
    else if (text == "warn")
        out = LogLevel::kWarn;
    else if (text == "error")
        out = LogLevel::kError;
    else
        return false;
    return true;
}

void set_log_level(LogLevel level) {
    g_level.store(static_cast<int>(level));
}

bool log_enabled(LogLevel level) {
    return static_cast<int>(level) >= g_level.load();
}

void log_event(LogLevel level, std::string_view event, std::initializer_list<LogField> fields) {
    log_event(level, event, fields.begin(), fields.size());
}

void log_event(LogLevel level, std::string_view event, const LogField* fields, std::size_t count) {
    if (!log_enabled(level)) return;
    std::lock_guard<std::mutex> guard(g_mutex);
    std::string& line = g_pending;  // formatted in place: no line copy
    line.append("ts=");
    append_timestamp(line);
    line.append(" level=").append(level_name(level)).append(" event=").append(event);
    for (std::size_t i = 0; i < count; ++i) {
        const auto& [k, v] = fields[i];
        line.push_back(' ');
        line.append(k);
        line.push_back('=');
        append_value(line, v);
    }
    line.push_back('\n');
    if (level >= LogLevel::kWarn || g_pending.size() >= kLogBufferBytes) write_pending();
}

void Limiter::log(LogLevel level, std::string_view event, std::initializer_list<LogField> fields) {
    if (!log_enabled(level)) return;
    log_at(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
               .count(),
           level, event, fields);
}

void Limiter::log_at(std::int64_t now_ns, LogLevel level, std::string_view event,
                     std::initializer_list<LogField> fields) {
    if (!log_enabled(level)) return;
    if (window_start_ns_ < 0 || now_ns - window_start_ns_ >= 1'000'000'000) {
        window_start_ns_ = now_ns;
        in_window_ = 0;
    }
    if (in_window_ >= per_second_) {
        ++dropped_;
        return;
    }
    ++in_window_;
    constexpr std::size_t kMaxFields = 15;
    LogField all[kMaxFields + 1];
    std::size_t n = 0;
    for (const LogField& f : fields) {
        if (n < kMaxFields) all[n++] = f;
    }
    const std::string dropped = std::to_string(dropped_);
    if (dropped_ != 0) all[n++] = {"suppressed_before", dropped};
    dropped_ = 0;
    log_event(level, event, all, n);
}

void log_flush() {
    std::lock_guard<std::mutex> guard(g_mutex);
    if (!g_pending.empty()) write_pending();
}

}  // namespace pgfence::log
