// fencectl's command line, parsed by hand (no Boost.ProgramOptions).
//
//   fencectl [GLOBAL...] COMMAND [ARGS...] [FLAGS...] [-- CMD ARGS...]
//
// Global flags (anywhere before "--"): --endpoints H:P,..., --timeout DUR,
// --max-clock-drift-ppm N, --cacert F, --cert F, --key F, --bearer-file F,
// -o/--output table|json, -h/--help, --version. Flags take their value as the next
// argument or after '=' (--lease=10s). Every error names the bad value.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pgfence::cli {

using std::chrono::milliseconds;

enum class Output { kTable, kJson };

struct Args {
    std::string command;  // empty with --help alone
    bool help = false;
    bool version = false;  // --version: print it and exit
    std::string endpoints;  // --endpoints; empty means FENCE_ENDPOINTS or the default
    std::optional<milliseconds> timeout;
    std::optional<std::uint64_t> max_clock_drift_ppm;  // rho for the local deadline (client.h)
    std::string cacert, cert, key, bearer_file;         // TLS and credentials (else FENCE_*_FILE)
    Output output = Output::kTable;
    bool output_given = false;
    std::vector<std::string> positional;  // KEY, TOKEN...
    std::optional<milliseconds> lease, wait, grace;
    std::string owner;
    std::string value;               // elect --value; proclaim's VALUE
    std::string prefix;              // list: only keys starting with it; watch: the keys watched
    bool prefix_given = false;       // --prefix was given (watch --prefix "" is every key)
    std::optional<std::uint64_t> rev;  // watch --rev N: from revision N
    bool progress = false;             // watch --progress: print start and progress lines too
    std::vector<std::string> child;  // run: CMD ARGS... after "--"
    // run, acquire: --advance R (repeatable): publish the token at each
    // resource with fence_advance before CMD starts (or the token is printed),
    // over --dsn (libpq conninfo; "" = the PG* environment).
    std::vector<std::string> advance;
    std::string dsn;
    bool dsn_given = false;
    std::uint64_t token = 0;         // release/keepalive/explain: parsed TOKEN
    // explain: TOKEN, or --key K (the lock key; explain's --key is not the
    // TLS key, which comes from FENCE_KEY_FILE there) with --since/--until
    // (epoch ms; nullopt: unbounded) and --limit; --client-log FILE.
    std::string explain_key;
    bool by_key = false;  // explain --key K (not TOKEN)
    std::optional<std::int64_t> since_ms, until_ms;
    std::optional<std::uint64_t> limit;
    std::string client_log;
    // member: the subcommand (list, add, promote, remove), its ID, and add's addresses
    std::string subcommand;
    std::uint64_t member_id = 0;
    std::string peer_addr, client_addr;
};

struct ArgsParse {
    Args args;
    std::string error;  // non-empty: a usage error, already phrased for stderr
};

// `argv` without the program name.
ArgsParse parse_args(const std::vector<std::string>& argv);

// A --since/--until time: "YYYY-MM-DDTHH:MM:SS[.mmm]Z" (UTC), or a duration
// before `now_ms` ("15m"). nullopt with `error` set when it is neither.
std::optional<std::int64_t> parse_time(const std::string& text, std::int64_t now_ms, std::string& error);

// Strict decimal token: 1..INT64_MAX (tokens are PostgreSQL bigints).
std::optional<std::uint64_t> parse_token(const std::string& text);

constexpr milliseconds kDefaultLease{10'000};
constexpr milliseconds kDefaultGrace{2'000};
constexpr milliseconds kDefaultWait{30'000};
// elect without --wait campaigns in rounds of this long, until leader.
constexpr milliseconds kElectWaitRound{30'000};
constexpr milliseconds kDefaultTimeout{10'000};
constexpr milliseconds kMinAttemptTimeout{100};  // run: floor of the per-request timeout
// explain --key: the tokens of the key looked at (newest first) by default, at
// most; --limit goes up to client::kMaxKeyHistoryLimit.
constexpr std::uint64_t kDefaultExplainLimit = 20;

}  // namespace pgfence::cli
