// server/routes.h: what the route table answers for a method and a path —
// the route, 405 on a known path, 404 on any other — which requests are
// authenticated under --auth-file, and what the gate's screen (step 3)
// refuses: requests from web pages, state changes that are not JSON, admin
// routes without authentication — without sockets.
#include <boost/test/unit_test.hpp>
#include <optional>
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

// A {name} segment matches one non-empty segment; the parser reads it.
BOOST_AUTO_TEST_CASE(a_pattern_segment_matches_one_segment) {
    BOOST_TEST(path_matches("/v1/tokens/{token}", "/v1/tokens/41"));
    BOOST_TEST(path_matches("/v1/tokens/{token}", "/v1/tokens/x%2Fy"));
    BOOST_TEST(path_matches("/v1/keys/{key}/history", "/v1/keys/report%3A7/history"));
    for (const char* path : {"/v1/tokens/", "/v1/tokens", "/v1/tokens/41/", "/v1/tokens/4/1", "/v1/tokens//"}) {
        BOOST_TEST(!path_matches("/v1/tokens/{token}", path), path);
    }
    for (const char* path : {"/v1/keys//history", "/v1/keys/a/b/history", "/v1/keys/a/history/", "/v1/keys/a"}) {
        BOOST_TEST(!path_matches("/v1/keys/{key}/history", path), path);
    }
    BOOST_TEST(!path_matches("/v1/acquire", "/v1/acquire/"));
    BOOST_TEST(match_route("GET", "/v1/tokens/41").route != nullptr);
    BOOST_TEST(match_route("POST", "/v1/tokens/41").path_known);
    BOOST_TEST(match_route("GET", "/v1/keys/a/history").route != nullptr);
    BOOST_TEST(!match_route("GET", "/v1/tokens/").path_known);
    BOOST_TEST(path_segment("/v1/tokens/41", 2) == "41");
    BOOST_TEST(path_segment("/v1/keys/a%2Fb/history", 2) == "a%2Fb");
    BOOST_TEST(path_segment("/v1/keys/a/history", 3) == "history");
    BOOST_TEST(path_segment("/v1/tokens", 2) == "");
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

// A set names its keys: authorization decides on every one (member_http.cc).
BOOST_AUTO_TEST_CASE(the_keys_of_a_set_authorization_decides_on) {
    member::Acquire set{{}, 1000, 0, "w"};
    set.keys = {"job/1", "report/2"};
    BOOST_TEST_REQUIRE(set_keys_of(set) != nullptr);
    BOOST_TEST((*set_keys_of(set) == std::vector<std::string>{"job/1", "report/2"}));
    BOOST_TEST((*set_keys_of(member::Release{{}, 7, {"a", "b"}}) == std::vector<std::string>{"a", "b"}));
    BOOST_TEST((*set_keys_of(member::KeepAlive{{}, 7, {"a", "b"}}) == std::vector<std::string>{"a", "b"}));
    BOOST_TEST(set_keys_of(member::Acquire{"job/1", 1000, 0, "w"}) == nullptr);  // one key: key_of
    BOOST_TEST(set_keys_of(member::ListLocks{}) == nullptr);
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
    // An election's routes decide on its key, election/NAME.
    BOOST_TEST(*key_of(member::Proclaim{member::election_key("billing"), 7, "v"}) == "election/billing");
}

// Every election route needs the permission on the election's key.
BOOST_AUTO_TEST_CASE(election_routes_need_the_permission_on_the_elections_key) {
    const std::pair<std::string_view, Need> expected[] = {{"/v1/election/campaign", Need::kLockOnKey},
                                                          {"/v1/election/proclaim", Need::kLockOnKey},
                                                          {"/v1/election/resign", Need::kLockOnKey},
                                                          {"/v1/election/leader", Need::kReadOnKey}};
    for (const auto& [path, need] : expected) {
        BOOST_TEST_CONTEXT(path) {
            const RouteMatch m = match_route(path == "/v1/election/leader" ? "GET" : "POST", path);
            BOOST_TEST_REQUIRE(m.route != nullptr);
            BOOST_TEST((m.route->need == need));
            BOOST_TEST((m.route->serves != Serves::kAny));
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

net::HttpRequest request_for(const Route& r, std::string content_type, std::optional<std::string> origin = {}) {
    net::HttpRequest req;
    req.method = std::string(r.method);
    req.target = std::string(r.path);
    req.content_type = std::move(content_type);
    req.origin = std::move(origin);
    return req;
}

// Options under which the screen lets every admin route through.
Options admin_on() {
    Options o;
    o.admin_without_auth = true;
    return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(routes_screen)

// Every route that is not a GET changes state; today those are the lock
// changes and the membership changes, all POST.
BOOST_AUTO_TEST_CASE(the_routes_that_change_state_are_the_non_gets) {
    std::set<std::string_view> changing;
    for (const Route& r : routes()) {
        BOOST_TEST_CONTEXT(r.method << " " << r.path) {
            BOOST_TEST((r.method == "GET" || r.method == "POST"));
            BOOST_TEST(changes_state(r) == (r.method != "GET"));
        }
        if (changes_state(r)) changing.insert(r.path);
    }
    const std::set<std::string_view> expected{"/v1/acquire",           "/v1/release",
                                              "/v1/keepalive",         "/v1/members/add",
                                              "/v1/members/promote",   "/v1/members/remove",
                                              "/v1/election/campaign", "/v1/election/proclaim",
                                              "/v1/election/resign"};
    BOOST_TEST((changing == expected));
}

// The browser's "simple request": text/plain (or a form) needs no preflight.
BOOST_AUTO_TEST_CASE(a_state_change_that_is_not_json_is_415_naming_its_content_type) {
    const Options o = admin_on();
    int rows = 0;
    for (const Route& r : routes()) {
        if (!changes_state(r)) continue;
        ++rows;
        for (const char* ct : {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                               "multipart/form-data; boundary=x", "", "application/jsonx", "application/json-seq",
                               "text/json", "application/ json"}) {
            BOOST_TEST_CONTEXT(r.method << " " << r.path << " Content-Type '" << ct << "'") {
                const auto refusal = screen(r, request_for(r, ct), o);
                BOOST_TEST_REQUIRE(refusal.has_value());
                BOOST_TEST(refusal->status == 415u);
                BOOST_TEST(std::string(refusal->error) == "unsupported_media_type");
                const std::string named = *ct == '\0' ? std::string("(none)") : "'" + std::string(ct) + "'";
                BOOST_TEST(refusal->message.find("Content-Type " + named) != std::string::npos);
                BOOST_TEST(refusal->message.find(std::string(r.path)) != std::string::npos);
            }
        }
        for (const char* ct : {"application/json", "application/json; charset=utf-8", "Application/JSON",
                               " application/json ;charset=utf-8", "application/json\t"}) {
            BOOST_TEST_CONTEXT(r.method << " " << r.path << " Content-Type '" << ct << "'") {
                BOOST_TEST(!screen(r, request_for(r, ct), o).has_value());
            }
        }
    }
    BOOST_TEST(rows == 9);  // the lock changes, the membership changes, the election changes
}

BOOST_AUTO_TEST_CASE(a_read_takes_any_content_type) {
    const Options o = admin_on();
    for (const Route& r : routes()) {
        if (changes_state(r)) continue;
        for (const char* ct : {"", "text/plain", "application/json"}) {
            BOOST_TEST_CONTEXT(r.method << " " << r.path << " Content-Type '" << ct << "'") {
                BOOST_TEST(!screen(r, request_for(r, ct), o).has_value());
            }
        }
    }
}

// Every route, a read too: a page's request carries Origin, a program's none.
BOOST_AUTO_TEST_CASE(a_request_from_a_web_page_is_403_naming_its_origin_on_every_route) {
    Options o = admin_on();
    o.allowed_origins = {"https://ops.example.com"};
    for (const Route& r : routes()) {
        for (const char* origin : {"http://evil.example", "null", "", "https://ops.example.com:443",
                                   "https://OPS.example.com", "http://ops.example.com"}) {
            BOOST_TEST_CONTEXT(r.method << " " << r.path << " Origin '" << origin << "'") {
                const auto refusal = screen(r, request_for(r, "text/plain", std::string(origin)), o);
                BOOST_TEST_REQUIRE(refusal.has_value());  // before the content type: 403, not 415
                BOOST_TEST(refusal->status == 403u);
                BOOST_TEST(std::string(refusal->error) == "origin_not_allowed");
                BOOST_TEST(refusal->message.find("Origin '" + std::string(origin) + "'") != std::string::npos);
                BOOST_TEST(refusal->message.find("--allowed-origin") != std::string::npos);
            }
        }
        BOOST_TEST_CONTEXT(r.method << " " << r.path << " an allowed origin") {
            BOOST_TEST(!screen(r, request_for(r, "application/json", "https://ops.example.com"), o).has_value());
        }
    }
}

BOOST_AUTO_TEST_CASE(no_origin_is_allowed_by_default) {
    Options o = admin_on();
    for (const Route& r : routes()) {
        BOOST_TEST_CONTEXT(r.method << " " << r.path) {
            const auto refusal = screen(r, request_for(r, "application/json", "http://127.0.0.1:7501"), o);
            BOOST_TEST_REQUIRE(refusal.has_value());
            BOOST_TEST(refusal->status == 403u);
            BOOST_TEST(!screen(r, request_for(r, "application/json"), o).has_value());
        }
    }
}

// Without authentication an admin route is off unless --admin-without-auth;
// authentication (either kind) or the flag turns it on.
BOOST_AUTO_TEST_CASE(an_admin_route_is_off_without_auth_and_without_the_flag) {
    Options off;
    Options flag = admin_on();
    Options file;
    file.auth_file = "auth.conf";
    Options certs;
    certs.client_cert_auth = true;
    int admin_rows = 0;
    for (const Route& r : routes()) {
        const net::HttpRequest req = request_for(r, "application/json");
        BOOST_TEST_CONTEXT(r.method << " " << r.path) {
            const auto refusal = screen(r, req, off);
            if (r.need == Need::kAdmin) {
                ++admin_rows;
                BOOST_TEST_REQUIRE(refusal.has_value());
                BOOST_TEST(refusal->status == 403u);
                BOOST_TEST(std::string(refusal->error) == "admin_disabled");
                BOOST_TEST(refusal->message.find("--admin-without-auth") != std::string::npos);
                BOOST_TEST(refusal->message.find(std::string(r.path)) != std::string::npos);
            } else {
                BOOST_TEST(!refusal.has_value());
            }
            BOOST_TEST(!screen(r, req, flag).has_value());
            BOOST_TEST(!screen(r, req, file).has_value());
            BOOST_TEST(!screen(r, req, certs).has_value());
        }
    }
    BOOST_TEST(admin_rows == 8);  // metrics, status, version, snapshot, members and its three changes
}

// The browser attack, one request: a page's text/plain POST /v1/members/remove.
BOOST_AUTO_TEST_CASE(the_cross_site_member_removal_is_refused) {
    const RouteMatch m = match_route("POST", "/v1/members/remove");
    BOOST_TEST_REQUIRE(m.route != nullptr);
    const net::HttpRequest req = request_for(*m.route, "text/plain", "http://evil.example");
    BOOST_TEST(screen(*m.route, req, Options{})->status == 403u);
    BOOST_TEST(screen(*m.route, req, admin_on())->status == 403u);
    net::HttpRequest no_origin = req;
    no_origin.origin.reset();
    BOOST_TEST(screen(*m.route, no_origin, admin_on())->status == 415u);
}

BOOST_AUTO_TEST_SUITE_END()
