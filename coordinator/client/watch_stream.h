// Client side of GET /v1/watch (docs/http-api.md, "Watch"): a stream of lock
// events that survives the death of the member serving it.
//
// Client::watch(request, on_event) opens the stream on any member (members
// serve it from what they have applied; no redirect to the leader) and calls
// on_event for every line, in the order the member sent them, until on_event
// answers kStop or an error that retrying cannot fix. It blocks the calling
// thread all that time.
//
// What on_event sees (revision = the Raft log index of the entry that made
// the event; one entry can make several events, which share its revision):
//   granted / released / expired   always; in log order, each exactly once;
//   start                          only with WatchRequest::progress, once per
//                                  stream opened (again after every resume);
//   progress                       only with WatchRequest::progress.
//
// Resuming. The stream ends when its member dies, closes it (an `error`
// line: watcher_too_slow, shutting_down), sends nothing for idle_timeout (a
// stopped or cut-off member), or the connection breaks; a line cut short by
// the break (a torn last line) is dropped unread. The watch then opens a new
// stream at any member (Options::endpoints, the one that served last tried
// last but not skipped) asking for `rev` = the resume point:
//   - after an event of revision R: rev = R, and the events of revision R
//     already delivered (same type, key and token) are skipped when they come
//     again, so no event is lost or delivered twice, also when the break fell
//     between two events of one revision;
//   - after a progress line A >= every event delivered: rev = A + 1 (every
//     event up to A was sent), so a quiet watch does not fall behind the
//     history a member keeps;
//   - before any event or progress: the request's from_revision, or, for a
//     watch "from now", the first stream's start revision + 1.
// To see progress lines, the watch always asks the member for them
// (progress=1) and hands them on only when WatchRequest::progress is set.
// Events of a revision below the resume point are skipped (a member never
// sends them); a revision going down within one stream is a protocol error.
//
// Errors (the Result's Error): kCompacted (410 from every endpoint: the
// resume point is older than the history each member keeps, which starts
// where it started or last installed a snapshot; a 410 moves on to the next
// endpoint first; Error::oldest_revision is the lowest revision they keep), kBadRequest (400), kNotAuthorized (401/403), kNotPgfence, and
// kUnavailable when no member served a stream for Options::timeout after the
// last one that brought a line ended (each reopening is a Transport call with
// the usual retries, backoff and probes).
// A line that is not a JSON object of a known shape is kProtocol. Lines of an
// unknown `type` are skipped (a newer member may send more kinds).
//
// Threading: as the Client, one thread at a time; on_event runs on the
// calling thread and must not call the same Client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace pgfence::client {

// Bound on one ndjson line of the stream (a key is at most 512 bytes, an owner
// and a value a few KiB): longer is a protocol error.
constexpr std::size_t kMaxWatchLineBytes = 64u << 10;

// A member sends a line at least every 10 s on a progress stream; a stream
// silent for three times that is taken for dead and reopened elsewhere.
constexpr std::chrono::milliseconds kDefaultWatchIdleTimeout{30'000};

struct WatchRequest {
    // Exactly one of: a key (prefix == false), or a key prefix (prefix ==
    // true; "" is every key the caller may read).
    std::string key;
    bool prefix = false;
    // >= 1: every event with revision >= it. 0: the events applied after the
    // member's applied index when the first stream starts.
    std::uint64_t from_revision = 0;
    // Hand start and progress lines to on_event too.
    bool progress = false;
    std::chrono::milliseconds idle_timeout = kDefaultWatchIdleTimeout;
    // Called (on the calling thread) each time the watch reopens its stream,
    // with why the last one ended and the revision it resumes from.
    std::function<void(const std::string& why, std::uint64_t resume_revision)> on_resume;

    static WatchRequest of_key(std::string key, std::uint64_t from_revision = 0) {
        WatchRequest r;
        r.key = std::move(key);
        r.from_revision = from_revision;
        return r;
    }
    static WatchRequest of_prefix(std::string prefix, std::uint64_t from_revision = 0) {
        WatchRequest r = of_key(std::move(prefix), from_revision);
        r.prefix = true;
        return r;
    }
};

enum class WatchEventType : std::uint8_t { kStart, kGranted, kReleased, kExpired, kProclaimed, kProgress };

const char* to_string(WatchEventType type);

struct WatchEvent {
    WatchEventType type = WatchEventType::kGranted;
    std::uint64_t revision = 0;  // start: the member's applied index; progress: the index every event up to was sent
    std::string key;             // granted, released, expired, proclaimed
    std::uint64_t token = 0;     // granted, released, expired, proclaimed
    std::string owner;           // granted
    std::string value;           // granted (what the lock publishes; "" = none), proclaimed
    std::uint64_t lease_ms = 0;  // granted
    bool existed = false;        // expired: the lock was still there with that token
    std::uint64_t member = 0;    // start: the ID of the member serving the stream
    std::string line;            // the line as the member sent it (JSON, no newline)
};

enum class WatchAction : std::uint8_t { kContinue, kStop };

using WatchCallback = std::function<WatchAction(const WatchEvent&)>;

// How a watch ended without error (on_event answered kStop).
struct WatchEnd {
    // The revision of the last event delivered (0: none). A new watch from
    // it delivers that revision's events again; from it + 1, none of them.
    std::uint64_t last_revision = 0;
};

// One line of the stream, parsed. kIgnore: a line of a type this client
// does not know; kBad: not a line of the wire (`error` says why).
struct WatchLine {
    enum class Kind : std::uint8_t { kEvent, kError, kIgnore, kBad } kind = Kind::kBad;
    WatchEvent event;   // kEvent
    std::string error;  // kError: the member's error code ("watcher_too_slow"...) and message; kBad: why
};
WatchLine parse_watch_line(std::string_view line);

// The resume rule above, without I/O: every line of every stream goes
// through accept(), in order; open() before each stream.
class WatchCursor {
public:
    enum class Verdict : std::uint8_t { kDeliver, kSkip, kOutOfOrder };

    explicit WatchCursor(std::uint64_t from_revision) : resume_(from_revision) {}

    // The `rev` to ask the next stream for (0: none, a watch from now that
    // has not started yet).
    std::uint64_t resume_revision() const { return resume_; }
    std::uint64_t last_revision() const { return last_event_; }
    // A new stream begins.
    void open() { stream_revision_ = 0; }
    Verdict accept(const WatchEvent& event);

private:
    struct Seen {
        WatchEventType type;
        std::string key;
        std::uint64_t token;
        bool operator==(const Seen&) const = default;
    };
    bool seen(const WatchEvent& event) const;

    std::uint64_t resume_ = 0;           // rev of the next stream
    std::uint64_t last_event_ = 0;       // revision of the last event delivered
    std::vector<Seen> at_last_;          // the events of revision last_event_ delivered
    std::uint64_t stream_revision_ = 0;  // highest revision of this stream's lines so far
};

}  // namespace pgfence::client
