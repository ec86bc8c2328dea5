// The Raft core built on DurableStorage: a single-member cluster persists its
// Ready batches to disk, restarts from the directory, and finds its term,
// vote and log where it left them.
#include <boost/test/unit_test.hpp>

#include "raft/raft.h"
#include "test_dir.h"

namespace pgfence::storage {
namespace {

using namespace test;

constexpr int kMaxTicks = 100;
constexpr int kMaxReadies = 100;

raft::Config single_member() {
    raft::Config c;
    c.id = kMember;
    c.members = {kMember};
    c.cluster_id = kCluster;
    return c;
}

// Persists and advances every pending Ready (raft.h's order: persist first).
void drain(raft::Raft& r, DurableStorage& s) {
    for (int i = 0; i < kMaxReadies && r.has_ready(); ++i) {
        raft::Ready rd = r.ready();
        s.persist(rd.hard_state ? &*rd.hard_state : nullptr, rd.snapshot ? &*rd.snapshot : nullptr,
                  rd.entries);
        r.advance(rd);
    }
}

void become_leader(raft::Raft& r, DurableStorage& s) {
    for (int i = 0; i < kMaxTicks && r.role() != raft::Role::kLeader; ++i) {
        r.tick();
        drain(r, s);
    }
    BOOST_TEST_REQUIRE((r.role() == raft::Role::kLeader));
    drain(r, s);
}

BOOST_AUTO_TEST_SUITE(raft_integration)

BOOST_AUTO_TEST_CASE(single_member_restarts_with_its_term_and_log) {
    TempDir dir;
    raft::Term term = 0;
    raft::Index last = 0;
    {
        auto s = open_storage(dir.path());
        raft::Raft r(single_member(), *s);
        become_leader(r, *s);
        for (int i = 0; i < 5; ++i) {
            BOOST_TEST((r.propose("cmd" + std::to_string(i)).error == raft::ProposeError::kNone));
            drain(r, *s);
        }
        term = r.term();
        last = s->last_index();
        BOOST_TEST(r.status().commit == last);
        BOOST_TEST(s->hard_state().term == term);
        BOOST_TEST(s->hard_state().vote == kMember);
    }
    auto s = open_storage(dir.path());
    BOOST_TEST(s->hard_state().term == term);
    BOOST_TEST(s->hard_state().vote == kMember);
    BOOST_TEST(s->last_index() == last);
    BOOST_TEST(s->entries(last, last + 1).at(0).data == "cmd4");
    raft::Raft r(single_member(), *s);
    BOOST_TEST(r.term() == term);
    BOOST_TEST(r.check_invariants() == "");
    become_leader(r, *s);
    BOOST_TEST(r.term() > term);
    BOOST_TEST(r.status().commit == s->last_index());  // the old entries are committed again
}

BOOST_AUTO_TEST_CASE(compaction_then_restart_rebuilds_from_the_snapshot) {
    TempDir dir;
    raft::Index snap_index = 0;
    {
        auto s = open_storage(dir.path());
        raft::Raft r(single_member(), *s);
        become_leader(r, *s);
        for (int i = 0; i < 10; ++i) {
            r.propose("c" + std::to_string(i));
            drain(r, *s);
        }
        snap_index = r.status().commit - 2;
        raft::Snapshot snap;
        snap.meta = {snap_index, s->entries(snap_index, snap_index + 1).at(0).term, raft::Configuration::of_voters({kMember})};
        snap.data = "state";
        s->save_snapshot(snap);
        r.compact(snap_index, "state", 0);
        drain(r, *s);
    }
    auto s = open_storage(dir.path());
    BOOST_TEST(s->first_index() == snap_index + 1);
    BOOST_TEST(s->snapshot().data == "state");
    raft::Raft r(single_member(), *s);
    BOOST_TEST(r.check_invariants() == "");
    BOOST_TEST(r.status().snapshot_index == snap_index);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::storage
