// The client library against scripted fake members: answers and error kinds,
// redirects, retries across endpoints, deadlines, and lease time counted from
// the send time.
#define BOOST_TEST_MODULE client_fake_server
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include "client/client.h"
#include "client/exit_codes.h"
#include "fake_server.h"

using namespace pgfence;
using namespace std::chrono_literals;
using test::FakeReply;
using test::FakeRequest;
using test::FakeServer;
using test::reply;
using test::redirect_to;
using test::delayed;
namespace json = boost::json;

namespace {

constexpr auto kSlack = 1500ms;  // scheduling slack on a busy 2-core machine

client::Options options_for(std::vector<client::Endpoint> endpoints) {
    client::Options o;
    o.endpoints = std::move(endpoints);
    o.timeout = 3s;
    o.attempt_timeout = 1s;
    o.backoff_initial = 10ms;
    o.backoff_max = 100ms;
    return o;
}

FakeReply granted(std::uint64_t token) {
    return reply(200, R"({"key":"k","token":)" + std::to_string(token) + R"(,"lease_ms":5000,"owner":"w"})");
}

// A port nothing listens on: bound, then closed.
client::Endpoint dead_endpoint() {
    std::uint16_t port = 0;
    { FakeServer s([](const FakeRequest&) { return FakeReply{}; }); port = s.endpoint().port; }
    return {"127.0.0.1", port};
}

// A member that is SIGSTOPped: the kernel completes TCP handshakes into the
// listen backlog, but nothing ever reads or answers.
struct StoppedMember {
    int fd = -1;
    std::uint16_t port = 0;
    StoppedMember() {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        BOOST_TEST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0);
        BOOST_TEST_REQUIRE(::listen(fd, 16) == 0);
        // Non-blocking, so that received() ends when the backlog is empty.
        BOOST_TEST_REQUIRE(::fcntl(fd, F_SETFL, O_NONBLOCK) == 0);
        BOOST_TEST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        port = ntohs(a.sin_port);
    }
    ~StoppedMember() { ::close(fd); }
    client::Endpoint endpoint() const { return {"127.0.0.1", port}; }
    // Everything clients sent so far (the member "resumes" and reads it all).
    std::string received() const {
        std::string all;
        for (int i = 0; i < 16; ++i) {
            const int c = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (c < 0) break;
            char buf[4096];
            ssize_t n = 0;
            while ((n = ::recv(c, buf, sizeof buf, 0)) > 0) all.append(buf, static_cast<std::size_t>(n));
            ::close(c);
        }
        return all;
    }
};

}  // namespace

BOOST_AUTO_TEST_CASE(acquire_sends_fields_and_returns_token) {
    FakeServer s([](const FakeRequest&) { return granted(41); });
    client::Client c(options_for({s.endpoint()}));
    auto r = c.acquire({"k", 5s, 0ms, "w"});
    BOOST_TEST_REQUIRE(r.ok(), r.message());
    BOOST_TEST(r.value().token == 41u);
    BOOST_TEST(r.value().lease.count() == 5000);
    const auto reqs = s.requests();
    BOOST_TEST_REQUIRE(reqs.size() == 1u);
    BOOST_TEST(reqs[0].method == "POST");
    BOOST_TEST(reqs[0].target == "/v1/acquire");
    const json::object body = json::parse(reqs[0].body).as_object();
    BOOST_TEST(body.at("key").as_string() == "k");
    BOOST_TEST(body.at("lease_ms").to_number<std::int64_t>() == 5000);
    BOOST_TEST(body.at("wait_ms").to_number<std::int64_t>() == 0);
    BOOST_TEST(body.at("owner").as_string() == "w");
}

BOOST_AUTO_TEST_CASE(acquire_returns_the_grants_proof_when_there_is_one) {
    const std::string proof = "v1.21fe31dfa154a261.12345678901234567890.c2ln";
    FakeServer s([&](const FakeRequest& req) {
        // The first grant is signed, the second (another cluster) is not.
        if (json::parse(req.body).as_object().at("key").as_string() == "signed") {
            return reply(200, R"({"key":"signed","token":9,"lease_ms":5000,"owner":"","proof":")" + proof + "\"}");
        }
        return granted(10);
    });
    client::Client c(options_for({s.endpoint()}));
    auto r = c.acquire({"signed", 5s, 0ms, ""});
    BOOST_TEST_REQUIRE(r.ok(), r.message());
    BOOST_TEST(r.value().proof == proof);
    auto plain = c.acquire({"plain", 5s, 0ms, ""});
    BOOST_TEST_REQUIRE(plain.ok(), plain.message());
    BOOST_TEST(plain.value().proof.empty());
}

BOOST_AUTO_TEST_CASE(lease_deadline_counts_from_send_time_not_receive_time) {
    FakeServer s([](const FakeRequest&) {
        FakeReply r = granted(7);
        r.delay = 400ms;  // the answer is slow: receive time is 400ms after send time
        return r;
    });
    client::Client c(options_for({s.endpoint()}));
    auto r = c.acquire({"k", 5s, 0ms, ""});
    BOOST_TEST_REQUIRE(r.ok(), r.message());
    const auto& lease = r.value();
    BOOST_TEST((lease.sent_at <= s.requests().at(0).arrived));
    BOOST_TEST(lease.max_clock_drift_ppm == 50000u);  // the default rho, 5%
    BOOST_TEST((lease.deadline() == lease.sent_at + 4750ms));  // 5000ms x (1 - 5%)
    BOOST_TEST((lease.deadline() <= lease.received_at + 4750ms - 390ms));
}

BOOST_AUTO_TEST_CASE(deadline_is_send_time_plus_lease_times_one_minus_rho) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/keepalive") return reply(200, R"({"key":"k","token":7,"ttl_ms":3000})");
        return granted(7);
    });
    auto o = options_for({s.endpoint()});
    o.max_clock_drift_ppm = 100000;  // 10%
    client::Client c(o);
    auto a = c.acquire({"k", 5s, 0ms, ""});
    BOOST_TEST_REQUIRE(a.ok(), a.message());
    BOOST_TEST(a.value().max_clock_drift_ppm == 100000u);
    BOOST_TEST((a.value().deadline() == a.value().sent_at + 4500ms));
    auto k = c.keepalive("k", 7);
    BOOST_TEST_REQUIRE(k.ok(), k.message());
    BOOST_TEST(k.value().ttl.count() == 3000);  // the leader's ttl, as answered
    BOOST_TEST((k.value().deadline() == k.value().sent_at + 2700ms));
}

BOOST_AUTO_TEST_CASE(usable_lease_rounds_down_and_never_goes_negative) {
    using client::usable_lease;
    BOOST_TEST((usable_lease(10s, 0) == 10s));
    BOOST_TEST((usable_lease(10s, 50000) == 9500ms));
    BOOST_TEST((usable_lease(1ms, 1) == std::chrono::nanoseconds(999'999)));  // 1ms x (1 - 1e-6)
    BOOST_TEST((usable_lease(10s, 1'000'000) == client::Clock::duration::zero()));
    BOOST_TEST((usable_lease(10s, 2'000'000) == client::Clock::duration::zero()));
    BOOST_TEST((usable_lease(0ms, 50000) == client::Clock::duration::zero()));
    BOOST_TEST((usable_lease(-5ms, 50000) == client::Clock::duration::zero()));
    // A huge lease from a hostile answer saturates instead of overflowing.
    BOOST_TEST((usable_lease(client::milliseconds::max(), 0) > client::Clock::duration::zero()));
}

BOOST_AUTO_TEST_CASE(lease_counts_from_the_first_attempt_when_an_answer_was_lost) {
    // Member A reads the request (it may have granted it) and hangs up; B answers.
    FakeServer a([](const FakeRequest&) { return test::hang_up(); });
    FakeServer b([](const FakeRequest&) { return granted(9); });
    client::Client c(options_for({a.endpoint(), b.endpoint()}));
    auto r = c.acquire({"k", 5s, 0ms, "w"});
    BOOST_TEST_REQUIRE(r.ok(), r.message());
    BOOST_TEST_REQUIRE(a.requests().size() >= 1u);
    BOOST_TEST((r.value().sent_at <= a.requests().at(0).arrived));
    BOOST_TEST((r.value().sent_at < b.requests().at(0).arrived));
}

BOOST_AUTO_TEST_CASE(follows_redirect_and_remembers_the_leader) {
    FakeServer leader([](const FakeRequest& q) {
        return q.target == "/v1/release" ? reply(200, R"({"released":true})") : granted(5);
    });
    FakeServer follower([&](const FakeRequest& q) {
        return redirect_to(leader.url(q.target));
    });
    client::Client c(options_for({follower.endpoint()}));
    BOOST_TEST_REQUIRE(c.acquire({"k", 5s, 0ms, ""}).ok());
    BOOST_TEST(follower.requests().size() == 1u);
    BOOST_TEST(leader.requests().at(0).target == "/v1/acquire");
    BOOST_TEST_REQUIRE(c.release("k", 5).ok());
    BOOST_TEST(follower.requests().size() == 1u);  // went straight to the leader
    BOOST_TEST(leader.requests().size() == 2u);
}

BOOST_AUTO_TEST_CASE(the_bearer_goes_only_to_the_endpoints_given) {
    // A plaintext redirect to a host not in the list gets the request, not the credential.
    FakeServer elsewhere([](const FakeRequest&) { return granted(5); });
    FakeServer given([&](const FakeRequest& q) { return redirect_to(elsewhere.url(q.target)); });
    auto o = options_for({given.endpoint()});
    o.bearer = "c2VjcmV0LW9mLXRoZS13b3JrZXI";
    client::Client c(o);
    BOOST_TEST_REQUIRE(c.acquire({"k", 5s, 0ms, ""}).ok());
    BOOST_TEST(given.requests().at(0).authorization == "Bearer c2VjcmV0LW9mLXRoZS13b3JrZXI");
    BOOST_TEST(elsewhere.requests().at(0).authorization == "");
}

BOOST_AUTO_TEST_CASE(an_answer_refused_by_authorization_is_final) {
    FakeServer s([](const FakeRequest&) {
        return reply(403, R"({"error":"forbidden","message":"user 'w' has no lock permission on key 'k'"})");
    });
    client::Client c(options_for({s.endpoint()}));
    auto r = c.acquire({"k", 5s, 0ms, ""});
    BOOST_TEST_REQUIRE(!r.ok());
    BOOST_TEST(static_cast<int>(r.error().kind) == static_cast<int>(client::ErrorKind::kNotAuthorized));
    BOOST_TEST(r.error().http_status == 403);
    BOOST_TEST(r.error().message.find("has no lock permission on key 'k'") != std::string::npos, r.error().message);
    BOOST_TEST(s.requests().size() == 1u);  // not retried
}

BOOST_AUTO_TEST_CASE(redirect_loop_is_bounded) {
    std::string other_url;
    FakeServer a([&](const FakeRequest&) { return redirect_to(other_url); });
    FakeServer b([&](const FakeRequest&) { return redirect_to(a.url("/v1/acquire")); });
    other_url = b.url("/v1/acquire");
    auto o = options_for({a.endpoint()});
    o.timeout = 500ms;
    client::Client c(o);
    const auto start = test::Clock::now();
    auto r = c.acquire({"k", 5s, 0ms, ""});
    BOOST_TEST_REQUIRE(!r.ok());
    BOOST_TEST((r.error().kind == client::ErrorKind::kUnavailable));
    BOOST_TEST(r.error().message.find("redirects") != std::string::npos, r.error().message);
    BOOST_TEST((test::Clock::now() - start < 500ms + kSlack));
    BOOST_TEST(a.requests().size() + b.requests().size() <= static_cast<std::size_t>(o.max_attempts));
}

BOOST_AUTO_TEST_CASE(retries_past_dead_member_and_no_leader) {
    FakeServer no_leader([](const FakeRequest&) { return reply(503, R"({"error":"no_leader"})"); });
    FakeServer good([](const FakeRequest&) { return granted(11); });
    client::Client c(options_for({dead_endpoint(), no_leader.endpoint(), good.endpoint()}));
    auto r = c.acquire({"k", 5s, 0ms, ""});
    BOOST_TEST_REQUIRE(r.ok(), r.message());
    BOOST_TEST(r.value().token == 11u);
    BOOST_TEST(no_leader.requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(no_leader_until_deadline_is_unavailable_with_backoff) {
    FakeServer no_leader([](const FakeRequest&) { return reply(503, R"({"error":"no_leader"})"); });
    auto o = options_for({no_leader.endpoint()});
    o.timeout = 600ms;
    client::Client c(o);
    const auto start = test::Clock::now();
    auto r = c.get("k");
    const auto elapsed = test::Clock::now() - start;
    BOOST_TEST_REQUIRE(!r.ok());
    BOOST_TEST((r.error().kind == client::ErrorKind::kUnavailable));
    BOOST_TEST(r.error().message.find("no_leader") != std::string::npos, r.error().message);
    BOOST_TEST((elapsed >= 550ms));  // kept retrying until about the deadline
    BOOST_TEST((elapsed < 600ms + kSlack));
    // Backoff 10, 20, 40, 80, 100, 100...ms: well under one request per ms.
    BOOST_TEST(no_leader.requests().size() < 20u);
}

BOOST_AUTO_TEST_CASE(slow_member_hits_the_call_deadline) {
    FakeServer slow([](const FakeRequest&) { return delayed(reply(200, "{}"), 10s); });
    auto o = options_for({slow.endpoint()});
    o.timeout = 400ms;
    client::Client c(o);
    const auto start = test::Clock::now();
    auto r = c.list();
    BOOST_TEST_REQUIRE(!r.ok());
    BOOST_TEST((r.error().kind == client::ErrorKind::kUnavailable));
    BOOST_TEST((test::Clock::now() - start < 400ms + kSlack));
}

BOOST_AUTO_TEST_CASE(keepalive_respects_the_callers_deadline) {
    FakeServer slow([](const FakeRequest&) { return delayed(reply(200, "{}"), 10s); });
    client::Client c(options_for({slow.endpoint()}));
    const auto start = test::Clock::now();
    auto r = c.keepalive("k", 3, start + 200ms);
    BOOST_TEST(!r.ok());
    BOOST_TEST((test::Clock::now() - start < 200ms + kSlack));
}

BOOST_AUTO_TEST_CASE(waited_acquire_retry_asks_only_for_the_wait_left) {
    int calls = 0;
    FakeServer s([&](const FakeRequest&) {
        if (++calls == 1) return delayed(reply(503, R"({"error":"no_leader"})"), 300ms);
        return granted(3);
    });
    client::Client c(options_for({s.endpoint()}));
    BOOST_TEST_REQUIRE(c.acquire({"k", 5s, 2000ms, ""}).ok());
    const auto reqs = s.requests();
    BOOST_TEST_REQUIRE(reqs.size() == 2u);
    const auto wait1 = json::parse(reqs[0].body).at("wait_ms").to_number<std::int64_t>();
    const auto wait2 = json::parse(reqs[1].body).at("wait_ms").to_number<std::int64_t>();
    BOOST_TEST(wait1 >= 1900);
    BOOST_TEST(wait1 <= 2000);
    BOOST_TEST(wait2 <= 1700);
}

BOOST_AUTO_TEST_CASE(errors_map_to_kinds_with_the_servers_message) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/acquire") return reply(409, R"({"error":"held"})");
        if (q.target == "/v1/release") return reply(404, R"({"error":"not_held"})");
        if (q.target == "/v1/keepalive") return reply(400, R"({"error":"bad_request","message":"token: must be a positive integer"})");
        if (q.target.starts_with("/v1/locks?key=")) return reply(404, R"({"error":"not_found"})");
        return reply(200, "this is not json");
    });
    client::Client c(options_for({s.endpoint()}));
    BOOST_TEST((c.acquire({"k", 5s, 0ms, ""}).error().kind == client::ErrorKind::kHeld));
    BOOST_TEST((c.release("k", 1).error().kind == client::ErrorKind::kNotHeld));
    const auto bad = c.keepalive("k", 1);
    BOOST_TEST((bad.error().kind == client::ErrorKind::kBadRequest));
    BOOST_TEST(bad.error().message.find("token: must be") != std::string::npos, bad.error().message);
    BOOST_TEST((c.get("a b/c").error().kind == client::ErrorKind::kNotFound));
    BOOST_TEST(s.requests().back().target == "/v1/locks?key=a%20b%2Fc");
    BOOST_TEST((c.list().error().kind == client::ErrorKind::kNotPgfence));
}

// Every answer of a member's API is a JSON object: a web server's page on the
// port is "not a pgfence member", whatever its status, naming the endpoint.
BOOST_AUTO_TEST_CASE(an_answer_that_is_not_a_json_object_is_not_a_pgfence_member) {
    FakeServer web([](const FakeRequest& q) {
        if (q.target == "/v1/acquire") return reply(404, "<!DOCTYPE HTML>\n<html><body>Not Found</body></html>");
        if (q.target == "/v1/status") return reply(200, "<html>status page</html>");
        if (q.target == "/v1/release") return reply(200, "");
        return reply(200, "[1, 2]");
    });
    client::Client c(options_for({web.endpoint()}));
    const auto acquired = c.acquire({"k", 5s, 0ms, ""});
    BOOST_TEST_REQUIRE(!acquired.ok());
    BOOST_TEST((acquired.error().kind == client::ErrorKind::kNotPgfence));
    const std::string& m = acquired.error().message;
    BOOST_TEST(m.find(web.endpoint().to_string() + " is not a pgfence member: it answered HTTP 404 with \"<!DOCTYPE HTML> <html>") == 0u, m);
    BOOST_TEST((c.status_of(web.endpoint()).error().kind == client::ErrorKind::kNotPgfence));
    const auto released = c.release("k", 1);
    BOOST_TEST((released.error().kind == client::ErrorKind::kNotPgfence));
    BOOST_TEST(released.error().message.find("with an empty body") != std::string::npos, released.error().message);
    BOOST_TEST((c.get("k").error().kind == client::ErrorKind::kNotPgfence));  // JSON, but not an object
    BOOST_TEST(std::string(client::to_string(client::ErrorKind::kNotPgfence)) == "not_pgfence");
}

// A call that keeps failing says so once, after the first round of endpoints
// (here at once: both refuse connections), with the last error; a call that
// succeeds says nothing.
BOOST_AUTO_TEST_CASE(a_call_that_keeps_retrying_is_noticed_once_after_the_first_round) {
    auto o = options_for({dead_endpoint(), dead_endpoint()});
    o.timeout = 800ms;
    std::vector<std::pair<std::string, test::Clock::duration>> notices;
    const auto start = test::Clock::now();
    o.on_retry = [&](const std::string& why) { notices.emplace_back(why, test::Clock::now() - start); };
    client::Client c(o);
    const auto r = c.get("k");
    BOOST_TEST_REQUIRE(!r.ok());
    BOOST_TEST((r.error().kind == client::ErrorKind::kUnavailable));
    BOOST_TEST_REQUIRE(notices.size() == 1u);
    BOOST_TEST(notices[0].first.find("127.0.0.1:") != std::string::npos, notices[0].first);
    BOOST_TEST((notices[0].second < 200ms + kSlack));  // well within client::kRetryNoticeAfter on a quiet machine
    FakeServer good([](const FakeRequest&) { return granted(4); });
    auto quiet = options_for({good.endpoint()});
    quiet.on_retry = [&](const std::string& why) { notices.emplace_back(why, test::Clock::duration{}); };
    client::Client c2(quiet);
    BOOST_TEST(c2.acquire({"k", 5s, 0ms, ""}).ok());
    BOOST_TEST(notices.size() == 1u);
}

// A call whose deadline comes before its first round has failed ends
// without a notice: the final error says it all.
BOOST_AUTO_TEST_CASE(no_notice_when_the_deadline_comes_first) {
    StoppedMember stopped;
    auto o = options_for({stopped.endpoint()});
    o.timeout = 200ms;  // shorter than the 300ms probe
    int notices = 0;
    o.on_retry = [&](const std::string&) { ++notices; };
    client::Client c(o);
    BOOST_TEST(!c.get("k").ok());
    BOOST_TEST(notices == 0);
}

// Three silent members (SIGSTOPped ones) are noticed after one round of
// probes (300ms each by default), within a second, while the call goes on.
BOOST_AUTO_TEST_CASE(a_silent_cluster_is_noticed_within_a_second) {
    StoppedMember a, b, c3;
    auto o = options_for({a.endpoint(), b.endpoint(), c3.endpoint()});
    o.timeout = 3s;
    std::vector<test::Clock::duration> at;
    const auto start = test::Clock::now();
    o.on_retry = [&](const std::string&) { at.push_back(test::Clock::now() - start); };
    client::Client c(o);
    BOOST_TEST(!c.get("k").ok());
    const auto took = test::Clock::now() - start;
    BOOST_TEST_REQUIRE(at.size() == 1u);
    BOOST_TEST((at[0] >= 3 * o.probe_timeout));
    BOOST_TEST((at[0] < client::kRetryNoticeAfter + kSlack));
    BOOST_TEST((took >= 2500ms));  // and the call went on after the notice
}

// list() asks page after page, each after the last key of the one before,
// until a page comes without "next"; a "next" that does not move on is refused.
BOOST_AUTO_TEST_CASE(list_follows_next_page_by_page_and_refuses_a_next_that_goes_nowhere) {
    FakeServer s([](const FakeRequest& q) {
        auto lock = [](const char* key, int token) {
            return std::string(R"({"key":")") + key + R"(","token":)" + std::to_string(token) +
                   R"(,"owner":"","lease_ms":3000,"ttl_ms":2500})";
        };
        if (q.target == "/v1/locks?prefix=job%2F&after=&limit=1000") {
            return reply(200, R"({"locks":[)" + lock("job/a", 1) + "," + lock("job/b", 2) + R"(],"next":"job/b"})");
        }
        if (q.target == "/v1/locks?prefix=job%2F&after=job%2Fb&limit=1000") {
            return reply(200, R"({"locks":[)" + lock("job/c", 3) + "]}");
        }
        if (q.target == "/v1/locks?prefix=loop&after=&limit=1000") return reply(200, R"({"locks":[],"next":""})");
        return reply(404, R"({"error":"not_found"})");
    });
    client::Client c(options_for({s.endpoint()}));
    auto l = c.list("job/");
    BOOST_TEST_REQUIRE(l.ok(), l.message());
    BOOST_TEST_REQUIRE(l.value().size() == 3u);
    BOOST_TEST(l.value()[2].key == "job/c");
    BOOST_TEST(s.requests().size() == 2u);
    auto loop = c.list("loop");
    BOOST_TEST_REQUIRE(!loop.ok());
    BOOST_TEST((loop.error().kind == client::ErrorKind::kProtocol));
    BOOST_TEST(loop.error().message.find("'next'") != std::string::npos, loop.error().message);
}

BOOST_AUTO_TEST_CASE(parses_get_list_and_status) {
    FakeServer s([](const FakeRequest& q) {
        if (q.target == "/v1/locks?prefix=&after=&limit=1000") {
            return reply(200, R"({"locks":[{"key":"a","token":4,"owner":"","lease_ms":3000,"ttl_ms":2500}]})");
        }
        if (q.target == "/v1/status") {
            return reply(200, R"({"id":2,"role":"leader","term":5,"leader":2,"commit_index":10,)"
                                  R"("applied_index":9,"members":[{"id":1,"client_addr":"127.0.0.1:7001"},)"
                                  R"({"id":3,"client_url":"http://127.0.0.1:7003"}]})");
        }
        return reply(200, R"({"key":"a","token":4,"owner":"w","lease_ms":3000,"ttl_ms":2500})");
    });
    client::Client c(options_for({s.endpoint()}));
    auto g = c.get("a");
    BOOST_TEST_REQUIRE(g.ok(), g.message());
    BOOST_TEST(g.value().owner == "w");
    BOOST_TEST(g.value().ttl.count() == 2500);
    auto l = c.list();
    BOOST_TEST_REQUIRE(l.ok(), l.message());
    BOOST_TEST_REQUIRE(l.value().size() == 1u);
    BOOST_TEST(l.value()[0].token == 4u);
    auto st = c.status();
    BOOST_TEST_REQUIRE(st.ok(), st.message());
    BOOST_TEST(st.value().id == "2");
    BOOST_TEST(st.value().role == "leader");
    BOOST_TEST(st.value().commit_index == 10u);
    BOOST_TEST_REQUIRE(st.value().member_endpoints.size() == 2u);
    BOOST_TEST(st.value().member_endpoints[1].to_string() == "127.0.0.1:7003");
}

BOOST_AUTO_TEST_CASE(keeps_the_connection_alive_between_calls) {
    FakeServer s([](const FakeRequest&) { return granted(1); });
    client::Client c(options_for({s.endpoint()}));
    for (int i = 0; i < 5; ++i) BOOST_TEST_REQUIRE(c.acquire({"k", 5s, 0ms, ""}).ok());
    BOOST_TEST(s.connections() == 1);
}

BOOST_AUTO_TEST_CASE(reconnects_when_member_closed_an_idle_connection) {
    FakeServer s([](const FakeRequest&) {
        FakeReply r = granted(1);
        r.close_after = true;  // closes without saying Connection: close
        return r;
    });
    auto o = options_for({s.endpoint()});
    o.max_attempts = 1;  // the transparent reconnect is not a second attempt
    client::Client c(o);
    for (int i = 0; i < 3; ++i) {
        auto r = c.acquire({"k", 5s, 0ms, ""});
        BOOST_TEST_REQUIRE(r.ok(), r.message());
    }
    BOOST_TEST(s.connections() == 3);
}

BOOST_AUTO_TEST_CASE(rejects_empty_endpoint_list) {
    BOOST_CHECK_THROW(client::Client(client::Options{}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(keepalive_attempt_timeout_moves_on_from_a_stuck_member) {
    FakeServer stuck([](const FakeRequest&) { return delayed(reply(200, "{}"), 10s); });
    FakeServer good([](const FakeRequest&) { return reply(200, R"({"key":"k","token":3,"ttl_ms":900})"); });
    auto o = options_for({stuck.endpoint(), good.endpoint()});
    o.keepalive_attempt_timeout = 200ms;
    client::Client c(o);
    const auto start = test::Clock::now();
    auto r = c.keepalive("k", 3);
    BOOST_TEST_REQUIRE(r.ok(), r.message());
    BOOST_TEST((test::Clock::now() - start < 200ms + kSlack));
    BOOST_TEST(r.value().ttl.count() == 900);
    BOOST_TEST((r.value().deadline() == r.value().sent_at + 855ms));  // 900ms x (1 - 5%)
    BOOST_TEST((r.value().sent_at <= good.requests().at(0).arrived));
}

BOOST_AUTO_TEST_CASE(stopped_member_is_left_after_the_probe_timeout_and_never_gets_the_request) {
    StoppedMember stopped;
    FakeServer good([](const FakeRequest&) { return granted(12); });
    auto o = options_for({stopped.endpoint(), good.endpoint()});
    o.attempt_timeout = 3s;
    o.probe_timeout = 200ms;
    client::Client c(o);
    const auto start = test::Clock::now();
    auto r = c.acquire({"k", 5s, 0ms, ""});
    const auto took = test::Clock::now() - start;
    BOOST_TEST_REQUIRE(r.ok(), r.message());
    BOOST_TEST(r.value().token == 12u);
    BOOST_TEST((took >= 190ms));         // it did wait for the stopped member's probe ...
    BOOST_TEST((took < 200ms + 1000ms));  // ... but not the 3s attempt timeout
    BOOST_TEST(good.probes() == 1);
    const std::string seen = stopped.received();
    BOOST_TEST(seen.find("GET /healthz") != std::string::npos, seen);
    BOOST_TEST(seen.find("/v1/acquire") == std::string::npos, seen);  // no phantom grant there
}

BOOST_AUTO_TEST_CASE(probe_runs_once_per_connection) {
    FakeServer s([](const FakeRequest&) { return granted(1); });
    client::Client c(options_for({s.endpoint()}));
    for (int i = 0; i < 3; ++i) BOOST_TEST_REQUIRE(c.acquire({"k", 5s, 0ms, ""}).ok());
    BOOST_TEST(s.probes() == 1);
    BOOST_TEST(s.requests().size() == 3u);
}

BOOST_AUTO_TEST_CASE(all_members_stopped_is_unavailable_by_the_deadline) {
    StoppedMember a, b;
    auto o = options_for({a.endpoint(), b.endpoint()});
    o.timeout = 700ms;
    o.probe_timeout = 100ms;
    client::Client c(o);
    const auto start = test::Clock::now();
    auto r = c.get("k");
    BOOST_TEST_REQUIRE(!r.ok());
    BOOST_TEST((r.error().kind == client::ErrorKind::kUnavailable));
    BOOST_TEST(r.error().message.find("/healthz") != std::string::npos, r.error().message);
    BOOST_TEST((test::Clock::now() - start < 700ms + kSlack));
}

// GET /v1/tokens/{token} and /v1/keys/{key}/history: the answer's fields, the
// key percent-encoded in the path, and 404 unknown_token / 410 compacted.
BOOST_AUTO_TEST_CASE(token_life_and_key_history_read_the_token_history) {
    const std::string life =
        R"({"token":41,"key":"report:7","owner":"w-a","lease_ms":5000,"granted":{"index":1234,"wall_ms":1796000000000},)"
        R"("ended":{"how":"expired","index":1300,"wall_ms":1796000009000,"last_keepalive_wall_ms":1796000003000},)"
        R"("next_token":1301,"keepalives":{"observed_by":2,"while_leader":true,"ok":12,"last_ok_wall_ms":1796000003000,)"
        R"("refused":1,"last_refused_wall_ms":1796000010000,"last_refused_reason":"not_held"}})";
    FakeServer s([&](const FakeRequest& r) {
        if (r.target == "/v1/tokens/41") return reply(200, life);
        if (r.target == "/v1/tokens/7") return reply(404, R"({"error":"unknown_token","message":"no token 7 was issued"})");
        if (r.target == "/v1/tokens/3") {
            return reply(410, R"({"error":"compacted","message":"token 3 is older","oldest_token":20})");
        }
        if (r.target == "/v1/keys/report%3A7/history?limit=5") return reply(200, R"({"key":"report:7","tokens":[)" + life + "]}");
        return reply(500, R"({"error":"unexpected"})");
    });
    client::Client c(options_for({s.endpoint()}));
    auto t = c.token_life_of(s.endpoint(), 41);
    BOOST_TEST_REQUIRE(t.ok(), t.message());
    const client::TokenLife& v = t.value();
    BOOST_TEST(v.token == 41u);
    BOOST_TEST(v.key == "report:7");
    BOOST_TEST((v.keys == std::vector<std::string>{"report:7"}));
    BOOST_TEST(v.lease.count() == 5000);
    BOOST_TEST(v.granted.index.value_or(0) == 1234u);
    BOOST_TEST(v.granted.wall_ms.value_or(0) == 1796000000000u);
    BOOST_TEST(v.ended.how == "expired");
    BOOST_TEST(v.ended.last_keepalive_wall_ms.value_or(0) == 1796000003000u);
    BOOST_TEST(v.next_token.value_or(0) == 1301u);
    BOOST_TEST(v.keepalives.observed_by == 2u);
    BOOST_TEST(v.keepalives.while_leader);
    BOOST_TEST(v.keepalives.ok == 12u);
    BOOST_TEST(v.keepalives.refused == 1u);
    BOOST_TEST(v.keepalives.last_refused_reason == "not_held");
    auto unknown = c.token_life(7);
    BOOST_TEST_REQUIRE(!unknown.ok());
    BOOST_TEST((unknown.error().kind == client::ErrorKind::kUnknownToken));
    auto compacted = c.token_life(3);
    BOOST_TEST_REQUIRE(!compacted.ok());
    BOOST_TEST((compacted.error().kind == client::ErrorKind::kCompacted));
    BOOST_TEST(compacted.error().oldest_token == 20u);
    auto h = c.key_history("report:7", 5);
    BOOST_TEST_REQUIRE(h.ok(), h.message());
    BOOST_TEST(h.value().key == "report:7");
    BOOST_TEST_REQUIRE(h.value().tokens.size() == 1u);
    BOOST_TEST(h.value().tokens[0].token == 41u);
}

// A member that has not applied a token yet answers not_applied: token_life
// asks the other endpoints (one knows it, or one that applied past it says
// unknown_token); from one member, or when none applied it, kNotApplied,
// never kUnknownToken.
BOOST_AUTO_TEST_CASE(a_token_not_applied_on_one_member_is_asked_of_the_others) {
    const std::string not_applied =
        R"({"error":"not_applied","message":"token 50 is above every token this member applied","applied_token":40})";
    FakeServer lagging([&](const FakeRequest&) { return reply(404, not_applied); });
    FakeServer current([&](const FakeRequest& r) {
        if (r.target == "/v1/tokens/50") {
            return reply(200, R"({"token":50,"key":"k","owner":"","lease_ms":1000,"granted":{"index":50,"wall_ms":null},)"
                              R"("ended":{"how":"held","index":null,"wall_ms":null,"last_keepalive_wall_ms":null},)"
                              R"("next_token":null,"keepalives":{"observed_by":2,"while_leader":false,"ok":0,)"
                              R"("last_ok_wall_ms":null,"refused":0,"last_refused_wall_ms":null,"last_refused_reason":null}})");
        }
        if (r.target == "/v1/tokens/51") return reply(404, R"({"error":"unknown_token","message":"no token 51"})");
        return reply(404, not_applied);
    });
    client::Client c(options_for({lagging.endpoint(), current.endpoint()}));
    auto alone = c.token_life_of(lagging.endpoint(), 50);
    BOOST_TEST_REQUIRE(!alone.ok());
    BOOST_TEST((alone.error().kind == client::ErrorKind::kNotApplied));
    BOOST_TEST(alone.error().applied_token == 40u);
    BOOST_TEST(client::exit_code_of(alone.error().kind, false) != pgfence::kExitNotFound);
    auto found = c.token_life(50);
    BOOST_TEST_REQUIRE(found.ok(), found.message());
    BOOST_TEST(found.value().token == 50u);
    auto unknown = c.token_life(51);
    BOOST_TEST_REQUIRE(!unknown.ok());
    BOOST_TEST((unknown.error().kind == client::ErrorKind::kUnknownToken));
    auto nowhere = c.token_life(52);
    BOOST_TEST_REQUIRE(!nowhere.ok());
    BOOST_TEST((nowhere.error().kind == client::ErrorKind::kNotApplied));
}

// A member whose packets are dropped: a listener with a backlog of 0 whose
// accept queue is already full drops the next SYNs (net.ipv4.tcp_abort_on_overflow
// 0, the default), so a connect gets no answer at all. The call still ends by
// its deadline, not after the kernel's SYN retries (about two minutes).
BOOST_AUTO_TEST_CASE(a_connect_that_gets_no_answer_ends_by_the_deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    BOOST_TEST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0);
    BOOST_TEST_REQUIRE(::listen(fd, 0) == 0);
    BOOST_TEST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    // Fill the accept queue (never accepted); one or two fit with backlog 0.
    std::vector<int> fillers;
    for (int i = 0; i < 3; ++i) {
        const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ::connect(c, reinterpret_cast<sockaddr*>(&a), len);
        fillers.push_back(c);
    }
    std::this_thread::sleep_for(100ms);  // the handshakes the queue takes complete
    auto o = options_for({{"127.0.0.1", ntohs(a.sin_port)}});
    o.timeout = 1s;
    o.attempt_timeout = 300ms;
    client::Client c(o);
    const auto start = std::chrono::steady_clock::now();
    auto r = c.get("k");
    const auto took = std::chrono::steady_clock::now() - start;
    BOOST_TEST(!r);
    if (!r) BOOST_TEST((r.error().kind == client::ErrorKind::kUnavailable));
    BOOST_TEST(took < o.timeout + kSlack);
    for (const int f : fillers) ::close(f);
    ::close(fd);
}
