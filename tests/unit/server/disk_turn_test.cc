// DiskTurn (server/disk_turn.h): where the Persist runs, when a snapshot's
// file may begin, and the one-writer invariant after every transition.
#include <boost/test/unit_test.hpp>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "server/disk_turn.h"

using namespace pgfence;
using namespace pgfence::server;

namespace {

using Kind = DiskTurn::Action::Kind;
using P = DiskTurn::Persist;
using S = DiskTurn::Save;

std::shared_ptr<const raft::Snapshot> snapshot_at(raft::Index index) {
    auto s = std::make_shared<raft::Snapshot>();
    s->meta.index = index;
    return s;
}

// Steps and asserts the invariant holds afterwards.
DiskTurn::Action step(DiskTurn& turn, const DiskTurn::Event& e) {
    DiskTurn::Action a = turn.step(e);
    BOOST_TEST(turn.check().empty(), "invariant broken: " << turn.check());
    return a;
}

// Every event the shell can report, a follower's and a leader's Persist both.
std::vector<DiskTurn::Event> all_events(const std::shared_ptr<const raft::Snapshot>& snap) {
    return {DiskTurn::PersistTaken{false}, DiskTurn::PersistTaken{true}, DiskTurn::PersistDone{},
            DiskTurn::SaveTaken{snap},     DiskTurn::FileWritten{},       DiskTurn::Adopted{}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(disk_turn)

BOOST_AUTO_TEST_CASE(a_follower_writes_on_the_loop_a_leader_on_the_writer) {
    DiskTurn turn;
    BOOST_TEST(step(turn, DiskTurn::PersistTaken{false}).kind == Kind::kPersistOnLoop);
    BOOST_TEST((turn.persist() == P::kOnLoop));
    BOOST_TEST(step(turn, DiskTurn::PersistDone{}).kind == Kind::kNothing);
    BOOST_TEST((turn.persist() == P::kNone));

    BOOST_TEST(step(turn, DiskTurn::PersistTaken{true}).kind == Kind::kPersistOnWriter);
    BOOST_TEST((turn.persist() == P::kOnWriter));
    BOOST_TEST(step(turn, DiskTurn::PersistDone{}).kind == Kind::kNothing);
    BOOST_TEST((turn.persist() == P::kNone));
}

BOOST_AUTO_TEST_CASE(a_save_with_no_persist_outstanding_goes_file_then_adoption_then_saved) {
    DiskTurn turn;
    const auto snap = snapshot_at(40);
    DiskTurn::Action a = step(turn, DiskTurn::SaveTaken{snap});
    BOOST_TEST(a.kind == Kind::kWriteFile);
    BOOST_TEST(a.snapshot == snap);
    BOOST_TEST((turn.save() == S::kFile));

    a = step(turn, DiskTurn::FileWritten{});
    BOOST_TEST(a.kind == Kind::kAdoptOnWriter);
    BOOST_TEST(a.snapshot == snap);
    BOOST_TEST((turn.save() == S::kAdopting));

    a = step(turn, DiskTurn::Adopted{});
    BOOST_TEST(a.kind == Kind::kSaved);
    BOOST_TEST(a.snapshot == snap);  // the very snapshot the core handed out
    BOOST_TEST((turn.save() == S::kNone));
}

BOOST_AUTO_TEST_CASE(a_save_taken_during_a_persist_waits_for_it) {
    for (const bool leader : {false, true}) {
        DiskTurn turn;
        const auto snap = snapshot_at(7);
        step(turn, DiskTurn::PersistTaken{leader});
        BOOST_TEST(step(turn, DiskTurn::SaveTaken{snap}).kind == Kind::kNothing);
        BOOST_TEST((turn.save() == S::kWaiting));
        const DiskTurn::Action a = step(turn, DiskTurn::PersistDone{});
        BOOST_TEST(a.kind == Kind::kWriteFile);
        BOOST_TEST(a.snapshot == snap);
        BOOST_TEST((turn.save() == S::kFile));
        BOOST_TEST((turn.persist() == P::kNone));
    }
}

BOOST_AUTO_TEST_CASE(a_follower_persist_goes_on_the_loop_while_a_file_is_written) {
    DiskTurn turn;
    step(turn, DiskTurn::SaveTaken{snapshot_at(3)});
    BOOST_TEST(step(turn, DiskTurn::PersistTaken{false}).kind == Kind::kPersistOnLoop);
    BOOST_TEST(step(turn, DiskTurn::PersistDone{}).kind == Kind::kNothing);  // the file is under way already
    BOOST_TEST((turn.save() == S::kFile));
}

BOOST_AUTO_TEST_CASE(a_follower_persist_queues_behind_an_adoption_then_returns_to_the_loop) {
    DiskTurn turn;
    step(turn, DiskTurn::SaveTaken{snapshot_at(3)});
    step(turn, DiskTurn::FileWritten{});
    BOOST_TEST(step(turn, DiskTurn::PersistTaken{false}).kind == Kind::kPersistOnWriter);
    // The adoption finishes first (the writer runs jobs in order)...
    BOOST_TEST(step(turn, DiskTurn::Adopted{}).kind == Kind::kSaved);
    BOOST_TEST(step(turn, DiskTurn::PersistDone{}).kind == Kind::kNothing);
    // ...and the next follower Persist is written on the loop again.
    BOOST_TEST(step(turn, DiskTurn::PersistTaken{false}).kind == Kind::kPersistOnLoop);
}

BOOST_AUTO_TEST_CASE(events_the_state_does_not_allow_are_refused_and_change_nothing) {
    const auto snap = snapshot_at(9);
    struct Case {
        std::vector<DiskTurn::Event> before;
        DiskTurn::Event refused;
    };
    const std::vector<Case> cases = {
        {{DiskTurn::PersistTaken{false}}, DiskTurn::PersistTaken{true}},      // two Persists
        {{DiskTurn::PersistTaken{true}}, DiskTurn::PersistTaken{false}},
        {{}, DiskTurn::PersistDone{}},                                        // done with none
        {{DiskTurn::SaveTaken{snap}}, DiskTurn::SaveTaken{snapshot_at(10)}},  // two saves
        {{}, DiskTurn::SaveTaken{nullptr}},                                   // no snapshot
        {{}, DiskTurn::FileWritten{}},                                        // no file
        {{DiskTurn::PersistTaken{true}, DiskTurn::SaveTaken{snap}}, DiskTurn::FileWritten{}},  // still waiting
        {{DiskTurn::SaveTaken{snap}}, DiskTurn::Adopted{}},                   // not queued for adoption
        // The loop writes a Persist: an adoption queued now would run beside it.
        {{DiskTurn::SaveTaken{snap}, DiskTurn::PersistTaken{false}}, DiskTurn::FileWritten{}},
    };
    for (const Case& c : cases) {
        DiskTurn turn;
        for (const DiskTurn::Event& e : c.before) BOOST_TEST(step(turn, e).kind != Kind::kBroken);
        const P persist = turn.persist();
        const S save = turn.save();
        const DiskTurn::Action a = step(turn, c.refused);
        BOOST_TEST(a.kind == Kind::kBroken);
        BOOST_TEST(!a.broken.empty());
        BOOST_TEST((turn.persist() == persist));
        BOOST_TEST((turn.save() == save));
    }
}

// Every state reachable from the start, every event in each: the invariant
// holds after each step, a refused event changes nothing, and no Persist is
// ever placed on the loop beside an adoption.
BOOST_AUTO_TEST_CASE(the_invariant_holds_in_every_reachable_state) {
    const auto snap = snapshot_at(5);
    std::set<std::pair<P, S>> seen{{P::kNone, S::kNone}};
    std::vector<DiskTurn> frontier{DiskTurn{}};
    std::size_t steps = 0;
    while (!frontier.empty()) {
        const DiskTurn from = frontier.back();
        frontier.pop_back();
        for (const DiskTurn::Event& e : all_events(snap)) {
            DiskTurn turn = from;
            const DiskTurn::Action a = step(turn, e);
            ++steps;
            if (a.kind == Kind::kBroken) {
                BOOST_TEST((turn.persist() == from.persist() && turn.save() == from.save()));
                continue;
            }
            if (a.kind == Kind::kPersistOnLoop) BOOST_TEST((turn.save() != S::kAdopting));
            if (a.kind == Kind::kAdoptOnWriter) BOOST_TEST((turn.persist() != P::kOnLoop));
            if (a.kind == Kind::kWriteFile) BOOST_TEST((turn.persist() == P::kNone));
            if (seen.insert({turn.persist(), turn.save()}).second) frontier.push_back(turn);
        }
    }
    BOOST_TEST(steps > 0u);
    // 3 x 4 states less the ones the invariant forbids: (kOnLoop, kAdopting)
    // and (kNone, kWaiting).
    BOOST_TEST(seen.size() == 10u);
    BOOST_TEST(seen.count({P::kOnLoop, S::kAdopting}) == 0u);
    BOOST_TEST(seen.count({P::kNone, S::kWaiting}) == 0u);
}

BOOST_AUTO_TEST_CASE(the_log_write_check_refuses_a_second_writer) {
    LogWriteCheck check;
    BOOST_TEST(check.try_begin());
    BOOST_TEST(!check.try_begin());  // a second write while the first runs
    check.end();
    BOOST_TEST(check.try_begin());
    check.end();
}

BOOST_AUTO_TEST_SUITE_END()
