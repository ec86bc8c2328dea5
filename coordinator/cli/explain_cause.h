// Why a token's write was refused as stale: the cause `fencectl explain`
// names, decided from the evidence alone. Pure: no I/O, no clock, no Boost;
// the caller gathers the evidence (explain_command.h) and this decides.
//
// Clocks. Coordinator times (wall_ms) are the leader's wall clock carried in
// the log; rejection times are PostgreSQL's clock; the client log's times are
// the holder's CLOCK_MONOTONIC and are only compared with each other. The
// rules compare coordinator and database times directly: on different
// machines a clock offset between them shifts every such comparison by that
// offset (docs/operations.md "Investigating stale writes").
//
// The rules, tried in this order; the first that holds decides, and its
// evidence lines say which facts decided it (docs/cli.md "explain"):
//
//  rule                              holds when
//  --------------------------------  ------------------------------------------------
//  0 undetermined                    the database was not read (no --dsn), or no
//                                    member answered for the token
//  1 contention                      no late-holder rejection (any reason but
//                                    'proof') carries the token, the rejection ring
//                                    covers the token (it is on and its oldest row
//                                    is no newer than the token's end), the client
//                                    log (if given) shows no stale write, and a
//                                    newer token followed on the key (a waiter got
//                                    it); else undetermined, saying which is missing
//  2 continued_after_failed_renewal  a keepalive of the token was answered with a
//                                    refusal before the refused write: in the client
//                                    log (not_held, or an error with an answer, sent
//                                    after the last ok keepalive before the write),
//                                    or, when the client log holds no write of the
//                                    token, counted by a member as refused at or
//                                    before the write's time
//  3 partitioned_holder              the client log shows keepalives of the token
//                                    sent after its last acknowledged one and before
//                                    the write that got no answer at all (not
//                                    `unavailable`: a member answered 503), and
//                                    whose request did not overlap a stall
//  4 paused_holder                   the client log shows the holder stalled (a
//                                    timer of the token's that woke at least a third
//                                    of the lease late: the process did not run)
//                                    across its lease's end (the last ok keepalive,
//                                    or the acquire, sent before the stall + the
//                                    lease), or with a `deadline` line inside it
//  5 continued_after_failed_renewal  the client log shows the holder's local lease
//                                    deadline passed without a successful keepalive
//                                    (a `deadline` line) before the write: it knew
//  6 lease_too_short                 the client log shows one piece of work of the
//                                    token that lasted longer than the lease, with
//                                    no keepalive of the token sent during it
//  7 paused_holder                   the coordinator ended the token as expired,
//                                    the last keepalive it saw arrived before the
//                                    expiry, and the write came after the expiry
//                                    (without a client log a network cut looks the
//                                    same: the evidence says so)
//  8 undetermined                    none of the above; `missing` says what
//                                    evidence would have decided it
//
// A client log with no line of the token counts as not given (`missing` says so).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pgfence::cli::explain {

enum class Cause : std::uint8_t {
    kPausedHolder,
    kPartitionedHolder,
    kLeaseTooShort,
    kContinuedAfterFailedRenewal,
    kContention,
    kUndetermined,
};

// "paused_holder", ... as the JSON `cause` value.
const char* to_string(Cause cause);

// The token as the coordinator's log tells it (the same on every member).
struct Life {
    std::uint64_t token = 0;
    std::string key;
    std::int64_t lease_ms = 0;
    std::optional<std::int64_t> granted_wall_ms;
    std::string ended_how;  // "held", "released", "expired", "phantom", "restore", "superseded"
    std::optional<std::int64_t> ended_wall_ms;
    std::optional<std::int64_t> last_keepalive_wall_ms;  // carried with an expiry
    std::optional<std::uint64_t> next_token;
};

// Keepalive arrivals merged over the members that answered: each counts
// what it saw as leader, so the counts add up and the last times are the
// latest of any member.
struct Keepalives {
    int members_answered = 0;
    int members_as_leader = 0;  // members that saw the token's keepalives while leading
    std::uint64_t ok = 0;
    std::optional<std::int64_t> last_ok_wall_ms;
    std::uint64_t refused = 0;
    std::optional<std::int64_t> last_refused_wall_ms;
    std::string last_refused_reason;
};

// The token granted next on the same key.
struct NextGrant {
    std::uint64_t token = 0;
    std::optional<std::int64_t> granted_wall_ms;
};

// One row of the database's fence_rejections that carried the token.
struct Rejection {
    std::int64_t at_ms = 0;  // PostgreSQL's clock, ms since the epoch
    std::uint64_t token = 0;
    std::optional<std::uint64_t> fence;  // the token that refused it
    std::string target;                  // relation or resource
    std::string path, reason, application_name;
    std::string lock_key;  // "" when unknown or hidden
};

// Whether a refusal of this reason is a late holder's: every reason but
// 'proof' (a token proof that does not verify) is one (stale, in_flight,
// preempted, ...).
bool is_late_holder(const Rejection& r);

// One line of the holder's own log (fence-worker's --log, event_log.h).
struct ClientEvent {
    std::string event;  // acquire, write, keepalive, work, stall, ...
    std::uint64_t token = 0;
    std::int64_t send_ns = 0, ack_ns = 0;  // holder's monotonic clock; 0: none
    std::string outcome;
    std::int64_t value = 0;
};

struct Evidence {
    Life life;
    Keepalives keepalives;
    std::optional<NextGrant> next;
    bool rejections_read = false;  // false: no --dsn
    // The database's rejection ring holds every refusal since the token's end
    // (it is on, and its oldest row is no newer than that); when false,
    // ring_gap says why not. Only then does a missing row mean no refusal.
    bool rejections_cover_token = false;
    std::string ring_gap;
    std::vector<Rejection> rejections;  // rows carrying the token, oldest first
    bool client_log_given = false;
    std::vector<ClientEvent> client_log;  // the token's lines, in file order
};

struct Explanation {
    Cause cause = Cause::kUndetermined;
    std::vector<std::string> evidence;  // the facts that decided it, one sentence each
    std::vector<std::string> missing;   // undetermined: what would decide it
};

// A stall at least this share of the lease counts as a pause (rule 4): one
// keepalive interval (fence-worker renews every lease/3).
constexpr std::int64_t kStallLeaseDivisor = 3;

Explanation classify(const Evidence& evidence);

}  // namespace pgfence::cli::explain
