// The leader's lease set and its expiry index (member/leases.h): take_due()
// hands out exactly the running leases that are due, earliest first, and
// every change of expire_at or phase keeps the index true.
#include <boost/test/unit_test.hpp>

#include "member/leases.h"

#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
    // Expiring is out of the index; a cut leaves it alone.
    BOOST_TEST((s.settle_expiring("a", 1, kT0 + milliseconds(110), true) == LeaseSet::Settled::kDue));
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

// The leader's expiry path: settle_expiring() ends a confirmation (due,
// running again, or gone) and makes a due lease kExpiring in the same lookup;
// set_running() takes one back when its Expire could not be proposed.
BOOST_AUTO_TEST_CASE(settle_expiring_makes_a_due_lease_expiring_in_one_step) {
    LeaseSet s(true);  // with checkpoints: a due lease leaves their index too
    for (int i = 0; i < 4; ++i) s.start("k" + std::to_string(i), static_cast<pgfence::lock::Token>(i + 1), 100, kT0, 0);
    std::vector<DueLease> due;
    BOOST_TEST(s.take_due(kT0 + milliseconds(100), 10, due) == 4u);
    const Time asked = kT0 + milliseconds(100);
    BOOST_TEST((s.settle_expiring("k0", 1, asked, true) == LeaseSet::Settled::kDue));
    BOOST_TEST((s.find("k0")->phase == LeasePhase::kExpiring));
    BOOST_TEST(s.find("k0")->checkpoint_at() == Lease::kNoCheckpoint);
    // A failed round or a restart runs on; another token, or a lease no longer confirming, is gone.
    BOOST_TEST((s.settle_expiring("k1", 2, asked, false) == LeaseSet::Settled::kRunning));
    BOOST_TEST(s.restart("k2", 3, kT0 + milliseconds(150), 0));
    BOOST_TEST((s.settle_expiring("k2", 3, asked, true) == LeaseSet::Settled::kRunning));
    BOOST_TEST((s.settle_expiring("k3", 9, asked, true) == LeaseSet::Settled::kGone));
    BOOST_TEST((s.settle_expiring("k0", 1, asked, true) == LeaseSet::Settled::kGone));  // already expiring
    BOOST_TEST(s.check_invariants() == "");
    std::vector<DueCheckpoint> checkpoints;
    s.take_checkpoints(kT0 + milliseconds(1000), 10, 1 << 20, checkpoints);
    for (const DueCheckpoint& c : checkpoints) BOOST_TEST(c.key != "k0");
    // Its Expire not proposed: running again at its expire_at, due at the
    // next take (with k1, whose round failed; k2 runs to its restart's end).
    BOOST_TEST(s.set_running("k0", 1));
    BOOST_TEST(s.check_invariants() == "");
    due.clear();
    s.take_due(kT0 + milliseconds(100), 10, due);
    BOOST_TEST((keys_of(due) == std::vector<std::string>{"k0", "k1"}));
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

// Every public mutator, in a seeded random order, on thousands of keys (more
// than 4096: a storm's take_due shrinks the heaps' vectors) with many ties of
// expire_at: after each step the invariants hold, and take_due hands out what
// a std::set of (expire_at, key) over the running leases says, in its order.
BOOST_AUTO_TEST_CASE(random_mutations_keep_the_index_true_and_take_due_in_order) {
    std::mt19937_64 rng(38);  // fixed: deterministic
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    constexpr std::size_t kKeys = 6000;
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < kKeys; ++i) keys.push_back("lock-" + std::to_string(i));
    LeaseSet s(/*checkpoints=*/true);
    std::map<std::string, pgfence::lock::Token> tokens;  // the token of each key's lease
    std::set<std::pair<Time, std::string>> model;         // the running leases by (expire_at, key)
    std::map<std::string, Time> modelled;                 // each modelled key's expire_at
    auto sync = [&](const std::string& key) {
        if (auto m = modelled.find(key); m != modelled.end()) {
            model.erase({m->second, key});
            modelled.erase(m);
        }
        const Lease* l = s.find(key);
        if (l == nullptr) {
            tokens.erase(key);
            return;
        }
        if (l->phase == LeasePhase::kRunning) {
            model.emplace(l->expire_at, key);
            modelled.emplace(key, l->expire_at);
        }
    };
    pgfence::lock::Token next_token = 1;
    Time now = kT0;
    // Coarse times and two lease lengths: many leases share an expire_at.
    auto lease_ms = [&] { return pick(2) == 0 ? std::uint64_t{100} : std::uint64_t{200}; };
    auto token_of = [&](const std::string& key) {
        auto t = tokens.find(key);
        // Now and then a wrong token: nothing may change.
        if (t == tokens.end() || pick(10) == 0) return pgfence::lock::Token{999'999'999};
        return t->second;
    };
    std::size_t taken_total = 0;
    for (std::size_t i = 0; i < kKeys; ++i) {  // most keys held: the heaps grow past 4096
        if (pick(4) == 0) continue;
        tokens[keys[i]] = next_token;
        s.start(keys[i], next_token++, lease_ms(), now, 0);
        sync(keys[i]);
    }
    BOOST_TEST_REQUIRE(s.check_invariants() == "");
    for (int step = 0; step < 4000; ++step) {
        const std::string& key = keys[pick(kKeys)];
        switch (pick(12)) {
            case 0:
            case 1:
                if (pick(2) == 0) {
                    tokens[key] = next_token++;
                } else if (!tokens.count(key)) {
                    tokens[key] = next_token++;
                }
                s.start(key, tokens[key], lease_ms(), now, 0);
                break;
            case 2:
                s.restart(key, token_of(key), now, 0, pick(3) == 0 ? 50 : 0);
                break;
            case 3:
                s.cut(key, token_of(key), now + milliseconds(10 * static_cast<int>(pick(5))));
                break;
            case 4:
                s.set_running(key, token_of(key));
                break;
            case 5:
            case 6:
                s.settle_expiring(key, token_of(key), now - milliseconds(10 * static_cast<int>(pick(20))),
                                  pick(2) == 0);
                break;
            case 7:
                s.erase(key, token_of(key));
                break;
            case 8: {
                std::vector<DueCheckpoint> cps;
                s.take_checkpoints(now, pick(200), std::size_t{1} << 30, cps);
                break;
            }
            case 9:
                now += milliseconds(10 * static_cast<int>(pick(3)));
                break;
            default: {
                // Mostly a tick's batch; now and then a storm that takes nearly all.
                const std::size_t limit = pick(20) == 0 ? kKeys : pick(50);
                std::vector<DueLease> want;
                for (auto m = model.begin(); m != model.end() && m->first <= now && want.size() < limit; ++m) {
                    want.push_back(DueLease{m->second, tokens.at(m->second)});
                }
                std::vector<DueLease> due;
                BOOST_TEST_REQUIRE(s.take_due(now, limit, due) == want.size());
                for (std::size_t d = 0; d < due.size(); ++d) {
                    BOOST_TEST_REQUIRE(due[d].key == want[d].key);
                    BOOST_TEST_REQUIRE(due[d].token == want[d].token);
                }
                for (const DueLease& d : due) sync(d.key);
                taken_total += due.size();
                if (pick(4) == 0) now += milliseconds(100);
                break;
            }
        }
        sync(key);
        const std::string problem = s.check_invariants();
        BOOST_TEST_REQUIRE(problem == "", "step " << step << ": " << problem);
        BOOST_TEST_REQUIRE(model.size() == modelled.size());
    }
    BOOST_TEST(taken_total > 4096u);  // a storm ran: the shrink path too
    s.clear();
    BOOST_TEST(s.empty());
    BOOST_TEST(s.check_invariants() == "");
}

// A lease's kid is a number its set names (kid()): "none" until a Granted
// answer's proof names one; a keepalive's answer (no kid) keeps it; the
// leases are counted by name (by_kid()); a kid no lease keeps any more gives
// its number to the next new one (the first free after the two fixed); a
// kid longer than kMaxProofKidBytes is kept as "unknown".
BOOST_AUTO_TEST_CASE(a_lease_keeps_its_kid_as_a_number_the_set_names) {
    LeaseSet s;
    s.start("a", 1, 100, kT0, 0);
    s.start("b", 2, 100, kT0, 0);
    BOOST_TEST(s.kid(*s.find("a")) == kNoProofKid);
    BOOST_TEST(s.answered("a", 1, "00000000000000aa"));
    BOOST_TEST(s.answered("b", 2, "00000000000000aa"));
    const std::uint16_t aa = s.find("a")->kid;
    BOOST_TEST(aa == kUnknownKidNumber + 1);  // the first after the two fixed
    BOOST_TEST(s.answered("a", 1));  // a keepalive: the kid stays
    BOOST_TEST(s.kid(*s.find("a")) == "00000000000000aa");
    BOOST_TEST(s.find("a")->kid == s.find("b")->kid);
    BOOST_TEST(s.by_kid().at("00000000000000aa") == 2u);
    BOOST_TEST(s.answered("a", 1, "00000000000000bb"));
    BOOST_TEST(s.answered("b", 2, "00000000000000bb"));  // no lease keeps aa any more
    const std::uint16_t bb = s.find("b")->kid;
    BOOST_TEST(s.answered("b", 2, "00000000000000cc"));
    BOOST_TEST(s.find("b")->kid == aa);  // aa's number, free; bb is still a's
    BOOST_TEST(s.answered("a", 1, "00000000000000dd"));  // bb free now: dd takes its number
    BOOST_TEST(s.find("a")->kid == bb);
    BOOST_TEST(s.kid(*s.find("a")) == "00000000000000dd");
    BOOST_TEST(s.kid(*s.find("b")) == "00000000000000cc");
    const std::map<std::string, std::size_t, std::less<>> both{{"00000000000000cc", 1}, {"00000000000000dd", 1}};
    BOOST_TEST((s.by_kid() == both));
    BOOST_TEST(s.answered("a", 1, std::string(kMaxProofKidBytes + 1, 'e')));
    BOOST_TEST(s.kid(*s.find("a")) == kUnknownProofKid);
    BOOST_TEST(s.check_invariants() == "");
    s.clear();
    s.start("a", 1, 100, kT0, 0);
    BOOST_TEST(s.kid(*s.find("a")) == kNoProofKid);
    BOOST_TEST(s.answered("a", 1, "00000000000000ff"));
    BOOST_TEST(s.find("a")->kid == kUnknownKidNumber + 1);  // the names start again
    BOOST_TEST(s.kid(*s.find("a")) == "00000000000000ff");
    BOOST_TEST(s.check_invariants() == "");
}

// A lease's checkpoint is due at the half of its run, while checkpoint_due.
BOOST_AUTO_TEST_CASE(a_checkpoint_is_due_at_the_half_of_the_run) {
    LeaseSet s(true);
    s.start("a", 1, 1001, kT0, 0);
    BOOST_TEST(s.find("a")->checkpoint_due);
    BOOST_TEST((s.find("a")->checkpoint_at() == kT0 + milliseconds(500)));
    BOOST_TEST(s.restart("a", 1, kT0 + milliseconds(10), 0, 400));  // a run of 400 ms
    BOOST_TEST((s.find("a")->checkpoint_at() == kT0 + milliseconds(210)));
    BOOST_TEST(s.cut("a", 1, kT0 + milliseconds(20)));
    BOOST_TEST(!s.find("a")->checkpoint_due);
    BOOST_TEST(s.find("a")->checkpoint_at() == Lease::kNoCheckpoint);
    BOOST_TEST(s.check_invariants() == "");
}

BOOST_AUTO_TEST_SUITE_END()
