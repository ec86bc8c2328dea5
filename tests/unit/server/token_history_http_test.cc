// GET /v1/tokens/{token} and GET /v1/keys/{key}/history through real members
// in one process (shell_cluster.h) with an auth file: a caller without read
// on any key of a token is refused (403, naming none of its keys), one that
// may read some keys of a set sees only those (the others counted in
// hidden_keys), and the key's history is refused without read on the key.
// Without auth: an error shows no raw byte; /metrics tells the history and
// the commit path's phases (leader and follower).
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "auth/policy.h"
#include "client/client.h"
#include "shell_cluster.h"

namespace pgfence::server::test {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

const std::string kAll = "YWxsLXRoZS1rZXlzLXNlY3JldA";     // may lock and read every key
const std::string kReadsA = "cmVhZHMtYS1vbmx5LXNlY3JldA";  // may read a/ only
const std::string kNone = "cmVhZHMtbm90aGluZy1zZWNyZXQ";   // may read c/ only

struct AuthFile {
    std::string path = "/tmp/pgfence-token-history-test-" + std::to_string(::getpid()) + ".auth";
    AuthFile() {
        std::ofstream(path, std::ios::trunc)
            << "role all lock: read:\nrole a read:a/\nrole c read:c/\n"
            << "user root all token:sha256:" << auth::hex(auth::sha256(kAll)) << "\n"
            << "user ann a token:sha256:" << auth::hex(auth::sha256(kReadsA)) << "\n"
            << "user cid c token:sha256:" << auth::hex(auth::sha256(kNone)) << "\n";
    }
    ~AuthFile() { std::remove(path.c_str()); }
};

// Status and body of a GET with a bearer secret.
std::pair<int, std::string> get(const client::Endpoint& at, const std::string& target,
                                const std::string& secret) {
    asio::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(asio::ip::make_address(at.host), at.port));
    const std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                            secret + "\r\nConnection: close\r\n\r\n";
    asio::write(s, asio::buffer(req));
    const timeval limit{5, 0};
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(s.native_handle(), buf, sizeof buf, 0)) > 0;)
        out.append(buf, static_cast<std::size_t>(n));
    return {std::stoi(out.substr(9, 3)), out.substr(out.find("\r\n\r\n") + 4)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(token_history_http)

BOOST_AUTO_TEST_CASE(a_token_shows_only_the_keys_its_caller_may_read) {
    AuthFile file;
    Cluster cluster(Delays{milliseconds(0), milliseconds(0)}, {},
                    [&file](Options& o) { o.auth_file = file.path; });
    BOOST_REQUIRE_EQUAL(cluster.start_error(), "");
    const std::vector<client::Endpoint> eps = cluster.endpoints();
    client::Options co;
    co.endpoints = eps;
    co.bearer = kAll;
    client::Client c(co);
    client::AcquireRequest set{"", milliseconds(30'000), milliseconds(0), "w"};
    set.keys = {"b/secret", "a/1", "b/other"};
    auto lease = c.acquire(set);
    BOOST_REQUIRE_MESSAGE(lease.ok(), lease.message());
    const std::string token = std::to_string(lease.value().token);
    auto one =
        c.acquire(client::AcquireRequest{"b/only", milliseconds(30'000), milliseconds(0), "w"});
    BOOST_REQUIRE_MESSAGE(one.ok(), one.message());
    const std::string only = std::to_string(one.value().token);

    for (const client::Endpoint& at : eps) {
        BOOST_REQUIRE(eventually([&] { return get(at, "/v1/tokens/" + only, kAll).first == 200; }));
        // Every key to a caller that may read them all.
        const auto [all_status, all] = get(at, "/v1/tokens/" + token, kAll);
        BOOST_TEST(all_status == 200);
        const auto all_json = boost::json::parse(all).as_object();
        BOOST_TEST(all_json.at("key").as_string() == "b/secret");
        BOOST_TEST(all_json.at("keys").as_array().size() == 3u);
        BOOST_TEST(!all_json.contains("hidden_keys"));

        // Only a/1 to ann, who may read a/ alone.
        const auto [status, body] = get(at, "/v1/tokens/" + token, kReadsA);
        BOOST_TEST(status == 200, body);
        BOOST_TEST(body.find("b/") == std::string::npos, body);
        const auto json = boost::json::parse(body).as_object();
        BOOST_TEST(json.at("key").as_string() == "a/1");
        BOOST_TEST(json.at("keys").as_array() == boost::json::array({"a/1"}));
        BOOST_TEST(json.at("hidden_keys").to_number<int>() == 2);
        // The key's history: the same, and refused on a key ann may not read.
        const auto [h_status, history] = get(at, "/v1/keys/a%2F1/history", kReadsA);
        BOOST_TEST(h_status == 200, history);
        BOOST_TEST(history.find("b/") == std::string::npos, history);
        BOOST_TEST(history.find("\"hidden_keys\":2") != std::string::npos, history);
        const auto [denied_status, denied] = get(at, "/v1/keys/b%2Fsecret/history", kReadsA);
        BOOST_TEST(denied_status == 403, denied);

        // A token with no key ann may read: 403 naming none of its keys.
        const auto [no_status, no] = get(at, "/v1/tokens/" + only, kReadsA);
        BOOST_TEST(no_status == 403, no);
        BOOST_TEST(no.find("b/only") == std::string::npos, no);
        BOOST_TEST(no.find("any key of token " + only) != std::string::npos, no);
        // The set, to cid who may read none of its keys.
        const auto [set_status, set_body] = get(at, "/v1/tokens/" + token, kNone);
        BOOST_TEST(set_status == 403, set_body);
        BOOST_TEST(set_body.find("b/") == std::string::npos, set_body);
        BOOST_TEST(set_body.find("a/") == std::string::npos, set_body);
    }
    cluster.stop();
}

// An error never echoes raw bytes: a bad segment is shown as it came, its
// bytes outside printable ASCII %-escaped. /metrics tells the history's size.
BOOST_AUTO_TEST_CASE(an_error_echoes_no_raw_byte_and_metrics_tell_the_history) {
    Cluster cluster(Delays{milliseconds(0), milliseconds(0)}, [](Options& o) { o.admin_without_auth = true; });
    BOOST_REQUIRE_EQUAL(cluster.start_error(), "");
    const client::Endpoint at = cluster.endpoints()[0];
    for (const std::string& target :
         {std::string("/v1/keys/%FF%FE/history"), std::string("/v1/keys/ok/history?limit=%C3%A9"),
          std::string("/v1/keys/%ZZ/history"), std::string("/v1/tokens/%C3%A9")}) {
        const auto [status, body] = get(at, target, "x");
        BOOST_TEST(status == 400, target << " " << body);
        for (const char ch : body) BOOST_TEST((static_cast<unsigned char>(ch) < 0x80), target << " " << body);
        BOOST_TEST(boost::json::parse(body).as_object().contains("message"));
    }
    const auto [status, body] = get(at, "/v1/keys/%FF%FE/history", "x");
    BOOST_TEST(body.find("'%FF%FE'") != std::string::npos, body);

    client::Options co;
    co.endpoints = cluster.endpoints();
    client::Client c(co);
    auto lease = c.acquire(client::AcquireRequest{"m/1", milliseconds(30'000), milliseconds(0), ""});
    BOOST_REQUIRE_MESSAGE(lease.ok(), lease.message());
    auto metric = [&](const std::string& name) {
        const std::string text = get(at, "/metrics", "x").second;
        const std::size_t p = text.find("\n" + name + " ");
        return p == std::string::npos ? std::uint64_t{0} : std::stoull(text.substr(p + name.size() + 2));
    };
    BOOST_TEST(eventually([&] { return metric("pgfence_token_history_tokens") == 1; }));
    BOOST_TEST(metric("pgfence_token_history_bytes") > 100u);
    BOOST_TEST(get(at, "/metrics", "x").second.find("\npgfence_token_history_dropped_total 0\n") != std::string::npos);

    // The commit path is timed (server/commit_phases.h): after a few
    // acquires the leader has observed `total`, a follower `f_local`
    // (counts only).
    for (int i = 2; i < 6; ++i) {
        const std::string key = "m/" + std::to_string(i);
        auto more = c.acquire(client::AcquireRequest{key, milliseconds(30'000), milliseconds(0), ""});
        BOOST_REQUIRE_MESSAGE(more.ok(), more.message());
    }
    auto count = [&](const client::Endpoint& e, const std::string& phase) {
        const std::string name = "pgfence_commit_phase_seconds_count{phase=\"" + phase + "\"}";
        const std::string text = get(e, "/metrics", "x").second;
        const std::size_t p = text.find("\n" + name + " ");
        return p == std::string::npos ? std::uint64_t{0} : std::stoull(text.substr(p + name.size() + 2));
    };
    BOOST_TEST(eventually([&] {
        const std::vector<client::Endpoint> all = cluster.endpoints();
        for (std::size_t l = 0; l < all.size(); ++l) {
            if (count(all[l], "total") == 0) continue;
            for (std::size_t f = 0; f < all.size(); ++f) {
                if (f != l && count(all[f], "f_local") > 0) return true;
            }
        }
        return false;
    }));
    cluster.stop();
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace pgfence::server::test
