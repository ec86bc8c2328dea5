// Flags: parsing, the lease floor rule and the derived cluster ID.
#include <boost/test/unit_test.hpp>
#include <vector>

#include "lock/commands.h"
#include "member/addresses.h"
#include "member/core.h"
#include "net/peer_transport.h"
#include "server/open_files.h"
#include "server/options.h"

#include <sys/resource.h>

using namespace pgfence::server;

namespace {
std::string parse(std::vector<std::string> args, Options& o) {
    std::vector<char*> argv{const_cast<char*>("fence-coordinator")};
    for (auto& a : args) argv.push_back(a.data());
    std::string err = parse_options(static_cast<int>(argv.size()), argv.data(), o);
    return err.empty() ? validate_options(o) : err;
}
const std::vector<std::string> kPeerTls = {"--peer-cert-file", "p.pem", "--peer-key-file", "pk.pem",
                                           "--peer-trusted-ca-file", "pca.pem"};
const std::vector<std::string> kBase = {"--id", "2", "--peers", "1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403",
                                        "--client-addr", "127.0.0.1:7502", "--data-dir", "/tmp/d"};
// parse() of kBase with FLAG VALUE added.
std::string parse_with(const char* flag, const char* value, Options& o) {
    auto args = kBase;
    args.insert(args.end(), {flag, value});
    return parse(args, o);
}

// A numeric flag takes `good` (read into `field`) and refuses each of `bad`
// with "FLAG: 'VALUE' must be RANGE".
void check_bounded_flag(const std::string& flag, const char* good, std::uint64_t Options::*field,
                        std::uint64_t expected, std::initializer_list<const char*> bad, const std::string& range) {
    Options o;
    BOOST_TEST(parse_with(flag.c_str(), good, o) == "");
    const std::uint64_t got = o.*field;
    BOOST_TEST(got == expected);
    for (const char* value : bad) {
        Options b;
        const std::string err = parse_with(flag.c_str(), value, b);
        BOOST_TEST(err.find(flag + ": '" + std::string(value) + "' must be " + range) != std::string::npos, err);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(options)

BOOST_AUTO_TEST_CASE(valid_flags_parse) {
    Options o;
    BOOST_TEST(parse(kBase, o) == "");
    BOOST_TEST(o.id == 2u);
    BOOST_TEST(o.peers.size() == 3u);
    BOOST_TEST(o.cluster_id == 0u);  // derived at bootstrap (bootstrap.h), not here
}

BOOST_AUTO_TEST_CASE(derived_cluster_id_depends_on_the_list_and_the_token) {
    Options a, b;
    BOOST_TEST(parse(kBase, a) == "");
    auto args = kBase;
    args[3] = "1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7404";
    BOOST_TEST(parse(args, b) == "");
    const std::uint64_t id = derive_cluster_id(a.peers);
    BOOST_TEST(id != 0u);
    BOOST_TEST(derive_cluster_id(b.peers) != id);
    // The order of --peers does not matter; a token makes another cluster.
    std::vector<PeerSpec> reversed(a.peers.rbegin(), a.peers.rend());
    BOOST_TEST(derive_cluster_id(reversed) == id);
    BOOST_TEST(derive_cluster_id(a.peers, "prod") != id);
    BOOST_TEST(derive_cluster_id(a.peers, "prod") != derive_cluster_id(a.peers, "test"));
    // Without a token, the ID the releases before derived (FNV-1a 64 of
    // "1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403,"): their data
    // directories keep opening.
    BOOST_TEST(id == 0x119c2bbdbf939478ull);
}

// Every member address is bounded once (member::kMaxAddressBytes); a longer
// --client-addr is refused at start by name, not cut short on the wire.
BOOST_AUTO_TEST_CASE(client_addr_over_the_address_limit_is_refused) {
    auto with_client_addr = [](const std::string& addr, Options& o) {
        auto args = kBase;
        args[5] = addr;
        return parse(args, o);
    };
    Options ok;
    const std::string longest = std::string(pgfence::member::kMaxAddressBytes - 5, 'h') + ":7502";
    BOOST_TEST(with_client_addr(longest, ok) == "");
    BOOST_TEST(ok.client_addr == longest);
    Options bad;
    const std::string err = with_client_addr("h" + longest, bad);
    BOOST_TEST(err.find("--client-addr is 262 bytes, over the limit of 261") == 0u, err);
}

BOOST_AUTO_TEST_CASE(join_and_peers_exclude_each_other_and_join_may_leave_the_client_address) {
    Options both;
    auto args = kBase;
    args.insert(args.end(), {"--join", "127.0.0.1:7501"});
    BOOST_TEST(parse(args, both).find("exclude each other") != std::string::npos);
    Options join;
    BOOST_TEST(parse({"--id", "4", "--join", "127.0.0.1:7501", "--data-dir", "/tmp/d4"}, join) == "");
    BOOST_TEST(join.join == "127.0.0.1:7501");
    Options none;
    BOOST_TEST(parse({"--id", "4", "--data-dir", "/tmp/d4"}, none).find("--client-addr") != std::string::npos);
    Options token;
    BOOST_TEST(parse({"--initial-cluster-token", ""}, token).find("--initial-cluster-token") != std::string::npos);
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
        BOOST_TEST(parse_with("--max-clock-drift-ppm", ok, o) == "");
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
        const std::string err = parse_with("--max-clock-drift-ppm", bad, o);
        BOOST_TEST(err.find("--max-clock-drift-ppm: '" + std::string(bad) + "'") != std::string::npos, err);
        BOOST_TEST(err.find("0..500000") != std::string::npos, err);
    }
}

BOOST_AUTO_TEST_CASE(usage_lists_max_clock_drift_ppm) {
    BOOST_TEST(usage().find("--max-clock-drift-ppm N") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_flag_without_a_value_does_not_take_the_next_argument) {
    Options o;
    auto args = kBase;
    args.insert(args.begin(), {"--cert-file", "c.pem", "--key-file", "k.pem", "--client-cert-auth", "--trusted-ca-file", "ca.pem"});
    args.insert(args.end(), kPeerTls.begin(), kPeerTls.end());
    BOOST_TEST(parse(args, o) == "");
    BOOST_TEST(o.client_cert_auth);
    BOOST_TEST(o.trusted_ca_file == "ca.pem");  // --trusted-ca-file was not swallowed as a value
    BOOST_TEST(o.id == 2u);
    Options last;  // the last argument
    args = kBase;
    args.insert(args.end(), kPeerTls.begin(), kPeerTls.end());
    args.insert(args.end(), {"--cert-file", "c.pem", "--key-file", "k.pem", "--trusted-ca-file", "ca.pem", "--client-cert-auth"});
    BOOST_TEST(parse(args, last) == "");
    BOOST_TEST(last.client_cert_auth);
    Options off;
    args.back() = "--client-cert-auth=false";
    BOOST_TEST(parse(args, off) == "");
    BOOST_TEST(!off.client_cert_auth);
    Options on;
    args.back() = "--client-cert-auth=true";
    BOOST_TEST(parse(args, on) == "");
    BOOST_TEST(on.client_cert_auth);
    Options bad;
    args.back() = "--client-cert-auth=yes";
    BOOST_TEST(parse(args, bad) == "flag --client-cert-auth takes no value (or =true / =false), got 'yes'");
    Options plain;
    BOOST_TEST(parse(kBase, plain) == "");
    BOOST_TEST(!plain.client_cert_auth);
    BOOST_TEST(!plain.client_tls());
    BOOST_TEST(!plain.peer_tls());
}

BOOST_AUTO_TEST_CASE(tls_flags_must_come_in_their_groups) {
    auto with = [](std::vector<std::string> extra) {
        Options o;
        auto args = kBase;
        args.insert(args.end(), extra.begin(), extra.end());
        return parse(args, o);
    };
    BOOST_TEST(with({"--cert-file", "c.pem"}).find("got only --cert-file") != std::string::npos);
    BOOST_TEST(with({"--key-file", "k.pem"}).find("got only --key-file") != std::string::npos);
    BOOST_TEST(with({"--trusted-ca-file", "ca.pem"}).find("--trusted-ca-file needs TLS on the HTTP API") != std::string::npos);
    BOOST_TEST(with({"--client-cert-auth"}).find("--client-cert-auth needs TLS on the HTTP API") != std::string::npos);
    BOOST_TEST(with({"--cert-file", "c", "--key-file", "k", "--client-cert-auth"}).find("needs --trusted-ca-file") !=
               std::string::npos);
    BOOST_TEST(with({"--peer-cert-file", "p.pem", "--peer-key-file", "pk.pem"}).find("always mutual") != std::string::npos);
    BOOST_TEST(with({"--peer-cert-file", "p", "--peer-key-file", "k", "--peer-trusted-ca-file", "ca"}) == "");
    // Client TLS or authorization with a plaintext peer port is refused.
    BOOST_TEST(with({"--cert-file", "c", "--key-file", "k"}).find("--cert-file needs peer TLS too") != std::string::npos);
    BOOST_TEST(with({"--auth-file", "auth.txt"}).find("--auth-file needs peer TLS too") != std::string::npos);
    BOOST_TEST(with({"--auth-file", "a", "--peer-cert-file", "p", "--peer-key-file", "k", "--peer-trusted-ca-file", "ca"}) == "");
}

BOOST_AUTO_TEST_CASE(usage_lists_the_tls_flags) {
    for (const char* flag : {"--cert-file", "--key-file", "--trusted-ca-file", "--client-cert-auth", "--peer-cert-file",
                             "--peer-key-file", "--peer-trusted-ca-file", "--auth-file"}) {
        BOOST_TEST(usage().find(flag) != std::string::npos, flag);
    }
}

BOOST_AUTO_TEST_CASE(max_connections_defaults_to_1024_and_takes_16_to_a_million) {
    Options d;
    BOOST_TEST(parse(kBase, d) == "");
    BOOST_TEST(d.max_connections == 1024u);
    check_bounded_flag("--max-connections", "20000", &Options::max_connections, 20000,
                       {"15", "1000001", "-1", "lots", ""}, "16..1000000");
}

BOOST_AUTO_TEST_CASE(max_connections_per_address_defaults_to_512_and_takes_1_to_a_million) {
    Options d;
    BOOST_TEST(parse(kBase, d) == "");
    BOOST_TEST(d.max_connections_per_address == 512u);
    check_bounded_flag("--max-connections-per-address", "4096", &Options::max_connections_per_address, 4096,
                       {"0", "1000001", "-1", "many", ""}, "1..1000000");
    BOOST_TEST(usage().find("--max-connections-per-address") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(watch_limits_have_defaults_and_bounds) {
    Options d;
    BOOST_TEST(parse(kBase, d) == "");
    BOOST_TEST(d.max_watchers == 512u);
    BOOST_TEST(d.watch_buffer_bytes == 262144u);
    BOOST_TEST(d.watch_history_events == 100000u);
    BOOST_TEST(d.watch_history_bytes == (64u << 20));
    check_bounded_flag("--max-watchers", "0", &Options::max_watchers, 0, {"1000001", "-1", "x", ""}, "0..1000000");
    check_bounded_flag("--watch-buffer-bytes", "4096", &Options::watch_buffer_bytes, 4096, {"4095", "1073741825", ""},
                       "4096..1073741824");
    check_bounded_flag("--watch-history-events", "1", &Options::watch_history_events, 1, {"0", "100000001"},
                       "1..100000000");
    check_bounded_flag("--watch-history-bytes", "4096", &Options::watch_history_bytes, 4096, {"4095", "x"},
                       "4096..68719476736");
    for (const char* flag : {"--max-watchers", "--watch-buffer-bytes", "--watch-history-events", "--watch-history-bytes"}) {
        BOOST_TEST(usage().find(flag) != std::string::npos, flag);
    }
}

BOOST_AUTO_TEST_CASE(peer_connection_limits_have_defaults_bounds_and_reach_the_transport) {
    check_bounded_flag("--peer-max-pending", "8", &Options::peer_max_pending, 8, {"0", "65537", "-1", ""}, "1..65536");
    check_bounded_flag("--peer-max-pending-per-address", "2", &Options::peer_max_pending_per_address, 2,
                       {"0", "65537", "x"}, "1..65536");
    check_bounded_flag("--peer-pending-timeout-ms", "250", &Options::peer_pending_timeout_ms, 250,
                       {"49", "60001", "1s"}, "50..60000");
    check_bounded_flag("--peer-max-connections-per-member", "64", &Options::peer_max_connections_per_member, 64,
                       {"0", "65"}, "1..64");
    check_bounded_flag("--peer-max-unknown-connections", "1", &Options::peer_max_unknown_connections, 1,
                       {"0", "65537"}, "1..65536");
    Options o;
    BOOST_TEST(parse(kBase, o) == "");
    pgfence::net::TransportOptions t;
    set_incoming_limits(o, t);
    BOOST_TEST(t.incoming.max_pending == 64u);
    BOOST_TEST(t.incoming.max_pending_per_address == 16u);
    BOOST_TEST(t.incoming.max_per_member == 4u);
    BOOST_TEST(t.incoming.max_unknown == 16u);
    BOOST_TEST(t.pending_timeout.count() == 1000);
}

BOOST_AUTO_TEST_CASE(max_expire_batch_defaults_to_the_commands_limit_and_is_bounded_by_it) {
    // A wave's Expires in one ExpireMany; 1 only while upgrading from a release before it (docs/operations.md, Upgrades).
    BOOST_TEST(Options{}.max_expire_batch == pgfence::member::kDefaultMaxExpireBatch);
    BOOST_TEST(Options{}.max_expire_batch == pgfence::lock::kMaxExpireMany);
    check_bounded_flag("--max-expire-batch", "1", &Options::max_expire_batch, 1,
                       {"0", "1025", "-1", "many", ""}, "1..1024");
}

BOOST_AUTO_TEST_CASE(heartbeat_and_election_periods_take_1_to_60000_ms) {
    Options h, e;
    BOOST_TEST(parse_with("--heartbeat-ms", "40", h) == "");
    BOOST_TEST(h.heartbeat_ms == 40);
    BOOST_TEST(parse_with("--election-ms", "200", e) == "");
    BOOST_TEST(e.election_ms == 200);
    for (const char* flag : {"--heartbeat-ms", "--election-ms"}) {
        for (const char* bad : {"0", "60001", "-1", "fast", ""}) {
            Options b;
            const std::string err = parse_with(flag, bad, b);
            BOOST_TEST(err.find(std::string(flag) + ": '" + bad + "' must be 1..60000") != std::string::npos, err);
        }
    }
}

BOOST_AUTO_TEST_CASE(expiry_wave_defaults_to_the_cores_and_takes_1_to_65536) {
    BOOST_TEST(Options{}.expiry_wave == pgfence::member::kDefaultExpiryWave);
    check_bounded_flag("--expiry-wave", "2048", &Options::expiry_wave, 2048,
                       {"0", "65537", "-1", "all", ""}, "1..65536");
    BOOST_TEST(usage().find("--expiry-wave N") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(owner_binding_defaults_to_on_and_takes_on_or_off) {
    Options d;
    BOOST_TEST(parse(kBase, d) == "");
    BOOST_TEST(d.owner_binding);
    Options off;
    BOOST_TEST(parse_with("--owner-binding", "off", off) == "");
    BOOST_TEST(!off.owner_binding);
    Options on;
    BOOST_TEST(parse_with("--owner-binding", "on", on) == "");
    BOOST_TEST(on.owner_binding);
    for (const char* bad : {"yes", "ON", "1", ""}) {
        Options b;
        const std::string err = parse_with("--owner-binding", bad, b);
        BOOST_TEST(err.find("--owner-binding: '" + std::string(bad) + "' must be on or off") != std::string::npos, err);
    }
}

BOOST_AUTO_TEST_CASE(token_history_limits_and_the_wall_clock_stamp_have_defaults_and_bounds) {
    Options d;
    BOOST_TEST(parse(kBase, d) == "");
    BOOST_TEST(d.token_history_events == 100000u);
    BOOST_TEST(d.token_history_bytes == (64u << 20));
    BOOST_TEST(d.log_wall_time);
    check_bounded_flag("--token-history-events", "1", &Options::token_history_events, 1, {"0", "100000001", "x"},
                       "1..100000000");
    check_bounded_flag("--token-history-bytes", "4096", &Options::token_history_bytes, 4096, {"4095", ""},
                       "4096..68719476736");
    Options off;
    BOOST_TEST(parse_with("--log-wall-time", "off", off) == "");
    BOOST_TEST(!off.log_wall_time);
    Options b;
    const std::string err = parse_with("--log-wall-time", "yes", b);
    BOOST_TEST(err.find("--log-wall-time: 'yes' must be on or off") != std::string::npos, err);
    for (const char* flag : {"--token-history-events", "--token-history-bytes", "--log-wall-time"}) {
        BOOST_TEST(usage().find(flag) != std::string::npos, flag);
    }
}

BOOST_AUTO_TEST_CASE(early_appends_default_to_off_and_take_on_or_off) {
    Options d;
    BOOST_TEST(parse(kBase, d) == "");
    BOOST_TEST(!d.early_appends);
    Options on;
    BOOST_TEST(parse_with("--early-appends", "on", on) == "");
    BOOST_TEST(on.early_appends);
    Options bad;
    const std::string err = parse_with("--early-appends", "1", bad);
    BOOST_TEST(err.find("--early-appends: '1' must be on or off") != std::string::npos, err);
}

BOOST_AUTO_TEST_CASE(lease_checkpoints_default_to_on_and_their_rate_to_1024) {
    Options d;
    BOOST_TEST(parse(kBase, d) == "");
    BOOST_TEST(d.lease_checkpoints);
    BOOST_TEST(d.max_checkpoints_per_tick == 1024u);
    Options off;
    BOOST_TEST(parse_with("--lease-checkpoints", "off", off) == "");
    BOOST_TEST(!off.lease_checkpoints);
    Options bad;
    const std::string err = parse_with("--lease-checkpoints", "yes", bad);
    BOOST_TEST(err.find("--lease-checkpoints: 'yes' must be on or off") != std::string::npos, err);
    Options one;
    BOOST_TEST(parse_with("--max-checkpoints-per-tick", "1", one) == "");
    BOOST_TEST(one.max_checkpoints_per_tick == 1u);
    for (const char* v : {"0", "1025", "-1", "many", ""}) {
        Options b;
        const std::string e = parse_with("--max-checkpoints-per-tick", v, b);
        BOOST_TEST(e.find("must be 1..1024") != std::string::npos, e);
    }
}

BOOST_AUTO_TEST_CASE(the_open_files_limit_is_raised_within_the_hard_limit_and_never_lowered) {
    rlimit original{};
    BOOST_TEST_REQUIRE(getrlimit(RLIMIT_NOFILE, &original) == 0);
    BOOST_TEST_REQUIRE(original.rlim_cur > 128u);
    // Start from a soft limit below the hard one (they are often equal).
    rlimit lowered = original;
    lowered.rlim_cur = original.rlim_cur - 64;
    BOOST_TEST_REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    const std::uint64_t start = lowered.rlim_cur;
    OpenFilesLimit lim;
    BOOST_TEST(raise_open_files_limit(start - 1, lim) == "");
    BOOST_TEST(lim.soft == start);  // never lowered
    BOOST_TEST(!lim.raised);
    BOOST_TEST(raise_open_files_limit(start + 10, lim) == "");
    BOOST_TEST(lim.raised);
    BOOST_TEST(lim.soft == start + 10);
    rlimit now{};
    BOOST_TEST_REQUIRE(getrlimit(RLIMIT_NOFILE, &now) == 0);
    BOOST_TEST(now.rlim_cur == start + 10);
    // Past the hard limit: as far as it allows, and no error.
    if (original.rlim_max != RLIM_INFINITY) {
        BOOST_TEST(raise_open_files_limit(original.rlim_max + 1000, lim) == "");
        BOOST_TEST(lim.soft == original.rlim_max);
        BOOST_TEST(lim.soft < original.rlim_max + 1000);
    }
    BOOST_TEST_REQUIRE(setrlimit(RLIMIT_NOFILE, &original) == 0);
}

// --allowed-origin: repeatable and comma-separated, each value an origin as
// a browser serializes it; "null" and "*" would let any page in.
BOOST_AUTO_TEST_CASE(allowed_origins_are_origins_as_browsers_send_them) {
    Options o;
    auto args = kBase;
    args.insert(args.end(), {"--allowed-origin", "https://ops.example.com,http://10.0.0.5:8080",
                             "--allowed-origin=http://[::1]:3000", "--allowed-origin", "https://ops.example.com"});
    BOOST_TEST(parse(args, o) == "");
    BOOST_TEST((o.allowed_origins ==
                std::vector<std::string>{"https://ops.example.com", "http://10.0.0.5:8080", "http://[::1]:3000"}));
    for (const char* bad : {"", "null", "*", "ops.example.com", "https://ops.example.com/", "https://Ops.example.com",
                            "https://ops.example.com:0", "https://ops.example.com:65536", "https://ops.example.com:",
                            "ftp://ops.example.com", "https://", "https://[]", "https://a b", "https://x:08"}) {
        Options b;
        const std::string err = parse_with("--allowed-origin", bad, b);
        BOOST_TEST(err.find("--allowed-origin: '" + std::string(bad) + "'") != std::string::npos, err);
    }
    Options none;
    BOOST_TEST(parse(kBase, none) == "");
    BOOST_TEST(none.allowed_origins.empty());
}

BOOST_AUTO_TEST_CASE(admin_without_auth_is_a_switch_off_by_default) {
    Options o;
    BOOST_TEST(parse(kBase, o) == "");
    BOOST_TEST(!o.admin_without_auth);
    BOOST_TEST(!o.auth_configured());
    auto args = kBase;
    args.push_back("--admin-without-auth");
    Options on;
    BOOST_TEST(parse(args, on) == "");
    BOOST_TEST(on.admin_without_auth);
    Options with_value;
    BOOST_TEST(parse_with("--admin-without-auth=", "", with_value) != "");
}

BOOST_AUTO_TEST_SUITE_END()
