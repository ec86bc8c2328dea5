// Prometheus rendering: counters present, histogram buckets cumulative.
#include <boost/test/unit_test.hpp>

#include "server/metrics.h"

using namespace pgfence::server;

BOOST_AUTO_TEST_SUITE(metrics)

BOOST_AUTO_TEST_CASE(render_contains_counters_gauges_and_cumulative_buckets) {
    Metrics m;
    pgfence::member::Counters c;
    c.grants = 3;
    c.expiries_existed = 1;
    m.fsync.observe(std::chrono::microseconds(300));
    m.fsync.observe(std::chrono::milliseconds(3));
    m.snapshot_save.observe(std::chrono::milliseconds(40));
    m.snapshot_save_last_seconds = 0.04;
    Gauges g;
    g.is_leader = true;
    g.term = 4;
    g.http_shed[static_cast<std::size_t>(pgfence::net::ConnClass::kAnonymous)] = 7;
    g.http_shed[static_cast<std::size_t>(pgfence::net::ConnClass::kLease)] = 1;
    g.http_refused_per_address = 5;
    const std::string text = m.render(c, g);
    BOOST_TEST(text.find("pgfence_http_connections_shed_total{class=\"anonymous\"} 7\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_http_connections_shed_total{class=\"authenticated\"} 0\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_http_connections_shed_total{class=\"lease\"} 1\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_http_connections_refused_total{reason=\"per_address\"} 5\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_http_connections_refused_total{reason=\"busy\"} 0\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_grants_total 3\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_expiries_total{existed=\"true\"} 1\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_is_leader 1\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_term 4\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_fsync_seconds_bucket{le=\"0.0005\"} 1\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_fsync_seconds_bucket{le=\"0.005\"} 2\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_fsync_seconds_count 2\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_snapshot_save_seconds_bucket{le=\"0.05\"} 1\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_snapshot_save_seconds_bucket{le=\"0.025\"} 0\n") != std::string::npos);
    BOOST_TEST(text.find("pgfence_snapshot_save_last_seconds 0.040000\n") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
