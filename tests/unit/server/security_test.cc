// server/security.h: authentication (bearer first, then the certificate's
// CN), the auth file loaded and reloaded (a broken one keeps the old).
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "server/security.h"

using namespace pgfence;
using namespace pgfence::server;

namespace {

const std::string kSecret = "c2VjcmV0LW9mLXRoZS13b3JrZXI";  // 27 b64token characters

struct AuthFile {
    std::string path = "/tmp/pgfence-security-test-" + std::to_string(::getpid()) + ".auth";
    explicit AuthFile(const std::string& text) { write(text); }
    ~AuthFile() { std::remove(path.c_str()); }
    void write(const std::string& text) const { std::ofstream(path, std::ios::trunc) << text; }
};

std::string file_text() {
    return "role w lock:job/\nuser worker w token:sha256:" + auth::hex(auth::sha256(kSecret)) + "\nuser carol w\n";
}

net::HttpRequest with(std::string authorization, std::string cn = {}) {
    net::HttpRequest r;
    r.method = "GET";
    r.target = "/v1/locks";
    r.authorization = std::move(authorization);
    r.client_cn = std::move(cn);
    return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(security)

BOOST_AUTO_TEST_CASE(a_bearer_secret_or_else_a_certificate_cn_names_the_user) {
    AuthFile file(file_text());
    Options o;
    o.auth_file = file.path;
    Security s(o);
    BOOST_TEST_REQUIRE(s.load() == "");
    BOOST_TEST(s.auth_enabled());
    Caller c = s.authenticate(with("Bearer " + kSecret));
    BOOST_TEST_REQUIRE(c.user != nullptr);
    BOOST_TEST(c.user->name == "worker");
    BOOST_TEST(s.authenticate(with("bearer  " + kSecret)).user == c.user);  // the scheme is case-insensitive
    // The bearer wins over the certificate.
    BOOST_TEST(s.authenticate(with("Bearer " + kSecret, "carol")).user == c.user);
    const Caller by_cn = s.authenticate(with("", "carol"));
    BOOST_TEST_REQUIRE(by_cn.user != nullptr);
    BOOST_TEST(by_cn.user->name == "carol");
    // Refusals say why (the 401's message), never echoing the credential.
    struct Case { net::HttpRequest req; std::string why; };
    for (const Case& k : {Case{with(""), "credentials required"},
                          Case{with("Basic dXNlcjpwYXNz"), "must be 'Bearer SECRET'"},
                          Case{with("Bearer"), "must be 'Bearer SECRET'"},
                          Case{with("Bearer short"), "is not 22..512 characters"},
                          Case{with("Bearer " + kSecret + "x"), "is not known"},
                          Case{with("", "mallory"), "no user is named by the client certificate's CN"}}) {
        const Caller refused = s.authenticate(k.req);
        BOOST_TEST(refused.user == nullptr, k.req.authorization);
        BOOST_TEST(refused.why.find(k.why) != std::string::npos, refused.why);
        BOOST_TEST(refused.why.find(kSecret) == std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(a_reload_that_fails_keeps_the_policy_loaded_before) {
    AuthFile file(file_text());
    Options o;
    o.auth_file = file.path;
    Security s(o);
    BOOST_TEST_REQUIRE(s.load() == "");
    const std::string digest = s.policy()->digest();
    file.write("role broken\n");
    const auto failed = s.reload();
    BOOST_TEST_REQUIRE(failed.size() == 1u);
    BOOST_TEST(failed[0].find("line 1: a role needs a name") != std::string::npos, failed[0]);
    BOOST_TEST(s.policy()->digest() == digest);
    BOOST_TEST(s.authenticate(with("Bearer " + kSecret)).user != nullptr);
    // A good file replaces it; a user removed from it no longer authenticates.
    file.write("role w lock:job/\nuser carol w\n");
    BOOST_TEST(s.reload().empty());
    BOOST_TEST(s.policy()->digest() != digest);
    BOOST_TEST(s.authenticate(with("Bearer " + kSecret)).user == nullptr);
}

BOOST_AUTO_TEST_CASE(a_missing_auth_file_stops_the_start_naming_it) {
    Options o;
    o.auth_file = "/nonexistent/pgfence.auth";
    Security s(o);
    BOOST_TEST(s.load().find("cannot read auth file '/nonexistent/pgfence.auth'") != std::string::npos);
    BOOST_TEST(!s.auth_enabled());
}

BOOST_AUTO_TEST_SUITE_END()
