// `fencectl run` against scripted fake members: the child's environment and
// exit status, release on exit, and termination when the lease is lost
// (keepalive refused, or no keepalive answered before the local deadline).
#define BOOST_TEST_MODULE client_run
#include <unistd.h>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/args.h"
#include "client/exit_codes.h"
#include "cli/run_command.h"
#include "fake_server.h"

using namespace pgfence;
using namespace std::chrono_literals;
using test::FakeReply;
using test::FakeRequest;
using test::FakeServer;
using test::reply;
using test::redirect_to;
using test::delayed;

namespace {

constexpr auto kSlack = 2s;

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "fencectl-run-XXXXXX").string();
        path = ::mkdtemp(tmpl.data());
    }
    ~TempDir() { std::filesystem::remove_all(path); }
};

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

FakeReply granted() { return reply(200, R"({"key":"job","token":77,"lease_ms":600,"owner":""})"); }

struct Run {
    int code = -1;
    std::string err;
    test::Clock::duration took{};
    std::chrono::system_clock::time_point started;  // wall clock, to compare with the child's `date`
};

Run run_fencectl(FakeServer& s, const std::vector<std::string>& words) {
    std::vector<std::string> all{"run", "job", "--lease", "600ms", "--wait", "0s", "--grace", "300ms"};
    all.insert(all.end(), words.begin(), words.end());
    const cli::ArgsParse p = cli::parse_args(all);
    BOOST_TEST_REQUIRE(p.error.empty(), p.error);
    client::Options o;
    o.endpoints = {s.endpoint()};
    o.timeout = 2s;
    o.attempt_timeout = 1s;
    client::Client c(o);
    std::ostringstream err;
    Run r;
    r.started = std::chrono::system_clock::now();
    const auto start = test::Clock::now();
    r.code = cli::run_with_lock(p.args, c, err);
    r.took = test::Clock::now() - start;
    r.err = err.str();
    return r;
}

std::size_t count(const std::vector<FakeRequest>& reqs, const std::string& target) {
    return static_cast<std::size_t>(std::count_if(reqs.begin(), reqs.end(), [&](const FakeRequest& q) { return q.target == target; }));
}

}  // namespace

BOOST_AUTO_TEST_CASE(exports_key_and_token_returns_child_status_and_releases) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/release") return reply(200, R"({"released":true})");
        return granted();
    });
    TempDir dir;
    const auto out = dir.path / "env";
    const auto seq = dir.path / "seq";
    const Run r = run_fencectl(s, {"--", "sh", "-c",
                                   "echo \"$FENCE_KEY $FENCE_TOKEN\" > " + out.string() + "; echo \"$FENCE_SEQ_FILE\" > " +
                                       seq.string() + "; head -c 4 \"$FENCE_SEQ_FILE\" >> " + seq.string() + "; exit 7"});
    BOOST_TEST(r.code == 7, r.err);
    BOOST_TEST(read_file(out) == "job 77\n");
    // The sequence file for fencectl seq: made for token 77, removed at the end.
    const std::string seq_text = read_file(seq);
    const std::string seq_path = seq_text.substr(0, seq_text.find('\n'));
    BOOST_TEST(seq_path.find("/fencectl-run.") != std::string::npos, seq_text);
    BOOST_TEST(seq_text.substr(seq_path.size() + 1) == "77 0");
    BOOST_TEST(!std::filesystem::exists(std::filesystem::path(seq_path).parent_path()));
    const auto reqs = s.requests();
    BOOST_TEST_REQUIRE(count(reqs, "/v1/release") == 1u);
    const auto body = boost::json::parse(reqs.back().body);
    BOOST_TEST(body.at("token").to_number<std::int64_t>() == 77);
}

BOOST_AUTO_TEST_CASE(keeps_alive_at_a_third_of_the_lease) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/keepalive") return reply(200, R"({"key":"job","token":77,"ttl_ms":600})");
        if (q.target == "/v1/release") return reply(200, R"({"released":true})");
        return granted();
    });
    const Run r = run_fencectl(s, {"--", "sleep", "1.1"});
    BOOST_TEST(r.code == 0, r.err);
    const auto n = count(s.requests(), "/v1/keepalive");
    BOOST_TEST(n >= 3u);  // every 200ms over 1.1s: about 5
    BOOST_TEST(n <= 8u);
}

BOOST_AUTO_TEST_CASE(refused_keepalive_terminates_the_child) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/keepalive" || q.target == "/v1/release") return reply(404, R"({"error":"not_held"})");
        return granted();
    });
    const Run r = run_fencectl(s, {"--", "sleep", "30"});
    BOOST_TEST(r.code == kExitLostLease, r.err);
    BOOST_TEST(r.err.find("keepalive refused") != std::string::npos, r.err);
    BOOST_TEST((r.took < 200ms + kSlack));  // first keepalive at lease/3, then SIGTERM: sleep dies at once
}

BOOST_AUTO_TEST_CASE(a_lost_lease_is_marked_in_the_sequence_file_before_the_child_is_signalled) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/keepalive" || q.target == "/v1/release") return reply(404, R"({"error":"not_held"})");
        return granted();
    });
    TempDir dir;
    const auto out = dir.path / "state";
    const Run r = run_fencectl(s, {"--", "sh", "-c",
                                   "trap 'ls \"${FENCE_SEQ_FILE%/seq}\" > " + out.string() +
                                       "; exit 0' TERM; while :; do sleep 0.05; done"});
    BOOST_TEST(r.code == kExitLostLease, r.err);
    BOOST_TEST(read_file(out) == "lost\nseq\n");  // fencectl seq refuses from then on (exit 4)
}

BOOST_AUTO_TEST_CASE(silent_cluster_terminates_the_child_by_the_local_deadline) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/acquire") return granted();
        return delayed(reply(200, "{}"), 30s);  // keepalives and the release are never answered
    });
    TempDir dir;
    const auto ticks = dir.path / "ticks";
    // The child ignores SIGTERM, so it takes the SIGKILL; each tick is the wall time in ns.
    const std::string script = "trap '' TERM; while :; do date +%s%N >> " + ticks.string() + "; sleep 0.02; done";
    const Run r = run_fencectl(s, {"--", "sh", "-c", script});
    BOOST_TEST(r.code == kExitLostLease, r.err);
    BOOST_TEST(r.err.find("local lease deadline") != std::string::npos, r.err);
    // The child is dead BEFORE the lease deadline (acquire's send time + 600ms,
    // and the send came after `started`), although it ignores SIGTERM and
    // --grace (300ms) alone would have carried it past the deadline.
    std::istringstream lines(read_file(ticks));
    long long tick_ns = 0, last_ns = 0;
    while (lines >> tick_ns) last_ns = tick_ns;
    BOOST_TEST_REQUIRE(last_ns > 0);
    const auto started_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(r.started.time_since_epoch()).count();
    BOOST_TEST(last_ns - started_ns < 600'000'000LL, "last tick " << (last_ns - started_ns) / 1'000'000 << "ms after start");
    // Then a release attempt of at most 1s.
    BOOST_TEST((r.took < 600ms + 1s + kSlack));
    const auto size = std::filesystem::file_size(ticks);
    BOOST_TEST_REQUIRE(size > 0u);
    // Nothing writes any more: the whole process group is gone. Bounded: 3 x 100ms.
    for (int i = 0; i < 3; ++i) {
        ::usleep(100'000);
        BOOST_TEST(std::filesystem::file_size(ticks) == size);
    }
}

BOOST_AUTO_TEST_CASE(held_lock_never_starts_the_child) {
    FakeServer s([](const FakeRequest&) { return reply(409, R"({"error":"held"})"); });
    TempDir dir;
    const auto marker = dir.path / "started";
    const Run r = run_fencectl(s, {"--", "touch", marker.string()});
    BOOST_TEST(r.code == kExitHeld, r.err);
    BOOST_TEST(!std::filesystem::exists(marker));
}

BOOST_AUTO_TEST_CASE(missing_command_exits_127_and_releases) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/release") return reply(200, R"({"released":true})");
        return granted();
    });
    const Run r = run_fencectl(s, {"--", "/nonexistent/fence-test-cmd"});
    BOOST_TEST(r.code == 127, r.err);
    BOOST_TEST(count(s.requests(), "/v1/release") == 1u);
}

BOOST_AUTO_TEST_CASE(late_grant_is_confirmed_before_the_child_starts) {
    // The grant arrives 400ms after the request was sent (lease 600ms): more than
    // a third of the lease may be gone, so run must keepalive before starting CMD.
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/acquire") return delayed(granted(), 400ms);
        return reply(404, R"({"error":"not_held"})");  // and the lease turns out to be lost
    });
    TempDir dir;
    const auto marker = dir.path / "started";
    const Run r = run_fencectl(s, {"--", "touch", marker.string()});
    BOOST_TEST(r.code == kExitLostLease, r.err);
    BOOST_TEST(!std::filesystem::exists(marker));
    const auto reqs = s.requests();
    BOOST_TEST_REQUIRE(reqs.size() >= 2u);
    BOOST_TEST(reqs[1].target == "/v1/keepalive");
}

// `fencectl elect`: the campaign's request, CMD's environment (the election,
// its key, the leader's token and value), keepalives of the election's key,
// a resign (not a release) when CMD exits; a refused keepalive terminates CMD
// as run's does; a campaign whose wait ran out is campaigned again until
// leader without --wait, and exits 3 with one.
namespace {

Run elect_fencectl(FakeServer& s, const std::vector<std::string>& words) {
    std::vector<std::string> all{"elect", "jobs", "--value", "http://a:80", "--lease", "600ms", "--grace", "300ms"};
    all.insert(all.end(), words.begin(), words.end());
    const cli::ArgsParse p = cli::parse_args(all);
    BOOST_TEST_REQUIRE(p.error.empty(), p.error);
    client::Options o;
    o.endpoints = {s.endpoint()};
    o.timeout = 2s;
    o.attempt_timeout = 1s;
    client::Client c(o);
    std::ostringstream err;
    Run r;
    const auto start = test::Clock::now();
    r.code = cli::run_elected(p.args, c, err);
    r.took = test::Clock::now() - start;
    r.err = err.str();
    return r;
}

FakeReply elected() {
    return reply(200, R"({"name":"jobs","value":"http://a:80","key":"election/jobs","token":88,"lease_ms":600,"owner":""})");
}

}  // namespace

BOOST_AUTO_TEST_CASE(elect_runs_cmd_as_leader_with_the_token_and_resigns) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/election/resign") return reply(200, R"({"resigned":true})");
        if (q.target == "/v1/keepalive") return reply(200, R"({"key":"election/jobs","token":88,"ttl_ms":600})");
        return elected();
    });
    TempDir dir;
    const auto out = dir.path / "env";
    const Run r = elect_fencectl(s, {"--", "sh", "-c",
                                     "echo \"$FENCE_ELECTION $FENCE_KEY $FENCE_TOKEN $FENCE_VALUE\" > " + out.string() +
                                         "; sleep 0.5; exit 5"});
    BOOST_TEST(r.code == 5, r.err);
    BOOST_TEST(read_file(out) == "jobs election/jobs 88 http://a:80\n");
    const auto reqs = s.requests();
    BOOST_TEST_REQUIRE(!reqs.empty());
    BOOST_TEST(reqs.front().target == "/v1/election/campaign");
    const auto campaign = boost::json::parse(reqs.front().body);
    BOOST_TEST(campaign.at("name").as_string() == "jobs");
    BOOST_TEST(campaign.at("value").as_string() == "http://a:80");
    BOOST_TEST(campaign.at("wait_ms").to_number<std::int64_t>() > 0);  // without --wait: until leader
    BOOST_TEST(count(reqs, "/v1/keepalive") >= 1u);
    for (const FakeRequest& q : reqs) {
        if (q.target == "/v1/keepalive") BOOST_TEST(boost::json::parse(q.body).at("key").as_string() == "election/jobs");
    }
    BOOST_TEST(count(reqs, "/v1/release") == 0u);
    BOOST_TEST_REQUIRE(count(reqs, "/v1/election/resign") == 1u);
    const auto resign = boost::json::parse(reqs.back().body);
    BOOST_TEST(resign.at("name").as_string() == "jobs");
    BOOST_TEST(resign.at("token").to_number<std::int64_t>() == 88);
}

BOOST_AUTO_TEST_CASE(elect_terminates_cmd_when_the_leadership_is_lost) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/keepalive") return reply(404, R"({"error":"not_held"})");
        if (q.target == "/v1/election/resign") return reply(404, R"({"error":"not_leader"})");
        return elected();
    });
    const Run r = elect_fencectl(s, {"--", "sleep", "30"});
    BOOST_TEST(r.code == kExitLostLease, r.err);
    BOOST_TEST(r.err.find("fencectl elect: lease of election/jobs token 88 lost") != std::string::npos, r.err);
    BOOST_TEST((r.took < 200ms + kSlack));
}

BOOST_AUTO_TEST_CASE(elect_campaigns_again_until_leader_and_gives_up_after_its_wait) {
    std::atomic<int> campaigns{0};
    FakeServer s([&campaigns](const FakeRequest& q) {
        if (q.target == "/v1/election/resign") return reply(200, R"({"resigned":true})");
        if (q.target == "/v1/election/campaign" && ++campaigns < 3) {
            return reply(409, R"({"error":"held","message":"wait timed out"})");
        }
        return elected();
    });
    Run r = elect_fencectl(s, {"--", "true"});
    BOOST_TEST(r.code == 0, r.err);
    BOOST_TEST(campaigns.load() == 3);
    FakeServer never([](const FakeRequest&) { return reply(409, R"({"error":"held","message":"wait timed out"})"); });
    r = elect_fencectl(never, {"--wait", "200ms", "--", "true"});
    BOOST_TEST(r.code == kExitHeld, r.err);
}
