// Flags: parsing, the lease floor rule and the derived cluster ID.
#include <boost/test/unit_test.hpp>
#include <vector>

#include "server/options.h"

using namespace pgfence::server;

namespace {
std::string parse(std::vector<std::string> args, Options& o) {
    std::vector<char*> argv{const_cast<char*>("fence-coordinator")};
    for (auto& a : args) argv.push_back(a.data());
    std::string err = parse_options(static_cast<int>(argv.size()), argv.data(), o);
    return err.empty() ? validate_options(o) : err;
}
const std::vector<std::string> kBase = {"--id", "2", "--peers", "1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403",
                                        "--client-addr", "127.0.0.1:7502", "--data-dir", "/tmp/d"};
}  // namespace

BOOST_AUTO_TEST_SUITE(options)

BOOST_AUTO_TEST_CASE(valid_flags_parse_and_derive_a_cluster_id) {
    Options o;
    BOOST_TEST(parse(kBase, o) == "");
    BOOST_TEST(o.id == 2u);
    BOOST_TEST(o.peers.size() == 3u);
    BOOST_TEST(o.cluster_id != 0u);
    Options other;
    auto args = kBase;
    args[3] = "1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7404";
    BOOST_TEST(parse(args, other) == "");
    BOOST_TEST(other.cluster_id != o.cluster_id);
}

BOOST_AUTO_TEST_CASE(min_lease_below_one_and_a_half_max_election_timeout_is_refused) {
    Options o;
    auto args = kBase;
    args.insert(args.end(), {"--heartbeat-ms", "50", "--election-ms", "1000", "--min-lease", "2999"});
    const std::string err = parse(args, o);
    BOOST_TEST(err.find("--min-lease 2999") != std::string::npos);
    BOOST_TEST(err.find(">= 3000") != std::string::npos);
    Options ok;
    args.back() = "3000";
    BOOST_TEST(parse(args, ok) == "");
}

BOOST_AUTO_TEST_CASE(bad_flags_are_named) {
    Options a;
    BOOST_TEST(parse({"--id", "x"}, a).find("--id") != std::string::npos);
    Options b;
    auto args = kBase;
    args[1] = "4";
    BOOST_TEST(parse(args, b).find("does not contain") != std::string::npos);
    Options c;
    BOOST_TEST(parse({"--peers", "1=nohost"}, c).find("--peers") != std::string::npos);
    Options d;
    BOOST_TEST(parse({"--bogus", "1"}, d).find("unknown flag --bogus") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_clock_drift_ppm_defaults_to_five_percent_and_takes_0_to_500000) {
    Options d;
    BOOST_TEST(parse(kBase, d) == "");
    BOOST_TEST(d.max_clock_drift_ppm == 50000u);
    for (const char* ok : {"0", "12345", "500000"}) {
        Options o;
        auto args = kBase;
        args.insert(args.end(), {"--max-clock-drift-ppm", ok});
        BOOST_TEST(parse(args, o) == "");
        BOOST_TEST(o.max_clock_drift_ppm == std::stoull(ok));
    }
    Options eq;
    auto args = kBase;
    args.push_back("--max-clock-drift-ppm=7");
    BOOST_TEST(parse(args, eq) == "");
    BOOST_TEST(eq.max_clock_drift_ppm == 7u);
}

BOOST_AUTO_TEST_CASE(bad_max_clock_drift_ppm_is_named_with_its_value_and_range) {
    for (const char* bad : {"500001", "-1", "5%", "", "0.05"}) {
        Options o;
        auto args = kBase;
        args.insert(args.end(), {"--max-clock-drift-ppm", bad});
        const std::string err = parse(args, o);
        BOOST_TEST(err.find("--max-clock-drift-ppm: '" + std::string(bad) + "'") != std::string::npos, err);
        BOOST_TEST(err.find("0..500000") != std::string::npos, err);
    }
}

BOOST_AUTO_TEST_CASE(usage_lists_max_clock_drift_ppm) {
    BOOST_TEST(usage().find("--max-clock-drift-ppm N") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
