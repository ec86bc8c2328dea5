// Lease checkpoints (docs/guarantees.md "Checkpoints"): the leader
// checkpoints a lease at the half of its run, a new leader restarts it from
// the checkpoint, and a keepalive or re-grant of a checkpointed lease is
// answered only once a clearing checkpoint applied.
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::member;
using namespace pgfence::member::test;
namespace lock = pgfence::lock;
namespace raft = pgfence::raft;

namespace {

constexpr std::uint64_t kCpRho = 50'000;

Harness cp_harness(int members) {
    return Harness(members, kCpRho, 10000, 100, lock::kMaxTableBytes, lock::kMaxExpireMany, kDefaultExpiryWave, true,
                   true);
}

Acquire cp_acquire(std::string key, std::uint64_t lease_ms, std::string owner = "") {
    return Acquire{std::move(key), lease_ms, 0, std::move(owner)};
}

raft::NodeId cp_other(raft::NodeId l) { return l == 1 ? 2 : 1; }

raft::NodeId cp_hand_over(Harness& h, raft::NodeId from) {
    const raft::NodeId target = cp_other(from);
    BOOST_REQUIRE(h.core(from).transfer_leadership(target));
    h.settle();
    for (int i = 0; i < 100 && h.leader() != target; ++i) h.advance(Harness::kTick);
    BOOST_REQUIRE(h.leader() == target);
    h.settle();
    return target;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoints)

// checkpoint_remaining_ms: the run less the elapsed time divided by (1 + rho), rounded up.
BOOST_AUTO_TEST_CASE(the_remaining_time_counts_the_elapsed_time_as_the_least_real_time_it_can_be) {
    using std::chrono::milliseconds;
    const Time t0{std::chrono::seconds(5)};
    BOOST_TEST(checkpoint_remaining_ms(10'000, t0, t0 + milliseconds(5250), kCpRho) == 5'000u);  // 5250 / 1.05
    BOOST_TEST(checkpoint_remaining_ms(10'000, t0, t0 + milliseconds(5251), kCpRho) == 5'000u);  // rounded up
    BOOST_TEST(checkpoint_remaining_ms(10'000, t0, t0 + milliseconds(5000), 0) == 5'000u);
    BOOST_TEST(checkpoint_remaining_ms(10'000, t0, t0, kCpRho) == 10'000u);
    BOOST_TEST(checkpoint_remaining_ms(10'000, t0 + milliseconds(1), t0, kCpRho) == 10'000u);
    BOOST_TEST(checkpoint_remaining_ms(10'000, t0, t0 + milliseconds(20'000), kCpRho) == 477u);  // 10000 / 1.05 passed at most
}

BOOST_AUTO_TEST_CASE(a_lease_is_checkpointed_once_at_its_half_and_a_new_leader_restarts_from_it) {
    Harness h = cp_harness(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, cp_acquire("k", 4000))));
    h.advance(milliseconds(1900));
    BOOST_TEST(h.core(l).table().find("k")->remaining_ms == 0u);
    h.advance(milliseconds(200));  // past 2000 ms: checkpointed
    h.settle();
    const std::uint64_t remaining = h.core(l).table().find("k")->remaining_ms;
    BOOST_TEST(remaining > 2000u);
    BOOST_TEST(remaining <= 4000u - 1950u * 1'000'000 / 1'050'000);
    for (raft::NodeId id : {1, 2, 3}) BOOST_TEST(h.core(id).table().find("k")->remaining_ms == remaining);
    h.advance(milliseconds(500));  // once per run
    BOOST_TEST(h.core(l).counters().checkpoints == 1u);
    const raft::NodeId n = cp_hand_over(h, l);
    const Time restarted = h.now();
    const Lease* lease = h.core(n).lease("k");
    BOOST_REQUIRE(lease != nullptr);
    BOOST_TEST(lease->run_ms == remaining);
    BOOST_TEST((lease->deadline <= restarted + milliseconds(remaining)));
    BOOST_TEST((lease->deadline > restarted - milliseconds(500) + milliseconds(remaining)));
    BOOST_TEST(h.logged(n, "leases_from_checkpoints", "restarted", "1"));
    // Expired about `remaining` x (1 + rho) later, well before a full lease.
    h.advance(milliseconds(remaining * 105 / 100 + 300));
    BOOST_TEST(h.core(n).table().find("k") == nullptr);
    BOOST_TEST(g.token > 0u);
}

BOOST_AUTO_TEST_CASE(without_checkpoints_a_new_leader_restarts_at_full_length) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    as<Granted>(h.answer(l, h.send(l, cp_acquire("k", 4000))));
    h.advance(milliseconds(2500));
    BOOST_TEST(h.core(l).table().find("k")->remaining_ms == 0u);
    const raft::NodeId n = cp_hand_over(h, l);
    BOOST_TEST(h.core(n).lease("k")->run_ms == 4000u);
}

// The keepalive renews the lease to its full length: the stored checkpoint
// is cleared, in the log, before the answer goes out.
BOOST_AUTO_TEST_CASE(a_keepalive_of_a_checkpointed_lease_clears_the_checkpoint_before_it_answers) {
    Harness h = cp_harness(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, cp_acquire("k", 4000))));
    h.advance(milliseconds(2500));
    h.settle();
    BOOST_REQUIRE(h.core(l).table().find("k")->remaining_ms != 0u);
    const std::uint64_t applied = h.core(l).table().applied_index();
    const RequestId ka = h.send(l, KeepAlive{"k", g.token});
    const KeptAlive k = as<KeptAlive>(h.answer(l, ka));
    BOOST_TEST(k.ttl_ms == 4000u);
    BOOST_TEST(h.core(l).table().applied_index() > applied);
    BOOST_TEST(h.core(l).counters().checkpoint_clears == 1u);
    h.settle();
    for (raft::NodeId id : {1, 2, 3}) BOOST_TEST(h.core(id).table().find("k")->remaining_ms == 0u);
    // A new leader now restarts it at full length.
    const raft::NodeId n = cp_hand_over(h, l);
    BOOST_TEST(h.core(n).lease("k")->run_ms == 4000u);
    // A keepalive of a lease without a checkpoint commits nothing.
    const std::uint64_t before = h.core(n).table().applied_index();
    as<KeptAlive>(h.answer(n, h.send(n, KeepAlive{"k", g.token})));
    BOOST_TEST(h.core(n).table().applied_index() == before);
}

// A same-owner re-grant restarts the lease at full length; the table clears
// the checkpoint as it applies it.
BOOST_AUTO_TEST_CASE(a_same_owner_regrant_leaves_no_checkpoint) {
    Harness h = cp_harness(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, cp_acquire("k", 4000, "w"))));
    h.advance(milliseconds(2500));
    h.settle();
    BOOST_REQUIRE(h.core(l).table().find("k")->remaining_ms != 0u);
    const Granted again = as<Granted>(h.answer(l, h.send(l, cp_acquire("k", 4000, "w"))));
    BOOST_TEST(again.token == g.token);
    h.settle();
    for (raft::NodeId id : {1, 2, 3}) BOOST_TEST(h.core(id).table().find("k")->remaining_ms == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
