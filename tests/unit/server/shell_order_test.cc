// The shell's own ordering of the member core's effects (member/core.h,
// "effects, and the order the caller carries them out in"), on a real
// three-member cluster in this process (shell_cluster.h): server::Member with
// real peer transports on loopback, each over a DurableLog that sleeps inside
// every write, under acquire/release load through the client library.
//
// Asserted:
//   1. Nothing a Ready's Persist carries in `messages` reaches a peer before
//      that persist() returned. The shell gives no hook on its sends, so they
//      are watched where they arrive: each member's peers dial it through a
//      forwarding proxy that decodes every frame and checks it, before passing
//      it on, against what the sender's DurableLog has made durable:
//        - a successful AppendResponse acknowledging index i: the sender's
//          persists that returned covered index i;
//        - a granted vote for c in term t, and a candidate c's vote request
//          in term t: a returned persist wrote hard state (term t, vote c);
//        - any message of term t (pre-vote ones aside, whose term is the one
//          the sender would campaign in): a returned persist wrote term t.
//      Every message is checked, a leader's messages_now too (they claim
//      nothing of its disk but their term, written when it stood for
//      election). Each persist() sleeps, so a message sent before or during
//      its write most likely arrives while the write is still running, and
//      is then caught (a message is never flagged wrongly).
//   2. One log write at a time: no persist() or adopt_snapshot() of a member
//      begins while another of the same member is still running, whether
//      they run on the writer thread or inline on the loop thread.
//      adopt_snapshot() sleeps long, so a follower persist that ran inline
//      beside a queued adoption would overlap it. The shell guards the same rule
//      itself (server/disk_turn.h: DiskTurn places the writes, LogWriteCheck
//      checks them as they run): an overlap ends this test binary with exit
//      status 70 before the assertion here is reached, and ctest reports
//      that. The DurableLog's own count asserts the rule should that check go.
// The load runs until every path the rules cover was taken, and each test
// asserts that it was: leader writes (the writer thread of a member that
// led), follower writes inline on the loop thread, follower writes queued
// behind a snapshot save (a writer-thread persist right after a save, by a
// member not seen leading yet: a non-leader writes there only behind a
// save), and snapshot saves on every
// member (snapshot_every is small), and persists that ran while a snapshot
// file was being written (it sleeps as long as an adoption, on its own
// thread: a persist must not wait for it). A rule seen broken ends the run early.
// The members are then stopped where they are (their io_contexts stop, as in
// a crash); nothing here is about graceful shutdown.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

#include "shell_cluster.h"

namespace pgfence::server::test {
namespace {

using std::chrono::milliseconds;

constexpr int kMinAcquires = 60;
constexpr int kMinSavesPerMember = 2;
constexpr int kMinWritesBehindSave = 3;
constexpr auto kRunLimit = std::chrono::seconds(20);  // bound on the load phase

// How often each write path ran, all members together.
struct Paths {
    int leader_writes = 0;                // writer-thread persists of members that led
    int follower_inline_writes = 0;       // loop-thread persists carrying entries
    int follower_writes_behind_save = 0;  // writer-thread persists right after a save, by a non-leader
    int min_saves = 0;                    // the fewest snapshot saves of any member
    int persists_beside_file = 0;         // persists begun while a snapshot file was being written

    std::string text() const {
        std::ostringstream out;
        out << "leader_writes=" << leader_writes
            << " follower_inline_writes=" << follower_inline_writes
            << " follower_writes_behind_save=" << follower_writes_behind_save
            << " min_saves=" << min_saves << " persists_beside_file=" << persists_beside_file;
        return out.str();
    }
};

Paths paths_taken(const Cluster& cluster) {
    Paths p;
    p.min_saves = std::numeric_limits<int>::max();
    for (int i = 0; i < Cluster::kMembers; ++i) {
        const DiskRecord& r = cluster.record(i);
        if (cluster.check().led(cluster.id(i))) p.leader_writes += r.writer_persists.load();
        p.follower_writes_behind_save += r.writes_behind_save.load();
        p.follower_inline_writes += r.inline_persists_with_entries.load();
        p.min_saves = std::min(p.min_saves, r.saves.load());
        p.persists_beside_file += r.persists_beside_file.load();
    }
    return p;
}

bool all_paths_taken(const Paths& p) {
    return p.leader_writes > 0 && p.follower_inline_writes > 0 &&
           p.follower_writes_behind_save >= kMinWritesBehindSave &&
           p.min_saves >= kMinSavesPerMember && p.persists_beside_file > 0;
}

int overlaps(const Cluster& cluster) {
    int n = 0;
    for (int i = 0; i < Cluster::kMembers; ++i) n += cluster.record(i).overlaps.load();
    return n;
}

// Runs the load until every write path was taken and kMinAcquires acquires
// were answered, or `broken()` (the test's rule was seen broken), or
// kRunLimit passed; then stops load and cluster. Returns the paths taken.
// `failure`: a member's loop threw, or the run did not exercise every path
// ("" otherwise, and when it stopped on a broken rule, which the caller's
// own assertion reports).
Paths run_until_exercised(Cluster& cluster, const std::function<bool()>& broken,
                          std::string& failure) {
    if (!cluster.start_error().empty()) {
        failure = "the cluster did not start: " + cluster.start_error();
        return {};
    }
    Load load(cluster.endpoints());
    const auto give_up = std::chrono::steady_clock::now() + kRunLimit;
    auto done = [&] {
        return (load.acquires() >= kMinAcquires && all_paths_taken(paths_taken(cluster))) ||
               broken();
    };
    while (!done() && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(milliseconds(10));
    load.stop();
    cluster.stop();
    const Paths p = paths_taken(cluster);
    if (!cluster.loop_errors().empty()) {
        failure = "a member's loop threw:" + cluster.loop_errors();
    } else if (!broken() && (load.acquires() < kMinAcquires || !all_paths_taken(p))) {
        failure = "within " + std::to_string(kRunLimit.count()) + " s only " +
                  std::to_string(load.acquires()) + " acquires and " + p.text();
    }
    return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shell_order)

// Persists of 3 ms: a message sent early overtakes its write by far on loopback.
BOOST_AUTO_TEST_CASE(messages_of_a_persist_arrive_only_after_it_returned) {
    Cluster cluster(Delays{milliseconds(3), milliseconds(10)});
    const ArrivalCheck& check = cluster.check();
    std::string failure;
    const Paths p = run_until_exercised(
        cluster, [&check] { return check.violation_count() > 0; }, failure);
    BOOST_TEST(failure.empty(), failure);
    BOOST_TEST_MESSAGE(
        "paths: " << p.text() << " messages_checked=" << check.messages_checked.load()
                  << " acks_checked=" << check.acks_checked.load()
                  << " votes_checked=" << check.votes_checked.load()
                  << " vote_requests_checked=" << check.vote_requests_checked.load());
    BOOST_TEST(check.acks_checked.load() > 0);
    BOOST_TEST(check.votes_checked.load() > 0);
    BOOST_TEST(check.vote_requests_checked.load() > 0);
    std::string first;
    for (const std::string& v : check.violations()) first += "\n  " + v;
    BOOST_TEST(check.violation_count() == 0u,
               check.violation_count()
                   << " messages arrived before their persist returned, first:" << first);
}

// Saves of 25 ms: a follower's persist run beside one would overlap it.
BOOST_AUTO_TEST_CASE(one_persist_or_snapshot_save_at_a_time) {
    Cluster cluster(Delays{milliseconds(1), milliseconds(25)});
    std::string failure;
    const Paths p = run_until_exercised(
        cluster, [&cluster] { return overlaps(cluster) > 0; }, failure);
    BOOST_TEST(failure.empty(), failure);
    BOOST_TEST_MESSAGE("paths: " << p.text());
    for (int i = 0; i < Cluster::kMembers; ++i) {
        const int overlapped = cluster.record(i).overlaps.load();
        BOOST_TEST(overlapped == 0, "member " << cluster.id(i) << ": " << overlapped
                                              << " writes began while another was running");
    }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace pgfence::server::test
