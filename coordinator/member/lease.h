// The leader-local lease of one held lock and the clock-rate margin on its
// expiry (docs/design.md "Time", docs/guarantees.md "Clocks: what is assumed").
//
// rho (--max-clock-drift-ppm, default 50000 ppm = 5%) is the largest error of
// any member's or client's clock RATE against real time: while d passes on a
// clock, between d/(1+rho) and d/(1-rho) passes in real time.
//
// The rule here: the leader proposes Expire only once lease_ms * (1 + rho)
// has passed on its own monotonic clock since the lease (re)started (the
// grant applied, a keepalive, or a new leader's restart_all_leases()). Why
// that never expires a lease before the client's send + lease in real time:
//
//   - the leader's clock runs at a rate r_L in [1 - rho, 1 + rho], so the real
//     time from the (re)start to Expire is >= lease * (1 + rho) / r_L >= lease;
//   - the (re)start happens after the client sent its request (the grant is
//     applied, the keepalive handled, or the lease restarted at its full
//     length by a new leader, all after that send);
//   - so in real time Expire comes after send + lease.
//
// The client's half (client.h, Lease::deadline()) stops using the lease by
// its own clock's send + lease * (1 - rho), which is real time <= send +
// lease. Together: a holder that stops by its deadline never overlaps the
// next holder while every clock rate is within rho. Beyond rho leases may
// overlap; the fencing token still protects the data.
//
// A run of the lease is the time from one (re)start to its end: lease_ms,
// except for a run a new leader restarts from its lock's checkpoint
// (lock::Lock::remaining_ms), whose length is that remaining time. The same
// rule holds for it: the leader proposes Expire once run_ms * (1 + rho) has
// passed since the run started, and the run started after the real time at
// which the holder's deadline was at most run_ms away (docs/guarantees.md
// "Checkpoints" shows why checkpoint_remaining_ms() gives such a run).
//
// `deadline` is the NOMINAL end (start + run_ms): the HTTP API's ttl_ms
// counts down to it, so the margin is invisible in the API; only the point at
// which Expire is considered (`expire_at`) adds it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "lock/commands.h"

namespace pgfence::member {

// A reading of the member's monotonic clock (only differences matter). The
// core never reads a clock: every input carries the time it happened.
using Time = std::chrono::nanoseconds;

constexpr std::uint64_t kDefaultMaxClockDriftPpm = 50'000;  // rho = 5%
constexpr std::uint64_t kMaxClockDriftPpmLimit = 500'000;   // 50%: the largest rho accepted anywhere

// The bounds an acquire's lease_ms and wait_ms are checked against when the
// server is given no others (--min-lease, --max-lease, --max-wait;
// net::RequestLimits). A lease is at most lock::kMaxLeaseMs (24h) whatever
// the flags say.
constexpr std::uint64_t kDefaultMinLeaseMs = 1'000;
constexpr std::uint64_t kDefaultMaxLeaseMs = 300'000;
constexpr std::uint64_t kDefaultMaxWaitMs = 300'000;

// lease_ms * rho in whole ms, rounded up: how long after the nominal deadline
// Expire may first be proposed. The one place the margin is computed.
// No overflow: lease_ms <= 24h (--max-lease) and ppm <= 500000 (options.h).
constexpr std::uint64_t expiry_margin_ms(std::uint64_t lease_ms, std::uint64_t max_clock_drift_ppm) {
    return (lease_ms * max_clock_drift_ppm + 999'999) / 1'000'000;
}

// The time a lease's holder may still hold it, checkpointed at `now` into a
// lease whose current run of `run_ms` started at `started` (both on this
// leader's clock): run_ms less the REAL time that has surely passed since,
// the elapsed time on this clock divided by (1 + rho) (a fast clock shows
// more time than passed), rounded so that the result only grows. 0 when
// nothing is left. An upper bound of the time left before the holder's
// deadline, so a new leader that waits this long times (1 + rho) on its own
// clock, from a moment after this one, never expires the lease early.
constexpr std::uint64_t checkpoint_remaining_ms(std::uint64_t run_ms, std::chrono::nanoseconds started,
                                                std::chrono::nanoseconds now, std::uint64_t max_clock_drift_ppm) {
    if (now <= started) return run_ms;
    const auto elapsed_ms = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now - started).count());  // rounded down
    // No overflow: elapsed_ms <= run_ms <= 24h when it matters (capped first).
    const std::uint64_t capped_ms = elapsed_ms < run_ms ? elapsed_ms : run_ms;
    const std::uint64_t surely_passed_ms = capped_ms * 1'000'000 / (1'000'000 + max_clock_drift_ppm);
    return run_ms - surely_passed_ms;
}

// Where a lease stands on its way to Expire:
//   kRunning    -> kConfirming  (expire_at passed: a leadership round is asked for)
//   kConfirming -> kRunning     (the round failed, or was asked for before the lease's current
//                                expire_at: a keepalive or re-grant restarted it meanwhile)
//   kConfirming -> kExpiring    (confirmed after expire_at: Expire{key, token} proposed next)
//   kExpiring   -> kRunning     (its Expire could not be proposed: due again at its expire_at)
// kExpiring is final once its Expire is proposed: keepalive fails, an
// idempotent re-grant is refused, and the lease leaves the map when the
// Expire (or a Release) applies.
enum class LeasePhase : std::uint8_t { kRunning, kConfirming, kExpiring };

// The `kid` of a lease: the ID of the key that signed the token proof last
// handed out with a Granted answer of it (net/token_signer.h; the shell tells
// the core which key it signs with, Core::set_proof_kid), or one of these.
// GET /v1/locks and the metric pgfence_leases_by_kid report it, so that a
// key rotation can wait for the old key's leases to end (docs/security.md).
inline constexpr std::string_view kNoProofKid = "none";          // no proof handed out (the member signs none, or no answer yet)
inline constexpr std::string_view kUnknownProofKid = "unknown";  // restarted by a new leader: a former leader answered it

// A lease's kid is kept as a number (Lease::kid) that its LeaseSet maps to
// the name (LeaseSet::kid()): at most kMaxProofKidBytes bytes, the 16 hex
// digits of a kid or one of the names above; a longer value is kept as
// kUnknownProofKid. Two numbers are fixed: kNoKidNumber (a Lease's own
// until answered) and kUnknownKidNumber; the LeaseSet gives out the rest.
inline constexpr std::size_t kMaxProofKidBytes = 16;
inline constexpr std::uint16_t kNoKidNumber = 0;       // kNoProofKid
inline constexpr std::uint16_t kUnknownKidNumber = 1;  // kUnknownProofKid

// Invariant: expire_at >= deadline; expire_at == deadline + expiry_margin_ms(run_ms,
// rho) except after a phantom grant expired, which brings each of them forward to the moment
// it ended the lease when it was later.
//
// `answers` counts the answers that promised this lease to a client and still
// stand: the Granted answers handed out for it (its grant's and same-owner
// re-grants' of its token) less those reported unwritten, and the keepalives
// answered. A lease a new leader restarted starts at 1: a former leader may
// have answered it. A phantom grant expires a lease only while it is 0, so a
// lease answered to anyone is never cut before its deadline, whatever the
// order of the writes reported (docs/guarantees.md, "Phantom locks").
//
// 56 bytes on LP64, no padding: the times and the log index, then lease_ms
// and run_ms in 32 bits (at most lock::kMaxLeaseMs), then answers, phase,
// whether a checkpoint is due and the kid's number.
struct Lease {
    static constexpr Time kNoCheckpoint = Time::max();

    lock::Token token = 0;
    Time started{};    // this run's (re)start
    Time deadline{};   // started + run_ms: the nominal end, reported as ttl_ms
    Time expire_at{};  // deadline + margin: Expire is considered from here on
    // The log index of the last Checkpoint naming this lease proposed in
    // this leadership (0: none): one above the applied index is in flight.
    std::uint64_t checkpoint_index = 0;
    std::uint32_t lease_ms = 0;
    std::uint32_t run_ms = 0;  // this run's length: lease_ms, or the checkpoint a new leader restarted it from
    std::uint32_t answers = 0;  // saturates at kMaxAnswers (then never cut)
    LeasePhase phase = LeasePhase::kRunning;
    // This run's checkpoint is due at checkpoint_at(); false when none is
    // (checkpoints off, or proposed already in this run).
    bool checkpoint_due = false;
    std::uint16_t kid = kNoKidNumber;  // its LeaseSet's number for the kid (kNoProofKid until answered)

    // When this run's checkpoint is due (started + run_ms / 2), kNoCheckpoint when none is.
    Time checkpoint_at() const {
        return checkpoint_due ? started + std::chrono::milliseconds(run_ms / 2) : kNoCheckpoint;
    }
    static constexpr std::uint32_t kMaxAnswers = std::numeric_limits<std::uint32_t>::max();

    bool expiring() const { return phase == LeasePhase::kExpiring; }
    bool answered() const { return answers > 0; }

    // (Re)starts the lease at `now` for a run of `run` ms (0: lease_ms): on
    // grant apply, keepalive, or a new leader's restart (from a checkpoint:
    // its remaining time). `checkpoints`: this run's checkpoint is due at its half.
    // `run` is at most lock::kMaxLeaseMs (a checkpoint is at most its lease):
    // std::logic_error past it.
    void restart(Time now, std::uint64_t max_clock_drift_ppm, bool checkpoints = false, std::uint64_t run = 0) {
        run_ms = run == 0 ? lease_ms : lock::lease_ms_u32(run, "Lease: run_ms");
        started = now;
        deadline = now + std::chrono::milliseconds(run_ms);
        expire_at = deadline + std::chrono::milliseconds(expiry_margin_ms(run_ms, max_clock_drift_ppm));
        checkpoint_due = checkpoints;
    }

    // `lease_ms` is at most lock::kMaxLeaseMs (validate()): std::logic_error past it.
    static Lease start(lock::Token token, std::uint64_t lease_ms, Time now, std::uint64_t max_clock_drift_ppm,
                       bool checkpoints = false) {
        Lease l;
        l.token = token;
        l.lease_ms = lock::lease_ms_u32(lease_ms, "Lease: lease_ms");
        l.restart(now, max_clock_drift_ppm, checkpoints);
        return l;
    }
};
static_assert(sizeof(void*) != 8 || sizeof(Lease) == 56);  // LP64, as said above

}  // namespace pgfence::member
