// The leader-local lease: nominal deadline and the clock-rate margin before
// Expire (member/lease.h).
#include <boost/test/unit_test.hpp>

#include "member/lease.h"

using namespace pgfence::member;
using std::chrono::milliseconds;

BOOST_AUTO_TEST_SUITE(lease)

BOOST_AUTO_TEST_CASE(margin_is_lease_times_rho_rounded_up_to_whole_ms) {
    BOOST_TEST(expiry_margin_ms(10000, 50000) == 500u);  // 5% of 10 s
    BOOST_TEST(expiry_margin_ms(1000, 50000) == 50u);
    BOOST_TEST(expiry_margin_ms(1001, 50000) == 51u);  // 50.05 ms -> 51
    BOOST_TEST(expiry_margin_ms(1, 1) == 1u);           // any positive margin is at least 1 ms
    BOOST_TEST(expiry_margin_ms(10000, 0) == 0u);
    BOOST_TEST(expiry_margin_ms(0, 50000) == 0u);
    BOOST_TEST(expiry_margin_ms(24ull * 3600 * 1000, 500000) == 12ull * 3600 * 1000);  // the largest inputs
}

BOOST_AUTO_TEST_CASE(expire_waits_lease_times_one_plus_rho_and_the_deadline_stays_nominal) {
    const Time t0{milliseconds(123456)};
    Lease l = Lease::start(41, 2000, t0, 50000);
    BOOST_TEST(l.token == 41u);
    BOOST_TEST(l.lease_ms == 2000u);
    BOOST_TEST((l.deadline == t0 + milliseconds(2000)));   // what ttl_ms counts down to
    BOOST_TEST((l.expire_at == t0 + milliseconds(2100)));  // 2000 x 1.05
    BOOST_TEST((l.phase == LeasePhase::kRunning));
    // A keepalive restarts both from its own time.
    const Time t1 = t0 + milliseconds(700);
    l.restart(t1, 50000);
    BOOST_TEST((l.deadline == t1 + milliseconds(2000)));
    BOOST_TEST((l.expire_at == t1 + milliseconds(2100)));
}

BOOST_AUTO_TEST_CASE(zero_drift_expires_at_the_nominal_deadline) {
    const Time t0{milliseconds(5)};
    const Lease l = Lease::start(1, 1500, t0, 0);
    BOOST_TEST((l.expire_at == l.deadline));
}

BOOST_AUTO_TEST_SUITE_END()
