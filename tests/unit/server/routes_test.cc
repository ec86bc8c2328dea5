// server/routes.h: what the route table answers for a method and a path —
// the route, 405 on a known path, 404 on any other — and which requests are
// authenticated under --auth-file, without sockets.
#include <boost/test/unit_test.hpp>
#include <set>
#include <string>
#include <utility>

#include "server/routes.h"

using namespace pgfence;
using namespace pgfence::server;

namespace {

const char* const kMethods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS", "get", ""};

bool has_route(std::string_view method, std::string_view path) {
    for (const Route& r : routes()) {
        if (r.method == method && r.path == path) return true;
    }
    return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(routes_table)

BOOST_AUTO_TEST_CASE(every_route_is_found_and_listed_once) {
    std::set<std::pair<std::string, std::string>> seen;
    for (const Route& r : routes()) {
        BOOST_TEST_CONTEXT(r.method << " " << r.path) {
            BOOST_TEST(seen.emplace(std::string(r.method), std::string(r.path)).second);
            BOOST_TEST(r.handle != nullptr);
            const RouteMatch m = match_route(r.method, r.path);
            BOOST_TEST(m.route == &r);
            BOOST_TEST(m.path_known);
        }
    }
}

BOOST_AUTO_TEST_CASE(another_method_on_a_known_path_is_405) {
    for (const Route& r : routes()) {
        for (const char* method : kMethods) {
            if (has_route(method, r.path)) continue;
            BOOST_TEST_CONTEXT(method << " " << r.path) {
                const RouteMatch m = match_route(method, r.path);
                BOOST_TEST(m.route == nullptr);
                BOOST_TEST(m.path_known);
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(an_unknown_path_is_404) {
    for (const char* path : {"", "/", "/v1", "/v1/", "/v1/acquire/", "/V1/ACQUIRE", "/healthz/", "/v1/members/",
                             "/v1/members/join/", "v1/acquire", "/v1/lock", "/v2/acquire"}) {
        for (const char* method : {"GET", "POST"}) {
            BOOST_TEST_CONTEXT(method << " '" << path << "'") {
                const RouteMatch m = match_route(method, path);
                BOOST_TEST(m.route == nullptr);
                BOOST_TEST(!m.path_known);
                BOOST_TEST(m.credentials);  // with --auth-file: 401 before the 404
            }
        }
    }
}

// With --auth-file, only /healthz and a joining member's question are
// answered without credentials, and a wrong method on those paths too.
BOOST_AUTO_TEST_CASE(only_healthz_and_join_are_asked_without_credentials) {
    const std::set<std::string_view> open{"/healthz", "/v1/members/join"};
    for (const Route& r : routes()) {
        for (const char* method : kMethods) {
            BOOST_TEST_CONTEXT(method << " " << r.path) {
                BOOST_TEST(match_route(method, r.path).credentials == (open.count(r.path) == 0));
            }
        }
        BOOST_TEST((r.need == Need::kNothing) == (open.count(r.path) == 1));
    }
}

// Authorization on a key needs the request parsed before it (the gate's step 3).
BOOST_AUTO_TEST_CASE(a_route_whose_key_decides_has_a_parser) {
    for (const Route& r : routes()) {
        if (r.need == Need::kLockOnKey || r.need == Need::kReadOnKey) {
            BOOST_TEST_CONTEXT(r.method << " " << r.path) { BOOST_TEST(r.parse != nullptr); }
        }
    }
}

BOOST_AUTO_TEST_CASE(the_key_authorization_decides_on) {
    BOOST_TEST(*key_of(member::Acquire{"job/1", 1000, 0, "w"}) == "job/1");
    BOOST_TEST(*key_of(member::Release{"job/2", 7}) == "job/2");
    BOOST_TEST(*key_of(member::KeepAlive{"job/3", 7}) == "job/3");
    member::ListLocks one;
    one.key = "job/4";
    BOOST_TEST(*key_of(one) == "job/4");
    BOOST_TEST(key_of(member::ListLocks{}) == nullptr);  // a list: read on some key, filtered
    BOOST_TEST(key_of(member::AddMember{4, "h:1", "h:2"}) == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
