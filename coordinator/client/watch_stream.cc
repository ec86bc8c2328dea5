// Client::watch: opening streams through the Transport, cutting them into
// lines, and the resume rule (watch_stream.h).
#include "client/watch_stream.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <optional>
#include <set>
#include <thread>

#include "client/client.h"
#include "client/transport.h"

namespace pgfence::client {
namespace json = boost::json;

const char* to_string(WatchEventType type) {
    switch (type) {
        case WatchEventType::kStart: return "start";
        case WatchEventType::kGranted: return "granted";
        case WatchEventType::kReleased: return "released";
        case WatchEventType::kExpired: return "expired";
        case WatchEventType::kProclaimed: return "proclaimed";
        case WatchEventType::kProgress: return "progress";
    }
    return "unknown";
}

namespace {

constexpr std::size_t kQuotedLine = 200;

bool u64_of(const json::object& o, const char* name, std::uint64_t& out) {
    const json::value* v = o.if_contains(name);
    if (!v) return false;
    if (v->is_uint64()) {
        out = v->get_uint64();
    } else if (v->is_int64() && v->get_int64() >= 0) {
        out = static_cast<std::uint64_t>(v->get_int64());
    } else {
        return false;
    }
    return true;
}

bool string_of(const json::object& o, const char* name, std::string& out) {
    const json::value* v = o.if_contains(name);
    if (!v || !v->is_string()) return false;
    out = std::string(v->get_string());
    return true;
}

WatchLine bad(std::string why) {
    WatchLine l;
    l.kind = WatchLine::Kind::kBad;
    l.error = std::move(why);
    return l;
}

// The request target of a stream from `rev` (0: none). Always progress=1:
// progress lines keep the resume point near and show the stream is alive.
std::string watch_target(const WatchRequest& request, std::uint64_t rev) {
    std::string target = std::string("/v1/watch?") + (request.prefix ? "prefix=" : "key=") + url_encode(request.key);
    if (rev > 0) target += "&rev=" + std::to_string(rev);
    return target + "&progress=1";
}

std::string quoted(std::string_view line) {
    return std::string(line.substr(0, kQuotedLine)) + (line.size() > kQuotedLine ? "..." : "");
}

// How one stream ended.
struct StreamEnd {
    enum class Kind : std::uint8_t { kStopped, kFailed, kBroken } kind = Kind::kBroken;
    Error error;      // kFailed
    std::string why;  // kBroken
    bool any_line = false;
};

StreamEnd failed(Error error) {
    StreamEnd e;
    e.kind = StreamEnd::Kind::kFailed;
    e.error = std::move(error);
    return e;
}

// One stream of `conn`, line by line, until it ends.
class StreamReader {
public:
    StreamReader(HttpConnection& conn, WatchCursor& cursor, const WatchRequest& request, const WatchCallback& on_event,
                 Clock::time_point& last_line_at)
        : conn_(conn), cursor_(cursor), request_(request), on_event_(on_event), last_line_at_(last_line_at) {}

    StreamEnd run() {
        cursor_.open();
        const std::string from = conn_.endpoint().to_string();
        for (;;) {
            std::string why;
            const StreamRead got = conn_.read_stream(pending_, Clock::now() + request_.idle_timeout, why);
            if (auto end = lines(from)) return *end;
            if (pending_.size() > kMaxWatchLineBytes) {
                conn_.close();
                return failed({ErrorKind::kProtocol,
                               from + " sent a watch line longer than " + std::to_string(kMaxWatchLineBytes) + " bytes",
                               0});
            }
            if (got == StreamRead::kData) continue;
            if (got == StreamRead::kTimeout) {
                conn_.close();
                why = from + " sent nothing for " + std::to_string(request_.idle_timeout.count()) + "ms";
            }
            if (!pending_.empty()) {
                why += "; its torn last line (" + std::to_string(pending_.size()) + " bytes) was dropped";
            }
            end_.why = why;
            return end_;
        }
    }

private:
    // Handles every complete line in pending_; a value when the stream ends with one.
    std::optional<StreamEnd> lines(const std::string& from) {
        std::size_t start = 0;
        for (std::size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
            std::string_view line(pending_.data() + start, nl - start);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            if (line.empty()) continue;
            last_line_at_ = Clock::now();
            end_.any_line = true;
            if (auto end = handle(line, from)) {
                conn_.close();
                return end;
            }
        }
        pending_.erase(0, start);
        return std::nullopt;
    }

    std::optional<StreamEnd> handle(std::string_view line, const std::string& from) {
        WatchLine parsed = parse_watch_line(line);
        switch (parsed.kind) {
            case WatchLine::Kind::kIgnore: return std::nullopt;
            case WatchLine::Kind::kBad:
                return failed({ErrorKind::kProtocol,
                               from + " sent a line that is not a watch line (" + parsed.error + "): " + quoted(line), 0});
            case WatchLine::Kind::kError: {
                StreamEnd e = end_;
                e.why = from + " closed the stream: " + parsed.error;
                return e;
            }
            case WatchLine::Kind::kEvent: break;
        }
        const WatchEvent& ev = parsed.event;
        switch (cursor_.accept(ev)) {
            case WatchCursor::Verdict::kSkip: return std::nullopt;
            case WatchCursor::Verdict::kOutOfOrder:
                return failed({ErrorKind::kProtocol,
                               from + " sent revision " + std::to_string(ev.revision) +
                                   " after a higher one in the same stream: " + quoted(line),
                               0});
            case WatchCursor::Verdict::kDeliver: break;
        }
        const bool meta = ev.type == WatchEventType::kStart || ev.type == WatchEventType::kProgress;
        if (meta && !request_.progress) return std::nullopt;
        if (on_event_(ev) == WatchAction::kContinue) return std::nullopt;
        StreamEnd e = end_;
        e.kind = StreamEnd::Kind::kStopped;
        return e;
    }

    HttpConnection& conn_;
    WatchCursor& cursor_;
    const WatchRequest& request_;
    const WatchCallback& on_event_;
    Clock::time_point& last_line_at_;
    std::string pending_;  // bytes after the last complete line
    StreamEnd end_;
};

}  // namespace

WatchLine parse_watch_line(std::string_view text) {
    boost::system::error_code ec;
    json::value v = json::parse(json::string_view(text.data(), text.size()), ec);
    if (ec) return bad("not JSON: " + ec.message());
    if (!v.is_object()) return bad("not a JSON object");
    const json::object& o = v.get_object();
    std::string type;
    if (!string_of(o, "type", type)) return bad("no string 'type'");
    WatchLine out;
    if (type == "error") {
        std::string code, message;
        string_of(o, "error", code);
        string_of(o, "message", message);
        out.kind = WatchLine::Kind::kError;
        out.error = (code.empty() ? "error" : code) + (message.empty() ? "" : " (" + message + ")");
        return out;
    }
    WatchEvent& ev = out.event;
    if (type == "start") {
        ev.type = WatchEventType::kStart;
    } else if (type == "progress") {
        ev.type = WatchEventType::kProgress;
    } else if (type == "granted") {
        ev.type = WatchEventType::kGranted;
    } else if (type == "released") {
        ev.type = WatchEventType::kReleased;
    } else if (type == "expired") {
        ev.type = WatchEventType::kExpired;
    } else if (type == "proclaimed") {
        ev.type = WatchEventType::kProclaimed;
    } else {
        out.kind = WatchLine::Kind::kIgnore;
        return out;
    }
    if (!u64_of(o, "revision", ev.revision)) return bad("'" + type + "' without a numeric 'revision'");
    const bool lock_event = ev.type != WatchEventType::kStart && ev.type != WatchEventType::kProgress;
    if (lock_event) {
        if (ev.revision == 0) return bad("'" + type + "' of revision 0");
        if (!string_of(o, "key", ev.key)) return bad("'" + type + "' without a string 'key'");
        if (!u64_of(o, "token", ev.token)) return bad("'" + type + "' without a numeric 'token'");
    }
    string_of(o, "owner", ev.owner);
    string_of(o, "value", ev.value);
    u64_of(o, "lease_ms", ev.lease_ms);
    u64_of(o, "member", ev.member);
    if (const json::value* e = o.if_contains("existed"); e && e->is_bool()) ev.existed = e->get_bool();
    ev.line = std::string(text);
    out.kind = WatchLine::Kind::kEvent;
    return out;
}

bool WatchCursor::seen(const WatchEvent& event) const {
    const Seen s{event.type, event.key, event.token};
    return std::find(at_last_.begin(), at_last_.end(), s) != at_last_.end();
}

WatchCursor::Verdict WatchCursor::accept(const WatchEvent& event) {
    if (event.type == WatchEventType::kStart) {
        // A watch from now starts after the first member's applied index.
        if (resume_ == 0) resume_ = event.revision + 1;
        return Verdict::kDeliver;
    }
    if (event.type == WatchEventType::kProgress) {
        // Every event up to the progress revision was sent: none is left to skip.
        if (event.revision >= last_event_ && event.revision + 1 > resume_) {
            resume_ = event.revision + 1;
            at_last_.clear();
        }
        return Verdict::kDeliver;
    }
    if (event.revision < stream_revision_) return Verdict::kOutOfOrder;
    stream_revision_ = event.revision;
    if (event.revision < resume_) return Verdict::kSkip;
    if (event.revision == last_event_ && seen(event)) return Verdict::kSkip;
    if (event.revision != last_event_) {
        last_event_ = event.revision;
        at_last_.clear();
    }
    at_last_.push_back({event.type, event.key, event.token});
    resume_ = event.revision;
    return Verdict::kDeliver;
}

Result<WatchEnd> run_watch(Transport& transport, const WatchRequest& request, const WatchCallback& on_event) {
    if (request.key.empty() && !request.prefix) return Error{ErrorKind::kBadRequest, "watch needs a key or a prefix", 0};
    if (request.idle_timeout.count() <= 0) return Error{ErrorKind::kBadRequest, "watch idle_timeout must be > 0", 0};
    const Options& o = transport.options();
    WatchCursor cursor(request.from_revision);
    Clock::time_point last_line_at = Clock::now();
    milliseconds backoff = o.backoff_initial;
    std::optional<Error> compacted;       // the 410 with the oldest revision kept, of this (re)opening
    std::set<std::string> compacted_at;   // the members that answered it
    for (bool first = true;; first = false) {
        Call call;
        const std::string target = watch_target(request, cursor.resume_revision());
        call.make = [&] {
            HttpRequest r{"GET", target, {}};
            r.stream = true;
            return Attempt{std::move(r), o.attempt_timeout};
        };
        // Gives up once no member sent a line for the call's timeout.
        call.deadline = std::max(Clock::now(), last_line_at + o.timeout);
        CallResult r = transport.perform(call);
        if (!r.answered) {
            if (!first) r.error.message = "no member served the watch again; " + r.error.message;
            return r.error;
        }
        if (r.response.status != 200) {
            Error e = error_of(r, ErrorKind::kNotFound);
            if (e.kind != ErrorKind::kCompacted) return e;
            // A member keeps the events it applied since it started: one
            // that has not restarted since may still have them.
            if (!compacted || e.oldest_revision < compacted->oldest_revision) compacted = e;
            if (!compacted_at.insert(r.answered_by).second || compacted_at.size() >= o.endpoints.size()) {
                return *compacted;
            }
            transport.avoid(r.answered_by);
            continue;
        }
        compacted.reset();
        compacted_at.clear();
        const StreamEnd end = StreamReader(*r.connection, cursor, request, on_event, last_line_at).run();
        if (end.kind == StreamEnd::Kind::kStopped) return WatchEnd{cursor.last_revision()};
        if (end.kind == StreamEnd::Kind::kFailed) return end.error;
        transport.avoid(r.answered_by);
        if (request.on_resume) request.on_resume(end.why, cursor.resume_revision());
        if (end.any_line) {
            // The member served until now: the other members have --timeout from here to take over.
            last_line_at = Clock::now();
            backoff = o.backoff_initial;
            continue;
        }
        // A member that serves streams but ends them at once: do not spin on it.
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, o.backoff_max);
    }
}

}  // namespace pgfence::client
