// The leader's lease set and its expiry index (member/leases.h): take_due()
// hands out exactly the running leases that are due, earliest first, and
// every change of expire_at or phase keeps the index true.
#include <boost/test/unit_test.hpp>

#include "member/leases.h"

using namespace pgfence::member;
using std::chrono::milliseconds;

namespace {

const Time kT0{milliseconds(1'000'000)};

std::vector<std::string> keys_of(const std::vector<DueLease>& due) {
    std::vector<std::string> out;
    for (const DueLease& d : due) out.push_back(d.key);
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(lease_set)

BOOST_AUTO_TEST_CASE(take_due_hands_out_the_due_leases_earliest_first_and_stops_at_the_first_not_due) {
    LeaseSet s;
    s.start("c", 3, 300, kT0, 0);
    s.start("a", 1, 100, kT0, 0);
    s.start("b", 2, 200, kT0, 0);
    std::vector<DueLease> due;
    BOOST_TEST(s.take_due(kT0 + milliseconds(99), 10, due) == 0u);
    BOOST_TEST(s.take_due(kT0 + milliseconds(200), 10, due) == 2u);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"a", "b"}));
    BOOST_TEST(due[1].token == 2u);
    BOOST_TEST((s.find("a")->phase == LeasePhase::kConfirming));
    BOOST_TEST((s.find("c")->phase == LeasePhase::kRunning));
    // Taken leases are out of the index: a later call does not hand them out again.
    due.clear();
    BOOST_TEST(s.take_due(kT0 + milliseconds(1000), 10, due) == 1u);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"c"}));
    BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(take_due_takes_at_most_its_limit) {
    LeaseSet s;
    for (int i = 0; i < 5; ++i) s.start("k" + std::to_string(i), static_cast<pgfence::lock::Token>(i + 1), 100, kT0, 0);
    std::vector<DueLease> due;
    BOOST_TEST(s.take_due(kT0 + milliseconds(100), 3, due) == 3u);
    BOOST_TEST(s.take_due(kT0 + milliseconds(100), 3, due) == 2u);
    BOOST_TEST(due.size() == 5u);
    BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(restart_cut_and_phase_changes_move_a_lease_in_the_index) {
    LeaseSet s;
    s.start("a", 1, 100, kT0, 0);
    s.start("b", 2, 100, kT0, 0);
    // A keepalive of "a" moves it past "b"; a wrong token changes nothing.
    BOOST_TEST(s.restart("a", 1, kT0 + milliseconds(50), 0));
    BOOST_TEST(!s.restart("a", 9, kT0 + milliseconds(90), 0));
    std::vector<DueLease> due;
    s.take_due(kT0 + milliseconds(100), 10, due);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"b"}));
    // A phantom release cuts "a" to now: due at once.
    BOOST_TEST(s.cut("a", 1, kT0 + milliseconds(110)));
    due.clear();
    s.take_due(kT0 + milliseconds(110), 10, due);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"a"}));
    // Back to running (a failed round): in the index again, due again.
    BOOST_TEST(s.set_running("a", 1));
    BOOST_TEST(s.check_invariants() == "");
    due.clear();
    s.take_due(kT0 + milliseconds(110), 10, due);
    BOOST_TEST(due.size() == 1u);
    // Expiring is final and out of the index; a cut leaves it alone.
    BOOST_TEST(s.set_expiring("a", 1) != nullptr);
    BOOST_TEST(!s.cut("a", 1, kT0));
    BOOST_TEST((s.find("a")->phase == LeasePhase::kExpiring));
    BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(a_restart_while_confirming_stays_out_of_the_index_until_running) {
    LeaseSet s;
    s.start("a", 1, 100, kT0, 0);
    std::vector<DueLease> due;
    s.take_due(kT0 + milliseconds(100), 10, due);
    BOOST_TEST(s.restart("a", 1, kT0 + milliseconds(100), 0));
    due.clear();
    BOOST_TEST(s.take_due(kT0 + milliseconds(500), 10, due) == 0u);
    BOOST_TEST(s.check_invariants() == "");
    s.set_running("a", 1);
    BOOST_TEST(s.take_due(kT0 + milliseconds(199), 10, due) == 0u);
    BOOST_TEST(s.take_due(kT0 + milliseconds(200), 10, due) == 1u);
}

BOOST_AUTO_TEST_CASE(settle_ends_a_confirmation_due_running_or_gone) {
    LeaseSet s;
    for (int i = 0; i < 4; ++i) s.start("k" + std::to_string(i), static_cast<pgfence::lock::Token>(i + 1), 100, kT0, 0);
    std::vector<DueLease> due;
    BOOST_TEST(s.take_due(kT0 + milliseconds(100), 10, due) == 4u);
    const Time asked = kT0 + milliseconds(100);
    // Confirmed, asked at its expire_at: due, still confirming (out of the index).
    BOOST_TEST((s.settle("k0", 1, asked, true) == LeaseSet::Settled::kDue));
    BOOST_TEST((s.find("k0")->phase == LeasePhase::kConfirming));
    // The round failed: running again, due again at the next take.
    BOOST_TEST((s.settle("k1", 2, asked, false) == LeaseSet::Settled::kRunning));
    // Restarted (a keepalive) after the round was asked for: runs on to its new expire_at.
    BOOST_TEST(s.restart("k2", 3, kT0 + milliseconds(150), 0));
    BOOST_TEST((s.settle("k2", 3, asked, true) == LeaseSet::Settled::kRunning));
    // Another token, a lease gone, a lease not confirming: nothing changes.
    BOOST_TEST((s.settle("k3", 9, asked, true) == LeaseSet::Settled::kGone));
    BOOST_TEST((s.settle("none", 1, asked, true) == LeaseSet::Settled::kGone));
    BOOST_TEST((s.settle("k1", 2, asked, true) == LeaseSet::Settled::kGone));
    BOOST_TEST(s.check_invariants() == "");
    // A due lease's Expire proposed: kExpiring, and set_expiring hands back the lease.
    const Lease* l = s.set_expiring("k0", 1);
    BOOST_TEST((l != nullptr && l->lease_ms == 100u && l->expiring()));
    BOOST_TEST(s.set_expiring("k0", 7) == nullptr);
    due.clear();
    BOOST_TEST(s.take_due(kT0 + milliseconds(200), 10, due) == 1u);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"k1"}));
    due.clear();
    BOOST_TEST(s.take_due(kT0 + milliseconds(250), 10, due) == 1u);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"k2"}));
    BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(ties_of_expire_at_go_by_key) {
    LeaseSet s;
    s.start("c", 4, 100, kT0, 0);
    s.start("a", 9, 100, kT0, 0);
    s.start("b", 6, 100, kT0, 0);
    std::vector<DueLease> due;
    s.take_due(kT0 + milliseconds(100), 10, due);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"a", "b", "c"}));
}

BOOST_AUTO_TEST_CASE(start_replaces_and_erase_needs_the_token) {
    LeaseSet s;
    s.start("a", 1, 100, kT0, 0);
    s.start("a", 5, 1000, kT0, 0);  // a new grant of the key replaces the lease, index too
    BOOST_TEST(s.size() == 1u);
    BOOST_TEST(s.find("a")->token == 5u);
    BOOST_TEST(s.check_invariants() == "");
    BOOST_TEST(!s.erase("a", 1));
    BOOST_TEST(s.erase("a", 5));
    BOOST_TEST(s.empty());
    BOOST_TEST(s.check_invariants() == "");
}

// A new leader restarts every lease at one moment: ties of expire_at, in
// key order whatever the tokens' order.
BOOST_AUTO_TEST_CASE(start_all_with_one_lease_length_indexes_every_lease_in_key_order) {
    pgfence::lock::LockTable table;
    const std::vector<std::string> keys{"m", "c", "x", "a", "q"};  // granted in this order: tokens 1..5
    for (std::size_t i = 0; i < keys.size(); ++i) table.apply(i + 1, pgfence::lock::Grant{keys[i], 100, ""});
    LeaseSet s;
    s.start_all(table, kT0, 0);
    BOOST_TEST(s.check_invariants() == "");
    std::vector<DueLease> due;
    BOOST_TEST(s.take_due(kT0 + milliseconds(100), 10, due) == 5u);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"a", "c", "m", "q", "x"}));
}

BOOST_AUTO_TEST_CASE(start_all_starts_one_running_lease_per_lock_of_the_table) {
    pgfence::lock::LockTable table;
    table.apply(1, pgfence::lock::Grant{"b", 200, ""});
    table.apply(2, pgfence::lock::Grant{"a", 300, ""});
    LeaseSet s;
    s.start("gone", 9, 100, kT0, 0);  // replaced: the table does not hold it
    s.start_all(table, kT0, 0);
    BOOST_TEST(s.size() == 2u);
    BOOST_TEST(s.find("gone") == nullptr);
    BOOST_TEST(s.find("a")->token == 2u);
    BOOST_TEST(s.check_invariants() == "");
    std::vector<DueLease> due;
    s.take_due(kT0 + milliseconds(300), 10, due);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"b", "a"}));  // by expire_at, not by key
}

BOOST_AUTO_TEST_SUITE_END()
