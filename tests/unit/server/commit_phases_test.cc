// CommitPhases: one proposal's phases from the batch timestamps the shell
// gives it (synthetic times: no clock is read here), and the rendering.
#include <boost/test/unit_test.hpp>

#include "server/commit_phases.h"

using namespace pgfence::server;
using std::chrono::microseconds;

namespace {
double sum_us(const CommitPhases& c, CommitPhases::Phase p) { return c.histogram(p).sum_seconds() * 1e6; }
}  // namespace

// Each case's CommitPhases, and its synthetic clock: `at(us)` is `us`
// microseconds after t0. (A test case derives from it: not in an anonymous
// namespace.)
struct CommitPhasesCase {
    CommitPhases c;
    const CommitPhases::TimePoint t0{};
    CommitPhases::TimePoint at(int us) const { return t0 + microseconds(us); }
};

BOOST_FIXTURE_TEST_SUITE(commit_phases, CommitPhasesCase)

BOOST_AUTO_TEST_CASE(phases_of_one_proposal_add_up_to_its_total) {
    // Read at 100; batch [5, 7] taken at 300; the writer began at 320, wrote
    // for 10 and synced for 200 (durable at 530), the loop heard at 560; the
    // (one needed) follower acked 7 at 600: committed at 600; applied at 650,
    // answered at 700.
    c.sent(7, 1, at(300));
    c.taken(5, 7, at(300));
    c.written(7, at(320), microseconds(10), microseconds(200), at(560));
    c.acked(2, 6, at(550));  // not yet the batch's last index
    c.acked(2, 7, at(600));
    c.answered(6, at(100), at(650), at(700));
    BOOST_TEST(sum_us(c, CommitPhases::kQueue) == 200, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kToWriter) == 20, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kFdatasync) == 200, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kToLoop) == 30, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerRtt) == 300, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kReplicate) == 300, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kToApply) == 50, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kToAnswer) == 50, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kTotal) == 600, boost::test_tools::tolerance(1e-6));
    // An index of no batch in flight is not observed.
    c.answered(9, at(100), at(650), at(700));
    BOOST_TEST(c.histogram(CommitPhases::kTotal).count() == 1u);
    BOOST_TEST(c.unobserved() == 1u);
}

BOOST_AUTO_TEST_CASE(the_leaders_own_write_finishing_last_is_the_commit) {
    // Batch [1, 1] taken at 100, acked at 300; the leader's write began at
    // 110 (write 10, fdatasync 500: durable at 620), heard at 650.
    c.sent(1, 1, at(100));
    c.taken(1, 1, at(100));
    c.acked(2, 1, at(300));
    c.written(1, at(110), microseconds(10), microseconds(500), at(650));
    c.answered(1, at(0), at(700), at(720));
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerRtt) == 200, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kReplicate) == 550, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kToLoop) == 30, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kToApply) == 50, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kTotal) == 720, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(two_acks_needed_one_does_not_commit) {
    c.sent(2, 2, at(100));
    c.taken(1, 2, at(100));
    c.written(2, at(100), microseconds(10), microseconds(100), at(220));
    c.acked(2, 2, at(200));
    c.answered(1, at(0), at(250), at(260));  // one follower of two: not committed
    BOOST_TEST(c.histogram(CommitPhases::kTotal).count() == 0u);
    BOOST_TEST(c.unobserved() == 1u);
    c.acked(2, 2, at(230));  // the same follower again: still one
    c.answered(1, at(0), at(250), at(260));
    BOOST_TEST(c.histogram(CommitPhases::kTotal).count() == 0u);
    c.acked(3, 2, at(300));
    c.answered(2, at(0), at(350), at(360));
    BOOST_TEST(c.histogram(CommitPhases::kTotal).count() == 1u);
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerRtt) == 200, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(a_batch_not_yet_committed_or_of_a_lost_term_is_not_observed) {
    c.sent(1, 1, at(10));
    c.taken(1, 1, at(10));
    c.written(1, at(10), microseconds(1), microseconds(1), at(20));
    c.answered(1, t0, at(30), at(40));  // no ack yet
    BOOST_TEST(c.histogram(CommitPhases::kTotal).count() == 0u);
    c.reset();
    c.acked(2, 1, at(25));
    c.answered(1, t0, at(30), at(40));
    BOOST_TEST(c.histogram(CommitPhases::kTotal).count() == 0u);
}

BOOST_AUTO_TEST_CASE(a_follower_times_each_append_until_its_ack) {
    c.append_read(3, 4, at(0));
    c.append_read(3, 6, at(50));
    c.append_read(3, 9, at(60));  // not covered by the ack below: kept
    // One write began at 100 (its fdatasync 200), its ack of 6 sent at 320.
    c.follower_acked(6, at(100), microseconds(200), at(320));
    BOOST_TEST(c.histogram(CommitPhases::kFollowerLocal).count() == 2u);
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerWait) == 100 + 50, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerFdatasync) == 400, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerLocal) == 320 + 270, boost::test_tools::tolerance(1e-6));
    c.follower_acked(9, at(400), microseconds(100), at(520));
    BOOST_TEST(c.histogram(CommitPhases::kFollowerLocal).count() == 3u);
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerLocal) == 320 + 270 + 460, boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(a_followers_appends_are_of_its_term) {
    c.follower_wrote(at(5));  // its previous write ended
    c.append_read(3, 4, at(10));
    c.append_read(4, 5, at(20));  // a newer term: the append of 4 is forgotten
    c.append_read(3, 6, at(30));  // an older term: ignored
    c.follower_acked(6, at(40), microseconds(100), at(150));
    BOOST_TEST(c.histogram(CommitPhases::kFollowerLocal).count() == 1u);
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerLocal) == 130, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerSocket) == 15, boost::test_tools::tolerance(1e-6));
    // Acked without a write: dropped, not observed.
    c.append_read(4, 7, at(200));
    c.drop_appends(7);
    c.follower_acked(7, at(210), microseconds(100), at(320));
    BOOST_TEST(c.histogram(CommitPhases::kFollowerLocal).count() == 1u);
    // Leadership won: forgotten.
    c.append_read(4, 8, at(400));
    c.reset();
    c.follower_acked(8, at(410), microseconds(100), at(520));
    BOOST_TEST(c.histogram(CommitPhases::kFollowerLocal).count() == 1u);
}

BOOST_AUTO_TEST_CASE(appends_sent_before_their_batch_is_taken_are_timed_from_their_send) {
    // Read at 50; its entry 4 went to the followers at 100, while the
    // previous batch was written; acked by the (one needed) follower at 350;
    // its batch [3, 4] taken at 400, written 410 + 10 + 250 (durable at
    // 670), heard at 700; applied at 720, answered at 730.
    c.sent(3, 1, at(60));
    c.sent(4, 1, at(100));
    c.acked(2, 4, at(350));
    c.taken(3, 4, at(400));
    c.written(4, at(410), microseconds(10), microseconds(250), at(700));
    c.answered(4, at(50), at(720), at(730));
    BOOST_TEST(sum_us(c, CommitPhases::kQueue) == 350, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kEarly) == 300, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerRtt) == 250, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kReplicate) == 300, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kTotal) == 680, boost::test_tools::tolerance(1e-6));
    // Entry 3 was carried by the appends sent at 60, acked with 4.
    c.answered(3, at(40), at(720), at(730));
    BOOST_TEST(sum_us(c, CommitPhases::kEarly) == 300 + 340, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(c.unobserved() == 0u);
}

BOOST_AUTO_TEST_CASE(a_resend_to_a_lagging_follower_is_not_timed) {
    // Entries [1, 3] sent at 60 with their batch taken at 100; a lagging
    // follower is sent [2, 3] again at 200 and [1, 2] at 250: those resends
    // time nothing. The (one needed) follower acked 3 at 300.
    c.sent(3, 1, at(60));
    c.taken(1, 3, at(100));
    c.sent(3, 1, at(200));
    c.sent(2, 1, at(250));
    c.acked(2, 3, at(300));
    c.written(3, at(110), microseconds(10), microseconds(100), at(250));
    c.answered(2, at(50), at(320), at(330));
    BOOST_TEST(c.unobserved() == 0u);
    BOOST_TEST(sum_us(c, CommitPhases::kEarly) == 40, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerRtt) == 240, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(sum_us(c, CommitPhases::kReplicate) == 200, boost::test_tools::tolerance(1e-6));
    // Entry 4, first sent at 400, is timed from there.
    c.sent(4, 1, at(400));
    c.taken(4, 4, at(410));
    c.acked(2, 4, at(500));
    c.written(4, at(420), microseconds(10), microseconds(50), at(490));
    c.answered(4, at(380), at(510), at(520));
    BOOST_TEST(c.unobserved() == 0u);
    BOOST_TEST(sum_us(c, CommitPhases::kFollowerRtt) == 240 + 100,
               boost::test_tools::tolerance(1e-6));
}

BOOST_AUTO_TEST_CASE(render_has_every_phase_and_the_batch_counters) {
    c.persisted_batch(3, 300);
    std::string out;
    render_commit_phases(out, c);
    for (int p = 0; p < CommitPhases::kPhases; ++p) {
        const std::string name = CommitPhases::name(static_cast<CommitPhases::Phase>(p));
        BOOST_TEST(out.find("pgfence_commit_phase_seconds_count{phase=\"" + name + "\"} 0\n") != std::string::npos);
        BOOST_TEST(out.find("pgfence_commit_phase_seconds_bucket{phase=\"" + name + "\",le=\"+Inf\"} 0\n") !=
                   std::string::npos);
    }
    BOOST_TEST(out.find("pgfence_persist_batches_total 1\n") != std::string::npos);
    BOOST_TEST(out.find("pgfence_persist_entries_total 3\n") != std::string::npos);
    BOOST_TEST(out.find("pgfence_persist_bytes_total 300\n") != std::string::npos);
    BOOST_TEST(out.find("pgfence_commit_phase_unobserved_total 0\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(render_of_one_observation_is_cumulative) {
    // One proposal whose total is 100 us.
    c.sent(1, 0, at(10));
    c.taken(1, 1, at(10));
    c.written(1, at(10), microseconds(1), microseconds(1), at(20));
    c.answered(1, t0, at(90), at(100));
    std::string out;
    render_commit_phases(out, c);
    const auto has = [&out](const std::string& line) { return out.find(line + "\n") != std::string::npos; };
    BOOST_TEST(has("pgfence_commit_phase_seconds_bucket{phase=\"total\",le=\"7.5e-05\"} 0"));
    BOOST_TEST(has("pgfence_commit_phase_seconds_bucket{phase=\"total\",le=\"0.0001\"} 1"));
    BOOST_TEST(has("pgfence_commit_phase_seconds_bucket{phase=\"total\",le=\"0.000125\"} 1"));
    BOOST_TEST(has("pgfence_commit_phase_seconds_bucket{phase=\"total\",le=\"1\"} 1"));
    BOOST_TEST(has("pgfence_commit_phase_seconds_bucket{phase=\"total\",le=\"+Inf\"} 1"));
    BOOST_TEST(has("pgfence_commit_phase_seconds_sum{phase=\"total\"} 0.000100000"));
    BOOST_TEST(has("pgfence_commit_phase_seconds_count{phase=\"total\"} 1"));
}

BOOST_AUTO_TEST_SUITE_END()
