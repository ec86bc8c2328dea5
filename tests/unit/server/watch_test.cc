// GET /v1/watch through real members in one process (shell_cluster.h): a
// watch on every member from rev=1 streams the same events, in log order,
// as they apply; a watch resumed from a revision starts with that
// revision's events; bad queries are 400. With small limits: a revision the
// history dropped is 410 with the oldest kept, a watch past --max-watchers
// 503 until one's client leaves, and a client that does not read is closed
// with the watcher_too_slow line.
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "shell_cluster.h"

namespace pgfence::server::test {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

// One watch: a raw connection whose chunked body is read into lines.
class Watch {
public:
    // receive_buffer > 0: a small SO_RCVBUF, for a client that does not read.
    Watch(const client::Endpoint& at, const std::string& query, int receive_buffer = 0) {
        socket_.open(tcp::v4());
        if (receive_buffer > 0) socket_.set_option(asio::socket_base::receive_buffer_size(receive_buffer));
        socket_.connect(tcp::endpoint(asio::ip::make_address(at.host), at.port));
        const std::string req = "GET /v1/watch?" + query + " HTTP/1.1\r\nHost: x\r\n\r\n";
        asio::write(socket_, asio::buffer(req));
        const timeval limit{0, 100'000};
        ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    }
    // Reads until a line contains `needle` (true) or 5 s pass (false).
    bool read_until(const std::string& needle) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (std::chrono::steady_clock::now() < deadline) {
            for (const std::string& l : lines()) {
                if (l.find(needle) != std::string::npos) return true;
            }
            char buf[4096];
            const ssize_t n = ::recv(socket_.native_handle(), buf, sizeof buf, 0);
            if (n == 0) return false;
            if (n > 0) raw_.append(buf, static_cast<std::size_t>(n));
        }
        return false;
    }
    void close() { socket_.close(); }
    // One read of what arrived (up to 100 ms).
    void pump() {
        char buf[4096];
        const ssize_t n = ::recv(socket_.native_handle(), buf, sizeof buf, 0);
        if (n > 0) raw_.append(buf, static_cast<std::size_t>(n));
    }
    std::string head() const { return raw_.substr(0, raw_.find("\r\n\r\n")); }
    // The body's lines (chunk framing removed).
    std::vector<std::string> lines() const {
        std::string body;
        std::size_t at = raw_.find("\r\n\r\n");
        if (at == std::string::npos) return {};
        at += 4;
        for (;;) {
            const std::size_t eol = raw_.find("\r\n", at);
            if (eol == std::string::npos) break;
            const std::size_t size = std::stoul(raw_.substr(at, eol - at), nullptr, 16);
            if (size == 0 || eol + 2 + size + 2 > raw_.size()) break;
            body.append(raw_, eol + 2, size);
            at = eol + 2 + size + 2;
        }
        std::vector<std::string> out;
        std::size_t from = 0;
        for (std::size_t nl; (nl = body.find('\n', from)) != std::string::npos; from = nl + 1) {
            out.push_back(body.substr(from, nl - from));
        }
        return out;
    }
    // The event lines only.
    std::vector<std::string> events() const {
        std::vector<std::string> out;
        for (const std::string& l : lines()) {
            if (l.find("\"type\":\"start\"") == std::string::npos) out.push_back(l);
        }
        return out;
    }

private:
    asio::io_context io_;
    tcp::socket socket_{io_};
    std::string raw_;
};

// status and body of a plain GET.
std::pair<int, std::string> get(const client::Endpoint& at, const std::string& target) {
    asio::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(asio::ip::make_address(at.host), at.port));
    const std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    asio::write(s, asio::buffer(req));
    const timeval limit{5, 0};  // a stream answered where none was expected ends the read
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(s.native_handle(), buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    return {std::stoi(out.substr(9, 3)), out.substr(out.find("\r\n\r\n") + 4)};
}

// A metric's value on a member (0 when absent).
std::uint64_t metric(const client::Endpoint& at, const std::string& name) {
    const std::string text = get(at, "/metrics").second;
    const std::size_t p = text.find("\n" + name + " ");
    return p == std::string::npos ? 0 : std::stoull(text.substr(p + name.size() + 2));
}

std::uint64_t revision_of(const std::string& line) {
    return boost::json::parse(line).as_object().at("revision").to_number<std::uint64_t>();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(watch_shell)

BOOST_AUTO_TEST_CASE(every_member_streams_the_same_events_in_log_order_and_resumes_from_a_revision) {
    Cluster cluster(Delays{milliseconds(1), milliseconds(1)});
    BOOST_REQUIRE_EQUAL(cluster.start_error(), "");
    const std::vector<client::Endpoint> eps = cluster.endpoints();
    std::vector<std::unique_ptr<Watch>> watches;
    for (const client::Endpoint& e : eps) watches.push_back(std::make_unique<Watch>(e, "prefix=w/&rev=1"));
    Watch progress(eps[1], "key=never&progress=1");  // sees no event, only progress
    for (auto& w : watches) {
        BOOST_REQUIRE(w->read_until("\"type\":\"start\""));
        BOOST_TEST(w->head().find("Transfer-Encoding: chunked") != std::string::npos);
        BOOST_TEST(w->head().find("Content-Type: application/x-ndjson") != std::string::npos);
    }
    client::Options o;
    o.endpoints = eps;
    client::Client c(o);
    std::vector<std::uint64_t> tokens;
    for (const char* key : {"w/a", "w/b", "other", "w/c"}) {
        auto lease = c.acquire(client::AcquireRequest{key, milliseconds(10'000), milliseconds(0), "me"});
        BOOST_REQUIRE_MESSAGE(lease.ok(), lease.message());
        tokens.push_back(lease.value().token);
        BOOST_REQUIRE(c.release(key, lease.value().token).ok());
    }
    for (auto& w : watches) BOOST_REQUIRE(w->read_until("\"type\":\"released\",\"revision\":"));
    for (auto& w : watches) BOOST_REQUIRE(w->read_until("\"key\":\"w/c\",\"token\":" + std::to_string(tokens[3]) + "}"));
    const std::vector<std::string> first = watches[0]->events();
    BOOST_REQUIRE_EQUAL(first.size(), 6u);  // "other" is not under w/
    BOOST_TEST(first[0] == "{\"type\":\"granted\",\"revision\":" + std::to_string(tokens[0]) +
                               ",\"key\":\"w/a\",\"token\":" + std::to_string(tokens[0]) +
                               ",\"owner\":\"me\",\"lease_ms\":10000}");
    BOOST_TEST(first[1].starts_with("{\"type\":\"released\""));
    for (std::size_t i = 1; i < first.size(); ++i) BOOST_TEST(revision_of(first[i]) > revision_of(first[i - 1]));
    for (auto& w : watches) BOOST_TEST(w->events() == first);

    // Progress: every event up to the applied index was sent (none here).
    const std::string last = std::to_string(revision_of(first.back()));
    BOOST_TEST(progress.read_until("{\"type\":\"progress\",\"revision\":"));
    BOOST_TEST(progress.events().size() >= 1u);
    for (const std::string& l : progress.events()) BOOST_TEST(l.starts_with("{\"type\":\"progress\""), l);
    BOOST_TEST(eventually([&] {
        progress.pump();
        return revision_of(progress.events().back()) >= revision_of(first.back());
    }), "no progress line reached revision " << last);

    // Resumed from the revision of w/b's grant: from that event on.
    Watch resumed(eps[1], "prefix=w/&rev=" + std::to_string(revision_of(first[2])));
    BOOST_REQUIRE(resumed.read_until("\"key\":\"w/c\",\"token\":" + std::to_string(tokens[3]) + "}"));
    BOOST_TEST(resumed.events() == std::vector<std::string>(first.begin() + 2, first.end()));
    // One key.
    Watch one(eps[2], "key=w/b&rev=1");
    BOOST_REQUIRE(one.read_until("\"type\":\"released\""));
    BOOST_TEST(one.events() == std::vector<std::string>(first.begin() + 2, first.begin() + 4));

    BOOST_TEST(get(eps[0], "/v1/watch?rev=1").first == 400);
    BOOST_TEST(get(eps[0], "/v1/watch?key=a&prefix=b").first == 400);
    BOOST_TEST(get(eps[0], "/v1/watch?key=a&rev=0").first == 400);
    cluster.stop();
}

BOOST_AUTO_TEST_CASE(limits_compacted_too_many_and_too_slow) {
    Cluster cluster(Delays{milliseconds(0), milliseconds(0)}, [](Options& o) {
        o.admin_without_auth = true;  // GET /metrics
        o.max_watchers = 2;
        o.watch_history_events = 10;
        o.watch_buffer_bytes = 4096;
    });
    BOOST_REQUIRE_EQUAL(cluster.start_error(), "");
    const std::vector<client::Endpoint> eps = cluster.endpoints();
    client::Options co;
    co.endpoints = eps;
    client::Client c(co);
    auto cycle = [&c](const std::string& key, const std::string& owner) {
        auto lease = c.acquire(client::AcquireRequest{key, milliseconds(10'000), milliseconds(0), owner});
        BOOST_REQUIRE_MESSAGE(lease.ok(), lease.message());
        BOOST_REQUIRE(c.release(key, lease.value().token).ok());
    };
    for (int i = 0; i < 10; ++i) cycle("c" + std::to_string(i), "");  // 20 events, 10 kept

    // 410 with the oldest revision kept; from it, the 10 events kept. m
    // may be a follower: first it applies every entry the leader committed.
    const client::Endpoint& m = eps[0];
    BOOST_REQUIRE(eventually([&] {
        std::uint64_t committed = 0;
        for (const client::Endpoint& e : eps) {
            committed = std::max(committed, metric(e, "pgfence_commit_index"));
        }
        return committed > 0 && metric(m, "pgfence_applied_index") >= committed;
    }));
    BOOST_REQUIRE(get(m, "/v1/watch?prefix=&rev=1").first == 410);
    const std::string body = get(m, "/v1/watch?prefix=&rev=1").second;
    const auto oldest = boost::json::parse(body).as_object().at("oldest_revision").to_number<std::uint64_t>();
    BOOST_TEST(body.find("\"error\":\"compacted\"") != std::string::npos);
    BOOST_TEST(oldest > 1u);
    {
        Watch from(m, "prefix=&rev=" + std::to_string(oldest));
        BOOST_REQUIRE(from.read_until("\"key\":\"c9\""));
        BOOST_TEST(from.read_until("\"type\":\"released\",\"revision\":" + std::to_string(oldest + 9)));
        BOOST_TEST(from.events().size() == 10u);
        BOOST_TEST(revision_of(from.events().front()) == oldest);
    }

    // 503 past --max-watchers; a watch whose client leaves frees its place.
    BOOST_REQUIRE(eventually([&] { return metric(m, "pgfence_watchers") == 0; }));
    Watch a(m, "key=x"), b(m, "key=y");
    BOOST_REQUIRE(a.read_until("start") && b.read_until("start"));
    const auto [status, refused] = get(m, "/v1/watch?key=z");
    BOOST_TEST(status == 503);
    BOOST_TEST(refused.find("too_many_watchers") != std::string::npos);
    a.close();
    BOOST_TEST(eventually([&] { return metric(m, "pgfence_watchers") == 1; }));
    BOOST_TEST(metric(m, "pgfence_watchers_closed_total{reason=\"client_gone\"}") >= 1u);
    b.close();
    BOOST_REQUIRE(eventually([&] { return metric(m, "pgfence_watchers") == 0; }));

    // A client that does not read: closed with watcher_too_slow.
    Watch slow(m, "prefix=big/", 2048);
    BOOST_REQUIRE(eventually([&] { return metric(m, "pgfence_watchers") == 1; }));
    const std::string key = "big/" + std::string(400, 'k');
    const std::string owner(200, 'o');
    int cycles = 0;
    for (; cycles < 400 && metric(m, "pgfence_watchers_closed_total{reason=\"watcher_too_slow\"}") == 0; ++cycles) {
        cycle(key + std::to_string(cycles), owner);
    }
    BOOST_TEST_MESSAGE("closed after " << cycles << " cycles; events " << metric(m, "pgfence_watch_events_total"));
    BOOST_REQUIRE(cycles < 400);
    BOOST_TEST(slow.read_until("\"error\":\"watcher_too_slow\""));
    BOOST_TEST(metric(m, "pgfence_watchers") == 0u);
    cluster.stop();
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace pgfence::server::test
