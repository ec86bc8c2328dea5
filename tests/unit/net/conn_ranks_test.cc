// The client port's shedding rule (net/conn_ranks.h): the oldest idle
// connection of the lowest class gives way, a busy one never; and the
// per-address bound.
#include <boost/test/unit_test.hpp>

#include "net/conn_ranks.h"

using namespace pgfence::net;

namespace {
using Order = ShedOrder<int>;
}

BOOST_AUTO_TEST_SUITE(conn_ranks)

BOOST_AUTO_TEST_CASE(nothing_open_or_all_busy_sheds_nothing) {
    Order o;
    BOOST_TEST(!o.victim().has_value());
    auto a = o.add(1);
    auto b = o.add(2);
    o.busy(a);
    o.busy(b);
    BOOST_TEST(!o.victim().has_value());  // the newcomer is refused instead
    BOOST_TEST(o.size() == 2u);
}

BOOST_AUTO_TEST_CASE(oldest_idle_anonymous_goes_first) {
    Order o;
    auto a = o.add(1);
    auto b = o.add(2);
    auto c = o.add(3);
    BOOST_TEST(*o.victim() == 1);
    // 1 sends a request and is answered: it is now the youngest idle.
    o.busy(a);
    BOOST_TEST(*o.victim() == 2);
    o.idle(a);
    BOOST_TEST(*o.victim() == 2);
    o.remove(b);
    BOOST_TEST(*o.victim() == 3);
    o.remove(c);
    BOOST_TEST(*o.victim() == 1);
}

BOOST_AUTO_TEST_CASE(a_client_that_keeps_sending_still_gives_way_to_a_higher_class) {
    // An anonymous connection that is answered again and again stays below
    // an authenticated or lease-holding one idle for longer.
    Order o;
    auto holder = o.add(1);
    auto user = o.add(2);
    auto pinger = o.add(3);
    o.raise(holder, ConnClass::kLease);
    o.raise(user, ConnClass::kAuthenticated);
    for (int i = 0; i < 5; ++i) {
        o.busy(pinger);
        o.idle(pinger);
    }
    BOOST_TEST(*o.victim() == 3);
    o.remove(pinger);
    BOOST_TEST(*o.victim() == 2);  // authenticated before lease
    o.remove(user);
    BOOST_TEST(*o.victim() == 1);
}

BOOST_AUTO_TEST_CASE(a_busy_connection_is_never_shed_whatever_its_class) {
    // A waiting acquire on an anonymous connection (auth off) is busy: the
    // idle lease holder goes first, and then nothing.
    Order o;
    auto waiting = o.add(1);
    auto holder = o.add(2);
    o.busy(waiting);
    o.raise(holder, ConnClass::kLease);
    BOOST_TEST(*o.victim() == 2);
    o.busy(holder);
    BOOST_TEST(!o.victim().has_value());
    o.idle(waiting);  // answered: idle again, still anonymous
    BOOST_TEST(*o.victim() == 1);
}

BOOST_AUTO_TEST_CASE(class_only_goes_up_and_a_raise_while_busy_applies_when_idle) {
    Order o;
    auto a = o.add(1);
    auto b = o.add(2);
    o.busy(a);
    o.raise(a, ConnClass::kLease);
    o.raise(a, ConnClass::kAnonymous);  // ignored
    BOOST_TEST((a.cls == ConnClass::kLease));
    BOOST_TEST(*o.victim() == 2);
    o.idle(a);
    BOOST_TEST(*o.victim() == 2);
    o.remove(b);
    BOOST_TEST(*o.victim() == 1);
    o.raise(a, ConnClass::kAuthenticated);  // lower than lease: ignored
    BOOST_TEST((a.cls == ConnClass::kLease));
}

BOOST_AUTO_TEST_CASE(within_a_higher_class_the_oldest_idle_goes_first) {
    Order o;
    auto a = o.add(1);
    auto b = o.add(2);
    o.raise(b, ConnClass::kLease);
    o.raise(a, ConnClass::kLease);  // raised later: younger in its class
    BOOST_TEST(*o.victim() == 2);
    o.busy(b);
    o.idle(b);
    BOOST_TEST(*o.victim() == 1);
}

BOOST_AUTO_TEST_CASE(class_names_are_the_metric_labels) {
    BOOST_TEST(conn_class_name(ConnClass::kAnonymous) == "anonymous");
    BOOST_TEST(conn_class_name(ConnClass::kAuthenticated) == "authenticated");
    BOOST_TEST(conn_class_name(ConnClass::kLease) == "lease");
}

BOOST_AUTO_TEST_CASE(per_address_limit_counts_each_address_alone) {
    AddressCounts c(2);
    BOOST_TEST(c.try_add("10.0.0.1"));
    BOOST_TEST(c.try_add("10.0.0.1"));
    BOOST_TEST(!c.try_add("10.0.0.1"));
    BOOST_TEST(c.count("10.0.0.1") == 2u);
    BOOST_TEST(c.try_add("10.0.0.2"));
    c.remove("10.0.0.1");
    BOOST_TEST(c.try_add("10.0.0.1"));
    c.remove("10.0.0.1");
    c.remove("10.0.0.1");
    c.remove("10.0.0.2");
    BOOST_TEST(c.addresses() == 0u);  // no entry left behind
    c.remove("10.0.0.9");             // an address never counted: nothing
    BOOST_TEST(c.count("10.0.0.9") == 0u);
}

BOOST_AUTO_TEST_CASE(an_ipv6_address_counts_as_its_64_and_ipv4_as_itself) {
    BOOST_TEST(address_group("2001:db8:1:2::5") == "2001:db8:1:2::/64");
    BOOST_TEST(address_group("2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64");
    BOOST_TEST(address_group("2001:db8:1:3::5") == "2001:db8:1:3::/64");
    BOOST_TEST(address_group("::1") == "::/64");
    BOOST_TEST(address_group("10.0.0.1") == "10.0.0.1");
    BOOST_TEST(address_group("::ffff:10.0.0.1") == "::ffff:10.0.0.1");  // IPv4 on a dual-stack socket
    BOOST_TEST(address_group("?") == "?");
    // One /64 is one address for the limit; the next /64 is another.
    AddressCounts c(2);
    BOOST_TEST(c.try_add("2001:db8:1:2::1"));
    BOOST_TEST(c.try_add("2001:db8:1:2:abcd::2"));
    BOOST_TEST(!c.try_add("2001:db8:1:2:1:2:3:4"));
    BOOST_TEST(c.count("2001:db8:1:2::99") == 2u);
    BOOST_TEST(c.try_add("2001:db8:1:3::1"));
    BOOST_TEST(c.try_add("::ffff:10.0.0.1"));
    BOOST_TEST(c.try_add("::ffff:10.0.0.2"));
    BOOST_TEST(c.try_add("::ffff:10.0.0.2"));
    c.remove("2001:db8:1:2::1");
    BOOST_TEST(c.try_add("2001:db8:1:2::7"));  // any address of the /64 frees the group's place
    BOOST_TEST(c.addresses() == 4u);
}

BOOST_AUTO_TEST_CASE(per_address_limit_of_zero_admits_nothing) {
    AddressCounts c(0);
    BOOST_TEST(!c.try_add("10.0.0.1"));
    BOOST_TEST(c.addresses() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
