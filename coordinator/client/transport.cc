#include "client/transport.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <thread>

namespace pgfence::client {
namespace {

constexpr int kStatusRedirect = 307;
constexpr int kStatusUnavailable = 503;
constexpr std::size_t kMaxConnections = 2 * kMaxEndpoints;
constexpr std::size_t kMaxQuotedBody = 200;

std::string quote_body(const std::string& body) {
    if (body.size() <= kMaxQuotedBody) return body;
    return body.substr(0, kMaxQuotedBody) + "...";
}

// Remembers the first send time of the call: the conservative start of any lease it creates.
void note_sent(const HttpResult& r, CallResult& out) {
    if (!r.sent || out.any_sent) return;
    out.any_sent = true;
    out.first_sent_at = r.sent_at;
}

}  // namespace

Transport::Transport(Options options)
    : options_(std::move(options)), settings_(std::make_shared<ConnectionSettings>()) {
    if (options_.endpoints.empty()) throw std::invalid_argument("pgfence client: no endpoints given");
    if (!options_.bearer.empty()) settings_->authorization = "Bearer " + options_.bearer;
    anonymous_ = settings_;  // the same TLS context; no credential (set apart below when there is one)
    if (!options_.bearer.empty()) anonymous_ = std::make_shared<ConnectionSettings>();
}

HttpConnection& Transport::connection(const Endpoint& endpoint) {
    const std::string name = endpoint.to_string();
    auto it = connections_.find(name);
    if (it != connections_.end()) return *it->second;
    if (connections_.size() >= kMaxConnections) connections_.clear();  // bound: redirects to many hosts
    if (endpoint.tls && !settings_->tls && settings_->tls_error.empty()) {
        // Made once, at the first https:// endpoint; a plaintext client loads no certificates.
        settings_->tls_error = net::make_tls_context(
            net::TlsFiles{options_.cert_file, options_.key_file, options_.ca_file}, net::TlsSide::kClient, settings_->tls);
        if (anonymous_ != settings_) {
            anonymous_->tls = settings_->tls;
            anonymous_->tls_error = settings_->tls_error;
        }
    }
    // The bearer secret goes to the endpoints given and to TLS ones (a
    // plaintext redirect target elsewhere gets no credential).
    const bool given = std::find(options_.endpoints.begin(), options_.endpoints.end(), endpoint) != options_.endpoints.end();
    auto [pos, _] = connections_.emplace(
        name, std::make_unique<HttpConnection>(endpoint, given || endpoint.tls ? settings_ : anonymous_));
    return *pos->second;
}

Endpoint Transport::pick_endpoint() {
    if (leader_) return *leader_;
    return options_.endpoints[next_ % options_.endpoints.size()];
}

void Transport::avoid(const std::string& endpoint) {
    if (leader_ && leader_->to_string() == endpoint) leader_.reset();
    if (options_.endpoints[next_ % options_.endpoints.size()].to_string() == endpoint) {
        next_ = (next_ + 1) % options_.endpoints.size();
    }
}

void Transport::note_failure() {
    if (leader_) {
        leader_.reset();
    } else {
        next_ = (next_ + 1) % options_.endpoints.size();
    }
}

// A new connection must answer GET /healthz quickly before it gets the real
// request (any HTTP answer will do): a stopped member is left after
// probe_timeout_ rather than attempt_timeout, and never holds a request.
bool Transport::probe(HttpConnection& conn, Clock::time_point attempt_deadline, std::string& why, bool have_cause) {
    if (!probing_ || conn.is_open()) return true;
    const auto deadline = std::min(attempt_deadline, Clock::now() + probe_timeout_);
    const HttpResult r = conn.roundtrip(HttpRequest{"GET", "/healthz", {}}, deadline);
    if (r.error == TransportError::kNone) return true;
    // Cut off by the attempt's own deadline (the call's time ran out), not
    // by the probe's: an earlier attempt's cause says more.
    if (r.error == TransportError::kTimeout && deadline == attempt_deadline && have_cause) {
        conn.close();
        return false;
    }
    why = r.error == TransportError::kTimeout
              ? conn.endpoint().to_string() + " accepted no request or did not answer /healthz within " +
                    std::to_string(probe_timeout_.count()) + "ms (stopped or overloaded?)"
              : r.message;
    conn.close();
    return false;
}

Transport::Step Transport::attempt(const Endpoint& first, const Call& call, CallResult& out,
                                   std::string& why) {
    Endpoint target = first;
    for (int hop = 0;; ++hop) {
        if (Clock::now() >= call.deadline) return Step::kNextEndpoint;  // keep the previous `why`
        const Attempt a = call.make();
        const auto attempt_deadline = std::min(call.deadline, Clock::now() + a.timeout);
        HttpConnection& conn = connection(target);
        const bool fresh = !conn.is_open();
        if (!probe(conn, attempt_deadline, why, out.attempts > 0)) {
            ++out.attempts;  // keeps max_attempts a bound on the loop
            return Step::kNextEndpoint;
        }
        HttpResult r = conn.roundtrip(a.request, attempt_deadline);
        if (r.error == TransportError::kIo && r.reused && !fresh) {
            // The member closed an idle keep-alive connection: retry once on a fresh one.
            note_sent(r, out);
            r = conn.roundtrip(a.request, attempt_deadline);
        }
        ++out.attempts;
        note_sent(r, out);
        if (r.error != TransportError::kNone) {
            // Cut off by the call's own deadline: an earlier attempt's cause says more.
            const bool cut_off = r.error == TransportError::kTimeout && Clock::now() >= call.deadline;
            if (!cut_off || out.attempts == 1) why = r.message;
            return Step::kNextEndpoint;
        }
        const int status = r.response.status;
        if (status == kStatusRedirect && call.follow_redirects) {
            const auto next = endpoint_of_url(r.response.location);
            if (!next) {
                why = target.to_string() + " redirected to an unusable Location '" + r.response.location + "'";
                return Step::kNextEndpoint;
            }
            if (target.tls && !next->tls) {
                why = target.to_string() + " redirected from https to plaintext '" + r.response.location +
                      "' (refused: credentials and answers would cross the network in the clear)";
                return Step::kNextEndpoint;
            }
            if (hop >= options_.max_redirects) {
                why = "more than " + std::to_string(options_.max_redirects) + " redirects, last to " +
                      next->to_string() + " (members disagree about the leader)";
                return Step::kNextEndpoint;
            }
            target = *next;
            continue;
        }
        if (status == kStatusUnavailable) {
            out.unavailable_answered = true;
            why = target.to_string() + " answered 503 " + quote_body(r.response.body);
            return Step::kNextEndpoint;
        }
        out.answered = true;
        out.answered_by = target.to_string();
        out.connection = &conn;
        out.response = std::move(r.response);
        out.sent_at = r.sent_at;
        if (call.follow_redirects) leader_ = target;
        return Step::kAnswered;
    }
}

CallResult Transport::perform(const Call& call) {
    CallResult out;
    std::string why = "the deadline had already passed";
    milliseconds backoff = options_.backoff_initial;
    std::size_t failures_in_row = 0;
    probing_ = options_.probe_timeout.count() > 0;
    probe_timeout_ = options_.probe_timeout;
    const auto start = Clock::now();
    bool noticed = !options_.on_retry;
    while (out.attempts < options_.max_attempts && Clock::now() < call.deadline) {
        const Step step = attempt(pick_endpoint(), call, out, why);
        if (step == Step::kAnswered) return out;
        note_failure();
        if (!call.retry) break;
        const bool round_failed = failures_in_row + 1 >= options_.endpoints.size();
        if (!noticed && (round_failed || Clock::now() - start >= kRetryNoticeAfter) &&
            out.attempts < options_.max_attempts && Clock::now() < call.deadline) {
            noticed = true;
            options_.on_retry(why);
        }
        if (++failures_in_row < options_.endpoints.size()) continue;
        failures_in_row = 0;
        probe_timeout_ = std::min(probe_timeout_ * 2, std::max(options_.probe_timeout, options_.attempt_timeout));
        const auto left = std::chrono::duration_cast<milliseconds>(call.deadline - Clock::now());
        std::this_thread::sleep_for(std::clamp(backoff, milliseconds(0), std::max(left, milliseconds(0))));
        backoff = std::min(backoff * 2, options_.backoff_max);
    }
    out.error = {ErrorKind::kUnavailable,
                 "cluster unavailable: no member gave an answer after " + std::to_string(out.attempts) +
                     " attempt(s); last error: " + why,
                 0};
    out.error.member_answered = out.unavailable_answered;
    return out;
}

CallResult Transport::perform_at(const Endpoint& endpoint, const Call& call) {
    CallResult out;
    std::string why = "the deadline had already passed";
    probing_ = false;  // one request to a named member: the probe would only add a round trip
    if (Clock::now() < call.deadline && attempt(endpoint, call, out, why) == Step::kAnswered) return out;
    out.error = {ErrorKind::kUnavailable, endpoint.to_string() + " did not answer: " + why, 0};
    out.error.member_answered = out.unavailable_answered;
    return out;
}

std::string url_encode(const std::string& value) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (const unsigned char c : value) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            out += '%';
            out += kHex[c >> 4];
            out += kHex[c & 0xf];
        }
    }
    return out;
}

}  // namespace pgfence::client
