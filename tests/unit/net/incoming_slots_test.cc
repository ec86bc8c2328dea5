// IncomingSlots: each row of its header's outcome tables.
#include "net/incoming_slots.h"

#include <boost/test/unit_test.hpp>

namespace pgfence::net {
namespace {

IncomingLimits small() {
    IncomingLimits l;
    l.max_pending = 4;
    l.max_pending_per_address = 2;
    l.max_per_member = 2;
    l.max_unknown = 1;
    return l;
}

BOOST_AUTO_TEST_SUITE(incoming_slots)

BOOST_AUTO_TEST_CASE(a_full_pool_sheds_its_oldest_silent_connection_then_its_oldest) {
    IncomingSlots s(small());
    BOOST_TEST(!s.admit(1, "a").has_value());
    BOOST_TEST(!s.admit(2, "b").has_value());
    BOOST_TEST(!s.admit(3, "c").has_value());
    BOOST_TEST(!s.admit(4, "d").has_value());
    s.spoke(1);  // 1 is being identified: 2 is the oldest silent one
    auto shed = s.admit(5, "e");
    BOOST_REQUIRE(shed.has_value());
    BOOST_TEST(shed->conn == 2u);
    BOOST_TEST((shed->reason == ShedReason::kPendingFull));
    BOOST_TEST(s.pending_count() == 4u);
    s.spoke(3);
    s.spoke(4);
    s.spoke(5);
    shed = s.admit(6, "f");  // every one spoke: the oldest goes
    BOOST_REQUIRE(shed.has_value());
    BOOST_TEST(shed->conn == 1u);
    BOOST_TEST(!s.pending(1));
    BOOST_TEST(s.pending(6));
}

BOOST_AUTO_TEST_CASE(one_address_at_its_cap_sheds_only_its_own_connections) {
    IncomingSlots s(small());
    s.admit(1, "member");
    s.spoke(1);
    s.admit(2, "flood");
    s.admit(3, "flood");
    auto shed = s.admit(4, "flood");
    BOOST_REQUIRE(shed.has_value());
    BOOST_TEST(shed->conn == 2u);
    BOOST_TEST((shed->reason == ShedReason::kAddressFull));
    // The same address as a member that spoke: the flood's silent ones go first.
    shed = s.admit(5, "member");
    BOOST_TEST(!shed.has_value());
    shed = s.admit(6, "member");  // its address at the cap: its silent 5 goes, not 1 that spoke
    BOOST_REQUIRE(shed.has_value());
    BOOST_TEST(shed->conn == 5u);
    BOOST_TEST(s.pending(1));
    BOOST_TEST(!s.pending(5));
}

BOOST_AUTO_TEST_CASE(an_ipv6_64_is_one_address_for_the_pending_places) {
    IncomingSlots s(small());
    s.admit(1, "2001:db8:1:2::1");
    s.admit(2, "2001:db8:1:2::2");
    auto shed = s.admit(3, "2001:db8:1:2:ffff::3");  // the same /64 at its cap (2)
    BOOST_REQUIRE(shed.has_value());
    BOOST_TEST(shed->conn == 1u);
    BOOST_TEST((shed->reason == ShedReason::kAddressFull));
    BOOST_TEST(!s.admit(4, "2001:db8:1:3::1").has_value());  // another /64: its own places
    BOOST_TEST(s.pending_count() == 3u);
    s.remove(2);
    BOOST_TEST(!s.admit(5, "2001:db8:1:2::5").has_value());  // the group has a free place again
}

BOOST_AUTO_TEST_CASE(identified_connections_leave_the_pool_and_a_member_redial_replaces_its_oldest) {
    IncomingSlots s(small());
    s.admit(1, "m");
    BOOST_TEST(s.identify(1, 7, true).admitted);
    BOOST_TEST(s.pending_count() == 0u);
    s.admit(2, "m");
    s.admit(3, "m");
    BOOST_TEST(s.admit(4, "m").value().conn == 2u);  // the address cap (2) sheds 2 ...
    BOOST_TEST(!s.identify(2, 7, true).admitted);  // ... which is no longer pending
    BOOST_TEST(s.identify(3, 7, true).admitted);
    const auto id = s.identify(4, 7, true);  // member 7's places (2) are taken by 1 and 3
    BOOST_TEST(id.admitted);
    BOOST_REQUIRE(id.shed.has_value());
    BOOST_TEST(id.shed->conn == 1u);
    BOOST_TEST((id.shed->reason == ShedReason::kMemberReplaced));
    BOOST_TEST(s.identified_count() == 2u);
    // Pending connections never take an identified place, however many come.
    for (IncomingSlots::Conn c = 10; c < 30; ++c) s.admit(c, "x" + std::to_string(c % 3));
    BOOST_TEST(s.identified_count() == 2u);
    BOOST_TEST(s.pending_count() == 4u);
}

BOOST_AUTO_TEST_CASE(unknown_members_share_their_own_places_and_close_frees_them) {
    IncomingSlots s(small());
    s.admit(1, "a");
    s.admit(2, "b");
    s.admit(3, "c");
    BOOST_TEST(s.identify(1, 50, false).admitted);
    const auto refused = s.identify(2, 51, false);
    BOOST_TEST(!refused.admitted);
    BOOST_REQUIRE(refused.shed.has_value());
    BOOST_TEST(refused.shed->conn == 2u);
    BOOST_TEST((refused.shed->reason == ShedReason::kUnknownFull));
    BOOST_TEST(!s.pending(2));
    BOOST_TEST(s.identify(3, 9, true).admitted);  // a known member is not held out by them
    s.remove(1);
    s.admit(4, "a");
    BOOST_TEST(s.identify(4, 51, false).admitted);
    s.remove(4);
    s.remove(3);
    s.remove(99);  // never seen: nothing
    BOOST_TEST(s.identified_count() == 0u);
    BOOST_TEST(s.pending_count() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
