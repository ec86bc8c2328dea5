#include "server/watchers.h"

#include <algorithm>

#include "net/json_text.h"

namespace pgfence::server {

namespace {

constexpr std::chrono::seconds kProgressEvery{1};
constexpr std::chrono::seconds kIdleLineAfter{10};

std::string error_line(std::string_view error, std::string_view message) {
    std::string out = "{\"type\":\"error\",\"error\":";
    net::append_json_string(out, error);
    out.append(",\"message\":");
    net::append_json_string(out, message);
    out.append("}\n");
    return out;
}

std::string revision_line(const char* type, raft::Index revision) {
    return std::string("{\"type\":\"") + type + "\",\"revision\":" + std::to_string(revision);
}

bool has_prefix(std::string_view key, const std::vector<std::string>& prefixes) {
    for (const std::string& p : prefixes) {
        if (key.starts_with(p)) return true;
    }
    return false;
}

}  // namespace

const char* watch_close_name(WatchClose reason) {
    switch (reason) {
        case WatchClose::kTooSlow:
            return "watcher_too_slow";
        case WatchClose::kClientGone:
            return "client_gone";
        case WatchClose::kShuttingDown:
            return "shutting_down";
        case WatchClose::kSnapshotInstalled:
            return "snapshot_installed";
    }
    return "unknown";
}

// An observe's "leader" line: `key`'s lock at `revision` (token 0: not held).
std::string state_line(raft::Index revision, const std::string& key, const lock::Lock* held) {
    std::string out = revision_line("leader", revision) + ",\"key\":";
    net::append_json_string(out, key);
    out.append(",\"token\":").append(std::to_string(held != nullptr ? held->token : 0));
    if (held != nullptr) {
        out.append(",\"owner\":");
        net::append_json_string(out, held->owner);
        out.append(",\"value\":");
        net::append_json_string(out, held->value);
    }
    out.append("}\n");
    return out;
}

std::string watch_event_line(const member::WatchEvent& e) {
    std::string out;
    out.reserve(96 + e.key.size() + e.owner.size() + e.value.size());
    out.append("{\"type\":\"");
    switch (e.type) {
        case member::WatchEventType::kGranted:
            out.append("granted");
            break;
        case member::WatchEventType::kReleased:
            out.append("released");
            break;
        case member::WatchEventType::kExpired:
            out.append("expired");
            break;
        case member::WatchEventType::kProclaimed:
            out.append("proclaimed");
            break;
    }
    out.append("\",\"revision\":").append(std::to_string(e.revision)).append(",\"key\":");
    net::append_json_string(out, e.key);
    out.append(",\"token\":").append(std::to_string(e.token));
    if (e.type == member::WatchEventType::kGranted) {
        out.append(",\"owner\":");
        net::append_json_string(out, e.owner);
        out.append(",\"lease_ms\":").append(std::to_string(e.lease_ms));
        if (!e.value.empty()) {
            out.append(",\"value\":");
            net::append_json_string(out, e.value);
        }
    } else if (e.type == member::WatchEventType::kProclaimed) {
        out.append(",\"value\":");
        net::append_json_string(out, e.value);
    } else if (e.type == member::WatchEventType::kExpired) {
        out.append(e.existed ? ",\"existed\":true" : ",\"existed\":false");
    }
    out.append("}\n");
    return out;
}

Watchers::Watchers(const member::WatchHistory& history, WatchLimits limits, std::uint64_t member_id)
    : history_(history),
      limits_(limits),
      member_id_(member_id),
      published_seq_(history.end_seq()),
      resets_seen_(history.resets()) {}

Watchers::~Watchers() { *alive_ = false; }

void Watchers::open(std::shared_ptr<net::HttpStream> stream, const WatchSpec& spec, raft::Index applied,
                    const lock::Lock* held) {
    publish();  // the marks are current: every event before published_seq_ went to the live watches
    const Id id = next_id_++;
    Watcher& w = watchers_[id];
    w.stream = std::move(stream);
    w.key = spec.key;
    w.prefixes = spec.prefixes;
    w.progress = spec.progress;
    w.min_revision = spec.from_revision ? *spec.from_revision : applied + 1;
    w.cursor = std::min(spec.from_revision ? history_.seq_of(*spec.from_revision) : history_.end_seq(), published_seq_);
    w.catching_up = w.cursor < published_seq_;
    w.sent_revision = applied;
    w.last_line = w.last_progress = Clock::now();
    if (w.key) {
        by_key_[*w.key].push_back(id);
    } else {
        by_prefix_[w.prefixes].push_back(id);
    }
    w.stream->on_close([alive = alive_, this, id] {
        if (!*alive || watchers_.count(id) == 0) return;
        ++closed_[static_cast<std::size_t>(WatchClose::kClientGone)];
        forget(id);
    });
    w.stream->write(revision_line("start", applied) + ",\"member\":" + std::to_string(member_id_) + "}\n");
    if (spec.state && spec.key) w.stream->write(state_line(applied, *spec.key, held));
    if (w.catching_up) catch_up(id);
}

bool Watchers::matches(const Watcher& w, const member::WatchEvent& e) const {
    if (e.revision < w.min_revision) return false;
    return w.key ? e.key == *w.key : has_prefix(e.key, w.prefixes);
}

bool Watchers::deliver(Id id, Watcher& w, const std::string& line, raft::Index revision) {
    if (w.stream->unwritten_bytes() + line.size() > limits_.buffer_bytes) {
        close(id, WatchClose::kTooSlow,
              "the client did not read the stream fast enough: more than " + std::to_string(limits_.buffer_bytes) +
                  " bytes were waiting (--watch-buffer-bytes); resume from the last revision seen");
        return false;
    }
    w.stream->write(line);
    ++events_sent_;
    w.sent_revision = std::max(w.sent_revision, revision);
    w.last_line = Clock::now();
    return true;
}

// Reads the history from the watch's cursor up to what was published, as
// long as its stream takes it; goes on when the stream drained.
void Watchers::catch_up(Id id) {
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return;
    Watcher& w = it->second;
    if (w.cursor < history_.begin_seq()) {
        close(id, WatchClose::kTooSlow,
              "the client did not read the stream fast enough: this member's history (--watch-history-events, "
              "--watch-history-bytes) dropped events it had not sent; resume from the last revision seen");
        return;
    }
    while (w.cursor < published_seq_) {
        const member::WatchEvent& e = history_.at(w.cursor);
        if (matches(w, e)) {
            std::string line = watch_event_line(e);
            const std::size_t waiting = w.stream->unwritten_bytes();
            if (waiting > 0 && waiting + line.size() > limits_.buffer_bytes) {
                w.stream->on_drained([alive = alive_, this, id] {
                    if (*alive) catch_up(id);
                });
                return;
            }
            w.stream->write(line);
            ++events_sent_;
            w.sent_revision = std::max(w.sent_revision, e.revision);
            w.last_line = Clock::now();
        }
        ++w.cursor;
    }
    w.catching_up = false;
}

void Watchers::publish_new() {
    if (history_.resets() != resets_seen_) {
        resets_seen_ = history_.resets();
        published_seq_ = history_.end_seq();
        const std::string why = "this member installed a snapshot up to revision " +
                                std::to_string(history_.oldest_revision() - 1) +
                                " and has not the events before it: resume from the last revision seen (on another "
                                "member if this one answers 410)";
        while (!watchers_.empty()) close(watchers_.begin()->first, WatchClose::kSnapshotInstalled, why);
        return;
    }
    const std::uint64_t end = history_.end_seq();
    if (watchers_.empty()) {
        published_seq_ = end;
        return;
    }
    if (published_seq_ < history_.begin_seq()) {  // more applied at once than the history keeps
        std::vector<Id> live;
        for (const auto& [id, w] : watchers_) {
            if (!w.catching_up) live.push_back(id);
        }
        for (Id id : live) {
            close(id, WatchClose::kTooSlow,
                  "more events applied at once than this member's history keeps (--watch-history-events, "
                  "--watch-history-bytes); resume from the last revision seen");
        }
        published_seq_ = history_.begin_seq();
    }
    std::vector<Id> targets;
    for (std::uint64_t seq = published_seq_; seq < end; ++seq) {
        const member::WatchEvent& e = history_.at(seq);
        targets.clear();
        if (auto k = by_key_.find(e.key); k != by_key_.end()) targets = k->second;
        for (const auto& [prefixes, ids] : by_prefix_) {
            if (has_prefix(e.key, prefixes)) targets.insert(targets.end(), ids.begin(), ids.end());
        }
        if (targets.empty()) continue;
        const std::string line = watch_event_line(e);
        for (Id id : targets) {
            auto it = watchers_.find(id);
            if (it == watchers_.end() || it->second.catching_up || e.revision < it->second.min_revision) continue;
            deliver(id, it->second, line, e.revision);
        }
    }
    published_seq_ = end;
}

void Watchers::tick(raft::Index applied, Clock::time_point now) {
    publish();
    for (auto& [id, w] : watchers_) {
        if (!w.progress || w.catching_up) continue;
        const bool moved = applied > w.sent_revision && now - w.last_progress >= kProgressEvery;
        if (!moved && now - w.last_line < kIdleLineAfter) continue;
        const raft::Index revision = std::max(applied, w.sent_revision);
        const std::string line = revision_line("progress", revision) + "}\n";
        // A client that does not read: the next event decides (deliver()).
        if (w.stream->unwritten_bytes() + line.size() > limits_.buffer_bytes) continue;
        w.stream->write(line);
        w.sent_revision = revision;
        w.last_line = w.last_progress = now;
    }
}

void Watchers::shutdown() {
    while (!watchers_.empty()) {
        close(watchers_.begin()->first, WatchClose::kShuttingDown,
              "the member is shutting down: resume from the last revision seen, on another member");
    }
}

void Watchers::close(Id id, WatchClose reason, std::string_view message) {
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return;
    const char* error = reason == WatchClose::kShuttingDown ? "shutting_down" : "watcher_too_slow";
    it->second.stream->write(error_line(error, message));
    it->second.stream->end();
    ++closed_[static_cast<std::size_t>(reason)];
    forget(id);
}

void Watchers::forget(Id id) {
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return;
    if (it->second.key) {
        auto k = by_key_.find(*it->second.key);
        if (k != by_key_.end()) {
            std::erase(k->second, id);
            if (k->second.empty()) by_key_.erase(k);
        }
    } else if (auto g = by_prefix_.find(it->second.prefixes); g != by_prefix_.end()) {
        std::erase(g->second, id);
        if (g->second.empty()) by_prefix_.erase(g);
    }
    watchers_.erase(it);
}

void Watchers::render_metrics(std::string& out) const {
    out += "# HELP pgfence_watchers Open watches (GET /v1/watch) on this member.\n# TYPE pgfence_watchers gauge\n";
    out += "pgfence_watchers " + std::to_string(watchers_.size()) + "\n";
    out += "# HELP pgfence_watch_events_total Event lines written to watches.\n"
           "# TYPE pgfence_watch_events_total counter\n";
    out += "pgfence_watch_events_total " + std::to_string(events_sent_) + "\n";
    out += "# HELP pgfence_watchers_closed_total Watches closed, by why.\n"
           "# TYPE pgfence_watchers_closed_total counter\n";
    for (std::size_t r = 0; r < kWatchCloseReasons; ++r) {
        out += std::string("pgfence_watchers_closed_total{reason=\"") + watch_close_name(static_cast<WatchClose>(r)) +
               "\"} " + std::to_string(closed_[r]) + "\n";
    }
}

}  // namespace pgfence::server
