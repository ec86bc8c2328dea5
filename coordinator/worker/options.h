// fence-worker's command line: what to lock, how long, where to write, how often.
//
// parse_options() never exits and never prints: it returns the options, a
// request for --help, or an error that names the bad flag and value.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/exit_codes.h"

namespace pgfence::worker {

using std::chrono::milliseconds;

// Which write path carries the token into PostgreSQL (see pg_writer.h).
enum class Mode : std::uint8_t {
    kGuard,         // UPDATE ... SET n = n + 1, fence = $token  (the fence_guard trigger)
    kFencedUpdate,  // SELECT ... FOR UPDATE, then fenced_update(..., $token)
    kAdmit,         // fence_admit('ledger:K', $token), then two plain tables
    kSequenced,     // kSequencedWrites numbered writes to worker_sequenced, then a replay of the first
    kMixed,         // one of the four above, chosen at random per iteration
};

const char* to_string(Mode mode);

// Who renews the lease while the work runs (--renew).
enum class Renew : std::uint8_t {
    kThread,   // a keepalive thread, every lease/3, whatever the work does
    kBetween,  // the worker itself, one KeepAlive before each piece of --work (a
               // single-threaded job's loop): a piece longer than the lease loses it
};

// Exit codes: the project's one scheme (client/exit_codes.h); fence-worker
// ends with kExitOk, kExitOther, kExitUsage, kExitHeld, kExitLostLease,
// kExitUnavailable, kExitNotAuthorized, kExitStale, kExitDatabase or
// kExitNotPgfence.

// Writes per lease on the sequenced path: (token, 1), (token, 2), ... then
// (token, 1) once more, the delayed duplicate the fence must refuse.
constexpr int kSequencedWrites = 2;

// The adversary's (--forge) forged and misdirected proofs, sent with a real
// grant (key A, token T, proof P) on one write path per iteration:
enum class Forgery : std::uint8_t {
    kCorrupt,     // (A, T) with P's signature changed in one character
    kOtherKey,    // (B, T) with P, B another --key (skipped with one key)
    kOtherToken,  // (A, T + kForgedTokenOffset) with P
    kUntrusted,   // (A, T) signed by the --forge key, which PostgreSQL does not trust
    kMissing,     // (A, T) with no proof at all
};
constexpr Forgery kForgeries[] = {Forgery::kCorrupt, Forgery::kOtherKey, Forgery::kOtherToken,
                                  Forgery::kUntrusted, Forgery::kMissing};
const char* to_string(Forgery forgery);
// kOtherToken's token is the grant's + 2^40: no cluster of a test grants such a
// token, so a fence at or above it can only come from a forged proof.
constexpr std::uint64_t kForgedTokenOffset = std::uint64_t{1} << 40;

// Bounds on what the command line may ask for.
constexpr std::size_t kMaxKeys = 64;
constexpr long kMaxIterations = 10'000'000;
constexpr milliseconds kMinLease{100};
constexpr milliseconds kMaxLease{std::chrono::hours(1)};
constexpr std::size_t kMaxWorkPieces = 64;

struct Options {
    std::vector<std::string> keys;  // --key, repeatable or comma separated
    milliseconds lease{2'000};      // --lease
    milliseconds wait{0};           // --wait: queue behind the holder this long
    // --work D[,D...]: pretend to work before writing, in pieces of these
    // lengths (one "work" log line each); empty: no work.
    std::vector<milliseconds> work;
    Renew renew = Renew::kThread;   // --renew thread|between
    milliseconds duration{0};       // --duration: stop starting iterations after this (0: none)
    std::string conninfo;           // --conninfo: libpq connection string ("" = PG* env)
    // --advance R (repeatable): publish each iteration's token at these
    // resources (fence_advance, over --conninfo) before its work starts.
    std::vector<std::string> advance;
    std::string endpoints;          // --endpoints (else FENCE_ENDPOINTS)
    std::string cacert, cert, key, bearer_file;  // --cacert --cert --key --bearer-file (else FENCE_*_FILE)
    Mode mode = Mode::kGuard;       // --mode
    long iterations = 1;            // --iterations
    std::string worker_id;          // --worker-id (default: fence-worker-<pid>)
    std::string log_path;           // --log: CSV event log, appended
    bool keep_going = false;        // --keep-going: log failures and continue
    bool lease_check = true;        // --no-lease-check clears it (tests only)
    bool setup = false;             // --setup: create the schema and exit
    std::uint64_t seed = 0;         // --seed (0: derived from the worker id)
    bool print_clock = false;  // --clock: print CLOCK_MONOTONIC ns and exit
    bool quiet = false;             // --quiet: no per-iteration narration
    bool proof = false;             // --proof: send each grant's token proof with every write
    std::string forge_key_file;     // --forge: the adversary; the untrusted key it signs with
    milliseconds pause{0};          // --pause: sleep between iterations
    // --max-clock-drift-ppm: rho for the local lease deadline (client.h)
    std::uint64_t max_clock_drift_ppm = client::kDefaultMaxClockDriftPpm;
};

struct ParseResult {
    std::optional<Options> options;  // set on success
    bool help = false;               // --help was asked for
    bool version = false;            // --version was asked for
    std::string error;               // set on failure; names the flag and the value
};

ParseResult parse_options(int argc, const char* const* argv);

// The --help text.
std::string usage();

}  // namespace pgfence::worker
