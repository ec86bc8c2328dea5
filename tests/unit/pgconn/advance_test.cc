// pgconn/advance.h without a database: targets, resource names, a failed
// connection (tests/e2e/lastmile publishes against a real PostgreSQL).
#define BOOST_TEST_MODULE pgconn_unit_tests
#include "pgconn/advance.h"

#include <boost/test/unit_test.hpp>
#include <string>

#include "client/exit_codes.h"

namespace pgfence::pgconn {
namespace {

BOOST_AUTO_TEST_CASE(a_resource_named_like_the_single_key_gets_its_proof) {
    const auto t = advance_targets({"report:7", "ledger"}, {"report:7"}, {}, "v1.proof");
    BOOST_REQUIRE_EQUAL(t.size(), 2u);
    BOOST_CHECK_EQUAL(t[0].resource, "report:7");
    BOOST_CHECK_EQUAL(t[0].proof, "v1.proof");
    BOOST_CHECK_EQUAL(t[1].resource, "ledger");
    BOOST_CHECK_EQUAL(t[1].proof, "");  // a proof binds its own lock key only
}

BOOST_AUTO_TEST_CASE(a_set_gives_each_resource_its_own_keys_proof) {
    const auto t = advance_targets({"b", "a", "c"}, {"a", "b"}, {"pa", "pb"}, "pa");
    BOOST_REQUIRE_EQUAL(t.size(), 3u);
    BOOST_CHECK_EQUAL(t[0].proof, "pb");
    BOOST_CHECK_EQUAL(t[1].proof, "pa");
    BOOST_CHECK_EQUAL(t[2].proof, "");
}

BOOST_AUTO_TEST_CASE(resource_names_follow_fence_advance_rules) {
    BOOST_CHECK_EQUAL(check_resource("report:7"), "");
    BOOST_CHECK_EQUAL(check_resource(std::string(512, 'r')), "");
    BOOST_CHECK_NE(check_resource(""), "");
    BOOST_CHECK_NE(check_resource(std::string(513, 'r')), "");
    BOOST_CHECK(check_resource("a\nb").find("control character") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_connection_that_fails_is_a_database_error_naming_resources_and_token) {
    // 14799: a port of this suite's range that nothing listens on.
    const PublishResult r = publish_generation("host=127.0.0.1 port=14799 password=sekret-pw", "pgconn-test",
                                               {{"a", ""}, {"b", ""}}, 42, std::chrono::milliseconds(2000));
    BOOST_CHECK(r.outcome == PublishOutcome::kError);
    BOOST_CHECK_EQUAL(exit_code_of(r.outcome), kExitDatabase);
    BOOST_TEST_MESSAGE(r.message);
    BOOST_CHECK(r.message.starts_with("token 42 not published at resources \"a\", \"b\": cannot connect to PostgreSQL: "));
    BOOST_CHECK(r.message.find("14799") != std::string::npos);
    BOOST_CHECK(r.message.find("sekret-pw") == std::string::npos);
}

// libpq quotes a connection string it cannot parse (a URI whole, the words
// after a keyword's value), and a connect error quotes a value that an
// unencoded character in the password put in the port or the host.
BOOST_AUTO_TEST_CASE(a_bad_connection_string_is_not_echoed) {
    for (const char* conninfo : {
             "postgresql://u:s3cr3t-pw@[::1]x/db",         // unexpected character ... in URI: "<the URI>"
             "postgresql://u:s3cr3t-pw@[::1/db",           // no matching "]" ... in URI: "<the URI>"
             "postgresql://u:s3cr3t%zz-pw@127.0.0.1/db",   // invalid percent-encoded token: "s3cr3t%zz-pw"
             "postgresql://u:pw@127.0.0.1/db?s3cr3t-pw",   // missing key/value separator ...: "s3cr3t-pw"
             "host=127.0.0.1 password=my s3cr3t-pw",       // missing "=" after "s3cr3t-pw"
             "postgresql://u:s3cr3t/pw@127.0.0.1:14799/db",  // the port is "s3cr3t"
             "postgresql://u:pw@s3cr3t@127.0.0.1:14799/db",  // the host is "s3cr3t@127.0.0.1"
         }) {
        Connection c;
        const std::string why = c.connect(conninfo, ConnectDefaults{"pgconn-test", 2});
        BOOST_TEST_MESSAGE(conninfo << " -> " << why);
        BOOST_CHECK_EQUAL(why, "cannot connect to PostgreSQL: invalid connection string (not shown: it may hold a "
                               "password)");
        BOOST_CHECK(why.find("s3cr3t") == std::string::npos);
        BOOST_CHECK(!c.connected());
    }
    // A string libpq parses keeps libpq's reason (host and port, not the password).
    Connection c;
    const std::string why = c.connect("postgresql://u:s3cr3t-pw@127.0.0.1:14799,127.0.0.1:14798/db?connect_timeout=2",
                                      ConnectDefaults{"pgconn-test", 2});
    BOOST_TEST_MESSAGE(why);
    BOOST_CHECK(why.starts_with("cannot connect to PostgreSQL: connection to server at \"127.0.0.1\", port 14799"));
    BOOST_CHECK(why.find("s3cr3t") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(outcomes_map_to_the_shared_exit_codes) {
    BOOST_CHECK_EQUAL(exit_code_of(PublishOutcome::kPublished), kExitOk);
    BOOST_CHECK_EQUAL(exit_code_of(PublishOutcome::kStale), kExitStale);
    BOOST_CHECK_EQUAL(exit_code_of(PublishOutcome::kError), kExitDatabase);
}

BOOST_AUTO_TEST_CASE(a_closed_connection_answers_without_a_result) {
    const Connection c;
    const Result r = c.exec("SELECT 1", {Param("x"), std::nullopt});
    BOOST_CHECK(!r.ok());
    BOOST_CHECK_EQUAL(r.sqlstate(), "");
    BOOST_CHECK_EQUAL(r.message(), "not connected");
    BOOST_CHECK(r.is_null(0, 0));
}

}  // namespace
}  // namespace pgfence::pgconn
