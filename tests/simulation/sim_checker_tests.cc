// Unit tests for the simulation's checkers: each feeds a hand-made history
// or event that breaks one invariant and asserts the checker catches it (and
// that a correct one passes). A checker that never fails proves nothing.
#define BOOST_TEST_MODULE sim_checker_tests
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "history.h"
#include "leader_checker.h"
#include "lease_checker.h"
#include "fenced_resource.h"
#include "lock_model.h"
#include "quorum_checker.h"
#include "token_checker.h"
#include "safety_checker.h"
#include "sim_disk.h"
#include "sim_failure.h"
#include "swarm.h"

using namespace pgfence;
using namespace pgfence::sim;

namespace {

raft::Entry command_entry(raft::Index index, raft::Term term, const lock::Command& cmd) {
    return raft::Entry{term, index, raft::EntryType::kNormal, lock::encode(cmd)};
}

ClientOp acked_command(std::uint64_t id, const lock::Command& cmd, std::uint64_t invoked_us,
                       std::uint64_t acked_us, raft::Index index, raft::Term term, lock::Result result) {
    ClientOp op;
    op.id = id;
    op.command = cmd;
    op.invoked_us = invoked_us;
    op.acked_us = acked_us;
    op.index = index;
    op.term = term;
    op.result = result;
    return op;
}

// Log: 1 no-op, 2 grant a by w1 (token 2), 3 grant a by w2 (rejected), 4 release a/2, 5 grant a by w2 (token 5).
std::vector<raft::Entry> sample_log() {
    return {raft::Entry{1, 1, raft::EntryType::kNoop, ""},
            command_entry(2, 1, lock::Grant{"a", 1000, "w1"}),
            command_entry(3, 1, lock::Grant{"a", 1000, "w2"}),
            command_entry(4, 2, lock::Release{"a", 2}),
            command_entry(5, 2, lock::Grant{"a", 1000, "w2"})};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(linearizability)

BOOST_AUTO_TEST_CASE(correct_history_passes) {
    const auto log = sample_log();
    std::vector<ClientOp> ops{
        acked_command(1, lock::Grant{"a", 1000, "w1"}, 0, 10, 2, 1, lock::Granted{2, true, 1000}),
        acked_command(2, lock::Grant{"a", 1000, "w2"}, 5, 12, 3, 1, lock::GrantRejected{2}),
        acked_command(3, lock::Release{"a", 2}, 20, 30, 4, 2, lock::Released{}),
        acked_command(4, lock::Grant{"a", 1000, "w2"}, 31, 40, 5, 2, lock::Granted{5, true, 1000}),
    };
    ClientOp read;
    read.id = 5;
    read.kind = ClientOp::Kind::kRead;
    read.read_key = "a";
    read.invoked_us = 41;
    read.acked_us = 50;
    read.index = 5;
    read.read_token = 5;
    ops.push_back(read);
    BOOST_TEST(check_linearizable(log, ops) == "");
}

BOOST_AUTO_TEST_CASE(two_holders_told_granted_is_caught) {
    // Both clients were told Granted for the same key: the model says the second is rejected.
    const auto log = sample_log();
    const std::vector<ClientOp> ops{
        acked_command(1, lock::Grant{"a", 1000, "w1"}, 0, 10, 2, 1, lock::Granted{2, true, 1000}),
        acked_command(2, lock::Grant{"a", 1000, "w2"}, 5, 12, 3, 1, lock::Granted{3, true, 1000}),
    };
    const std::string verdict = check_linearizable(log, ops);
    BOOST_TEST(verdict.find("sequential model") != std::string::npos, verdict);
}

BOOST_AUTO_TEST_CASE(real_time_order_violation_is_caught) {
    // op 2 was invoked after op 1 was acknowledged but sits earlier in the log.
    const auto log = sample_log();
    const std::vector<ClientOp> ops{
        acked_command(1, lock::Grant{"a", 1000, "w2"}, 0, 10, 3, 1, lock::GrantRejected{2}),
        acked_command(2, lock::Grant{"a", 1000, "w1"}, 11, 20, 2, 1, lock::Granted{2, true, 1000}),
    };
    const std::string verdict = check_linearizable(log, ops);
    BOOST_TEST(verdict.find("real-time order") != std::string::npos, verdict);
}

BOOST_AUTO_TEST_CASE(result_for_another_command_is_caught) {
    // The client was told its Release succeeded at index 2, which holds a Grant.
    const auto log = sample_log();
    const std::vector<ClientOp> ops{acked_command(1, lock::Release{"a", 2}, 0, 10, 2, 1, lock::Released{})};
    const std::string verdict = check_linearizable(log, ops);
    BOOST_TEST(verdict.find("different command") != std::string::npos, verdict);
}

BOOST_AUTO_TEST_CASE(result_from_an_overwritten_term_is_caught) {
    // Acknowledged with term 3 but the committed entry at that index has term 1.
    const auto log = sample_log();
    const std::vector<ClientOp> ops{
        acked_command(1, lock::Grant{"a", 1000, "w1"}, 0, 10, 2, 3, lock::Granted{2, true, 1000})};
    const std::string verdict = check_linearizable(log, ops);
    BOOST_TEST(verdict.find("has term 1") != std::string::npos, verdict);
}

BOOST_AUTO_TEST_CASE(stale_read_is_caught) {
    // The release at 4 and grant at 5 were acknowledged before the read began;
    // a read served at index 5 that reports token 2 saw old state.
    const auto log = sample_log();
    std::vector<ClientOp> ops{acked_command(1, lock::Grant{"a", 1000, "w2"}, 0, 10, 5, 2, lock::Granted{5, true, 1000})};
    ClientOp read;
    read.id = 2;
    read.kind = ClientOp::Kind::kRead;
    read.read_key = "a";
    read.invoked_us = 11;
    read.acked_us = 20;
    read.index = 5;
    read.read_token = 2;
    ops.push_back(read);
    BOOST_TEST(check_linearizable(log, ops) != "");
    ops.back().read_token = 2;
    ops.back().index = 3;  // consistent with the log at 3, but before a write acknowledged earlier
    const std::string verdict = check_linearizable(log, ops);
    BOOST_TEST(verdict.find("real-time order") != std::string::npos, verdict);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(lock_model)

BOOST_AUTO_TEST_CASE(tokens_follow_index_and_floor_and_stale_tokens_remove_nothing) {
    LockModel m;
    BOOST_TEST((m.apply(1, lock::SetTokenFloor{100}) == lock::Result{lock::FloorSet{100}}));
    BOOST_TEST((m.apply(2, lock::Grant{"k", 10, "w"}) == lock::Result{lock::Granted{102, true, 10}}));
    BOOST_TEST((m.apply(3, lock::Grant{"k", 10, "w"}) == lock::Result{lock::Granted{102, false, 10}}));
    BOOST_TEST((m.apply(4, lock::Grant{"k", 10, "v"}) == lock::Result{lock::GrantRejected{102}}));
    BOOST_TEST((m.apply(5, lock::Expire{"k", 7}) == lock::Result{lock::Expired{false}}));
    BOOST_TEST((m.apply(6, lock::Release{"k", 7}) == lock::Result{lock::NotFound{}}));
    BOOST_TEST(m.token_at("k", 6) == 102u);
    BOOST_TEST((m.apply(7, lock::Expire{"k", 102}) == lock::Result{lock::Expired{true}}));
    BOOST_TEST(m.token_at("k", 7) == 0u);
    BOOST_TEST(m.token_at("k", 1) == 0u);
    BOOST_TEST(m.token_at("k", 2) == 102u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(safety_checker)

BOOST_AUTO_TEST_CASE(two_leaders_in_one_term_are_caught) {
    SafetyChecker c;
    c.observe_role(1, raft::Role::kLeader, 3);
    c.observe_role(1, raft::Role::kLeader, 3);
    c.observe_role(2, raft::Role::kLeader, 4);
    BOOST_CHECK_THROW(c.observe_role(2, raft::Role::kLeader, 3), SimFailure);
}

BOOST_AUTO_TEST_CASE(log_matching_violation_is_caught) {
    SafetyChecker c;
    SimStorage image;
    const auto e1 = command_entry(1, 1, lock::Grant{"a", 10, ""});
    image.append(e1);
    c.observe_written(1, {e1}, image);
    c.observe_written(2, {e1}, image);
    const auto other = command_entry(1, 1, lock::Grant{"b", 10, ""});
    BOOST_CHECK_THROW(c.observe_written(3, {other}, image), SimFailure);
}

BOOST_AUTO_TEST_CASE(changed_committed_entry_is_caught) {
    SafetyChecker c;
    lock::LockTable t1;
    const auto e1 = command_entry(1, 1, lock::Grant{"a", 10, "w"});
    const auto r1 = t1.apply(1, std::get<lock::Command>(lock::decode_command(e1.data)));
    c.after_apply(1, e1, r1, std::nullopt, 0, t1);
    lock::LockTable t2;
    const auto e1_other = command_entry(1, 2, lock::Grant{"a", 10, "w"});
    const auto r2 = t2.apply(1, std::get<lock::Command>(lock::decode_command(e1_other.data)));
    BOOST_CHECK_THROW(c.after_apply(2, e1_other, r2, std::nullopt, 0, t2), SimFailure);
}

BOOST_AUTO_TEST_CASE(stale_expire_removing_a_newer_grant_is_caught) {
    // A table that wrongly lets Expire ignore the token: simulate its outcome.
    SafetyChecker c;
    lock::LockTable honest;
    const auto e1 = command_entry(1, 1, lock::Grant{"a", 10, "w"});
    const auto r1 = honest.apply(1, lock::Grant{"a", 10, "w"});
    c.after_apply(1, e1, r1, std::nullopt, 0, honest);
    // The broken member's table after "expiring" token 99: the key is gone.
    lock::LockTable broken;
    broken.apply(1, lock::Grant{"a", 10, "w"});
    broken.apply(2, lock::Release{"a", 1});
    const auto e2 = command_entry(2, 1, lock::Expire{"a", 99});
    BOOST_CHECK_THROW(c.after_apply(1, e2, lock::Expired{true}, lock::Lock{"a", 1, 10, "w"}, 1, broken),
                      SimFailure);
}

BOOST_AUTO_TEST_CASE(vote_sent_before_it_is_durable_is_caught) {
    SafetyChecker c;
    SimStorage durable;
    durable.set_hard_state(raft::HardState{4, 2, 0});
    raft::Message vote{7, 1, 2, 4, raft::VoteResponse{false, true}};
    c.observe_sent(vote, durable);  // durable vote for 2 in term 4: fine
    raft::Message other{7, 1, 3, 4, raft::VoteResponse{false, true}};
    BOOST_CHECK_THROW(c.observe_sent(other, durable), SimFailure);
    raft::Message later{7, 1, 3, 5, raft::VoteResponse{false, true}};
    BOOST_CHECK_THROW(c.observe_sent(later, durable), SimFailure);
}

BOOST_AUTO_TEST_CASE(append_ack_beyond_the_durable_log_is_caught) {
    SafetyChecker c;
    SimStorage durable;
    durable.set_hard_state(raft::HardState{1, 0, 0});
    durable.append(raft::Entry{1, 1, raft::EntryType::kNoop, ""});
    raft::Message ack{7, 2, 1, 1, raft::AppendResponse{true, 1, 0, 0, 0}};
    c.observe_sent(ack, durable);
    std::get<raft::AppendResponse>(ack.body).match_index = 2;
    BOOST_CHECK_THROW(c.observe_sent(ack, durable), SimFailure);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sim_disk)

raft::Ready ready_with(raft::Index first, raft::Index last, raft::Term term) {
    raft::Ready r;
    for (raft::Index i = first; i <= last; ++i) r.entries.push_back(raft::Entry{term, i, raft::EntryType::kNoop, ""});
    r.hard_state = raft::HardState{term, 1, last};
    return r;
}

BOOST_AUTO_TEST_CASE(crash_never_loses_synced_writes_and_keeps_a_prefix_of_pending_ones) {
    for (std::uint64_t seed = 1; seed <= 200; ++seed) {
        SimRandom random(seed);
        SimDisk disk;
        disk.write(ready_with(1, 3, 1));
        disk.sync();
        disk.write(ready_with(4, 9, 2));
        BOOST_TEST(disk.volatile_image().last_index() == 9u);
        const CrashLoss loss = disk.crash(random);
        const SimStorage& d = disk.durable();
        BOOST_TEST(d.last_index() >= 3u);
        BOOST_TEST(d.last_index() <= 9u);
        BOOST_TEST(d.term_at(3).value_or(0) == 1u);
        // The hard state is written after the entries: a durable commit never points past the durable log.
        BOOST_TEST(d.hard_state().commit <= d.last_index());
        if (loss == CrashLoss::kAllLost) BOOST_TEST(d.last_index() == 3u);
        if (loss == CrashLoss::kAllKept) BOOST_TEST(d.hard_state().commit == 9u);
        BOOST_TEST(disk.volatile_image().last_index() == d.last_index());
        BOOST_TEST(!disk.has_pending());
    }
}

BOOST_AUTO_TEST_CASE(conflicting_write_is_recorded_as_overwritten) {
    SimDisk disk;
    disk.write(ready_with(1, 5, 1));
    disk.sync();
    disk.reset_overwritten();
    disk.write(ready_with(3, 3, 2));
    disk.sync();
    BOOST_TEST(disk.durable().last_index() == 3u);
    BOOST_TEST(disk.durable().lowest_overwritten() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()

// Lease safety in real time (lease_checker.h), rho = 50%: a 1000 ms lease is
// usable for 500 ms after its send.
BOOST_AUTO_TEST_SUITE(lease_checker)

BOOST_AUTO_TEST_CASE(a_second_holder_inside_the_first_ones_interval_is_caught) {
    LeaseChecker c(500'000);
    c.granted(1, "k", 10, 1000, 0, 100);                                // held over [100, 500000)
    BOOST_CHECK_THROW(c.granted(2, "k", 11, 1000, 300'000, 400'000), SimFailure);
}

BOOST_AUTO_TEST_CASE(a_handover_after_the_interval_or_a_release_passes) {
    LeaseChecker c(500'000);
    c.granted(1, "k", 10, 1000, 0, 100);
    c.granted(2, "k", 11, 1000, 400'000, 500'000);  // from 500000: the first ended there
    c.released("k", 11, 600'000);
    c.granted(3, "k", 12, 1000, 650'000, 700'000);
    c.granted(4, "j", 13, 1000, 0, 100);            // another key
    BOOST_TEST(c.intervals() == 4u);
    BOOST_TEST(c.pairs_checked() > 0u);
}

BOOST_AUTO_TEST_CASE(the_latest_keepalive_decides_and_a_release_ends_it_for_good) {
    LeaseChecker c(500'000);
    c.granted(1, "k", 10, 1000, 0, 100);
    c.kept_alive(1, "k", 10, 1000, 400'000);  // held until 900000
    BOOST_CHECK_THROW(c.granted(2, "k", 11, 1000, 800'000, 850'000), SimFailure);
    LeaseChecker d(500'000);
    d.granted(1, "k", 10, 1000, 0, 100);
    d.released("k", 10, 200'000);           // by anyone who knows token 10
    d.kept_alive(1, "k", 10, 1000, 150'000);  // sent before the release, answered after it
    d.kept_alive(2, "k", 10, 1000, 210'000);  // another client's: the holder learns nothing
    d.granted(2, "k", 11, 1000, 250'000, 300'000);
    BOOST_TEST(d.intervals() == 2u);
}

BOOST_AUTO_TEST_CASE(beyond_rho_overlaps_are_counted_not_failed) {
    LeaseChecker c(500'000, false);
    c.granted(1, "k", 10, 1000, 0, 100);
    c.granted(2, "k", 11, 1000, 300'000, 400'000);  // inside the first one's interval
    c.kept_alive(2, "k", 11, 1000, 450'000);        // the same pair again: one overlap
    c.granted(3, "j", 12, 1000, 0, 100);
    BOOST_TEST(c.overlaps() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(token_checker)

BOOST_AUTO_TEST_CASE(fresh_tokens_above_every_earlier_one_and_own_regrants_pass) {
    TokenChecker c;
    c.granted("k", 10, "w1", true, 0, 100);
    c.granted("j", 12, "", true, 50, 200);     // sent before 10 was told... and larger anyway
    c.granted("k", 10, "w1", false, 300, 400);  // w1's idempotent re-grant
    c.granted("i", 11, "w2", true, 90, 500);   // sent before 10 and 12 were told: may be smaller
    BOOST_TEST(c.fresh_checked() == 3u);
}

BOOST_AUTO_TEST_CASE(a_fresh_token_not_above_one_told_before_its_send_is_caught) {
    TokenChecker c;
    c.granted("k", 10, "w1", true, 0, 100);
    BOOST_CHECK_THROW(c.granted("j", 9, "w2", true, 101, 200), SimFailure);
}

BOOST_AUTO_TEST_CASE(a_token_told_for_two_keys_or_two_owners_is_caught) {
    TokenChecker c;
    c.granted("k", 10, "w1", true, 0, 100);
    BOOST_CHECK_THROW(c.granted("j", 10, "w1", false, 150, 200), SimFailure);
    TokenChecker d;
    d.granted("k", 10, "w1", true, 0, 100);
    BOOST_CHECK_THROW(d.granted("k", 10, "w2", false, 150, 200), SimFailure);
    TokenChecker e;
    e.granted("k", 10, "", true, 0, 100);  // no owner: nothing is idempotent
    BOOST_CHECK_THROW(e.granted("k", 10, "", false, 150, 200), SimFailure);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fenced_resource)

BOOST_AUTO_TEST_CASE(stale_writes_are_refused_and_counted) {
    FencedResource r;
    r.granted("k", 10);
    r.granted("k", 12);
    BOOST_TEST(r.write("k", 12));
    BOOST_TEST(!r.write("k", 10));  // a paused holder's late write
    BOOST_TEST(!r.write("k", 12));  // equal: not newer
    BOOST_TEST(r.accepted() == 1u);
    BOOST_TEST(r.refused() == 2u);
}

BOOST_AUTO_TEST_CASE(a_write_with_a_token_never_granted_for_its_key_is_caught) {
    FencedResource r;
    r.granted("k", 10);
    r.granted("j", 11);
    BOOST_CHECK_THROW(r.write("k", 11), SimFailure);
    BOOST_CHECK_THROW(r.write("k", 13), SimFailure);
}

BOOST_AUTO_TEST_SUITE_END()

// The leader's rules from outside (leader_checker.h): 3 members, rho = 50%,
// member 1 leads term 2 with its clock at real time. A 100 ms lease then has
// expire_at 150 ms after its start.
BOOST_AUTO_TEST_SUITE(leader_checker)

namespace {

using std::chrono::milliseconds;

member::Time at_ms(std::int64_t ms) { return milliseconds(ms); }

const raft::Configuration kThree = raft::Configuration::of_voters({1, 2, 3});

raft::Message response_from(raft::NodeId from, raft::Term term) {
    raft::Message m;
    m.from = from;
    m.to = 1;
    m.term = term;
    m.body = raft::HeartbeatResponse{1};
    return m;
}

// Member 1 leads term 2 and holds key k with token 10 (lease 100 ms from 0 ms).
LeaderChecker leading_with_a_lease() {
    LeaderChecker c(3, 500'000);
    c.set_rate(1, 1.0);
    lock::LockTable empty;
    c.leading(1, 2, kThree, 0, empty, at_ms(0));
    c.grant_applied(1, "k", 10, 100, at_ms(0));
    return c;
}

}  // namespace

BOOST_AUTO_TEST_CASE(expire_after_expire_at_with_a_quorum_confirming_after_it_passes) {
    LeaderChecker c = leading_with_a_lease();
    c.delivered(1, response_from(2, 2), 150'000);  // sent when the leader's clock reached expire_at
    c.expire_proposed(1, "k", 10, 151'000, at_ms(151));
    c.expire_in_ready(1, 2, "k", 10);
    BOOST_TEST(c.expires_checked() == 1u);
}

BOOST_AUTO_TEST_CASE(expire_before_expire_at_is_caught) {
    LeaderChecker c = leading_with_a_lease();
    c.delivered(1, response_from(2, 2), 149'000);
    BOOST_CHECK_THROW(c.expire_proposed(1, "k", 10, 149'500, at_ms(149)), SimFailure);  // 100 ms lease + 50 ms margin
}

BOOST_AUTO_TEST_CASE(expire_confirmed_only_by_a_round_before_the_deadline_is_caught) {
    LeaderChecker c = leading_with_a_lease();
    c.delivered(1, response_from(2, 2), 140'000);  // before expire_at
    c.delivered(1, response_from(3, 1), 160'000);  // an older term proves nothing
    BOOST_CHECK_THROW(c.expire_proposed(1, "k", 10, 161'000, at_ms(161)), SimFailure);
}

BOOST_AUTO_TEST_CASE(a_restart_moves_expire_at_and_the_round_must_follow_it) {
    LeaderChecker c = leading_with_a_lease();
    c.kept_alive(1, "k", 10, at_ms(120));          // expire_at now 270 ms
    c.delivered(1, response_from(2, 2), 200'000);  // after the first expire_at, before the new one
    BOOST_CHECK_THROW(c.expire_proposed(1, "k", 10, 280'000, at_ms(280)), SimFailure);
    LeaderChecker d = leading_with_a_lease();
    d.grant_applied(1, "k", 10, 100, at_ms(120));  // an idempotent re-grant restarts it too
    d.delivered(1, response_from(3, 2), 200'000);
    BOOST_CHECK_THROW(d.expire_proposed(1, "k", 10, 280'000, at_ms(280)), SimFailure);
}

BOOST_AUTO_TEST_CASE(a_clock_running_fast_confirms_in_its_own_time) {
    // Member 1's clock runs at 2x: its expire_at of 150 ms comes at 75 ms real time.
    LeaderChecker c(3, 500'000);
    c.set_rate(1, 2.0);
    lock::LockTable empty;
    c.leading(1, 2, kThree, 0, empty, at_ms(0));
    c.grant_applied(1, "k", 10, 100, at_ms(0));
    c.delivered(1, response_from(2, 2), 70'000);
    BOOST_CHECK_THROW(c.expire_proposed(1, "k", 10, 76'000, at_ms(152)), SimFailure);
    c.delivered(1, response_from(3, 2), 75'500);
    c.expire_proposed(1, "k", 10, 76'000, at_ms(152));
    BOOST_TEST(c.expires_checked() == 1u);
}

BOOST_AUTO_TEST_CASE(keepalive_after_the_expire_was_proposed_is_caught) {
    LeaderChecker c = leading_with_a_lease();
    c.delivered(1, response_from(2, 2), 150'000);
    c.expire_proposed(1, "k", 10, 151'000, at_ms(151));
    BOOST_CHECK_THROW(c.kept_alive(1, "k", 10, at_ms(152)), SimFailure);
    BOOST_CHECK_THROW(c.kept_alive(1, "j", 11, at_ms(152)), SimFailure);  // no lease at all
}

BOOST_AUTO_TEST_CASE(an_expire_nobody_announced_or_of_an_unleased_lock_is_caught) {
    LeaderChecker c = leading_with_a_lease();
    BOOST_CHECK_THROW(c.expire_in_ready(1, 2, "k", 10), SimFailure);
    c.delivered(1, response_from(2, 2), 500'000);
    BOOST_CHECK_THROW(c.expire_proposed(1, "k", 9, 501'000, at_ms(501)), SimFailure);
}

BOOST_AUTO_TEST_CASE(a_phantom_ends_the_lease_at_once_but_only_for_a_gone_acquire) {
    LeaderChecker c = leading_with_a_lease();
    BOOST_CHECK_THROW(c.phantom_released(1, "k", 10, at_ms(20)), SimFailure);
    c.acquire_gone(1, "k");
    c.phantom_released(1, "k", 10, at_ms(20));
    c.delivered(1, response_from(2, 2), 21'000);
    c.expire_proposed(1, "k", 10, 22'000, at_ms(22));
    BOOST_TEST(c.expires_checked() == 1u);
}

// Membership: only voters of a configuration in force since expire_at confirm.
BOOST_AUTO_TEST_CASE(a_learners_response_confirms_no_expire) {
    raft::Configuration with_learner = kThree;
    with_learner.members.push_back(raft::ConfigMember{4, false, ""});
    LeaderChecker c(4, 500'000);
    c.set_rate(1, 1.0);
    lock::LockTable empty;
    c.leading(1, 2, with_learner, 7, empty, at_ms(0));
    c.grant_applied(1, "k", 10, 100, at_ms(0));
    c.delivered(1, response_from(4, 2), 150'000);  // the learner: it counts in no quorum
    BOOST_CHECK_THROW(c.expire_proposed(1, "k", 10, 151'000, at_ms(151)), SimFailure);
    c.delivered(1, response_from(3, 2), 150'500);  // a voter
    c.expire_proposed(1, "k", 10, 152'000, at_ms(152));
    BOOST_TEST(c.expires_checked() == 1u);
}

BOOST_AUTO_TEST_CASE(a_configuration_in_force_since_expire_at_may_confirm_but_not_one_that_ended_before) {
    lock::LockTable empty;
    raft::Configuration five = raft::Configuration::of_voters({1, 2, 3, 4, 5});
    // Three voters at expire_at (150 ms); 4 and 5 promoted one by one after
    // it: the round the three confirmed still counts.
    LeaderChecker c(5, 500'000);
    c.set_rate(1, 1.0);
    c.leading(1, 2, kThree, 7, empty, at_ms(0));
    c.grant_applied(1, "k", 10, 100, at_ms(0));
    c.delivered(1, response_from(2, 2), 150'000);
    c.leading(1, 2, raft::Configuration::of_voters({1, 2, 3, 4}), 9, empty, at_ms(155));
    c.leading(1, 2, five, 11, empty, at_ms(158));
    c.expire_proposed(1, "k", 10, 160'000, at_ms(160));
    // Five voters from before expire_at on: two confirmations are not a majority of them.
    LeaderChecker d(5, 500'000);
    d.set_rate(1, 1.0);
    d.leading(1, 2, kThree, 7, empty, at_ms(0));
    d.grant_applied(1, "k", 10, 100, at_ms(0));
    d.leading(1, 2, five, 11, empty, at_ms(100));
    d.delivered(1, response_from(2, 2), 150'000);
    BOOST_CHECK_THROW(d.expire_proposed(1, "k", 10, 160'000, at_ms(160)), SimFailure);
}

BOOST_AUTO_TEST_CASE(waiters_granted_out_of_arrival_order_are_caught) {
    LeaderChecker c = leading_with_a_lease();
    c.queued(1, 101, {"k"});
    c.queued(1, 102, {"k"});
    c.queued(1, 201, {"j"});
    c.answered(1, 201, true);  // another key's queue
    BOOST_CHECK_THROW(c.answered(1, 102, true), SimFailure);
}

// A set queues on each of its keys: granting it before an earlier waiter on
// any one of them is caught, as is a later waiter jumping it on one key.
BOOST_AUTO_TEST_CASE(a_waiting_set_out_of_arrival_order_on_any_key_is_caught) {
    LeaderChecker c = leading_with_a_lease();
    c.queued(1, 101, {"j"});
    c.queued(1, 102, {"k", "j"});
    c.queued(1, 103, {"k"});
    BOOST_CHECK_THROW(c.answered(1, 103, true), SimFailure);  // jumped the set on "k"
    LeaderChecker d = leading_with_a_lease();
    d.queued(1, 101, {"j"});
    d.queued(1, 102, {"k", "j"});
    BOOST_CHECK_THROW(d.answered(1, 102, true), SimFailure);  // before 101 on "j"
    LeaderChecker e = leading_with_a_lease();
    e.queued(1, 101, {"j"});
    e.queued(1, 102, {"k", "j"});
    e.queued(1, 103, {"k"});
    e.answered(1, 101, true);
    e.answered(1, 102, true);
    e.answered(1, 103, true);
    BOOST_TEST(e.waiting_sets_checked() == 1u);
}

BOOST_AUTO_TEST_CASE(waiters_in_order_or_after_the_earlier_one_left_pass) {
    LeaderChecker c = leading_with_a_lease();
    c.queued(1, 101, {"k"});
    c.queued(1, 102, {"k"});
    c.queued(1, 103, {"k"});
    c.queued(1, 101, {"k"});       // a head that lost a race keeps its place
    c.answered(1, 101, true);
    c.answered(1, 102, false);   // timed out (or its client left)
    c.answered(1, 103, true);
    lock::LockTable empty;
    c.queued(1, 104, {"k"});
    c.leading(1, 3, kThree, 0, empty, at_ms(500));  // a new term: the old queue is gone
    c.queued(1, 105, {"k"});
    c.answered(1, 105, true);
    BOOST_TEST(c.waiter_grants_checked() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()

// Quorums across membership changes (quorum_checker.h).
BOOST_AUTO_TEST_SUITE(quorum_checker)

namespace {

raft::Configuration voters_and_learners(const std::vector<raft::NodeId>& voters,
                                        const std::vector<raft::NodeId>& learners) {
    raft::Configuration c = raft::Configuration::of_voters(voters);
    for (raft::NodeId id : learners) c.members.push_back(raft::ConfigMember{id, false, ""});
    std::sort(c.members.begin(), c.members.end(),
              [](const raft::ConfigMember& a, const raft::ConfigMember& b) { return a.id < b.id; });
    return c;
}

raft::Message vote(raft::NodeId from, raft::NodeId to, raft::Term term, bool granted = true, bool pre_vote = false) {
    return raft::Message{7, from, to, term, raft::VoteResponse{pre_vote, granted}};
}

raft::Entry config_entry(raft::Index index, raft::Term term, const raft::Configuration& c) {
    return raft::Entry{term, index, raft::EntryType::kConfig, raft::encode_configuration(c)};
}

// A durable image holding entries 1..last of term `term`.
SimStorage image_up_to(raft::Index last, raft::Term term) {
    SimStorage s;
    for (raft::Index i = 1; i <= last; ++i) s.append(raft::Entry{term, i, raft::EntryType::kNoop, ""});
    return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_leader_elected_by_a_majority_of_its_voters_passes) {
    QuorumChecker c(raft::Configuration::of_voters({1, 2, 3}));
    c.delivered(vote(2, 1, 5));
    c.delivered(vote(3, 1, 5, true, true));  // a pre-vote is not a vote
    c.elected(1, 5, voters_and_learners({1, 2, 3}, {4}));
    BOOST_TEST(c.elections_checked() == 1u);
}

BOOST_AUTO_TEST_CASE(a_learners_or_strangers_vote_elects_nobody) {
    const raft::Configuration config = voters_and_learners({1, 2, 3}, {4});
    QuorumChecker c(config);
    c.delivered(vote(4, 1, 5));  // the learner's
    c.delivered(vote(9, 1, 5));  // a member outside the configuration
    c.delivered(vote(2, 1, 4));  // another term's
    c.delivered(vote(3, 1, 5, false));  // refused
    BOOST_CHECK_THROW(c.elected(1, 5, config), SimFailure);
}

BOOST_AUTO_TEST_CASE(a_removed_members_vote_elects_nobody) {
    // 3 was removed: the two voters left must both vote.
    QuorumChecker c(raft::Configuration::of_voters({1, 2, 3}));
    c.delivered(vote(3, 1, 6));
    BOOST_CHECK_THROW(c.elected(1, 6, raft::Configuration::of_voters({1, 2})), SimFailure);
    c.delivered(vote(2, 1, 6));
    c.elected(1, 6, raft::Configuration::of_voters({1, 2}));
}

BOOST_AUTO_TEST_CASE(a_learner_that_leads_is_caught) {
    QuorumChecker c(raft::Configuration::of_voters({1, 2, 3}));
    c.delivered(vote(1, 4, 5));
    c.delivered(vote(2, 4, 5));
    BOOST_CHECK_THROW(c.elected(4, 5, voters_and_learners({1, 2, 3}, {4})), SimFailure);
}

BOOST_AUTO_TEST_CASE(a_commit_durable_on_a_majority_of_voters_passes_and_a_snapshot_counts) {
    QuorumChecker c(raft::Configuration::of_voters({1, 2, 3}));
    const SimStorage one = image_up_to(10, 3);
    SimStorage two;  // compacted past index 10
    two.install_snapshot(raft::Snapshot{raft::SnapshotMeta{12, 3, raft::Configuration::of_voters({1, 2, 3})}, ""});
    const SimStorage three = image_up_to(9, 3);
    c.attach(1, one);
    c.attach(2, two);
    c.attach(3, three);
    c.committed(1, 3, 10, raft::Configuration::of_voters({1, 2, 3}));
    BOOST_TEST(c.commits_checked() == 1u);
}

BOOST_AUTO_TEST_CASE(a_commit_counting_a_learner_or_a_removed_member_is_caught) {
    const SimStorage holds = image_up_to(10, 3);
    const SimStorage behind = image_up_to(9, 3);
    const SimStorage other_term = image_up_to(10, 2);
    QuorumChecker c(raft::Configuration::of_voters({1, 2, 3}));
    c.attach(1, holds);
    c.attach(2, behind);
    c.attach(3, other_term);  // index 10, but of term 2
    c.attach(4, holds);       // the learner holds it
    c.attach(5, holds);       // so does a removed member
    BOOST_CHECK_THROW(c.committed(1, 3, 10, voters_and_learners({1, 2, 3}, {4})), SimFailure);
    BOOST_CHECK_THROW(c.committed(1, 3, 10, raft::Configuration::of_voters({1, 2, 3})), SimFailure);
    c.attach(2, holds);
    c.committed(1, 3, 10, voters_and_learners({1, 2, 3}, {4}));
}

BOOST_AUTO_TEST_CASE(committed_configurations_change_one_member_at_a_time) {
    const raft::Configuration first = raft::Configuration::of_voters({1, 2, 3});
    QuorumChecker c(first);
    c.config_applied(config_entry(4, 1, voters_and_learners({1, 2, 3}, {4})));
    c.config_applied(config_entry(4, 1, voters_and_learners({1, 2, 3}, {4})));  // applied again elsewhere
    c.config_applied(config_entry(6, 1, raft::Configuration::of_voters({1, 2, 3, 4})));
    c.config_applied(config_entry(8, 2, raft::Configuration::of_voters({1, 2, 4})));
    BOOST_TEST(c.config_changes_committed() == 3u);
    BOOST_TEST(c.voters_max() == 4u);
    BOOST_TEST(c.voters_min() == 3u);
    // Two at once: one removed and one added.
    BOOST_CHECK_THROW(c.config_applied(config_entry(9, 2, voters_and_learners({1, 2}, {5}))), SimFailure);
    QuorumChecker d(first);
    BOOST_CHECK_THROW(d.config_applied(config_entry(4, 1, raft::Configuration::of_voters({1, 2, 3, 4}))),
                      SimFailure);  // added as a voter
    QuorumChecker e(first);
    BOOST_CHECK_THROW(e.config_applied(config_entry(4, 1, raft::Configuration::of_voters({1, 2, 3}))),
                      SimFailure);  // no change at all
}

BOOST_AUTO_TEST_CASE(a_leader_writing_a_change_while_the_one_before_is_uncommitted_is_caught) {
    QuorumChecker c(raft::Configuration::of_voters({1, 2, 3}));
    const SimStorage holds = image_up_to(8, 2);
    c.attach(1, holds);
    c.attach(2, holds);
    c.config_written(1, 2, 4, 0);  // the first change: the one in force is the first configuration
    c.committed(1, 2, 4, raft::Configuration::of_voters({1, 2, 3}));
    c.config_written(1, 2, 6, 4);  // 4 is committed: the next change may go
    BOOST_CHECK_THROW(c.config_written(1, 2, 8, 6), SimFailure);  // 6 is not: two changes pending
}

BOOST_AUTO_TEST_CASE(a_member_whose_removal_committed_never_leads_a_later_term) {
    QuorumChecker c(raft::Configuration::of_voters({1, 2, 3}));
    c.config_applied(config_entry(5, 4, raft::Configuration::of_voters({1, 2})));  // 3 removed in term 4
    const raft::Configuration old = raft::Configuration::of_voters({1, 2, 3});
    c.delivered(vote(2, 3, 3));
    c.elected(3, 3, old);  // an old term's election completing late: harmless
    c.delivered(vote(2, 3, 5));
    BOOST_CHECK_THROW(c.elected(3, 5, old), SimFailure);
}

BOOST_AUTO_TEST_CASE(the_configuration_a_core_says_is_in_force_is_its_logs) {
    const raft::Configuration first = raft::Configuration::of_voters({1, 2, 3});
    const raft::Configuration added = voters_and_learners({1, 2, 3}, {4});
    QuorumChecker c(first);
    SimStorage log = image_up_to(3, 1);
    BOOST_TEST((log_configuration(log, 3, first) == first));
    BOOST_TEST((log_configuration(log, 3, raft::Configuration{}).members.empty()));  // a joiner's
    log.append(config_entry(4, 1, added));
    log.append(raft::Entry{1, 5, raft::EntryType::kNoop, ""});
    BOOST_TEST((log_configuration(log, 5, first) == added));
    BOOST_TEST((log_configuration(log, 3, first) == first));
    c.check_core_configuration(1, added, log, 5, first);
    BOOST_CHECK_THROW(c.check_core_configuration(1, first, log, 5, first), SimFailure);  // its entry ignored
    // From a snapshot once the entry is compacted away.
    SimStorage snap;
    snap.install_snapshot(raft::Snapshot{raft::SnapshotMeta{6, 1, added}, ""});
    BOOST_TEST((log_configuration(snap, 6, first) == added));
    BOOST_CHECK_THROW(c.check_core_configuration(2, first, snap, 6, first), SimFailure);
}

// The liveness bound grows by a worst-case round trip per append's worth of
// entries behind: a leader-churn run's flow limits let one entry per round
// trip through, so a follower hundreds of entries behind is not stuck, only
// slow. Seed 20392: voters {1, 2} and learner 4, commit 32, member 1's log
// at 582 (member 2's at 126, member 4's at 70): 550 entries behind. Healed,
// members 2 and 4 caught up and the marker committed 5.2 s later, past the
// 40 election timeouts alone (3.24 s with its slowest tick, 8,109 us).
BOOST_AUTO_TEST_CASE(the_liveness_bound_covers_a_catch_up_of_one_entry_per_round_trip) {
    FaultConfig c;
    c.election_ticks = 5;
    c.delay_min_us = 190;
    c.delay_max_us = 12'358;
    c.persist_us_max = 1'632;
    c.max_append_bytes = 4;  // one entry per append
    const std::uint64_t slowest_tick_us = 8'109;
    const std::uint64_t elections_us = 40 * 2 * 5 * slowest_tick_us;
    BOOST_TEST(liveness_bound_us(c, 40, slowest_tick_us, 0) == elections_us);
    BOOST_TEST(elections_us < 5'200'000u);  // what seed 20392 took: the old bound alone fails it
    BOOST_TEST(liveness_bound_us(c, 40, slowest_tick_us, 550) == elections_us + 550 * (2 * 12'358u + 1'632u));
    BOOST_TEST(liveness_bound_us(c, 40, slowest_tick_us, 550) > 5'200'000u);
    // Appends of 2 KiB carry 8 entries of 256 bytes or more: an eighth of the allowance.
    c.max_append_bytes = 2048;
    BOOST_TEST(liveness_bound_us(c, 40, slowest_tick_us, 550) == elections_us + 69 * (2 * 12'358u + 1'632u));
}

BOOST_AUTO_TEST_SUITE_END()
