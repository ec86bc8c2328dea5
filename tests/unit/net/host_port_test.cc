// parse_host_port: the port after the last ':', 1..65535 in digits; what each
// failure is called (the client's messages name it).
#include <boost/test/unit_test.hpp>

#include "net/host_port.h"

using namespace pgfence::net;

BOOST_AUTO_TEST_SUITE(host_port)

BOOST_AUTO_TEST_CASE(splits_at_the_last_colon) {
    const HostPort a = parse_host_port("127.0.0.1:7501");
    BOOST_TEST(a.ok());
    BOOST_TEST(a.host == "127.0.0.1");
    BOOST_TEST(a.port == 7501);
    const HostPort v6 = parse_host_port("::1:7001");
    BOOST_TEST(v6.ok());
    BOOST_TEST(v6.host == "::1");
    const HostPort bracketed = parse_host_port("[::1]:7001");
    BOOST_TEST(bracketed.ok());
    BOOST_TEST(bracketed.host == "[::1]");  // brackets are kept
    BOOST_TEST(parse_host_port("h:1").port == 1);
    BOOST_TEST(parse_host_port("h:65535").port == 65535);
    BOOST_TEST(parse_host_port("h:0000007001").port == 7001);  // leading zeros
}

BOOST_AUTO_TEST_CASE(names_what_is_wrong) {
    BOOST_TEST((parse_host_port("localhost").error == HostPortError::kNoColon));
    BOOST_TEST((parse_host_port(":7001").error == HostPortError::kEmptyHost));
    for (const char* bad : {"h:", "h:x1", "h:+1", "h:-1", "h: 1", "h:1 ", "h:99999999999"}) {
        BOOST_TEST((parse_host_port(bad).error == HostPortError::kPortNotNumber), bad);
    }
    for (const char* bad : {"h:0", "h:65536", "h:99999"}) {
        BOOST_TEST((parse_host_port(bad).error == HostPortError::kPortOutOfRange), bad);
    }
    BOOST_TEST(parse_host_port("a b:1").host == "a b");  // the host is the caller's to check
    BOOST_TEST(parse_host_port("a b:x").host == "a b");
}

BOOST_AUTO_TEST_SUITE_END()
