#include "worker/event_log.h"

#include <cerrno>
#include <cstring>

namespace pgfence::worker {
namespace {

long long ns(std::chrono::steady_clock::time_point t) {
    if (t == std::chrono::steady_clock::time_point{}) return 0;
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Keys may hold commas or quotes: quote the field CSV-style when needed.
std::string csv(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

}  // namespace

EventLog::~EventLog() {
    if (file_) std::fclose(file_);
}

std::string EventLog::open(const std::string& path, const std::string& worker) {
    worker_ = worker;
    if (path.empty()) return {};
    file_ = std::fopen(path.c_str(), "a");
    if (!file_) return "cannot open --log '" + path + "': " + std::strerror(errno);
    return {};
}

void EventLog::write(const Event& e) {
    if (!file_) return;
    std::fprintf(file_, "%s,%s,%s,%llu,%lld,%lld,%s,%s,%lld\n", csv(worker_).c_str(),
                 e.event.c_str(), csv(e.key).c_str(), static_cast<unsigned long long>(e.token),
                 ns(e.sent_at), ns(e.acked_at), e.path.c_str(), e.outcome.c_str(),
                 static_cast<long long>(e.value));
    std::fflush(file_);
}

}  // namespace pgfence::worker
