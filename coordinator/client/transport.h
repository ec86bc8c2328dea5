// Retry, redirect and deadline policy over HttpConnection (internal to the
// client library).
//
// One call = attempts until an answer that is not 307/503 arrives, the call's
// deadline passes, or Options::max_attempts is used up. Within an attempt
// 307s are followed (bounded hops). After a connection error, timeout or 503
// the next endpoint is tried; once every endpoint has failed in a row the
// transport sleeps (exponential backoff, capped, never past the deadline).
// Before the first request on a new connection the member is probed with
// GET /healthz under Options::probe_timeout (see there). Options::on_retry
// hears once per call that it goes on retrying.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "client/client.h"
#include "client/http_connection.h"

namespace pgfence::client {

struct Attempt {
    HttpRequest request;
    milliseconds timeout{0};  // budget for this attempt (clamped to the call deadline)
};

struct Call {
    std::function<Attempt()> make;  // called before every attempt (acquire shrinks its wait)
    Clock::time_point deadline;
    bool follow_redirects = true;
    bool retry = true;  // false: one attempt at the first endpoint only
};

struct CallResult {
    bool answered = false;     // a final HTTP answer arrived (any status but 307/503)
    HttpResponse response;     // when answered
    Error error;               // when not answered: kUnavailable or kProtocol
    bool any_sent = false;
    // Some member answered 503 (no leader, or not ready): the request arrived
    // though the call was not answered (Error::member_answered says so too).
    bool unavailable_answered = false;
    Clock::time_point first_sent_at;  // first byte of the first attempt that went out
    Clock::time_point sent_at;        // first byte of the attempt that was answered
    int attempts = 0;
    std::string answered_by;          // HOST:PORT of the member that answered (when answered)
    // The connection that carried the answer (when answered): valid until the
    // transport's next call; a streamed body (HttpRequest::stream) is read from it.
    HttpConnection* connection = nullptr;
};

class Transport {
public:
    explicit Transport(Options options);

    CallResult perform(const Call& call);
    // One request to one given endpoint: no redirects, no retries.
    CallResult perform_at(const Endpoint& endpoint, const Call& call);

    const Options& options() const { return options_; }
    // The next call starts elsewhere than `endpoint` (HOST:PORT as in
    // CallResult::answered_by) when there is elsewhere: it served a stream
    // that broke.
    void avoid(const std::string& endpoint);

private:
    enum class Step : std::uint8_t { kAnswered, kNextEndpoint };
    Step attempt(const Endpoint& first, const Call& call, CallResult& out, std::string& why);
    HttpConnection& connection(const Endpoint& endpoint);
    // have_cause: `why` already holds an earlier attempt's cause.
    bool probe(HttpConnection& conn, Clock::time_point attempt_deadline, std::string& why, bool have_cause);
    Endpoint pick_endpoint();
    void note_failure();

    Options options_;
    std::shared_ptr<ConnectionSettings> settings_;   // shared by the connections that carry the bearer
    std::shared_ptr<ConnectionSettings> anonymous_;  // the same without it (== settings_ when there is none)
    std::map<std::string, std::unique_ptr<HttpConnection>> connections_;
    std::optional<Endpoint> leader_;  // last member that gave a final answer
    std::size_t next_ = 0;            // round-robin position in options_.endpoints
    milliseconds probe_timeout_{0};   // this call's probe budget (grows per failed round)
    bool probing_ = false;            // this call probes new connections
};

// The Error of a final answer other than 200 (client.cc): the member's
// `error` and `message` as an ErrorKind; `not_found_kind` for a 404.
Error error_of(const CallResult& call, ErrorKind not_found_kind);

// Client::watch's loop (watch_stream.cc, the contract in watch_stream.h).
Result<WatchEnd> run_watch(Transport& transport, const WatchRequest& request, const WatchCallback& on_event);

// Percent-encodes a query parameter's value (RFC 3986's unreserved
// characters pass as they are).
std::string url_encode(const std::string& value);

}  // namespace pgfence::client
