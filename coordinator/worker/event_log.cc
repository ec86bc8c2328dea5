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
    std::string line = csv(worker_) + ',' + e.event + ',' + csv(e.key) + ',' +
                       std::to_string(e.token) + ',' + std::to_string(ns(e.sent_at)) + ',' +
                       std::to_string(ns(e.acked_at)) + ',' + e.path + ',' + e.outcome + ',' +
                       std::to_string(e.value) + '\n';
    std::lock_guard lock(mu_);
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);
}

}  // namespace pgfence::worker
