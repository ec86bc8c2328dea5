// pgfence client: the coordinator's HTTP API (docs/http-api.md) as typed, synchronous C++ calls.
//
// - Endpoints come from Options::endpoints (see endpoints_from_env()).
// - A follower's 307 is followed to the leader (at most Options::max_redirects
//   hops); the leader is remembered for the next call.
// - Connection errors, timeouts and 503 are retried across the endpoints with
//   exponential backoff, all within the call's deadline. A new connection is
//   first probed (GET /healthz, Options::probe_timeout) so that a member that
//   accepts connections but never answers is skipped quickly.
// - Lease time is counted from when a request was SENT, never from when the
//   answer arrived, and shortened by the clock-rate bound rho
//   (Options::max_clock_drift_ppm, default 5%): Lease::deadline() is send time
//   + lease * (1 - rho) on this process's steady_clock. This client's clock
//   runs at a rate r_C in [1 - rho, 1 + rho] against real time, so when it
//   reads send + lease * (1 - rho), at most lease * (1 - rho) / r_C <= lease
//   of real time has passed since the send; the coordinator's leader does not
//   expire the lease before send + lease in real time (it waits lease *
//   (1 + rho) on its own clock; docs/guarantees.md "Clocks: what is
//   assumed"). So a holder that stops working by deadline() never overlaps
//   the next holder while every clock rate is within rho; beyond that, only
//   the fencing token protects the data.
//
// Threading: a Client is used by one thread at a time (it owns its sockets).
// Connections are kept alive and reused between calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "client/endpoints.h"
#include "client/sequence.h"
#include "client/watch_stream.h"
#include "member/lease.h"
#include "member/token_history.h"

namespace pgfence::client {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// rho's default (5%) and the largest --max-clock-drift-ppm fencectl and
// fence-worker accept (50%): fence-coordinator's own (member/lease.h).
using member::kDefaultMaxClockDriftPpm;
using member::kMaxClockDriftPpmLimit;

// lease * (1 - rho), rho = max_clock_drift_ppm / 1e6, rounded down to the
// clock's tick: how long after its send a lease may be used (see above).
// The one place the client applies rho; rho >= 100% leaves nothing.
constexpr Clock::duration usable_lease(milliseconds lease, std::uint64_t max_clock_drift_ppm) {
    constexpr std::int64_t kMaxLeaseMs = INT64_MAX / 1'000'000;  // keeps the product below in range
    if (lease.count() <= 0 || max_clock_drift_ppm >= 1'000'000) return Clock::duration::zero();
    const std::int64_t ms = lease.count() < kMaxLeaseMs ? lease.count() : kMaxLeaseMs;
    // ms * (1e6 - ppm) is lease * (1 - rho) in nanoseconds, exactly.
    const auto ns = std::chrono::nanoseconds(ms * static_cast<std::int64_t>(1'000'000 - max_clock_drift_ppm));
    return std::chrono::duration_cast<Clock::duration>(ns);
}

struct Options {
    std::vector<Endpoint> endpoints;
    milliseconds timeout{10'000};         // whole-call deadline (acquire adds its wait)
    milliseconds attempt_timeout{3'000};  // one request to one member (acquire adds its wait)
    // One keepalive request to one member; 0 means attempt_timeout. A holder
    // sets it to a fraction of the lease so a stopped leader is left in time.
    milliseconds keepalive_attempt_timeout{0};
    // A member is asked GET /healthz on every new connection and must answer
    // within this before it gets the real request: a member that accepts TCP
    // but never answers (SIGSTOPped, hung) costs this, not attempt_timeout, and
    // never sees the request. Doubles after each round in which every endpoint
    // failed (up to attempt_timeout), so a merely slow cluster still gets through.
    // 0 disables the probe.
    milliseconds probe_timeout{300};
    milliseconds backoff_initial{20};     // first pause after every endpoint failed once
    milliseconds backoff_max{500};        // pauses double up to this
    int max_redirects = 4;                // 307 hops per attempt
    int max_attempts = 64;                // requests per call, whatever the deadline
    // rho: the largest clock-rate error of this process (and of the
    // coordinator's members) against real time, in parts per million. Copied
    // into every Lease and KeepaliveResult this client returns.
    std::uint64_t max_clock_drift_ppm = kDefaultMaxClockDriftPpm;
    // For https:// endpoints: the CA bundle the members' certificates must
    // chain to (empty: the system's), and this client's certificate and key
    // when the members ask for one (--client-cert-auth). The member's host
    // name or IP must be in its certificate's SANs.
    std::string ca_file;
    std::string cert_file;
    std::string key_file;
    // Sent as `Authorization: Bearer ...` on every request when not empty
    // (a member with --auth-file). Never logged or put in an error message.
    std::string bearer;
    // Called at most once per call, on the calling thread, when the call goes
    // on retrying after every endpoint failed once or kRetryNoticeAfter
    // passed without an answer: the last failure. fencectl prints it.
    std::function<void(const std::string& last_error)> on_retry;
};

constexpr milliseconds kRetryNoticeAfter{1'000};

enum class ErrorKind : std::uint8_t {
    kHeld,         // 409: the key is held by someone else (or the wait ran out)
    kNotHeld,      // 404 on release/keepalive: the key is not held with that token
    kNotFound,     // 404 on get: no such lock
    kBadRequest,   // 400: the server named what was wrong
    kUnavailable,  // no member answered usefully (connection errors, 503 no_leader) by the deadline
    kProtocol,     // an answer we cannot understand (bad JSON, unexpected status, redirect loop)
    kNotAuthorized,  // 401 (no or unknown credentials) or 403 (no permission on that key); see http_status
    kUnknownMember,  // 404 unknown_member: no member of that ID in the configuration
    kRefused,        // 409 member_change_refused: the membership change is not allowed now (message says why)
    kNotPgfence,     // an endpoint answered HTTP that is not a pgfence member's (a body that is not a JSON object)
    kCompacted,      // 410 compacted: a watch from a revision older than the history kept (see oldest_revision),
                     // or a token older than the token history kept (see oldest_token)
    kUnknownToken,   // 404 unknown_token: no such token was issued (GET /v1/tokens/{token})
    kNotApplied,     // 404 not_applied: the member has not applied the entries that may issue the token (yet);
                     // not "never issued" (see applied_token)
};

const char* to_string(ErrorKind kind);

// The exit code of every pgfence tool (client/exit_codes.h) for an error of
// this kind; `lease_call` says a not_held came from keepalive (a lost lease)
// rather than from release (not found).
int exit_code_of(ErrorKind kind, bool lease_call = false);

struct Error {
    ErrorKind kind = ErrorKind::kProtocol;
    std::string message;  // says what happened, with the server's message when it sent one
    int http_status = 0;  // 0 when no HTTP answer was involved
    std::uint64_t oldest_revision = 0;  // kCompacted: the oldest revision the member still keeps
    std::uint64_t oldest_token = 0;     // kCompacted from the token history: the oldest token it still keeps
    std::uint64_t applied_token = 0;    // kNotApplied: the highest token the member's applied entries could issue
    bool member_answered = false;       // kUnavailable: some member answered 503 (the request arrived)
};

// An acquire's 400 about its lease or wait, in the terms of the flags the
// user typed (`--lease 1h is longer than the cluster allows: it grants
// leases from 500ms to 5m`); any other error's message as it is.
std::string in_flag_terms(const Error& error, milliseconds lease, milliseconds wait);

// Either a value or an Error.
template <class T>
class Result {
public:
    Result(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
    Result(Error error) : v_(std::move(error)) {}      // NOLINT(google-explicit-constructor)
    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    const T& value() const { return std::get<0>(v_); }
    T& value() { return std::get<0>(v_); }
    const Error& error() const { return std::get<1>(v_); }
    // The error's message, or "" on success (handy in logs and test messages).
    std::string message() const { return ok() ? std::string() : error().message; }

private:
    std::variant<T, Error> v_;
};

struct AcquireRequest {
    std::string key;
    milliseconds lease{10'000};
    milliseconds wait{0};  // > 0: queue FIFO behind the holder for up to this long
    std::string owner;     // optional; the same owner re-acquiring gets its token back
    // A set of 2..64 distinct keys acquired all or nothing under one lease
    // and one token (docs/http-api.md "Several keys under one lease"); `key`
    // is then ignored.
    std::vector<std::string> keys{};
};

// A campaign in election `name` (POST /v1/election/campaign): an acquire of
// the election's key whose lock publishes `value` while it leads.
struct CampaignRequest {
    std::string name;
    std::string value;
    milliseconds lease{10'000};
    milliseconds wait{0};  // > 0: queue FIFO behind the leader for up to this long
    std::string owner;
};

struct Lease {
    std::string key;  // a set's: its first key; a campaign's: the election's key ("election/" + name)
    // A set's keys, in the order asked ({key} for one key): all held with `token`.
    std::vector<std::string> keys;
    // A set's token proofs, one per key of `keys` (signed grants only).
    std::vector<std::string> proofs;
    std::uint64_t token = 0;
    std::string name;   // a campaign's election, "" for a lock
    std::string value;  // a campaign's: what the lock publishes
    milliseconds lease{0};
    std::string owner;
    // The grant's token proof when the cluster signs grants
    // (--token-signing-key-file), else "": what pg_fence verifies through
    // SET LOCAL pg_fence.proof or a `proof` argument (docs/sql.md).
    std::string proof;
    // Send time of the FIRST request of the call: with an owner, an earlier
    // attempt whose answer was lost may be the one that created the grant.
    Clock::time_point sent_at;
    Clock::time_point received_at;
    std::uint64_t max_clock_drift_ppm = kDefaultMaxClockDriftPpm;  // the client's rho
    // Stop using the lease by then: sent_at + lease * (1 - rho).
    Clock::time_point deadline() const { return sent_at + usable_lease(lease, max_clock_drift_ppm); }
    // The grant's write numbers for pg_fence's sequenced mode (client/sequence.h):
    // 1, 2, 3, ... from any thread; copies of a Lease share one sequence.
    // nullopt once the last bigint was handed out.
    std::shared_ptr<WriteSequence> sequence = std::make_shared<WriteSequence>();
    std::optional<std::int64_t> next_seq() const { return sequence->next(); }
};

struct KeepaliveResult {
    std::string key;                // a set's: its first key
    std::vector<std::string> keys;  // a set's keys ({key} for one key)
    std::uint64_t token = 0;
    milliseconds ttl{0};        // as the leader answered: the full lease, restarted
    Clock::time_point sent_at;  // send time of the request that succeeded
    std::uint64_t max_clock_drift_ppm = kDefaultMaxClockDriftPpm;  // the client's rho
    // Stop using the lease by then: sent_at + ttl * (1 - rho).
    Clock::time_point deadline() const { return sent_at + usable_lease(ttl, max_clock_drift_ppm); }
};

struct LockInfo {
    std::string key;
    std::uint64_t token = 0;
    std::string owner;
    milliseconds lease{0};
    milliseconds ttl{0};
    // The ID of the key that signed the proof last handed out for its lease
    // (docs/http-api.md, GET /v1/locks): 16 hex digits, "none" or "unknown"
    // ("" from a member that does not report it).
    std::string kid;
};

// An election's leader (GET /v1/election/leader).
struct LeaderInfo {
    std::string name;
    std::string key;
    std::string value;
    std::uint64_t token = 0;  // the leader's fencing epoch
    std::string owner;
    milliseconds lease{0};
    milliseconds ttl{0};
};

struct Proclaimed {
    std::string name;
    std::uint64_t token = 0;
    std::string value;
};

struct MemberStatus {
    std::string endpoint;  // where it was asked
    std::string id, role, leader;
    std::uint64_t term = 0, commit_index = 0, applied_index = 0;
    std::optional<bool> voter;  // false: a learner (absent when the member does not say)
    std::vector<Endpoint> member_endpoints;  // client addresses the member listed, if any
    std::string json;  // the raw answer, for -o json
};

struct Released {};

// A token's life as one member applied it (GET /v1/tokens/{token},
// docs/http-api.md). Everything but `keepalives` is derived from the log,
// the same on every member; `keepalives` is what the answering member saw
// while it led, so a caller asks every member and merges them.
struct TokenMoment {
    std::optional<std::uint64_t> index;    // the log entry (null: not known here)
    std::optional<std::uint64_t> wall_ms;  // the leader's wall clock carried in the entry (null: none)
};
struct TokenEnd {
    // "held" (not ended), "released", "expired", "phantom", "restore" or "superseded".
    std::string how;
    std::optional<std::uint64_t> index;
    std::optional<std::uint64_t> wall_ms;
    std::optional<std::uint64_t> last_keepalive_wall_ms;
};
struct TokenKeepalives {
    std::uint64_t observed_by = 0;  // the member that answered
    bool while_leader = false;      // it saw keepalives of this token as leader
    std::uint64_t ok = 0;
    std::optional<std::uint64_t> last_ok_wall_ms;
    std::uint64_t refused = 0;
    std::optional<std::uint64_t> last_refused_wall_ms;
    std::string last_refused_reason;  // "" when none
};
struct TokenLife {
    std::uint64_t token = 0;
    std::string key;                // a set's: its first key
    std::vector<std::string> keys;  // a set's keys ({key} for one key)
    std::string owner;
    milliseconds lease{0};
    TokenMoment granted;
    TokenEnd ended;
    std::optional<std::uint64_t> next_token;  // the token granted next on the same key
    TokenKeepalives keepalives;
    std::string endpoint;  // the member that answered
    std::string json;      // this token's object as the member answered it, for -o json
};
struct KeyHistory {
    std::string key;
    std::vector<TokenLife> tokens;  // newest first
    std::string endpoint;           // the member that answered
    std::string json;               // the raw answer, for -o json
};
// The most tokens one key's history answer holds (GET /v1/keys/{key}/history?limit=).
constexpr std::size_t kMaxKeyHistoryLimit = member::kMaxKeyHistoryTokens;

// One member of the configuration in force, as GET /v1/members lists it.
struct MemberEntry {
    std::uint64_t id = 0;
    bool voter = false;        // false: a learner (replicated to, never counted)
    std::string peer_addr;     // HOST:PORT ("" when not known)
    std::string client_addr;   // HOST:PORT ("" when not known)
    bool caught_up = false;    // a learner that may be promoted now
    std::uint64_t match_index = 0;
};
struct MemberList {
    std::uint64_t cluster_id = 0;
    std::uint64_t config_index = 0;  // the entry of the configuration (0: the first one)
    std::uint64_t leader = 0;
    std::vector<MemberEntry> members;
    std::string json;  // the raw answer, for -o json
};

class Client {
public:
    explicit Client(Options options);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    Result<Lease> acquire(const AcquireRequest& request);
    // An acquire of the set `keys` (2..64 distinct keys) under one lease.
    Result<Lease> acquire_many(const std::vector<std::string>& keys, AcquireRequest request);
    Result<Released> release(const std::string& key, std::uint64_t token);
    // A whole set's release and keepalive (a key alone of a set is refused:
    // ErrorKind::kBadRequest, "part_of_set").
    Result<Released> release(const std::vector<std::string>& keys, std::uint64_t token);
    Result<KeepaliveResult> keepalive(const std::vector<std::string>& keys, std::uint64_t token,
                                      std::optional<Clock::time_point> deadline = std::nullopt);
    // `deadline` (optional) cuts the call short, e.g. at the local lease deadline.
    Result<KeepaliveResult> keepalive(const std::string& key, std::uint64_t token,
                                      std::optional<Clock::time_point> deadline = std::nullopt);
    Result<LockInfo> get(const std::string& key);

    // Elections (docs/http-api.md "Elections"). campaign: leader once
    // granted (kHeld when the wait ran out); its lease is kept alive with
    // keepalive(lease.key, lease.token). proclaim and resign: kNotHeld when
    // the election is not led with that token. leader: kNotFound when the
    // election has no leader.
    Result<Lease> campaign(const CampaignRequest& request);
    Result<Proclaimed> proclaim(const std::string& name, std::uint64_t token, const std::string& value);
    Result<Released> resign(const std::string& name, std::uint64_t token);
    Result<LeaderInfo> leader(const std::string& name);
    // Follows election `name` by polling leader() every `interval` (at
    // least kMinObserveInterval; there is no stream): calls `changed` with
    // the leader (nullopt: none) first and then at each change of token or
    // value, until `changed` returns false or `until` passes (Ok), or a poll
    // fails otherwise than with kNotFound (its Error). A change is seen up to
    // one interval late; one shorter than an interval may be missed.
    Result<Released> observe(const std::string& name, milliseconds interval, Clock::time_point until,
                             const std::function<bool(const std::optional<LeaderInfo>&)>& changed);
    // Every held lock whose key starts with `prefix` ("": all), sorted by
    // key, asked for page by page (GET /v1/locks?prefix=&after=&limit=,
    // kListPageSize a page): not one snapshot, a lock changed meanwhile may
    // show or not. At most kMaxListedLocks (more: a protocol error).
    Result<std::vector<LockInfo>> list(const std::string& prefix = "");
    // Status of the first member that answers (any role).
    Result<MemberStatus> status();
    // Status of one given member, without redirects or retries elsewhere.
    Result<MemberStatus> status_of(const Endpoint& endpoint);

    // Membership (admin; the leader answers): the configuration in force, and
    // changes answered with the configuration once the change applied.
    Result<MemberList> members();
    Result<MemberList> add_member(std::uint64_t id, const std::string& peer_addr, const std::string& client_addr);
    Result<MemberList> promote_member(std::uint64_t id);
    Result<MemberList> remove_member(std::uint64_t id);
    // A backup from the leader (GET /v1/snapshot, admin): the backup file's
    // bytes as the leader answered them (storage/backup.h decodes and checks
    // them). `timeout` bounds the whole call (a large table takes a while).
    Result<std::string> snapshot(milliseconds timeout);
    // Follows lock events (GET /v1/watch) until on_event answers kStop or an
    // error retrying cannot fix; resumes on another member when the stream
    // breaks, with no gap and no duplicate. The contract: watch_stream.h.
    Result<WatchEnd> watch(const WatchRequest& request, const WatchCallback& on_event);
    // A token's life (GET /v1/tokens/{token}) from the first member that
    // answers: kUnknownToken when no such token was issued, kCompacted
    // (Error::oldest_token) when it is older than the history kept. A member
    // that has not applied the token yet (404 not_applied) sends it on to
    // every endpoint in turn; kNotApplied (Error::applied_token) when none
    // has applied it, which does not mean it was never issued.
    Result<TokenLife> token_life(std::uint64_t token);
    // The same from one given member, without redirects or retries
    // elsewhere (kNotApplied as it answers): ask each member to merge their
    // `keepalives`.
    Result<TokenLife> token_life_of(const Endpoint& endpoint, std::uint64_t token);
    // The tokens of `key` the member keeps, newest first, at most `limit`
    // (1..kMaxKeyHistoryLimit) (GET /v1/keys/{key}/history).
    Result<KeyHistory> key_history(const std::string& key, std::size_t limit = member::kDefaultKeyHistoryTokens);
    Result<KeyHistory> key_history_of(const Endpoint& endpoint, const std::string& key,
                                      std::size_t limit = member::kDefaultKeyHistoryTokens);
    // What member `id`, added and about to start with --join, asks (no
    // credentials needed): kUnknownMember when it was not added.
    Result<MemberList> join_info(std::uint64_t id);

    const Options& options() const;

private:
    class Impl;
    std::unique_ptr<Impl> impl_;
};

// Endpoints from `flag` if non-empty, else FENCE_ENDPOINTS, else kDefaultEndpoints.
EndpointsParse endpoints_from(const std::string& flag);

// Where TLS files and the bearer secret come from when no flag names them.
// (FENCE_KEY is the lock key `fencectl run` exports; the key *file* is FENCE_KEY_FILE.)
constexpr milliseconds kMinObserveInterval{50};      // Client::observe: the shortest poll interval
constexpr std::size_t kListPageSize = 1000;            // Client::list: locks asked for per page
constexpr std::size_t kMaxListedLocks = 10'000'000;    // more than a full table of 1-byte keys holds

constexpr std::string_view kCaFileEnv = "FENCE_CACERT_FILE";
constexpr std::string_view kCertFileEnv = "FENCE_CERT_FILE";
constexpr std::string_view kKeyFileEnv = "FENCE_KEY_FILE";
constexpr std::string_view kBearerFileEnv = "FENCE_BEARER_FILE";

// Fills options' ca_file, cert_file, key_file and bearer from the given paths,
// each one falling back to its environment variable when empty. The bearer
// file holds the secret on its first line (surrounding blanks and the line end
// are dropped; at most 4 KiB). The TLS files are loaded once here, so a bad
// one is reported now. "" or an error naming the file.
std::string load_credentials(const std::string& ca_file, const std::string& cert_file, const std::string& key_file,
                             const std::string& bearer_file, Options& options);

}  // namespace pgfence::client
