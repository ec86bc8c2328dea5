// fence-worker's CSV event log: one `keepalive` line per KeepAlive request the
// keepalive thread makes (send and answer times, outcome, ttl), and whole
// lines when two threads write at once.
#define BOOST_TEST_MODULE worker_keepalive_log
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_server.h"
#include "worker/event_log.h"
#include "worker/keepalive.h"

using namespace pgfence;
using namespace std::chrono_literals;
using test::FakeRequest;
using test::FakeServer;
using test::reply;

namespace {

struct TempFile {
    std::filesystem::path path;
    TempFile() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "fence-worker-log-XXXXXX").string();
        const int fd = ::mkstemp(tmpl.data());
        BOOST_TEST_REQUIRE(fd >= 0);
        ::close(fd);
        path = tmpl;
    }
    ~TempFile() { std::filesystem::remove(path); }
};

struct Line {
    std::vector<std::string> fields;  // worker,event,key,token,send_ns,ack_ns,path,outcome,value
    long long send_ns() const { return std::stoll(fields.at(4)); }
    long long ack_ns() const { return std::stoll(fields.at(5)); }
};

std::vector<Line> read_lines(const std::filesystem::path& p, const std::string& event) {
    std::ifstream in(p);
    std::vector<Line> out;
    std::string text;
    while (std::getline(in, text)) {
        Line l;
        std::stringstream fields(text);
        std::string f;
        while (std::getline(fields, f, ',')) l.fields.push_back(f);
        if (!text.empty() && text.back() == ',') l.fields.emplace_back();
        BOOST_TEST_REQUIRE(l.fields.size() == 9u, text);
        if (l.fields[1] == event) out.push_back(std::move(l));
    }
    return out;
}

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(client::Clock::now().time_since_epoch()).count();
}

client::Options options_for(const client::Endpoint& e) {
    client::Options o;
    o.endpoints = {e};
    o.timeout = 2s;
    o.attempt_timeout = 500ms;
    o.backoff_initial = 10ms;
    o.backoff_max = 50ms;
    return o;
}

// A lease as the client hands it out: sent now, the default rho.
client::Lease lease_of(client::milliseconds lease) {
    client::Lease l;
    l.key = "job";
    l.token = 77;
    l.lease = lease;
    l.sent_at = client::Clock::now();
    l.received_at = l.sent_at;
    return l;
}

// Polls `done` until it holds or `limit` passes; true if it held. The
// conditions below hold within about a second: the limits only end a test
// whose condition never comes.
template <typename Pred>
bool wait_until(Pred done, client::milliseconds limit = 10s) {
    const auto deadline = client::Clock::now() + limit;
    while (!done()) {
        if (client::Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(each_successful_keepalive_is_one_ok_line_with_its_times_and_ttl) {
    FakeServer s([](const FakeRequest&) { return reply(200, R"({"key":"job","token":77,"ttl_ms":900})"); });
    TempFile file;
    worker::EventLog log;
    BOOST_TEST_REQUIRE(log.open(file.path.string(), "w1") == "");
    const long long before_ns = now_ns();
    int renewals = 0;
    {
        // KeepAlives every 300ms; each has until 855ms (900ms x 95%) after the
        // last: the third comes after the first deadline, so only renewals
        // that extend the lease reach it.
        worker::Keepalive k(options_for(s.endpoint()), lease_of(900ms), &log);
        BOOST_TEST_REQUIRE(wait_until([&] { return k.renewals() >= 3 || k.lost(); }));
        BOOST_TEST(!k.lost(), k.why_lost());
        renewals = k.renewals();
    }
    const long long after_ns = now_ns();
    const auto lines = read_lines(file.path, "keepalive");
    BOOST_TEST(renewals >= 3);
    // The destructor may let one more request finish after renewals() was read.
    BOOST_TEST(lines.size() >= static_cast<std::size_t>(renewals));
    BOOST_TEST(lines.size() <= static_cast<std::size_t>(renewals) + 1);
    BOOST_TEST(lines.size() == s.requests().size());
    long long last_send = 0;
    for (const Line& l : lines) {
        BOOST_TEST(l.fields[0] == "w1");
        BOOST_TEST(l.fields[2] == "job");
        BOOST_TEST(l.fields[3] == "77");
        BOOST_TEST(l.fields[6] == "");  // no write path
        BOOST_TEST(l.fields[7] == "ok");
        BOOST_TEST(l.fields[8] == "900");
        BOOST_TEST(l.send_ns() > before_ns);
        BOOST_TEST(l.send_ns() > last_send);
        BOOST_TEST(l.ack_ns() >= l.send_ns());
        BOOST_TEST(l.ack_ns() < after_ns);
        last_send = l.send_ns();
    }
}

BOOST_AUTO_TEST_CASE(a_refused_keepalive_is_a_not_held_line_with_its_answer_time) {
    FakeServer s([](const FakeRequest&) { return reply(404, R"({"error":"not_held"})"); });
    TempFile file;
    worker::EventLog log;
    BOOST_TEST_REQUIRE(log.open(file.path.string(), "w1") == "");
    {
        worker::Keepalive k(options_for(s.endpoint()), lease_of(300ms), &log);
        BOOST_TEST(wait_until([&] { return k.lost(); }));
        BOOST_TEST(k.why_lost().find("gone") != std::string::npos, k.why_lost());
    }
    const auto lines = read_lines(file.path, "keepalive");
    BOOST_TEST_REQUIRE(lines.size() == 1u);  // the thread stops at the refusal
    BOOST_TEST(lines[0].fields[7] == "not_held");
    BOOST_TEST(lines[0].fields[8] == "0");
    BOOST_TEST(lines[0].send_ns() > 0);
    BOOST_TEST(lines[0].ack_ns() >= lines[0].send_ns());
}

BOOST_AUTO_TEST_CASE(an_unanswered_keepalive_is_an_error_line_with_ack_ns_0) {
    std::uint16_t port = 0;  // nothing listens there
    { FakeServer gone([](const FakeRequest&) { return reply(200, "{}"); }); port = gone.endpoint().port; }
    TempFile file;
    worker::EventLog log;
    BOOST_TEST_REQUIRE(log.open(file.path.string(), "w1") == "");
    const long long before_ns = now_ns();
    {
        worker::Keepalive k(options_for({"127.0.0.1", port}), lease_of(300ms), &log);
        BOOST_TEST(wait_until([&] { return k.lost(); }));
    }
    const auto lines = read_lines(file.path, "keepalive");
    BOOST_TEST_REQUIRE(lines.size() >= 1u);
    for (const Line& l : lines) {
        BOOST_TEST(l.fields[7] == "error");
        BOOST_TEST(l.fields[8] == "0");
        BOOST_TEST(l.send_ns() > before_ns);  // taken just before the call
        BOOST_TEST(l.ack_ns() == 0);
    }
}

BOOST_AUTO_TEST_CASE(no_log_means_nothing_is_written_and_the_lease_is_kept) {
    FakeServer s([](const FakeRequest&) { return reply(200, R"({"key":"job","token":77,"ttl_ms":900})"); });
    worker::Keepalive k(options_for(s.endpoint()), lease_of(900ms), nullptr);
    // Past the first deadline (855ms), as above.
    BOOST_TEST_REQUIRE(wait_until([&] { return k.renewals() >= 3 || k.lost(); }));
    BOOST_TEST(!k.lost(), k.why_lost());
    BOOST_TEST(k.renewals() >= 3);
}

BOOST_AUTO_TEST_CASE(lines_from_two_threads_never_interleave) {
    TempFile file;
    worker::EventLog log;
    BOOST_TEST_REQUIRE(log.open(file.path.string(), "w1") == "");
    constexpr int kPerThread = 2000;
    const std::string long_key(400, 'k');
    auto writer = [&](const char* event) {
        for (int i = 0; i < kPerThread; ++i) {
            log.write(worker::Event{event, long_key, static_cast<std::uint64_t>(i), {}, {}, "", "ok", i});
        }
    };
    std::thread a(writer, "acquire");
    std::thread b(writer, "keepalive");
    a.join();
    b.join();
    const auto acquires = read_lines(file.path, "acquire");  // checks every line has 9 fields
    const auto keepalives = read_lines(file.path, "keepalive");
    BOOST_TEST(acquires.size() == static_cast<std::size_t>(kPerThread));
    BOOST_TEST(keepalives.size() == static_cast<std::size_t>(kPerThread));
    for (const Line& l : keepalives) BOOST_TEST_REQUIRE(l.fields[2] == long_key);
}

BOOST_AUTO_TEST_CASE(a_wakeup_a_third_of_the_lease_late_is_a_stall_line) {
    FakeServer s([](const FakeRequest&) { return reply(200, R"({"key":"job","token":77,"ttl_ms":900})"); });
    TempFile file;
    worker::EventLog log;
    BOOST_TEST_REQUIRE(log.open(file.path.string(), "w1") == "");
    {
        worker::Keepalive k(options_for(s.endpoint()), lease_of(900ms), &log, false);  // no thread
        const auto due = client::Clock::now();
        k.note_wakeup(due, due + 299ms);  // under lease/3: not a stall
        k.note_wakeup(due, due + 300ms);
        k.renew_now(*std::make_unique<client::Client>(options_for(s.endpoint())));
    }
    const auto stalls = read_lines(file.path, "stall");
    BOOST_TEST_REQUIRE(stalls.size() == 1u);
    BOOST_TEST(stalls[0].fields[8] == "300");
    BOOST_TEST(stalls[0].ack_ns() - stalls[0].send_ns() == 300'000'000);
    // renew_now: one request, one line, and no thread made any other.
    BOOST_TEST(read_lines(file.path, "keepalive").size() == 1u);
    BOOST_TEST(s.requests().size() == 1u);
}

// Every member answering 503 (no leader) is an answer: the line says
// `unavailable` with its answer time, not a request that never arrived.
BOOST_AUTO_TEST_CASE(a_keepalive_answered_503_only_is_unavailable_with_its_answer_time) {
    FakeServer s([](const FakeRequest&) { return reply(503, R"({"error":"no_leader"})"); });
    TempFile file;
    worker::EventLog log;
    BOOST_TEST_REQUIRE(log.open(file.path.string(), "w1") == "");
    client::Client c(options_for(s.endpoint()));
    {
        worker::Keepalive k(options_for(s.endpoint()), lease_of(900ms), &log, false);
        k.renew_now(c);
    }
    const auto lines = read_lines(file.path, "keepalive");
    BOOST_TEST_REQUIRE(lines.size() == 1u);
    BOOST_TEST(lines[0].fields[7] == "unavailable");
    BOOST_TEST(lines[0].ack_ns() > lines[0].send_ns());
}

// Without the thread (--renew between), lost() turns true once the local
// deadline passes though nothing renews after the last piece, and logs no
// `deadline` line for it.
BOOST_AUTO_TEST_CASE(without_the_thread_lost_turns_true_at_the_local_deadline) {
    FakeServer s([](const FakeRequest&) { return reply(200, R"({"key":"job","token":77,"ttl_ms":300})"); });
    TempFile file;
    worker::EventLog log;
    BOOST_TEST_REQUIRE(log.open(file.path.string(), "w1") == "");
    {
        worker::Keepalive k(options_for(s.endpoint()), lease_of(300ms), &log, false);
        BOOST_TEST(!k.lost());
        BOOST_TEST_REQUIRE(wait_until([&] { return k.lost(); }, 2s));
        BOOST_TEST(k.why_lost().find("local lease deadline") != std::string::npos, k.why_lost());
    }
    BOOST_TEST(read_lines(file.path, "deadline").empty());
}
