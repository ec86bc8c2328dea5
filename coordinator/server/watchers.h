// The open watches of GET /v1/watch (docs/http-api.md "GET /v1/watch"):
// each a streamed response (net::HttpStream) of the lock events this member
// applied (member::WatchHistory, the core's), one JSON line each, in log
// order, with no gap and no duplicate.
//
// A watch starts at a cursor in the history: the first event at or after
// its `rev`, or (no rev) the history's end. From there it is
//   catching up  while its cursor is behind what was published: it reads
//                the history itself, as fast as its stream drains (paced:
//                it stops while the stream holds buffer_bytes unwritten,
//                and goes on when it drained); a cursor the history dropped
//                meanwhile closes it (watcher_too_slow);
//   live         once it reached it: publish(), called after the core
//                applied entries, hands each new event to the live watches
//                that match it (by key in a map; prefix watches grouped by
//                their prefixes, each group tested once), its line
//                formatted once. A live watch whose stream would hold
//                more than buffer_bytes unwritten with the line is closed
//                (watcher_too_slow): a client that does not read never
//                grows the member's memory past about buffer_bytes per watch.
// With no watch open, publish() only moves its mark (the apply path pays
// one comparison). Events before a watch's `rev` are skipped either way.
//
// The history restarting after a snapshot the member installed (its
// resets()) leaves every open watch before a gap: each is closed with
// watcher_too_slow, and resumes (elsewhere, or here once its revision is
// kept again).
//
// Lines: the start line at open; the events; with progress, a progress
// line (every matching event up to the applied index was sent) at most once
// a second when the applied index moved past the last line, and after 10 s
// without a line; an error line before the member closes a watch
// (watcher_too_slow, shutting_down). A watch closes too when its client goes.
//
// Threading: the event loop's thread only; the streams' callbacks come back
// there (posted), and find nothing once the Watchers is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lock/table.h"
#include "member/watch_history.h"
#include "net/http_server.h"
#include "raft/types.h"

namespace pgfence::server {

// What a watch asks for, after parsing and authorization.
struct WatchSpec {
    std::optional<std::string> key;  // one key, or
    std::vector<std::string> prefixes{std::string()};  // keys under any of these (readable parts of the prefix)
    std::optional<raft::Index> from_revision;  // rev: every event at or after it; unset: after the applied index
    bool progress = false;
    // GET /v1/election/observe: after the start line, the key's lock as it
    // is at the start revision (a "leader" line; token 0: not held), so the
    // events that follow tell every change from there.
    bool state = false;
};

struct WatchLimits {
    std::size_t max_watchers = 512;
    std::size_t buffer_bytes = 256u << 10;
};

// Why watches closed (pgfence_watchers_closed_total{reason}).
enum class WatchClose : std::uint8_t { kTooSlow, kClientGone, kShuttingDown, kSnapshotInstalled };
constexpr std::size_t kWatchCloseReasons = 4;
const char* watch_close_name(WatchClose reason);

class Watchers {
public:
    using Clock = std::chrono::steady_clock;

    // `history` is the core's: it outlives this object.
    Watchers(const member::WatchHistory& history, WatchLimits limits, std::uint64_t member_id);
    ~Watchers();
    Watchers(const Watchers&) = delete;
    Watchers& operator=(const Watchers&) = delete;

    bool full() const { return watchers_.size() >= limits_.max_watchers; }
    std::size_t size() const { return watchers_.size(); }
    // Opens a watch on `stream` (already answered 200): the start line, then
    // what it asked for from the history. spec.from_revision must be
    // >= history.oldest_revision() (else the caller answers 410) and not full().
    // With spec.state, `held` is spec.key's lock at `applied` (nullptr: not held).
    void open(std::shared_ptr<net::HttpStream> stream, const WatchSpec& spec, raft::Index applied,
              const lock::Lock* held = nullptr);
    // The history grew (or restarted): hand the new events to live watches.
    void publish() {
        if (history_.end_seq() == published_seq_ && history_.resets() == resets_seen_) return;
        publish_new();
    }
    // Progress lines, once a tick (after publish()).
    void tick(raft::Index applied, Clock::time_point now);
    // The member stops: each watch gets the shutting_down line and ends.
    void shutdown();

    std::uint64_t events_sent() const { return events_sent_; }
    std::uint64_t closed(WatchClose reason) const { return closed_[static_cast<std::size_t>(reason)]; }
    // pgfence_watchers, pgfence_watch_events_total, pgfence_watchers_closed_total{reason}.
    void render_metrics(std::string& out) const;

private:
    struct Watcher {
        std::shared_ptr<net::HttpStream> stream;
        std::optional<std::string> key;
        std::vector<std::string> prefixes;
        raft::Index min_revision = 1;
        std::uint64_t cursor = 0;  // catching up: the next seq to read
        bool catching_up = false;
        bool progress = false;
        raft::Index sent_revision = 0;  // what the lines sent cover
        Clock::time_point last_line{};
        Clock::time_point last_progress{};
    };
    using Id = std::uint64_t;

    void publish_new();
    bool matches(const Watcher& w, const member::WatchEvent& e) const;
    // Writes `line` covering `revision`; false (and the watch closed) when it
    // would pass the buffer.
    bool deliver(Id id, Watcher& w, const std::string& line, raft::Index revision);
    void catch_up(Id id);
    void close(Id id, WatchClose reason, std::string_view message);
    void forget(Id id);  // out of the maps, no line

    const member::WatchHistory& history_;
    WatchLimits limits_;
    std::uint64_t member_id_;
    std::map<Id, Watcher> watchers_;
    std::unordered_map<std::string, std::vector<Id>> by_key_;
    // Prefix watches grouped by their prefixes: an event is tested once per
    // group, however many watches share it.
    std::map<std::vector<std::string>, std::vector<Id>> by_prefix_;
    Id next_id_ = 1;
    std::uint64_t published_seq_;  // events before it went to the live watches
    std::uint64_t resets_seen_;
    std::uint64_t events_sent_ = 0;
    std::uint64_t closed_[kWatchCloseReasons] = {};
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // the streams' callbacks check it
};

// One event as its JSON line (with the newline).
std::string watch_event_line(const member::WatchEvent& e);

}  // namespace pgfence::server
