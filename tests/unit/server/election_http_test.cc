// The election routes over HTTP, through the shell's gate and answers, on
// an in-process three-member cluster (shell_cluster.h) asked through the
// client library: a campaign leads and publishes its value, which
// GET /v1/election/leader and GET /v1/locks show with the leader's token;
// proclaim changes the value and keeps the token; a campaign that finds a
// leader is refused (409) without a wait and queues with one; a resign hands
// over to the waiting campaign at once, with a larger token; proclaim and
// resign with a token that does not lead are refused (404 not_leader); an
// election nobody leads answers 404 no_leader; a bad name is a 400;
// Client::observe sees the leader, then each change (polling).
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "client/client.h"
#include "shell_cluster.h"

using namespace pgfence;
using namespace pgfence::server::test;
using std::chrono::milliseconds;

namespace {

client::Options options_for(const Cluster& cluster) {
    client::Options o;
    o.endpoints = cluster.endpoints();
    o.timeout = milliseconds(10'000);
    return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(election_http)

BOOST_AUTO_TEST_CASE(campaign_proclaim_leader_and_resign_over_http) {
    Cluster cluster(Delays{milliseconds(0), milliseconds(0)});
    BOOST_TEST_REQUIRE(cluster.start_error().empty(), cluster.start_error());
    client::Client c(options_for(cluster));

    auto none = c.leader("billing");
    BOOST_TEST_REQUIRE(!none.ok());
    BOOST_TEST((none.error().kind == client::ErrorKind::kNotFound));
    BOOST_TEST(none.error().http_status == 404);
    BOOST_TEST(none.error().message.find("has no leader") != std::string::npos, none.error().message);

    auto first = c.campaign(client::CampaignRequest{"billing", "http://a:80", milliseconds(5'000), milliseconds(0), "a"});
    BOOST_TEST_REQUIRE(first.ok(), first.message());
    BOOST_TEST(first.value().key == "election/billing");
    BOOST_TEST(first.value().value == "http://a:80");
    const std::uint64_t token = first.value().token;

    auto led = c.leader("billing");
    BOOST_TEST_REQUIRE(led.ok(), led.message());
    BOOST_TEST(led.value().name == "billing");
    BOOST_TEST(led.value().value == "http://a:80");
    BOOST_TEST(led.value().token == token);
    BOOST_TEST(led.value().owner == "a");
    auto lock = c.get("election/billing");  // the election is the lock on its key
    BOOST_TEST_REQUIRE(lock.ok(), lock.message());
    BOOST_TEST(lock.value().token == token);

    auto proclaimed = c.proclaim("billing", token, "http://b:80");
    BOOST_TEST_REQUIRE(proclaimed.ok(), proclaimed.message());
    BOOST_TEST(proclaimed.value().value == "http://b:80");
    BOOST_TEST(c.leader("billing").value().value == "http://b:80");
    BOOST_TEST(c.leader("billing").value().token == token);
    auto stale = c.proclaim("billing", token + 1000, "x");
    BOOST_TEST_REQUIRE(!stale.ok());
    BOOST_TEST((stale.error().kind == client::ErrorKind::kNotHeld));
    BOOST_TEST(stale.error().message.find("is not led with that token") != std::string::npos, stale.error().message);
    BOOST_TEST(c.leader("billing").value().value == "http://b:80");

    auto refused = c.campaign(client::CampaignRequest{"billing", "c", milliseconds(5'000), milliseconds(0), "c"});
    BOOST_TEST_REQUIRE(!refused.ok());
    BOOST_TEST((refused.error().kind == client::ErrorKind::kHeld));

    // A campaign that waits; the resign hands over to it at once (the
    // first leader's 5s lease is far from over).
    auto waiting = std::async(std::launch::async, [&cluster] {
        client::Client other(options_for(cluster));
        return other.campaign(client::CampaignRequest{"billing", "d", milliseconds(5'000), milliseconds(8'000), "d"});
    });
    BOOST_TEST((waiting.wait_for(milliseconds(300)) == std::future_status::timeout));  // queued behind the leader
    auto wrong = c.resign("billing", token + 1000);
    BOOST_TEST((!wrong.ok() && wrong.error().kind == client::ErrorKind::kNotHeld));
    const auto resigned_at = std::chrono::steady_clock::now();
    auto resigned = c.resign("billing", token);
    BOOST_TEST_REQUIRE(resigned.ok(), resigned.message());
    BOOST_TEST_REQUIRE((waiting.wait_for(milliseconds(3'000)) == std::future_status::ready));
    const auto handed_over = std::chrono::steady_clock::now() - resigned_at;
    auto second = waiting.get();
    BOOST_TEST_REQUIRE(second.ok(), second.message());
    BOOST_TEST(second.value().token > token);
    BOOST_TEST(second.value().value == "d");
    BOOST_TEST(std::chrono::duration_cast<milliseconds>(handed_over).count() < 2'000);
    BOOST_TEST(c.leader("billing").value().value == "d");

    // Observing by polling: the leader first, then each change, in order.
    std::mutex seen_mutex;  // guards seen: the watcher's thread adds, this one reads
    std::vector<std::string> seen;
    auto watching = std::async(std::launch::async, [&cluster, &seen, &seen_mutex] {
        client::Client watcher(options_for(cluster));
        return watcher.observe("billing", milliseconds(50), std::chrono::steady_clock::now() + milliseconds(5'000),
                               [&seen, &seen_mutex](const std::optional<client::LeaderInfo>& now) {
                                   std::lock_guard guard(seen_mutex);
                                   seen.push_back(now ? now->value : "(none)");
                                   return seen.size() < 3;
                               });
    });
    // Waits (at most 2 s) until observe reported n changes; fails the test otherwise.
    const auto seen_now = [&seen, &seen_mutex](std::size_t n) {
        for (int i = 0; i < 100; ++i) {
            {
                std::lock_guard guard(seen_mutex);
                if (seen.size() >= n) return;
            }
            std::this_thread::sleep_for(milliseconds(20));
        }
        BOOST_TEST_REQUIRE(false, "observe reported fewer than " << n << " changes in 2 s");
    };
    seen_now(1);
    BOOST_TEST_REQUIRE(c.proclaim("billing", second.value().token, "e").ok());
    seen_now(2);
    BOOST_TEST_REQUIRE(c.resign("billing", second.value().token).ok());
    BOOST_TEST_REQUIRE((watching.wait_for(milliseconds(5'000)) == std::future_status::ready));
    BOOST_TEST(watching.get().ok());
    BOOST_TEST((seen == std::vector<std::string>{"d", "e", "(none)"}));

    auto bad = c.leader("");
    BOOST_TEST((!bad.ok() && bad.error().kind == client::ErrorKind::kBadRequest));
    cluster.stop();
    BOOST_TEST(cluster.loop_errors().empty(), cluster.loop_errors());
}

BOOST_AUTO_TEST_SUITE_END()
