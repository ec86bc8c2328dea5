// Randomized schedules against the core alone (the whole-cluster simulation
// with the lock table lives in tests/simulation/). Per seed: random drops,
// duplicates, reordering, partitions, slow disks and crashes that lose the
// Ready being written. After every step: Figure 3's Election Safety, State
// Machine Safety (members apply identical entries at each index) and the
// core's own check_invariants(); at the end, healing must restore progress.
#include <boost/test/unit_test.hpp>
#include <map>

#include "harness.h"
#include "raft/rng.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

namespace {

struct Oracle {
    std::map<Term, NodeId> leader_of_term;
    std::map<Index, Entry> applied;  // first application of each index, cluster-wide

    void observe(Cluster& c, std::uint64_t seed) {
        for (auto& [id, m] : c.members()) {
            if (m.raft->role() == Role::kLeader) {
                auto [it, fresh] = leader_of_term.emplace(m.raft->term(), id);
                if (it->second != id) {
                    BOOST_FAIL("seed " << seed << ": two leaders in term " << m.raft->term());
                }
            }
            for (const Entry& e : m.applied) {
                auto [it, fresh] = applied.emplace(e.index, e);
                if (!(it->second == e)) {
                    BOOST_FAIL("seed " << seed << ": member " << id
                                       << " applied a different entry at " << e.index);
                }
            }
            m.applied.clear();  // compared once; keeps the check linear
        }
    }
};

struct Faults {
    int drop_pct = 0;  // of delivered messages
    int dup_pct = 0;
};

// Delivers a random queued message (reordering), maybe duplicating or dropping it.
void deliver_random(Cluster& c, SplitMix64& rng, const Faults& f) {
    if (c.net().empty()) return;
    const std::size_t k = rng.next() % c.net().size();
    Message m = c.net()[k];
    c.net().erase(c.net().begin() + static_cast<std::ptrdiff_t>(k));
    if (rng.in_range(0, 100) < f.dup_pct) c.net().push_back(m);
    if (rng.in_range(0, 100) >= f.drop_pct) {
        c.net().push_front(m);
        c.deliver_one();
    }
}

// The application snapshots its applied state and compacts (storage + core).
void compact_applied(Cluster& c, NodeId who, SplitMix64& rng) {
    const Status st = c.raft(who).status();
    MemoryStorage& disk = c.member(who).storage;
    if (st.applied <= st.snapshot_index || st.applied <= disk.snapshot().meta.index ||
        st.applied > disk.last_index() || c.member(who).pending) {
        return;
    }
    const Term t = disk.entries(st.applied, st.applied + 1)[0].term;
    disk.compact(Snapshot{SnapshotMeta{st.applied, t, c.raft(who).configuration_at(st.applied)}, "s"});
    c.raft(who).compact(st.applied, "s", static_cast<Index>(rng.in_range(0, 5)));
}

// One random step of the fault phase (per-mille weights).
void random_action(Cluster& c, SplitMix64& rng, std::size_t n, const Faults& f, int& proposals) {
    const int action = rng.in_range(0, 1000);
    const NodeId who = static_cast<NodeId>(rng.in_range(1, static_cast<int>(n)));
    if (action < 150) {
        c.tick(who);
    } else if (action < 300) {
        if (c.raft(who).propose("c" + std::to_string(proposals)).error == ProposeError::kNone) {
            ++proposals;
        }
    } else if (action < 303) {
        c.restart(who);  // loses a Ready being written
    } else if (action < 313) {
        c.member(who).persist = !c.member(who).persist;  // disk stalls / resumes
    } else if (action < 318) {
        c.heal();
        if (rng.in_range(0, 2) == 0) c.isolate(who);
    } else if (action < 320) {
        const NodeId target = static_cast<NodeId>(rng.in_range(1, static_cast<int>(n)));
        if (c.raft(who).role() == Role::kLeader) c.raft(who).transfer_leadership(target);
    } else if (action < 330) {
        compact_applied(c, who, rng);
    } else {
        // A leader writing its Ready sends what was proposed since, as the
        // member core's turn() does with Config::early_appends (raft.h
        // take_messages_now).
        if (c.member(who).pending) {
            for (Message& m : c.raft(who).take_messages_now()) c.net().push_back(std::move(m));
        }
        c.process(who);
        deliver_random(c, rng, f);
    }
}

// Heals everything and demands a leader, then a commit on every member.
void liveness_phase(Cluster& c, Oracle& oracle, std::size_t n, std::uint64_t seed) {
    c.heal();
    for (auto& [id, m] : c.members()) m.persist = true;
    NodeId leader = kNoNode;
    for (int i = 0; i < 200 && leader == kNoNode; ++i) {
        c.tick_all(1);
        oracle.observe(c, seed);
        leader = c.leader();
    }
    BOOST_REQUIRE_MESSAGE(leader != kNoNode, "seed " << seed << ": no leader after healing");
    const ProposeResult pr = c.raft(leader).propose("final");
    BOOST_REQUIRE_MESSAGE(
        pr.error == ProposeError::kNone || pr.error == ProposeError::kTransferring,
        "seed " << seed << ": " << to_string(pr.error));
    for (int i = 0; i < 50; ++i) {
        c.tick_all(1);
        oracle.observe(c, seed);
    }
    if (pr.error != ProposeError::kNone || c.raft(leader).role() != Role::kLeader) return;
    for (NodeId id : ids(n)) {
        BOOST_REQUIRE_MESSAGE(
            c.raft(id).status().commit >= pr.index,
            "seed " << seed << ": member " << id << " did not commit " << pr.index);
    }
}

// Returns how many log indexes were applied somewhere (so the run was not vacuous).
std::size_t run_schedule(std::uint64_t seed, std::size_t n) {
    SplitMix64 rng(seed);
    Cluster c(
        n, [](Config& cfg) { cfg.max_inflight_appends = 4; }, {}, seed);
    Oracle oracle;
    const Faults faults{rng.in_range(0, 30), rng.in_range(0, 10)};  // swarm: per seed
    int proposals = 0;
    for (int step = 0; step < 4000; ++step) {
        random_action(c, rng, n, faults, proposals);
        oracle.observe(c, seed);
    }
    liveness_phase(c, oracle, n, seed);
    return oracle.applied.size();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_schedule)

BOOST_AUTO_TEST_CASE(random_schedules_keep_election_and_state_machine_safety_3_members) {
    std::size_t applied = 0;
    for (std::uint64_t seed = 1; seed <= 200; ++seed) applied += run_schedule(seed, 3);
    BOOST_TEST_MESSAGE("3 members: " << applied << " indexes applied over 200 seeds");
    BOOST_TEST(applied > 200u * 20u);
}

BOOST_AUTO_TEST_CASE(random_schedules_keep_election_and_state_machine_safety_5_members) {
    std::size_t applied = 0;
    for (std::uint64_t seed = 1000; seed < 1100; ++seed) applied += run_schedule(seed, 5);
    BOOST_TEST_MESSAGE("5 members: " << applied << " indexes applied over 100 seeds");
    BOOST_TEST(applied > 100u * 20u);
}

BOOST_AUTO_TEST_SUITE_END()
