// Parsing of what users type: durations, endpoint lists, fencectl's command line.
#define BOOST_TEST_MODULE client_parse
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli/args.h"
#include "cli/output.h"
#include "cli/commands.h"
#include "cli/help.h"
#include "client/exit_codes.h"
#include "client/duration.h"
#include "client/endpoints.h"

using namespace pgfence;
using std::chrono::milliseconds;

BOOST_AUTO_TEST_SUITE(duration)

BOOST_AUTO_TEST_CASE(accepts_integer_and_unit) {
    BOOST_TEST(client::parse_duration("500ms").value->count() == 500);
    BOOST_TEST(client::parse_duration("10s").value->count() == 10'000);
    BOOST_TEST(client::parse_duration("2m").value->count() == 120'000);
    BOOST_TEST(client::parse_duration("1h").value->count() == 3'600'000);
    BOOST_TEST(client::parse_duration("0s").value->count() == 0);
}

BOOST_AUTO_TEST_CASE(rejects_anything_else_and_names_the_value) {
    for (const char* bad : {"", "10", "ms", "1.5s", "-1s", "+1s", "10 s", " 10s", "10S", "1m30s", "10sec",
                            "99999999999999s", "1000000h"}) {
        const auto d = client::parse_duration(bad);
        BOOST_TEST(!d.value.has_value(), "accepted '" << bad << "'");
        std::string quoted(1, '\'');  // built stepwise: GCC 12 -O3 flags "'" + s + "'" (-Wrestrict, a false positive)
        quoted.append(bad).push_back('\'');
        BOOST_TEST(d.error.find(quoted) != std::string::npos, d.error);
    }
}

BOOST_AUTO_TEST_CASE(formats_with_the_largest_exact_unit) {
    BOOST_TEST(client::format_duration(milliseconds(1500)) == "1500ms");
    BOOST_TEST(client::format_duration(milliseconds(10'000)) == "10s");
    BOOST_TEST(client::format_duration(milliseconds(120'000)) == "2m");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(endpoints)

BOOST_AUTO_TEST_CASE(parses_lists_and_drops_duplicates) {
    const auto p = client::parse_endpoints("127.0.0.1:7001,localhost:7002,127.0.0.1:7001");
    BOOST_TEST(p.error.empty(), p.error);
    BOOST_TEST_REQUIRE(p.endpoints.size() == 2u);
    BOOST_TEST(p.endpoints[0].to_string() == "127.0.0.1:7001");
    BOOST_TEST(p.endpoints[1].host == "localhost");
    BOOST_TEST(p.endpoints[1].port == 7002);
}

BOOST_AUTO_TEST_CASE(rejects_bad_entries_naming_them) {
    for (const char* bad : {"", "127.0.0.1", ":7001", "h:0", "h:65536", "h:x1", "a:1,,b:2", "a:1,", "h:7001 "}) {
        const auto p = client::parse_endpoints(bad);
        BOOST_TEST(p.endpoints.empty(), "accepted '" << bad << "'");
        BOOST_TEST(!p.error.empty());
    }
    BOOST_TEST(client::parse_endpoints("a:1,h:99999").error.find("'h:99999'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(reads_redirect_locations) {
    const auto e = client::endpoint_of_url("http://127.0.0.1:7002/v1/acquire");
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->to_string() == "127.0.0.1:7002");
    BOOST_TEST(!e->tls);
    BOOST_TEST(client::endpoint_of_url("http://127.0.0.1:7002").has_value());
    const auto tls = client::endpoint_of_url("https://127.0.0.1:7002/v1/locks?key=a");  // a TLS member's 307 keeps https
    BOOST_TEST_REQUIRE(tls.has_value());
    BOOST_TEST(tls->tls);
    BOOST_TEST(tls->to_string() == "https://127.0.0.1:7002");
    BOOST_TEST(tls->authority() == "127.0.0.1:7002");
    BOOST_TEST(!client::endpoint_of_url("ftp://127.0.0.1:7002/").has_value());
    BOOST_TEST(!client::endpoint_of_url("/v1/acquire").has_value());
}

BOOST_AUTO_TEST_CASE(endpoints_name_their_scheme) {
    const auto p = client::parse_endpoints("https://10.0.0.1:7501,http://10.0.0.2:7502,10.0.0.3:7503");
    BOOST_TEST(p.error.empty(), p.error);
    BOOST_TEST_REQUIRE(p.endpoints.size() == 3u);
    BOOST_TEST(p.endpoints[0].tls);
    BOOST_TEST(p.endpoints[0].host == "10.0.0.1");
    BOOST_TEST(!p.endpoints[1].tls);
    BOOST_TEST(!p.endpoints[2].tls);
    // The same host:port over TLS and in plaintext are two endpoints.
    BOOST_TEST(client::parse_endpoints("https://h:1,h:1").endpoints.size() == 2u);
    BOOST_TEST(client::parse_endpoints("ftp://h:1").error.find("unknown scheme") != std::string::npos);
    BOOST_TEST(!client::parse_endpoints("https://h:1/v1").error.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fencectl_args)

cli::ArgsParse parse(std::vector<std::string> words) { return cli::parse_args(words); }

BOOST_AUTO_TEST_CASE(acquire_with_flags_in_both_forms) {
    const auto p = parse({"--endpoints", "127.0.0.1:1", "acquire", "job", "--lease=3s", "--wait", "500ms",
                          "--owner", "w1", "-o", "json"});
    BOOST_TEST_REQUIRE(p.error.empty(), p.error);
    BOOST_TEST(p.args.command == "acquire");
    BOOST_TEST(p.args.positional.at(0) == "job");
    BOOST_TEST(p.args.lease->count() == 3000);
    BOOST_TEST(p.args.wait->count() == 500);
    BOOST_TEST(p.args.owner == "w1");
    BOOST_TEST(p.args.endpoints == "127.0.0.1:1");
    BOOST_TEST((p.args.output == cli::Output::kJson));
}

BOOST_AUTO_TEST_CASE(global_flags_after_the_command) {
    const auto p = parse({"status", "-o", "json", "--endpoints=a:1,b:2", "--timeout", "2s"});
    BOOST_TEST_REQUIRE(p.error.empty(), p.error);
    BOOST_TEST(p.args.endpoints == "a:1,b:2");
    BOOST_TEST(p.args.timeout->count() == 2000);
}

BOOST_AUTO_TEST_CASE(run_takes_everything_after_double_dash) {
    const auto p = parse({"run", "job", "--lease", "2s", "--grace", "1s", "--", "sh", "-c", "echo --lease"});
    BOOST_TEST_REQUIRE(p.error.empty(), p.error);
    BOOST_TEST(p.args.child == (std::vector<std::string>{"sh", "-c", "echo --lease"}));
    BOOST_TEST(p.args.grace->count() == 1000);
}

BOOST_AUTO_TEST_CASE(release_parses_the_token) {
    const auto p = parse({"release", "job", "42"});
    BOOST_TEST_REQUIRE(p.error.empty(), p.error);
    BOOST_TEST(p.args.token == 42u);
}

// acquire, release and keepalive take a set of keys (the token last); at most 64.
BOOST_AUTO_TEST_CASE(several_keys_parse_with_the_token_last) {
    const auto set = parse({"acquire", "a", "b", "c"});
    BOOST_TEST(set.error == "");
    BOOST_TEST((set.args.positional == std::vector<std::string>{"a", "b", "c"}));
    const auto release = parse({"release", "a", "b", "41"});
    BOOST_TEST(release.error == "");
    BOOST_TEST(release.args.token == 41u);
    BOOST_TEST(parse({"keepalive", "a", "b", "x"}).error.find("'x'") != std::string::npos);
    std::vector<std::string> too_many{"acquire"};
    for (int i = 0; i < 65; ++i) too_many.push_back("k" + std::to_string(i));
    BOOST_TEST(parse(too_many).error.find("got 65") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(usage_errors_name_what_was_wrong) {
    struct Case {
        std::vector<std::string> words;
        std::string expect;
    };
    const std::vector<Case> cases{
        {{}, "missing command"},
        {{"frobnicate"}, "'frobnicate'"},
        {{"acquire"}, "expected KEY"},
        {{"get", "a", "b"}, "got 2"},
        {{"acquire", "k", "--lease", "10"}, "'10'"},
        {{"acquire", "k", "--lease"}, "--lease needs a value"},
        {{"acquire", "k", "--lease", "0s"}, "greater than 0"},
        {{"acquire", "k", "--bogus", "1"}, "'--bogus'"},
        {{"get", "k", "--lease", "1s"}, "--lease is not valid for 'get'"},
        {{"release", "k", "12x"}, "'12x'"},
        {{"release", "k", "0"}, "'0'"},
        {{"release", "k", "9223372036854775808"}, "'9223372036854775808'"},
        {{"run", "k"}, "missing '-- CMD"},
        {{"run", "k", "--"}, "nothing after '--'"},
        {{"get", "k", "--", "x"}, "unexpected '--'"},
        {{"list", "-o", "yaml"}, "'yaml'"},
        {{"--endpoints"}, "--endpoints needs a value"},
        {{"list", "--max-clock-drift-ppm", "500001"}, "--max-clock-drift-ppm: '500001' must be 0..500000"},
        {{"list", "--max-clock-drift-ppm", "5%"}, "'5%'"},
        {{"list", "--max-clock-drift-ppm"}, "--max-clock-drift-ppm needs a value"},
    };
    for (const auto& c : cases) {
        const auto p = parse(c.words);
        BOOST_TEST(p.error.find(c.expect) != std::string::npos, "error '" << p.error << "' lacks '" << c.expect << "'");
    }
}

BOOST_AUTO_TEST_CASE(help_anywhere) {
    BOOST_TEST(parse({"--help"}).args.help);
    const auto p = parse({"run", "--help"});
    BOOST_TEST(p.error.empty());
    BOOST_TEST(p.args.help);
    BOOST_TEST(p.args.command == "run");
    BOOST_TEST(parse({"help", "status"}).args.command == "status");
}

// Every exit of the --advance publish (cli/publish.cc) is in the help of the
// commands that publish, on one line once the help's line breaks are gone.
BOOST_AUTO_TEST_CASE(help_of_run_and_acquire_lists_every_publish_exit) {
    for (const std::string command : {"acquire", "run"}) {
        std::string flat;
        for (const char c : cli::help_text(command)) {
            const char w = c == '\n' ? ' ' : c;
            if (w != ' ' || (!flat.empty() && flat.back() != ' ')) flat += w;
        }
        for (const std::string expect : {"10 --advance", "11 --advance", "4 no time left to publish"}) {
            BOOST_TEST(flat.find(expect) != std::string::npos, command << " --help lacks '" << expect << "'");
        }
    }
}

BOOST_AUTO_TEST_CASE(bad_endpoint_list_is_a_usage_error) {
    const auto p = parse({"--endpoints", "nohost", "list"});
    BOOST_TEST_REQUIRE(p.error.empty());
    client::Options options;
    std::string error;
    BOOST_TEST(!cli::client_options(p.args, options, error));
    BOOST_TEST(error.find("'nohost'") != std::string::npos, error);
}

BOOST_AUTO_TEST_CASE(run_gives_each_keepalive_request_an_eighth_of_the_lease) {
    auto attempt_ms = [](std::vector<std::string> words) {
        client::Options options;  // fresh: defaults as fencectl starts with
        std::string error;
        BOOST_TEST_REQUIRE(cli::client_options(cli::parse_args(words).args, options, error), error);
        BOOST_TEST(options.attempt_timeout.count() == 3000);  // acquire and the rest keep theirs
        return options.keepalive_attempt_timeout.count();
    };
    BOOST_TEST(attempt_ms({"run", "k", "--lease", "2s", "--", "true"}) == 250);
    BOOST_TEST(attempt_ms({"run", "k", "--lease", "500ms", "--", "true"}) == 100);  // floor
    BOOST_TEST(attempt_ms({"run", "k", "--lease", "1m", "--", "true"}) == 3000);
    BOOST_TEST(attempt_ms({"get", "k"}) == 0);
}

BOOST_AUTO_TEST_CASE(max_clock_drift_ppm_reaches_the_client_options) {
    auto ppm = [](std::vector<std::string> words) {
        client::Options options;
        std::string error;
        const cli::ArgsParse p = cli::parse_args(words);
        BOOST_TEST_REQUIRE(p.error.empty(), p.error);
        BOOST_TEST_REQUIRE(cli::client_options(p.args, options, error), error);
        return options.max_clock_drift_ppm;
    };
    BOOST_TEST(ppm({"list"}) == 50000u);
    BOOST_TEST(ppm({"--max-clock-drift-ppm", "0", "list"}) == 0u);
    BOOST_TEST(ppm({"run", "k", "--max-clock-drift-ppm=500000", "--", "true"}) == 500000u);
}

BOOST_AUTO_TEST_CASE(exit_codes_by_error_kind) {
    using client::ErrorKind;
    auto code = [](ErrorKind k, const char* cmd) { return cli::exit_code_of({k, "", 0}, cmd); };
    BOOST_TEST(code(ErrorKind::kHeld, "acquire") == pgfence::kExitHeld);
    BOOST_TEST(code(ErrorKind::kNotHeld, "keepalive") == pgfence::kExitLostLease);
    BOOST_TEST(code(ErrorKind::kNotHeld, "release") == pgfence::kExitNotFound);
    BOOST_TEST(code(ErrorKind::kNotFound, "get") == pgfence::kExitNotFound);
    BOOST_TEST(code(ErrorKind::kBadRequest, "acquire") == pgfence::kExitUsage);
    BOOST_TEST(code(ErrorKind::kUnavailable, "list") == pgfence::kExitUnavailable);
    BOOST_TEST(code(ErrorKind::kProtocol, "list") == pgfence::kExitOther);
    BOOST_TEST(code(ErrorKind::kNotAuthorized, "acquire") == pgfence::kExitNotAuthorized);
    BOOST_TEST(code(ErrorKind::kNotAuthorized, "keepalive") == 7);
    BOOST_TEST(code(ErrorKind::kUnknownMember, "member") == pgfence::kExitUnknownMember);
    BOOST_TEST(code(ErrorKind::kRefused, "member") == pgfence::kExitRefused);
    BOOST_TEST(code(ErrorKind::kNotPgfence, "status") == pgfence::kExitNotPgfence);
    BOOST_TEST(pgfence::kExitNotPgfence == 12);
    BOOST_TEST(code(ErrorKind::kCompacted, "watch") == pgfence::kExitCompacted);
    BOOST_TEST(code(ErrorKind::kCompacted, "explain") == pgfence::kExitCompacted);
    BOOST_TEST(code(ErrorKind::kUnknownToken, "explain") == pgfence::kExitNoSuchToken);
}

BOOST_AUTO_TEST_CASE(the_one_exit_code_scheme_gives_each_number_one_meaning) {
    const std::vector<int> codes{pgfence::kExitOk,          pgfence::kExitOther,        pgfence::kExitUsage,
                                 pgfence::kExitHeld,        pgfence::kExitLostLease,    pgfence::kExitUnavailable,
                                 pgfence::kExitNotFound,    pgfence::kExitNotAuthorized, pgfence::kExitUnknownMember,
                                 pgfence::kExitRefused,     pgfence::kExitStale,        pgfence::kExitDatabase,
                                 pgfence::kExitNotPgfence,  pgfence::kExitCompacted,     pgfence::kExitNoSuchToken};
    for (std::size_t i = 0; i < codes.size(); ++i) BOOST_TEST(codes[i] == static_cast<int>(i));  // 0..14, in order
}

BOOST_AUTO_TEST_CASE(run_without_the_double_dash_says_where_the_command_goes) {
    for (const std::vector<std::string>& words :
         {std::vector<std::string>{"run", "report:7", "sh", "-c", "true"}, std::vector<std::string>{"run", "report:7", "true"},
          std::vector<std::string>{"run", "report:7", "--lease", "5s", "ls", "-l"}}) {
        const cli::ArgsParse p = parse(words);
        BOOST_TEST(p.error.find("run's command goes after '--': fencectl run KEY [FLAGS] -- CMD [ARGS...]") !=
                       std::string::npos,
                   p.error);
    }
    BOOST_TEST(parse({"acquire", "k", "-c"}).error.find("after '--'") == std::string::npos);  // only for run
    BOOST_TEST(parse({"run", "k", "--", "sh", "-c", "true"}).error.empty());
}

BOOST_AUTO_TEST_CASE(a_refused_lease_is_said_in_the_flags_terms) {
    const cli::ArgsParse p = parse({"acquire", "k", "--lease", "1h"});
    BOOST_TEST_REQUIRE(p.error.empty(), p.error);
    const client::Error lease{client::ErrorKind::kBadRequest,
                              "bad request: field 'lease_ms' is 3600000, must be within [500, 300000]", 400};
    BOOST_TEST(cli::in_flag_terms(lease, p.args) ==
               "--lease 1h is longer than the cluster allows: it grants leases from 500ms to 5m "
               "(fence-coordinator --min-lease and --max-lease)");
    const cli::ArgsParse brief = parse({"acquire", "k", "--lease", "100ms", "--wait", "10m"});
    const client::Error short_lease{client::ErrorKind::kBadRequest,
                                    "bad request: field 'lease_ms' is 100, must be within [500, 300000]", 400};
    BOOST_TEST(cli::in_flag_terms(short_lease, brief.args).starts_with("--lease 100ms is shorter than the cluster allows"));
    const client::Error wait{client::ErrorKind::kBadRequest, "bad request: field 'wait_ms' is 600000, must be at most 300000",
                             400};
    BOOST_TEST(cli::in_flag_terms(wait, brief.args) ==
               "--wait 10m is longer than the cluster allows: it waits at most 5m (fence-coordinator --max-wait)");
    const client::Error other{client::ErrorKind::kBadRequest, "bad request: key: too long", 400};
    BOOST_TEST(cli::in_flag_terms(other, p.args) == other.message);
    const client::Error held{client::ErrorKind::kHeld, "held 'lease_ms'", 409};
    BOOST_TEST(cli::in_flag_terms(held, p.args) == held.message);
}

BOOST_AUTO_TEST_CASE(watch_takes_a_key_or_a_prefix_a_revision_and_progress) {
    const cli::ArgsParse key = parse({"watch", "report:7", "--rev", "12", "--progress"});
    BOOST_TEST_REQUIRE(key.error == "");
    BOOST_TEST(key.args.positional.at(0) == "report:7");
    BOOST_TEST(!key.args.prefix_given);
    BOOST_TEST(*key.args.rev == 12u);
    BOOST_TEST(key.args.progress);
    const cli::ArgsParse all = parse({"watch", "--prefix", ""});
    BOOST_TEST_REQUIRE(all.error == "");
    BOOST_TEST(all.args.prefix_given);
    BOOST_TEST(all.args.prefix == "");
    BOOST_TEST(!all.args.rev.has_value());
    BOOST_TEST(!all.args.progress);
    auto error_of = [](std::vector<std::string> words) { return parse(std::move(words)).error; };
    BOOST_TEST(error_of({"watch"}).find("expected KEY or --prefix P") != std::string::npos);
    BOOST_TEST(error_of({"watch", "a", "--prefix", "b"}).find("not both") != std::string::npos);
    BOOST_TEST(error_of({"watch", "a", "--rev", "0"}).find("--rev: '0' must be a revision >= 1") != std::string::npos);
    BOOST_TEST(error_of({"watch", "a", "--rev", "x"}).find("--rev: 'x'") != std::string::npos);
    BOOST_TEST(error_of({"watch", "a", "--progress=1"}).find("takes no value") != std::string::npos);
    BOOST_TEST(error_of({"get", "a", "--rev", "3"}).find("not valid for 'get'") != std::string::npos);
    BOOST_TEST(error_of({"list", "--progress"}).find("not valid for 'list'") != std::string::npos);
    BOOST_TEST(parse({"help", "watch"}).args.help);
}

BOOST_AUTO_TEST_CASE(explain_takes_a_token_or_a_key_with_a_window) {
    const cli::ArgsParse t = parse({"explain", "41", "--dsn", "", "--client-log", "w.csv", "-o", "json"});
    BOOST_TEST_REQUIRE(t.error == "");
    BOOST_TEST(t.args.token == 41u);
    BOOST_TEST(t.args.dsn_given);
    BOOST_TEST(t.args.client_log == "w.csv");
    const cli::ArgsParse k = parse({"explain", "--key", "report:7", "--since", "2026-12-04T21:30:00.250Z",
                                    "--until", "2026-12-04T21:31:00Z", "--limit", "5"});
    BOOST_TEST_REQUIRE(k.error == "");
    BOOST_TEST(k.args.explain_key == "report:7");
    BOOST_TEST(k.args.key == "");  // not the TLS key
    BOOST_TEST(*k.args.since_ms == 1796419800250);
    BOOST_TEST(*k.args.until_ms == 1796419860000);
    BOOST_TEST(*k.args.limit == 5u);
    auto error_of = [](std::vector<std::string> words) { return parse(std::move(words)).error; };
    BOOST_TEST(error_of({"explain"}).find("give TOKEN or --key K") != std::string::npos);
    BOOST_TEST(error_of({"explain", "41", "--key", "k"}).find("one of them") != std::string::npos);
    BOOST_TEST(error_of({"explain", "x41"}).find("invalid token 'x41'") != std::string::npos);
    BOOST_TEST(error_of({"explain", "41", "--since", "1h"}).find("go with --key") != std::string::npos);
    BOOST_TEST(error_of({"explain", "--key", "k", "--since", "yesterday"}).find("'yesterday'") != std::string::npos);
    BOOST_TEST(error_of({"explain", "--key", "k", "--limit", "1001"}).find("1..1000") != std::string::npos);
    BOOST_TEST(error_of({"explain", "--key", "k", "--since", "1m", "--until", "1h"}).find("after --until") !=
               std::string::npos);
    BOOST_TEST(error_of({"get", "k", "--client-log", "w.csv"}).find("not valid for 'get'") != std::string::npos);
    BOOST_TEST(error_of({"explain", "--key", ""}).find("the lock key is empty ('')") != std::string::npos);
    std::string why;
    BOOST_TEST(*cli::parse_time("15m", 1'000'000, why) == 100'000);
    // A day or second the calendar does not have is named, not normalised.
    BOOST_TEST(!cli::parse_time("2026-02-31T00:00:00Z", 0, why));
    BOOST_TEST(why.find("'2026-02-31T00:00:00Z'") != std::string::npos, why);
    BOOST_TEST(!cli::parse_time("2026-12-04T21:30:60Z", 0, why));
    BOOST_TEST(*cli::parse_time("2028-02-29T00:00:00Z", 0, why) == 1835395200000);
    // What explain prints is what --since takes back.
    BOOST_TEST(cli::utc_text(1796419800250) == "2026-12-04T21:30:00.250Z");
    BOOST_TEST(*cli::parse_time(cli::utc_text(1796419800250), 0, why) == 1796419800250);
    BOOST_TEST(cli::utc_text(1796419800250, false) == "2026-12-04T21:30:00Z");
}

BOOST_AUTO_TEST_CASE(member_subcommands_parse_and_name_what_is_wrong) {
    const cli::ArgsParse add =
        parse({"member", "add", "4", "--peer-addr", "10.0.0.4:7400", "--client-addr=10.0.0.4:7500", "-o", "json"});
    BOOST_TEST_REQUIRE(add.error == "");
    BOOST_TEST(add.args.subcommand == "add");
    BOOST_TEST(add.args.member_id == 4u);
    BOOST_TEST(add.args.peer_addr == "10.0.0.4:7400");
    BOOST_TEST(add.args.client_addr == "10.0.0.4:7500");
    BOOST_TEST(parse({"member", "list"}).error == "");
    BOOST_TEST(parse({"member", "remove", "2"}).args.member_id == 2u);
    auto error_of = [](std::vector<std::string> words) { return parse(std::move(words)).error; };
    BOOST_TEST(error_of({"member"}).find("expected list, add, promote or remove") != std::string::npos);
    BOOST_TEST(error_of({"member", "grow"}).find("unknown subcommand 'grow'") != std::string::npos);
    BOOST_TEST(error_of({"member", "promote"}).find("expected ID") != std::string::npos);
    BOOST_TEST(error_of({"member", "remove", "x"}).find("invalid member ID 'x'") != std::string::npos);
    BOOST_TEST(error_of({"member", "remove", "0"}).find("invalid member ID '0'") != std::string::npos);
    BOOST_TEST(error_of({"member", "add", "4"}).find("needs --peer-addr") != std::string::npos);
    BOOST_TEST(error_of({"member", "list", "--peer-addr", "h:1"}).find("not valid for 'member'") != std::string::npos);
    BOOST_TEST(error_of({"acquire", "k", "--peer-addr", "h:1"}).find("not valid for 'acquire'") != std::string::npos);
    BOOST_TEST(parse({"help", "member"}).args.help);
}

BOOST_AUTO_TEST_CASE(advance_is_repeatable_bounded_and_only_for_run_and_acquire) {
    const cli::ArgsParse run =
        parse({"run", "report:7", "--advance", "report:7", "--advance=ledger", "--dsn", "host=db", "--", "true"});
    BOOST_TEST_REQUIRE(run.error == "");
    BOOST_TEST(run.args.advance == (std::vector<std::string>{"report:7", "ledger"}));
    BOOST_TEST(run.args.dsn == "host=db");
    const cli::ArgsParse env = parse({"acquire", "a", "b", "--advance", "a"});
    BOOST_TEST_REQUIRE(env.error == "");
    BOOST_TEST(env.args.dsn == "");  // libpq's "": the PG* environment
    auto error_of = [](std::vector<std::string> words) { return parse(std::move(words)).error; };
    BOOST_TEST(error_of({"get", "a", "--advance", "a"}).find("not valid for 'get'") != std::string::npos);
    BOOST_TEST(error_of({"elect", "n", "--advance", "a", "--", "true"}).find("not valid for 'elect'") !=
               std::string::npos);
    BOOST_TEST(error_of({"run", "a", "--dsn", "host=db", "--", "true"}).find("--dsn: used only with --advance") !=
               std::string::npos);
    BOOST_TEST(error_of({"acquire", "a", "--advance", ""}).find("resource '' must be 1-512 bytes") !=
               std::string::npos);
    BOOST_TEST(error_of({"acquire", "a", "--advance", "x\ty"}).find("control character") != std::string::npos);
    std::vector<std::string> many{"acquire", "a"};
    for (int i = 0; i < 65; ++i) many.insert(many.end(), {"--advance", "r" + std::to_string(i)});
    BOOST_TEST(error_of(many).find("--advance: at most 64 resources (got another: 'r64')") != std::string::npos);
    many.resize(many.size() - 2);
    BOOST_TEST(error_of(many) == "");
}

BOOST_AUTO_TEST_CASE(tls_and_bearer_flags_reach_the_client_options) {
    const std::string dir = "/tmp/pgfence-parse-test-" + std::to_string(::getpid());
    ::mkdir(dir.c_str(), 0700);
    const std::string bearer = dir + "/bearer";
    {
        std::ofstream(bearer) << "  c2VjcmV0LW9mLXRoZS13b3JrZXI \nsecond line ignored\n";
    }
    client::Options options;
    std::string error;
    BOOST_TEST_REQUIRE(cli::client_options(parse({"--bearer-file", bearer, "list"}).args, options, error), error);
    BOOST_TEST(options.bearer == "c2VjcmV0LW9mLXRoZS13b3JrZXI");  // first line, blanks dropped
    // The flags take a file; an empty one is a usage error naming the flag.
    for (const char* flag : {"--cacert", "--cert", "--key", "--bearer-file"}) {
        BOOST_TEST(parse({std::string(flag) + "=", "list"}).error == std::string(flag) + ": needs a file name");
        BOOST_TEST(parse({flag}).error.find("needs a value") != std::string::npos);
    }
    // Missing files, a certificate without its key, an empty bearer file: refused now, naming the file.
    client::Options o2;
    BOOST_TEST(!cli::client_options(parse({"--cacert", dir + "/none.pem", "list"}).args, o2, error));
    BOOST_TEST(error.find(dir + "/none.pem") != std::string::npos, error);
    BOOST_TEST(!cli::client_options(parse({"--cert", dir + "/c.pem", "list"}).args, o2, error));
    BOOST_TEST(error.find("needs its key") != std::string::npos, error);
    BOOST_TEST(!cli::client_options(parse({"--bearer-file", dir + "/nothing", "list"}).args, o2, error));
    BOOST_TEST(error.find("cannot read bearer file '" + dir + "/nothing'") != std::string::npos, error);
    { std::ofstream(dir + "/empty") << "\n"; }
    BOOST_TEST(!cli::client_options(parse({"--bearer-file", dir + "/empty", "list"}).args, o2, error));
    BOOST_TEST(error.find("is empty") != std::string::npos, error);
    { std::ofstream(dir + "/big") << std::string(5000, 'a'); }
    BOOST_TEST(!cli::client_options(parse({"--bearer-file", dir + "/big", "list"}).args, o2, error));
    BOOST_TEST(error.find("larger than 4096 bytes") != std::string::npos, error);
    // The environment gives the files when no flag does; the flag wins.
    ::setenv("FENCE_BEARER_FILE", bearer.c_str(), 1);
    client::Options from_env;
    BOOST_TEST_REQUIRE(cli::client_options(parse({"list"}).args, from_env, error), error);
    BOOST_TEST(from_env.bearer == "c2VjcmV0LW9mLXRoZS13b3JrZXI");
    ::setenv("FENCE_BEARER_FILE", (dir + "/nothing").c_str(), 1);
    client::Options flag_wins;
    BOOST_TEST(cli::client_options(parse({"--bearer-file", bearer, "list"}).args, flag_wins, error), error);
    ::unsetenv("FENCE_BEARER_FILE");
    // FENCE_KEY is the lock key `run` exports, not a key file.
    ::setenv("FENCE_KEY", "jobs/1", 1);
    client::Options key_env;
    BOOST_TEST(cli::client_options(parse({"list"}).args, key_env, error), error);
    BOOST_TEST(key_env.key_file.empty());
    ::unsetenv("FENCE_KEY");
    std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
