#include "cli/args.h"

#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "client/client.h"
#include "client/duration.h"
#include "lock/commands.h"
#include "pgconn/advance.h"

namespace pgfence::cli {
namespace {

constexpr std::size_t kMaxArgs = 4096;

struct CommandSpec {
    const char* name;
    std::size_t positional;  // exact count
    const char* positional_names;
    bool lease_flags;  // --lease --wait --owner
    bool grace_flag;   // --grace
    bool output_flag;  // -o
    bool child;        // needs "-- CMD ARGS..."
};

// member: positional counts are checked per subcommand (validate_member).
constexpr std::size_t kVariable = static_cast<std::size_t>(-1);

// acquire, release and keepalive take several keys too (a set under one
// lease): kMoreKeys more positionals are allowed before the token.
constexpr std::size_t kMoreKeys = lock::kMaxGrantManyKeys - 1;

constexpr std::array<CommandSpec, 16> kCommands{{
    {"acquire", 1, "KEY [KEY...]", true, false, true, false},
    {"release", 2, "KEY [KEY...] TOKEN", false, false, false, false},
    {"keepalive", 2, "KEY [KEY...] TOKEN", false, false, true, false},
    {"run", 1, "KEY", true, true, false, true},
    {"elect", 1, "NAME", true, true, false, true},
    {"leader", 1, "NAME", false, false, true, false},
    {"proclaim", 3, "NAME TOKEN VALUE", false, false, true, false},
    {"resign", 2, "NAME TOKEN", false, false, false, false},
    {"seq", 0, "", false, false, false, false},
    {"get", 1, "KEY", false, false, true, false},
    {"list", 0, "", false, false, true, false},
    {"status", 0, "", false, false, true, false},
    {"member", kVariable, "list | add ID | promote ID | remove ID", false, false, true, false},
    {"snapshot", kVariable, "save FILE | status FILE", false, false, true, false},
    {"watch", kVariable, "KEY | --prefix P", false, false, false, false},
    {"explain", kVariable, "TOKEN | --key K", false, false, true, false},
}};

bool several_keys(const CommandSpec& c) {
    const std::string_view name = c.name;
    return name == "acquire" || name == "release" || name == "keepalive";
}

const CommandSpec* find_command(const std::string& name) {
    for (const CommandSpec& c : kCommands) {
        if (name == c.name) return &c;
    }
    return nullptr;
}

struct Parser {
    const std::vector<std::string>& argv;
    ArgsParse out;
    std::vector<std::string> given;  // flags seen, by canonical name

    // run's CMD goes after "--": said when run's words do not parse without it.
    std::string run_hint() const {
        const std::string& cmd = out.args.command;
        if ((cmd != "run" && cmd != "elect") || !out.args.child.empty()) return {};
        return "; " + cmd + "'s command goes after '--': fencectl " + cmd + (cmd == "run" ? " KEY" : " NAME") +
               " [FLAGS] -- CMD [ARGS...]";
    }

    bool error(std::string message) {
        if (out.error.empty()) out.error = std::move(message);
        return false;
    }

    bool duration(const std::string& flag, const std::string& value, std::optional<milliseconds>& into) {
        const client::DurationParse d = client::parse_duration(value);
        if (!d.value) return error(flag + ": " + d.error);
        into = *d.value;
        return true;
    }

    bool ppm(const std::string& flag, const std::string& value, std::optional<std::uint64_t>& into) {
        std::uint64_t n = 0;
        const char* end = value.data() + value.size();
        const auto [ptr, ec] = std::from_chars(value.data(), end, n);
        if (value.empty() || ec != std::errc() || ptr != end || n > client::kMaxClockDriftPpmLimit) {
            return error(flag + ": '" + value + "' must be 0.." + std::to_string(client::kMaxClockDriftPpmLimit) +
                         " (parts per million of clock rate; 50000 = 5%)");
        }
        into = n;
        return true;
    }

    // Applies one flag; `value` is empty for flags without a value.
    bool apply(const std::string& flag, const std::string& value) {
        Args& a = out.args;
        given.push_back(flag);
        if (flag == "--prefix") a.prefix_given = true;
        for (auto [name, field] : {std::pair{"--endpoints", &a.endpoints}, std::pair{"--owner", &a.owner},
                                   std::pair{"--peer-addr", &a.peer_addr}, std::pair{"--client-addr", &a.client_addr},
                                   std::pair{"--prefix", &a.prefix},
                                   std::pair{"--value", &a.value}}) {
            if (flag != name) continue;
            *field = value;
            return true;
        }
        for (auto [name, field] : {std::pair{"--cacert", &a.cacert}, std::pair{"--cert", &a.cert},
                                   std::pair{"--key", &a.key}, std::pair{"--bearer-file", &a.bearer_file}}) {
            if (flag != name) continue;
            if (value.empty() && flag == "--key" && a.command == "explain") {
                return error("explain --key: the lock key is empty ('')");
            }
            if (value.empty()) return error(flag + ": needs a file name");
            *field = value;
            return true;
        }
        if (flag == "--rev") {
            std::uint64_t n = 0;
            const char* end = value.data() + value.size();
            const auto [ptr, ec] = std::from_chars(value.data(), end, n);
            if (value.empty() || ec != std::errc() || ptr != end || n == 0) {
                return error("--rev: '" + value + "' must be a revision >= 1 (a Raft log index, as watch prints them)");
            }
            a.rev = n;
            return true;
        }
        if (flag == "--advance") {
            if (std::string why = pgconn::check_resource(value); !why.empty()) return error("--advance: " + why);
            if (a.advance.size() >= pgconn::kMaxAdvanceResources) {
                return error("--advance: at most " + std::to_string(pgconn::kMaxAdvanceResources) +
                             " resources (got another: '" + value + "')");
            }
            a.advance.push_back(value);
            return true;
        }
        if (flag == "--since" || flag == "--until") {
            std::string why;
            const auto now_ms = std::chrono::duration_cast<milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch()).count();
            const auto t = parse_time(value, now_ms, why);
            if (!t) return error(flag + ": " + why);
            (flag == "--since" ? a.since_ms : a.until_ms) = *t;
            return true;
        }
        if (flag == "--limit") {
            std::uint64_t n = 0;
            const char* end = value.data() + value.size();
            const auto [ptr, ec] = std::from_chars(value.data(), end, n);
            if (value.empty() || ec != std::errc() || ptr != end || n == 0 || n > client::kMaxKeyHistoryLimit) {
                return error("--limit: '" + value + "' must be 1.." + std::to_string(client::kMaxKeyHistoryLimit));
            }
            a.limit = n;
            return true;
        }
        if (flag == "--client-log") {
            if (value.empty()) return error("--client-log: needs a file name");
            a.client_log = value;
            return true;
        }
        if (flag == "--dsn") {
            a.dsn = value;
            a.dsn_given = true;
            return true;
        }
        if (flag == "--timeout") return duration(flag, value, a.timeout);
        if (flag == "--max-clock-drift-ppm") return ppm(flag, value, a.max_clock_drift_ppm);
        if (flag == "--lease") return duration(flag, value, a.lease);
        if (flag == "--wait") return duration(flag, value, a.wait);
        if (flag == "--grace") return duration(flag, value, a.grace);
        if (flag == "--output") {
            a.output_given = true;
            if (value != "json" && value != "table") {
                return error("-o/--output: unknown format '" + value + "' (use table or json)");
            }
            a.output = value == "json" ? Output::kJson : Output::kTable;
            return true;
        }
        return error("unknown flag '" + flag + "' (see fencectl --help)");
    }

    bool flag(std::size_t& i) {
        std::string name = argv[i], value;
        bool inline_value = false;
        if (const auto eq = name.find('='); name.starts_with("--") && eq != std::string::npos) {
            value = name.substr(eq + 1);
            name.resize(eq);
            inline_value = true;
        }
        if (name == "-h" || name == "--help") {
            out.args.help = true;
            return true;
        }
        if (name == "--version") {
            out.args.version = true;
            return true;
        }
        if (name == "--progress") {
            if (inline_value) return error("flag --progress takes no value");
            out.args.progress = true;
            given.push_back(name);
            return true;
        }
        if (name == "-o") name = "--output";
        static constexpr std::array<const char*, 23> kWithValue{
            "--endpoints", "--owner", "--timeout",   "--lease",     "--wait",     "--grace",
            "--output",    "--max-clock-drift-ppm",  "--cacert",    "--cert",     "--key",
            "--bearer-file", "--peer-addr", "--client-addr", "--prefix", "--rev", "--value",
            "--advance", "--dsn", "--since", "--until", "--limit", "--client-log"};
        bool known = false;
        for (const char* f : kWithValue) known = known || name == f;
        if (!known) return error("unknown flag '" + name + "' (see fencectl --help)" + run_hint());
        if (!inline_value) {
            if (i + 1 >= argv.size()) return error("flag " + name + " needs a value");
            value = argv[++i];
        }
        return apply(name, value);
    }

    bool scan() {
        if (argv.size() > kMaxArgs) return error("too many arguments (at most " + std::to_string(kMaxArgs) + ")");
        for (std::size_t i = 0; i < argv.size(); ++i) {
            const std::string& a = argv[i];
            if (a == "--") {
                out.args.child.assign(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
                if (out.args.child.empty()) return error("nothing after '--' (run needs CMD [ARGS...])");
                return true;
            }
            if (a.size() > 1 && a[0] == '-') {
                if (!flag(i)) return false;
            } else if (out.args.command.empty()) {
                out.args.command = a;
            } else {
                out.args.positional.push_back(a);
            }
        }
        return true;
    }

    bool flag_allowed(const CommandSpec& c, const std::string& f) {
        if (out.args.command == "explain" &&
            (f == "--dsn" || f == "--since" || f == "--until" || f == "--limit" || f == "--client-log")) {
            return true;
        }
        if (f == "--endpoints" || f == "--timeout" || f == "--max-clock-drift-ppm" || f == "--cacert" || f == "--cert" ||
            f == "--key" || f == "--bearer-file") {
            return true;
        }
        if (f == "--lease" || f == "--wait" || f == "--owner") return c.lease_flags;
        if (f == "--grace") return c.grace_flag;
        if (f == "--output") return c.output_flag;
        if (f == "--peer-addr" || f == "--client-addr") return out.args.subcommand == "add";
        if (f == "--prefix") return out.args.command == "list" || out.args.command == "watch";
        if (f == "--rev" || f == "--progress") return out.args.command == "watch";
        if (f == "--value") return out.args.command == "elect";
        if (f == "--advance" || f == "--dsn") return out.args.command == "run" || out.args.command == "acquire";
        return false;
    }

    // fencectl snapshot save FILE | status FILE
    bool validate_snapshot() {
        Args& a = out.args;
        const std::string sub = a.positional.empty() ? std::string() : a.positional.front();
        if (sub != "save" && sub != "status") {
            return error(sub.empty() ? "snapshot: expected save FILE or status FILE (see fencectl help snapshot)"
                                     : "snapshot: unknown subcommand '" + sub + "' (expected save or status)");
        }
        if (a.positional.size() != 2 || a.positional[1].empty()) {
            return error("snapshot " + sub + ": expected FILE, got " + std::to_string(a.positional.size() - 1) +
                         " argument(s)");
        }
        return true;
    }

    // fencectl watch KEY | --prefix P
    bool validate_watch() {
        Args& a = out.args;
        a.subcommand.clear();
        if (a.prefix_given && !a.positional.empty()) {
            return error("watch: give KEY or --prefix P, not both (got '" + a.positional.front() + "' and --prefix)");
        }
        if (!a.prefix_given && a.positional.size() != 1) {
            return error("watch: expected KEY or --prefix P, got " + std::to_string(a.positional.size()) +
                         " argument(s)");
        }
        if (!a.prefix_given && a.positional.front().empty()) return error("watch: KEY is empty (use --prefix \"\" for every key)");
        return true;
    }

    // fencectl explain TOKEN | --key K [--since T] [--until T] [--limit N]
    bool validate_explain() {
        Args& a = out.args;
        a.subcommand.clear();
        a.explain_key = a.key;  // explain's --key is the lock key
        a.key.clear();
        const bool by_key = !a.explain_key.empty();
        a.by_key = by_key;
        if (by_key == !a.positional.empty() || a.positional.size() > 1) {
            return error("explain: give TOKEN or --key K, one of them (got " + std::to_string(a.positional.size()) +
                         " argument(s)" + (by_key ? " and --key" : "") + ")");
        }
        if (!by_key) {
            const auto token = parse_token(a.positional.front());
            if (!token) return error("explain: invalid token '" + a.positional.front() + "' (expected an integer 1.." +
                                     std::to_string(lock::kMaxToken) + ")");
            a.token = *token;
            if (a.since_ms || a.until_ms || a.limit) return error("explain: --since, --until and --limit go with --key");
        }
        if (a.since_ms && a.until_ms && *a.since_ms > *a.until_ms) {
            return error("explain: --since is after --until");
        }
        return true;
    }

    // fencectl member list | add ID --peer-addr H:P --client-addr H:P | promote ID | remove ID
    bool validate_member() {
        Args& a = out.args;
        const std::string sub = a.positional.empty() ? std::string() : a.positional.front();
        if (sub != "list" && sub != "add" && sub != "promote" && sub != "remove") {
            return error(sub.empty() ? "member: expected list, add, promote or remove (see fencectl help member)"
                                     : "member: unknown subcommand '" + sub + "' (expected list, add, promote or remove)");
        }
        const std::size_t want = sub == "list" ? 1 : 2;
        if (a.positional.size() != want) {
            return error("member " + sub + ": expected " + (want == 1 ? std::string("no arguments") : "ID") + ", got " +
                         std::to_string(a.positional.size() - 1) + " argument(s)");
        }
        if (want == 2) {
            const std::string& text = a.positional[1];
            const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), a.member_id);
            if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || a.member_id == 0) {
                return error("member " + sub + ": invalid member ID '" + text + "' (expected an integer >= 1)");
            }
        }
        if (sub == "add" && (a.peer_addr.empty() || a.client_addr.empty())) {
            return error("member add: needs --peer-addr HOST:PORT and --client-addr HOST:PORT (the new member's "
                         "addresses, as the others will reach it)");
        }
        return true;
    }

    bool validate() {
        Args& a = out.args;
        if (a.command == "help") {
            a.help = true;
            a.command = a.positional.empty() ? "" : a.positional.front();
            a.positional.clear();
        }
        if (a.command.empty()) return a.help || a.version ? true : error("missing command (see fencectl --help)");
        const CommandSpec* c = find_command(a.command);
        if (!c) return error("unknown command '" + a.command + "' (see fencectl --help)");
        if (a.help) return true;
        if (c->positional == kVariable && !a.positional.empty()) a.subcommand = a.positional.front();
        for (const std::string& f : given) {
            if (!flag_allowed(*c, f)) return error("flag " + f + " is not valid for '" + a.command + "'");
        }
        if (c->positional == kVariable) {
            const bool ok = a.command == "member"    ? validate_member()
                            : a.command == "watch"   ? validate_watch()
                            : a.command == "explain" ? validate_explain()
                                                     : validate_snapshot();
            if (!ok) return false;
        } else if (a.positional.size() < c->positional ||
                   a.positional.size() > c->positional + (several_keys(*c) ? kMoreKeys : 0)) {
            std::string want = c->positional == 0 ? "no arguments" : std::string(c->positional_names);
            return error(a.command + ": expected " + want + ", got " + std::to_string(a.positional.size()) +
                         " argument(s)" + run_hint());
        }
        if (c->child && a.child.empty()) return error(a.command + ": missing '-- CMD [ARGS...]'");
        if (!c->child && !a.child.empty()) return error(a.command + ": unexpected '--'");
        if (c->positional == 2 || a.command == "proclaim") {
            // proclaim NAME TOKEN VALUE; else the token comes last (after a set's keys).
            const std::string& text = a.command == "proclaim" ? a.positional[1] : a.positional.back();
            const auto token = parse_token(text);
            if (!token) return error("invalid token '" + text + "' (expected an integer 1.." +
                                     std::to_string(lock::kMaxToken) + ")");
            a.token = *token;
        }
        if (a.command == "proclaim") a.value = a.positional[2];
        if (a.dsn_given && a.advance.empty() && a.command != "explain") {
            return error("--dsn: used only with --advance RESOURCE (the database to publish the token in)");
        }
        if (a.lease && a.lease->count() == 0) return error("--lease: must be greater than 0");
        if (a.timeout && a.timeout->count() == 0) return error("--timeout: must be greater than 0");
        return true;
    }
};

}  // namespace

std::optional<std::int64_t> parse_time(const std::string& text, std::int64_t now_ms, std::string& error) {
    if (const client::DurationParse d = client::parse_duration(text); d.value) return now_ms - d.value->count();
    // YYYY-MM-DDTHH:MM:SS[.mmm]Z
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, ms = 0, n = 0;
    const bool with_ms = text.size() == 24;
    const int got = with_ms ? std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &y, &mo, &d, &h, &mi, &s, &ms, &n)
                            : std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &y, &mo, &d, &h, &mi, &s, &n);
    if (got != (with_ms ? 7 : 6) || static_cast<std::size_t>(n) != text.size() || mo < 1 || mo > 12 || d < 1 ||
        d > 31 || h > 23 || mi > 59 || s > 60) {
        error = "'" + text + "' is neither a time (2026-12-04T21:30:00Z, UTC) nor a duration before now (15m)";
        return std::nullopt;
    }
    std::tm tm{};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    const std::time_t t = timegm(&tm);
    // timegm normalises (February 31 becomes March 3): a time that does not
    // come back as written is not a date.
    std::tm back{};
    gmtime_r(&t, &back);
    if (back.tm_year != y - 1900 || back.tm_mon != mo - 1 || back.tm_mday != d || back.tm_hour != h ||
        back.tm_min != mi || back.tm_sec != s) {
        error = "'" + text + "' is not a time of the calendar (no such day or second, UTC)";
        return std::nullopt;
    }
    return static_cast<std::int64_t>(t) * 1000 + ms;
}

std::optional<std::uint64_t> parse_token(const std::string& text) {
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || value == 0 || value > lock::kMaxToken) return std::nullopt;
    return value;
}

ArgsParse parse_args(const std::vector<std::string>& argv) {
    Parser p{argv, {}, {}};
    if (p.scan()) p.validate();
    return std::move(p.out);
}

}  // namespace pgfence::cli
