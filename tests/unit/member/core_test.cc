// The member core's lease rules, without sockets: grant, keepalive, expiry
// with and without a quorum's confirmation, a new leader restarting leases,
// waiter order, phantom release, proposal timeout, the rho margin.
#include <boost/test/unit_test.hpp>
#include <map>
#include <set>

#include "harness.h"

using namespace pgfence;
using namespace pgfence::member;
using namespace pgfence::member::test;

namespace {

Acquire acq(std::string key, std::uint64_t lease_ms, std::string owner = "", std::uint64_t wait_ms = 0) {
    return Acquire{std::move(key), lease_ms, wait_ms, std::move(owner)};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(member_core)

BOOST_AUTO_TEST_CASE(grant_answers_with_the_entry_token_and_starts_the_lease_at_apply) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const RequestId id = h.send(l, acq("k", 1000, "a"));
    const Granted g = as<Granted>(h.answer(l, id));
    BOOST_TEST(g.key == "k");
    BOOST_TEST(g.owner == "a");
    BOOST_TEST(g.lease_ms == 1000u);
    BOOST_TEST(g.token == h.core(l).table().find("k")->token);
    const Lease* lease = h.core(l).lease("k");
    BOOST_REQUIRE(lease != nullptr);
    BOOST_TEST((lease->deadline == h.now() + milliseconds(1000)));
    BOOST_TEST(h.core(l).ttl_ms("k", h.now()) == 1000u);
    BOOST_TEST(h.core(l).counters().grants == 1u);
    // A follower answers Unavailable naming the leader.
    const raft::NodeId f = l == 1 ? 2 : 1;
    BOOST_TEST(as<Unavailable>(h.answer(f, h.send(f, acq("j", 1000)))).leader == l);
}

// Each answer a log entry decided carries that entry and the table's result
// there, handed to the answering callback: a new lock's grant says it created
// the lock, a same-owner retry's that it did not; a list, the index it shows.
BOOST_AUTO_TEST_CASE(answers_carry_the_entry_and_result_that_decided_them) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const std::optional<Answer> first = h.decided(l, h.send(l, acq("k", 1000, "a")));
    BOOST_REQUIRE(first.has_value());
    const lock::Token token = as<Granted>(std::optional<Response>(first->response)).token;
    BOOST_TEST(first->index == h.core(l).table().applied_index());
    BOOST_TEST(first->term == h.core(l).raft().term());
    BOOST_TEST((first->result == lock::Result{lock::Granted{token, true, 1000}}));
    const std::optional<Answer> retry = h.decided(l, h.send(l, acq("k", 1000, "a")));
    BOOST_REQUIRE(retry.has_value());
    BOOST_TEST(retry->index == first->index + 1);
    BOOST_TEST((retry->result == lock::Result{lock::Granted{token, false, 1000}}));
    const std::optional<Answer> other = h.decided(l, h.send(l, acq("k", 1000, "b")));
    BOOST_REQUIRE(other.has_value());
    BOOST_TEST((other->result == lock::Result{lock::GrantRejected{token}}));
    const std::optional<Answer> released = h.decided(l, h.send(l, Release{"k", token}));
    BOOST_REQUIRE(released.has_value());
    BOOST_TEST(std::holds_alternative<Released>(released->response));
    BOOST_TEST((released->result == lock::Result{lock::Released{}}));
    const std::optional<Answer> list = h.decided(l, h.send(l, ListLocks{}));
    BOOST_REQUIRE(list.has_value());
    BOOST_TEST(list->index == h.core(l).table().applied_index());
    BOOST_TEST(list->term == 0u);
    BOOST_TEST((list->result == lock::Result{lock::Noop{}}));
    // A keepalive is decided by no entry.
    const lock::Token again = as<Granted>(h.answer(l, h.send(l, acq("k", 1000, "a")))).token;
    const std::optional<Answer> kept = h.decided(l, h.send(l, KeepAlive{"k", again}));
    BOOST_REQUIRE(kept.has_value());
    BOOST_TEST(std::holds_alternative<KeptAlive>(kept->response));
    BOOST_TEST(kept->index == 0u);
}

BOOST_AUTO_TEST_CASE(expire_is_proposed_only_after_lease_times_one_plus_rho) {
    Harness h(3, 50'000);  // rho 5%: 1000 ms lease -> Expire from 1050 ms
    const raft::NodeId l = h.elect();
    as<Granted>(h.answer(l, h.send(l, acq("k", 1000))));
    h.advance(milliseconds(1000));  // nominal deadline passed, margin not
    BOOST_TEST(h.core(l).table().find("k") != nullptr);
    BOOST_TEST(h.core(l).ttl_ms("k", h.now()) == 0u);
    BOOST_TEST(h.core(l).counters().expires_proposed == 0u);
    h.advance(milliseconds(100));
    BOOST_TEST(h.core(l).counters().expires_proposed == 1u);
    BOOST_TEST(h.core(l).table().find("k") == nullptr);
    BOOST_TEST(h.core(l).counters().expiries_existed == 1u);
    BOOST_TEST(h.logged(l, "expire_proposed", "margin_ms", "50"));
}

BOOST_AUTO_TEST_CASE(with_rho_zero_expire_comes_at_the_nominal_deadline) {
    Harness h(3, 0);
    const raft::NodeId l = h.elect();
    as<Granted>(h.answer(l, h.send(l, acq("k", 1000))));
    h.advance(milliseconds(950));
    BOOST_TEST(h.core(l).counters().expires_proposed == 0u);
    h.advance(milliseconds(100));
    BOOST_TEST(h.core(l).counters().expires_proposed == 1u);
}

BOOST_AUTO_TEST_CASE(expire_needs_a_quorum_to_confirm_leadership) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    as<Granted>(h.answer(l, h.send(l, acq("k", 1000))));
    h.isolate(l);
    h.advance(milliseconds(1500));
    // The cut-off leader never confirmed leadership after the deadline: no Expire.
    BOOST_TEST(h.core(l).counters().expires_proposed == 0u);
    BOOST_TEST(h.core(l).table().find("k") != nullptr);
    h.heal();
}

BOOST_AUTO_TEST_CASE(keepalive_restarts_the_lease_and_fails_once_expire_is_proposed) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, acq("k", 1000))));
    h.advance(milliseconds(600));
    const KeptAlive k = as<KeptAlive>(h.answer(l, h.send(l, KeepAlive{"k", g.token})));
    BOOST_TEST(k.ttl_ms == 1000u);
    BOOST_TEST((h.core(l).lease("k")->deadline == h.now() + milliseconds(1000)));
    h.advance(milliseconds(600));  // 1200 ms after the grant: alive thanks to the keepalive
    BOOST_TEST(h.core(l).table().find("k") != nullptr);
    BOOST_TEST(h.core(l).counters().keepalives == 1u);
    // A wrong token is not held.
    as<NotHeld>(h.answer(l, h.send(l, KeepAlive{"k", g.token + 1})));
    // Past expire_at the Expire is proposed: a keepalive is too late.
    h.advance(milliseconds(500));
    BOOST_TEST(h.core(l).counters().expires_proposed == 1u);
    as<NotHeld>(h.answer(l, h.send(l, KeepAlive{"k", g.token})));
}

BOOST_AUTO_TEST_CASE(a_new_leader_restarts_every_lease_at_its_full_length) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    as<Granted>(h.answer(l, h.send(l, acq("k", 2000))));
    h.advance(milliseconds(1500));
    const raft::NodeId target = l == 1 ? 2 : 1;
    BOOST_REQUIRE(h.core(l).transfer_leadership(target));
    const Time asked = h.now();
    h.settle();
    for (int i = 0; i < 100 && h.leader() != target; ++i) h.advance(Harness::kTick);
    BOOST_REQUIRE(h.leader() == target);
    const Lease* lease = h.core(target).lease("k");
    BOOST_REQUIRE(lease != nullptr);
    // Started when it became leader, not when the old leader granted it.
    BOOST_TEST((lease->deadline >= asked + milliseconds(2000)));
    BOOST_TEST(h.core(l).lease("k") == nullptr);  // the old leader dropped its leases
}

BOOST_AUTO_TEST_CASE(waiters_are_granted_in_arrival_order) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted a = as<Granted>(h.answer(l, h.send(l, acq("k", 5000, "a"))));
    const RequestId b = h.send(l, acq("k", 5000, "b", 10000));
    const RequestId c = h.send(l, acq("k", 5000, "c", 10000));
    BOOST_TEST(h.core(l).waiter_count() == 2u);
    BOOST_TEST(!h.answer(l, b).has_value());
    as<Released>(h.answer(l, h.send(l, Release{"k", a.token})));
    const Granted gb = as<Granted>(h.answer(l, b));
    BOOST_TEST(gb.owner == "b");
    BOOST_TEST(!h.answer(l, c).has_value());
    as<Released>(h.answer(l, h.send(l, Release{"k", gb.token})));
    const Granted gc = as<Granted>(h.answer(l, c));
    BOOST_TEST(gc.owner == "c");
    BOOST_TEST(gc.token > gb.token);
    BOOST_TEST(h.core(l).counters().waiter_grants == 2u);
}

BOOST_AUTO_TEST_CASE(a_waiter_times_out_and_a_gone_waiter_gives_up_its_place) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted a = as<Granted>(h.answer(l, h.send(l, acq("k", 60000, "a"))));
    const RequestId b = h.send(l, acq("k", 5000, "b", 10000));
    const RequestId c = h.send(l, acq("k", 5000, "c", 1000));
    BOOST_TEST(h.node(l).watched.count(b) == 1u);
    h.advance(milliseconds(1100));
    BOOST_TEST(as<Held>(h.answer(l, c)).message == "wait timed out");
    const RequestId d = h.send(l, acq("k", 5000, "d", 10000));
    h.core(l).client_gone(b, h.now());
    as<Released>(h.answer(l, h.send(l, Release{"k", a.token})));
    BOOST_TEST(!h.answer(l, b).has_value());
    BOOST_TEST(as<Granted>(h.answer(l, d)).owner == "d");
}

BOOST_AUTO_TEST_CASE(a_grant_that_could_not_be_written_is_released) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    h.auto_written = false;
    const RequestId id = h.send(l, acq("k", 5000));
    const Granted g = as<Granted>(h.answer(l, id));
    BOOST_TEST(h.core(l).table().find("k") != nullptr);
    h.core(l).response_written(id, false, h.now());
    h.settle();
    BOOST_TEST(h.core(l).table().find("k") == nullptr);
    BOOST_TEST(h.core(l).counters().phantom_releases == 1u);
    BOOST_TEST(h.logged(l, "phantom_release", "token", std::to_string(g.token)));
}

BOOST_AUTO_TEST_CASE(a_grant_for_a_client_gone_before_it_applied_is_released_unanswered) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    h.isolate(l);  // the Grant waits for the quorum
    const RequestId c = h.send(l, acq("j", 5000, "c"));
    BOOST_TEST(!h.answer(l, c).has_value());
    h.core(l).client_gone(c, h.now());
    h.heal();
    h.advance(milliseconds(200));
    BOOST_TEST(!h.answer(l, c).has_value());
    BOOST_TEST(h.core(l).table().find("j") == nullptr);
    BOOST_TEST(h.core(l).counters().grants == 1u);
    BOOST_TEST(h.core(l).counters().phantom_releases == 1u);
    BOOST_TEST(h.core(l).counters().expiries_existed == 1u);  // expired through a quorum round
}

BOOST_AUTO_TEST_CASE(a_retry_that_got_the_same_token_back_keeps_the_lock_its_gone_attempt_created) {
    // The client's first acquire times out and it closes that connection; its
    // retry (same owner) is proposed before the first applies. The first
    // creates the lock, the retry gets the same token back (idempotent): the
    // first one's phantom must not take the lock from under the retry.
    Harness h(3);
    const raft::NodeId l = h.elect();
    h.isolate(l);
    const RequestId first = h.send(l, acq("k", 5000, "o"));
    h.core(l).client_gone(first, h.now());
    const RequestId retry = h.send(l, acq("k", 5000, "o"));
    h.heal();
    h.advance(milliseconds(300));
    BOOST_TEST(!h.answer(l, first).has_value());
    const Granted g = as<Granted>(h.answer(l, retry));
    BOOST_REQUIRE(h.core(l).table().find("k") != nullptr);
    BOOST_TEST(h.core(l).table().find("k")->token == g.token);
    BOOST_TEST(h.core(l).counters().phantom_releases == 1u);
    BOOST_TEST(h.core(l).counters().expires_proposed == 0u);
    h.advance(milliseconds(2000));
    BOOST_TEST(h.core(l).table().find("k") != nullptr);  // the retry's lease runs its full length
}

BOOST_AUTO_TEST_CASE(a_late_failed_write_does_not_cut_the_lease_a_retry_restarted) {
    // The first answer's write fails only after the same owner's retry got the
    // same token back (its re-grant restarted the lease): the lock stays.
    Harness h(3);
    const raft::NodeId l = h.elect();
    h.auto_written = false;
    const RequestId first = h.send(l, acq("k", 5000, "o"));
    const Granted g = as<Granted>(h.answer(l, first));
    h.advance(milliseconds(100));
    const RequestId retry = h.send(l, acq("k", 5000, "o"));
    BOOST_TEST(as<Granted>(h.answer(l, retry)).token == g.token);
    h.core(l).response_written(retry, true, h.now());
    h.core(l).response_written(first, false, h.now());
    h.advance(milliseconds(2000));
    BOOST_REQUIRE(h.core(l).table().find("k") != nullptr);
    BOOST_TEST(h.core(l).counters().expires_proposed == 0u);
    BOOST_TEST(h.logged(l, "phantom_release", "reason", "the lease was answered to a client"));
}

// The first acquire and the same owner's retry commit in
// one batch and apply at one `now`, so both answers name one lease with one
// deadline; the first answer is then not written (its client gave up). The
// lease answered to the retry must run its full length, whichever of the
// two writes is reported first.
BOOST_AUTO_TEST_CASE(a_failed_write_does_not_cut_a_lease_answered_to_a_retry_of_the_same_batch) {
    for (const bool failed_first : {false, true}) {
        BOOST_TEST_CONTEXT("the failed write reported " << (failed_first ? "first" : "second")) {
            Harness h(3);
            const raft::NodeId l = h.elect();
            h.auto_written = false;
            h.isolate(l);  // both Grants wait for the quorum: they commit together
            const RequestId first = h.send(l, acq("k", 5000, "o"));
            const RequestId retry = h.send(l, acq("k", 5000, "o"));
            h.heal();
            h.advance(Harness::kTick);
            const Granted a = as<Granted>(h.answer(l, first));
            const Granted b = as<Granted>(h.answer(l, retry));
            BOOST_REQUIRE(a.token == b.token);
            const Time deadline = h.core(l).lease("k")->deadline;
            if (failed_first) h.core(l).response_written(first, false, h.now());
            h.core(l).response_written(retry, true, h.now());
            if (!failed_first) h.core(l).response_written(first, false, h.now());
            BOOST_TEST((h.core(l).lease("k")->deadline == deadline));
            h.advance(milliseconds(4500));  // short of the retry's 5000 ms
            BOOST_REQUIRE(h.core(l).table().find("k") != nullptr);
            BOOST_TEST(h.core(l).table().find("k")->token == b.token);
            BOOST_TEST(h.core(l).counters().expires_proposed == 0u);
            BOOST_TEST(h.core(l).counters().phantom_releases == 0u);
            h.advance(milliseconds(1000));  // past 5000 ms + the margin: it ends as any lease
            BOOST_TEST(h.core(l).table().find("k") == nullptr);
        }
    }
}

// Each lease's kid is the key that signed the proof last
// handed out for it; a re-grant after a rotation moves it to the new key, a
// keepalive (no proof) does not, and a new leader cannot know it.
BOOST_AUTO_TEST_CASE(a_lease_reports_the_kid_of_its_last_answer_and_moves_on_a_re_grant_after_rotation) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    for (raft::NodeId id = 1; id <= 3; ++id) h.core(id).set_proof_kid("00000000000000aa");
    const Granted g = as<Granted>(h.answer(l, h.send(l, acq("k", 5000, "o"))));
    as<Granted>(h.answer(l, h.send(l, acq("j", 5000))));
    BOOST_TEST(h.core(l).lease_kid(*h.core(l).lease("k")) == "00000000000000aa");
    BOOST_TEST(h.core(l).leases_by_kid().at("00000000000000aa") == 2u);
    for (raft::NodeId id = 1; id <= 3; ++id) h.core(id).set_proof_kid("00000000000000bb");  // SIGHUP, a new key
    as<KeptAlive>(h.answer(l, h.send(l, KeepAlive{"k", g.token})));
    BOOST_TEST(h.core(l).lease_kid(*h.core(l).lease("k")) == "00000000000000aa");  // a keepalive carries no proof
    BOOST_TEST(as<Granted>(h.answer(l, h.send(l, acq("k", 5000, "o")))).token == g.token);
    BOOST_TEST(h.core(l).lease_kid(*h.core(l).lease("k")) == "00000000000000bb");
    BOOST_TEST(h.core(l).leases_by_kid().at("00000000000000aa") == 1u);
    BOOST_TEST(h.core(l).leases_by_kid().at("00000000000000bb") == 1u);
    ListLocks all;
    const Locks listed = as<Locks>(h.answer(l, h.send(l, all)));
    BOOST_REQUIRE(listed.locks.size() == 2u);
    for (const LockView& v : listed.locks) {
        BOOST_TEST(v.kid == (v.lock.key == "k" ? "00000000000000bb" : "00000000000000aa"));
    }
    h.send(l, Release{"j", h.core(l).table().find("j")->token});
    BOOST_TEST(h.core(l).leases_by_kid().count("00000000000000aa") == 0u);  // ended: counted no more
    // A new leader restarts the leases, answered by a former leader: unknown.
    const raft::NodeId target = l == 1 ? 2 : 1;
    BOOST_REQUIRE(h.core(l).transfer_leadership(target));
    for (int i = 0; i < 100 && !h.core(target).is_leader(); ++i) h.advance(Harness::kTick);
    BOOST_REQUIRE(h.core(target).is_leader());
    h.core(target).request(900, ListLocks{}, h.now());
    h.settle();
    BOOST_TEST(as<Locks>(h.answer(target, 900)).locks.front().kid == std::string(kUnknownProofKid));
    BOOST_TEST(h.core(target).leases_by_kid().at(std::string(kUnknownProofKid)) == 1u);
    BOOST_TEST(h.core(l).leases_by_kid().empty());
}

BOOST_AUTO_TEST_CASE(a_proposal_that_never_commits_is_answered_unavailable_after_the_timeout) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, acq("k", 60000))));
    // A leader that cannot reach anyone keeps its term until check-quorum
    // steps it down; its proposal never commits. Whichever comes first — the
    // step-down or the 10 s timeout — the client is told Unavailable.
    h.isolate(l);
    const RequestId id = h.send(l, Release{"k", g.token});
    BOOST_TEST(!h.answer(l, id).has_value());
    h.advance(milliseconds(10'500));
    as<Unavailable>(h.answer(l, id));
    BOOST_TEST(h.core(l).proposal_count() == 0u);
    BOOST_TEST(h.core(l).counters().proposal_timeouts == 1u);
}

BOOST_AUTO_TEST_CASE(a_keepalive_on_a_new_leader_finds_the_lease_it_restarted) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const Granted g = as<Granted>(h.answer(l, h.send(l, acq("k", 5000))));
    const raft::NodeId target = l == 1 ? 2 : 1;
    BOOST_REQUIRE(h.core(l).transfer_leadership(target));
    for (int i = 0; i < 100 && h.core(target).raft().role() != raft::Role::kLeader; ++i) h.advance(Harness::kTick);
    BOOST_REQUIRE(h.core(target).is_leader());
    h.core(target).request(500, KeepAlive{"k", g.token}, h.now());
    h.settle();
    BOOST_TEST(as<KeptAlive>(h.answer(target, 500)).token == g.token);
}

BOOST_AUTO_TEST_CASE(client_gone_is_kept_only_for_a_grant_in_flight) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const RequestId done = h.send(l, acq("k", 5000));
    as<Granted>(h.answer(l, done));
    h.core(l).client_gone(done, h.now());  // answered already: nothing to remember
    h.core(l).client_gone(12345, h.now());  // never seen
    BOOST_TEST(h.core(l).check_invariants() == "");
    // A later request reusing the answered id is answered, not released.
    h.core(l).request(done, Acquire{"j", 5000, 0, ""}, h.now());
    h.settle();
    BOOST_TEST(as<Granted>(h.answer(l, done)).key == "j");
    BOOST_TEST(h.core(l).counters().phantom_releases == 0u);
}

BOOST_AUTO_TEST_CASE(a_backup_holds_every_grant_answered_and_needs_a_confirmed_leader) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    const lock::Token t = as<Granted>(h.answer(l, h.send(l, acq("k", 60000)))).token;
    const Backup b = as<Backup>(h.answer(l, h.send(l, TakeBackup{})));
    BOOST_REQUIRE(b.snapshot != nullptr);
    BOOST_TEST(b.snapshot->meta.index == h.core(l).table().applied_index());
    BOOST_TEST((b.snapshot->meta.config.voters() == std::vector<raft::NodeId>{1, 2, 3}));
    auto table = lock::LockTable::restore(b.snapshot->data);
    BOOST_REQUIRE(std::holds_alternative<lock::LockTable>(table));
    BOOST_TEST(std::get<lock::LockTable>(table).find("k")->token == t);
    BOOST_TEST(std::get<lock::LockTable>(table).last_token() == t);
    // A follower sends the caller to the leader; a cut-off leader cannot confirm it leads.
    const raft::NodeId f = l == 1 ? 2 : 1;
    BOOST_TEST(as<Unavailable>(h.answer(f, h.send(f, TakeBackup{}))).leader == l);
    h.isolate(l);
    const RequestId cut_off = h.send(l, TakeBackup{});
    h.advance(milliseconds(1500));
    const std::optional<Response> late = h.answer(l, cut_off);
    BOOST_TEST((!late || std::holds_alternative<Unavailable>(*late)));
    h.heal();
}

// 40 locks with 500-byte keys: about 21 KB of table.
void fill_big(Harness& h, raft::NodeId l) {
    for (int i = 0; i < 40; ++i) {
        as<Granted>(h.answer(l, h.send(l, acq(std::to_string(1000 + i) + std::string(496, 'k'), 60000))));
    }
}

// Grants and releases a small key until the leader has taken one snapshot
// more (or `most` cycles ran); returns the cycles it took.
int cycles_to_next_snapshot(Harness& h, raft::NodeId l, int most) {
    const std::uint64_t before = h.core(l).counters().snapshots;
    for (int i = 0; i < most; ++i) {
        if (h.core(l).counters().snapshots > before) return i;
        const lock::Token t = as<Granted>(h.answer(l, h.send(l, acq("k", 60000)))).token;
        as<Released>(h.answer(l, h.send(l, Release{"k", t})));
    }
    return most;
}

BOOST_AUTO_TEST_CASE(a_snapshot_waits_for_log_bytes_as_large_as_the_table) {
    // Entry count alone (pct 0): a snapshot within 16 small entries.
    {
        Harness h(3, 50'000, 16, 0);
        const raft::NodeId l = h.elect();
        fill_big(h, l);
        BOOST_TEST(cycles_to_next_snapshot(h, l, 20) <= 9);
    }
    // Size-aware (pct 100): once the fill's own entries are snapshotted, the
    // 21 KB table is written again only after about as many bytes of small
    // entries, counted with kEntryOverheadBytes each (a grant and a release
    // of "k": 34 bytes of commands, 86 counted), not after 16 entries.
    Harness h(3, 50'000, 16, 100);
    const raft::NodeId l = h.elect();
    fill_big(h, l);
    const std::uint64_t table = h.core(l).table().bytes();
    BOOST_TEST_REQUIRE(table > 20'000u);
    BOOST_TEST_REQUIRE(cycles_to_next_snapshot(h, l, 400) < 400);  // the one the fill's log is due
    const int expected = static_cast<int>(table / (34 + 2 * kEntryOverheadBytes));
    const int cycles = cycles_to_next_snapshot(h, l, 2000);
    BOOST_TEST(cycles >= expected * 9 / 10, cycles << " cycles, expected about " << expected);
    BOOST_TEST(cycles <= expected * 11 / 10, cycles << " cycles, expected about " << expected);
    BOOST_TEST(h.core(l).check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(a_full_table_answers_table_full_and_the_next_waiter_is_told_at_once) {
    // Room for two ownerless one-letter locks.
    Harness h(3, 50'000, 10000, 100, 2 * lock::lock_bytes("k", ""));
    const raft::NodeId l = h.elect();
    const lock::Token k = as<Granted>(h.answer(l, h.send(l, acq("k", 60000)))).token;
    as<Granted>(h.answer(l, h.send(l, acq("x", 60000))));
    BOOST_TEST(as<TableFull>(h.answer(l, h.send(l, acq("y", 60000)))).message.find("limit is 50") != std::string::npos);
    BOOST_TEST(h.core(l).counters().grants_table_full == 1u);
    // Two waiters on "k" whose owners make their locks larger than the room
    // "k" leaves when it goes: both are told when it is released, not when
    // their waits run out.
    const RequestId w1 = h.send(l, acq("k", 60000, "owner-1", 30000));
    const RequestId w2 = h.send(l, acq("k", 60000, "owner-2", 30000));
    BOOST_TEST(h.core(l).waiter_count() == 2u);
    as<Released>(h.answer(l, h.send(l, Release{"k", k})));
    as<TableFull>(h.answer(l, w1));
    as<TableFull>(h.answer(l, w2));
    BOOST_TEST(h.core(l).waiter_count() == 0u);
    BOOST_TEST(h.core(l).counters().grants_table_full == 3u);
    // A lock that fits is still granted.
    as<Granted>(h.answer(l, h.send(l, acq("z", 60000))));
    BOOST_TEST(h.core(l).check_invariants() == "");
}

// An expiry storm: leases that ran out together share one quorum round and
// go out as ExpireMany entries of up to lock::kMaxExpireMany locks, not one
// entry each.
BOOST_AUTO_TEST_CASE(leases_due_together_expire_in_batches_of_up_to_the_limit) {
    Harness h(3, 0, 10000, 100, lock::kMaxTableBytes, lock::kMaxExpireMany, kMaxExpiryWave);  // one wave
    const raft::NodeId l = h.elect();
    const std::size_t n = 2 * lock::kMaxExpireMany + 5;  // three batches
    std::vector<RequestId> ids;
    for (std::size_t i = 0; i < n; ++i) ids.push_back(h.send(l, acq("storm-" + std::to_string(i), 1000)));
    for (RequestId id : ids) as<Granted>(h.answer(l, id));
    BOOST_TEST_REQUIRE(h.core(l).table().size() == n);
    // A lease kept alive meanwhile is not part of the storm.
    const lock::Token kept = h.core(l).table().find("storm-0")->token;
    h.advance(milliseconds(500));
    as<KeptAlive>(h.answer(l, h.send(l, KeepAlive{"storm-0", kept})));
    const raft::Index before = h.core(l).table().applied_index();
    h.advance(milliseconds(600));  // every other lease ran out
    BOOST_TEST(h.core(l).table().size() == 1u);
    BOOST_TEST(h.core(l).table().find("storm-0") != nullptr);
    BOOST_TEST(h.core(l).counters().expires_proposed == n - 1);
    BOOST_TEST(h.core(l).counters().expiries_existed == n - 1);
    // Three entries, not n - 1 (one Expire each), carried them.
    BOOST_TEST(h.core(l).table().applied_index() - before == 3u);
    for (raft::NodeId id = 1; id <= 3; ++id) BOOST_TEST(h.core(id).table().size() == 1u);
    BOOST_TEST(h.logged(l, "expire_proposed", "batch", std::to_string(lock::kMaxExpireMany)));
    BOOST_TEST(h.core(l).check_invariants() == "");
    // One line per entry proposed and per entry applied (per lock only at
    // debug level: the next test).
    BOOST_TEST(h.count_logged(l, "expire_proposed") == 3u);
    BOOST_TEST(h.count_logged(l, "expire") == 3u);
    BOOST_TEST(h.logged(l, "expire", "locks", std::to_string(lock::kMaxExpireMany)));
    BOOST_TEST(h.logged(l, "expire", "expired", std::to_string(lock::kMaxExpireMany)));
    BOOST_TEST(h.logged(l, "expire", "index", std::to_string(before + 1)));
    BOOST_TEST(h.logged(l, "expire_proposed", "index", std::to_string(before + 1)));
}

// With debug lines on, each lock of an ExpireMany also gets an
// expire_proposed_lock line on the leader and an expire_lock line where it
// applies: its key, token, owner, whether it existed, the entry's index.
BOOST_AUTO_TEST_CASE(at_debug_level_each_expired_lock_gets_its_own_lines) {
    Harness h(3, [](Config& c) { c.debug_logs = true; });
    const raft::NodeId l = h.elect();
    std::map<std::string, lock::Token> tokens;
    for (int i = 0; i < 3; ++i) {
        const std::string key = "d" + std::to_string(i);
        tokens[key] = as<Granted>(h.answer(l, h.send(l, acq(key, 1000, "owner-" + std::to_string(i))))).token;
    }
    const raft::Index entry = h.core(l).table().applied_index() + 1;
    h.advance(milliseconds(1200));
    BOOST_TEST_REQUIRE(h.core(l).table().size() == 0u);
    BOOST_TEST(h.count_logged(l, "expire") == 1u);  // one entry
    auto field = [](const LogLine& line, std::string_view name) {
        for (std::size_t i = 0; i < line.count; ++i) {
            if (name == line.fields[i].first) return line.fields[i].second;
        }
        return std::string("<none>");
    };
    for (const char* event : {"expire_proposed_lock", "expire_lock"}) {
        std::map<std::string, std::string> owners;  // key -> owner, one line each
        for (const LogLine& line : h.node(l).logs) {
            if (std::string_view(line.event) != event) continue;
            BOOST_TEST((line.level == LogLevel::kDebug));
            const std::string key = field(line, "key");
            BOOST_TEST_REQUIRE(tokens.count(key) == 1u);
            BOOST_TEST(field(line, "token") == std::to_string(tokens[key]));
            BOOST_TEST(field(line, "index") == std::to_string(entry));
            if (std::string_view(event) == "expire_lock") BOOST_TEST(field(line, "existed") == "true");
            BOOST_TEST(owners.emplace(key, field(line, "owner")).second, event << " twice for " << key);
        }
        BOOST_TEST((owners == std::map<std::string, std::string>{
                        {"d0", "owner-0"}, {"d1", "owner-1"}, {"d2", "owner-2"}}),
                   event);
    }
}

// A storm larger than one wave (Config::expiry_wave) goes in waves back to
// back: the next is taken when the last Expire of the one before applies,
// not at the next tick, so every lease is expired within the tick it ran
// out in (here, where rounds and commits take no time).
BOOST_AUTO_TEST_CASE(a_storm_larger_than_a_wave_expires_wave_after_wave_without_waiting_for_ticks) {
    const std::size_t wave = 8;
    Harness h(3, 0, 10000, 100, lock::kMaxTableBytes, 3, wave);
    const raft::NodeId l = h.elect();
    const std::size_t n = 2 * wave + 3;  // three waves, of three or two entries each
    std::vector<RequestId> ids;
    for (std::size_t i = 0; i < n; ++i) ids.push_back(h.send(l, acq("wave-" + std::to_string(i), 1000)));
    for (RequestId id : ids) as<Granted>(h.answer(l, id));
    BOOST_TEST_REQUIRE(h.core(l).table().size() == n);
    h.advance(milliseconds(950));
    BOOST_TEST(h.core(l).table().size() == n);
    h.advance(Harness::kTick);  // every lease runs out at this tick
    BOOST_TEST(h.core(l).table().size() == 0u);
    BOOST_TEST(h.core(l).counters().expires_proposed == n);
    BOOST_TEST(h.core(l).counters().expire_batches == 7u);  // 3 + 3 + 1 (3, 3, 2 / 3, 3, 2 / 3)
    BOOST_TEST(h.core(l).check_invariants() == "");
}

// The expiry wave, the batch and the snapshot slice are bounded: a core is
// not built with a value outside them.
BOOST_AUTO_TEST_CASE(a_config_outside_the_wave_batch_or_slice_bounds_is_refused) {
    auto build = [](auto set) {
        Config c;
        c.raft.id = 1;
        c.raft.members = {1};
        c.raft.cluster_id = 7;
        set(c);
        raft::MemoryStorage storage;
        Core core(std::move(c), storage);
    };
    BOOST_CHECK_NO_THROW(build([](Config& c) { c.expiry_wave = kMaxExpiryWave; }));
    BOOST_CHECK_THROW(build([](Config& c) { c.expiry_wave = 0; }), std::invalid_argument);
    BOOST_CHECK_THROW(build([](Config& c) { c.expiry_wave = kMaxExpiryWave + 1; }), std::invalid_argument);
    BOOST_CHECK_THROW(build([](Config& c) { c.max_expire_batch = 0; }), std::invalid_argument);
    BOOST_CHECK_THROW(build([](Config& c) { c.max_expire_batch = lock::kMaxExpireMany + 1; }), std::invalid_argument);
    BOOST_CHECK_THROW(build([](Config& c) { c.snapshot_slice_locks = 0; }), std::invalid_argument);
}

// With max_expire_batch 1 (while upgrading from a release before
// ExpireMany) leases that ran out together go out one Expire each.
BOOST_AUTO_TEST_CASE(with_a_batch_of_one_each_lease_is_expired_by_an_expire_of_its_own) {
    Harness h(3, 0, 10000, 100, lock::kMaxTableBytes, 1);
    const raft::NodeId l = h.elect();
    for (int i = 0; i < 5; ++i) as<Granted>(h.answer(l, h.send(l, acq("k" + std::to_string(i), 1000))));
    const raft::Index before = h.core(l).table().applied_index();
    h.advance(milliseconds(1100));
    BOOST_TEST(h.core(l).table().size() == 0u);
    BOOST_TEST(h.core(l).table().applied_index() - before == 5u);
    BOOST_TEST(h.core(l).counters().expire_batches == 0u);
}

// An Expire the leader cannot propose (its proposals are full: here its
// appends are lost, so nothing it proposes applies) is logged
// expire_not_proposed and its lease runs again, to expire at a later tick
// once proposals drain.
BOOST_AUTO_TEST_CASE(an_expire_that_cannot_be_proposed_runs_on_and_expires_later) {
    Harness h(3, [](Config& c) { c.max_proposals = 2; });
    const raft::NodeId l = h.elect();
    as<Granted>(h.answer(l, h.send(l, acq("k", 1000))));
    // The leader's appends are lost; its heartbeats are not: it keeps leading
    // and confirms its expiry rounds, but commits nothing.
    h.drop = [l](const raft::Message& m) { return m.from == l && std::holds_alternative<raft::AppendRequest>(m.body); };
    const RequestId p0 = h.send(l, acq("p0", 1000));
    const RequestId p1 = h.send(l, acq("p1", 1000));  // max_proposals pending
    h.advance(milliseconds(1200));  // k ran out (1,050 ms with rho)
    BOOST_TEST_REQUIRE(h.core(l).leader_term() != 0u);
    BOOST_TEST(h.logged(l, "expire_not_proposed", "key", "k"));
    BOOST_TEST(h.logged(l, "expire_not_proposed", "error", raft::to_string(raft::ProposeError::kBacklog)));
    BOOST_TEST(h.core(l).counters().expires_proposed == 0u);
    const Lease* lease = h.core(l).lease("k");
    BOOST_TEST_REQUIRE(lease != nullptr);
    BOOST_TEST((lease->phase == LeasePhase::kRunning));
    BOOST_TEST(h.core(l).table().find("k") != nullptr);
    BOOST_TEST(h.core(l).check_invariants() == "");
    // Appends get through again: the proposals apply, and k expires.
    h.drop = nullptr;
    for (int i = 0; i < 200 && h.core(l).table().find("k") != nullptr; ++i) h.advance(Harness::kTick);
    BOOST_TEST(h.core(l).table().find("k") == nullptr);
    BOOST_TEST(h.core(l).counters().expires_proposed >= 1u);
    as<Granted>(h.answer(l, p0));
    as<Granted>(h.answer(l, p1));
    BOOST_TEST(h.core(l).check_invariants() == "");
}

// A round that fails (the leader is cut off) leaves the whole batch running:
// none is proposed, and once the leader is heard again they expire.
BOOST_AUTO_TEST_CASE(a_batch_whose_round_fails_runs_on_and_expires_later) {
    Harness h(3, 0);
    const raft::NodeId l = h.elect();
    for (int i = 0; i < 5; ++i) as<Granted>(h.answer(l, h.send(l, acq("k" + std::to_string(i), 1000))));
    h.isolate(l);
    h.advance(milliseconds(1200));
    BOOST_TEST(h.core(l).counters().expires_proposed == 0u);
    BOOST_TEST(h.core(l).check_invariants() == "");
    h.heal();
    auto expired = [&h] { return h.leader() != raft::kNoNode && h.core(h.leader()).table().size() == 0; };
    for (int i = 0; i < 200 && !expired(); ++i) h.advance(Harness::kTick);
    BOOST_TEST(expired());
}

// The leader `l` of `h` proposes "a" (request 901) and keeps its write
// outstanding, then "b" (902) and runs a turn: the two turns' effects.
struct WriteOutstanding {
    Effects first;   // the Persist of "a", its appends
    Effects second;  // the turn after "b" was proposed
    raft::Index a_index = 0;
};
static WriteOutstanding propose_b_while_a_is_written(Harness& h, raft::NodeId l) {
    Core& c = h.core(l);
    WriteOutstanding w;
    c.request(901, acq("a", 1000, "x"), h.now());
    c.turn(h.now());
    w.first = c.take_effects();
    BOOST_REQUIRE(w.first.persist);  // the write of "a" stays outstanding
    w.a_index = w.first.persist->entries.back().index;
    c.request(902, acq("b", 1000, "x"), h.now());
    c.turn(h.now());
    w.second = c.take_effects();
    return w;
}

// The followers that `fx` sends an AppendRequest whose entries end at `last`.
static std::set<raft::NodeId> appended_up_to(const Effects& fx, raft::Index last) {
    std::set<raft::NodeId> to;
    for (const raft::Message& m : fx.send) {
        const auto* req = std::get_if<raft::AppendRequest>(&m.body);
        if (req != nullptr && !req->entries.empty() && req->entries.back().index == last) to.insert(m.to);
    }
    return to;
}

// Thesis §10.2.1, with Config::early_appends: an entry proposed while the
// leader's write is outstanding goes to the followers at once (turn() sends
// it), and is answered only once it is durable on the leader too.
BOOST_AUTO_TEST_CASE(a_leader_sends_entries_proposed_while_its_write_is_outstanding) {
    Harness h(3, [](Config& cfg) { cfg.early_appends = true; });
    const raft::NodeId l = h.elect();
    Core& c = h.core(l);
    auto [first, second, a_index] = propose_b_while_a_is_written(h, l);
    BOOST_TEST(!second.persist);
    BOOST_TEST(second.respond.empty());
    std::set<raft::NodeId> sent_to;
    for (const raft::Message& m : second.send) {
        const auto* req = std::get_if<raft::AppendRequest>(&m.body);
        if (req == nullptr || req->entries.empty()) continue;
        sent_to.insert(m.to);
        BOOST_TEST(req->entries.back().index == a_index + 1);
    }
    BOOST_TEST(sent_to.size() == 2u);
    for (const Effects* fx : {&first, &second}) {
        for (const raft::Message& m : fx->send) h.core(m.to).step(m, h.now());
    }
    h.settle();  // both followers hold a and b durably; the leader has neither
    BOOST_TEST(!h.answer(l, 901).has_value());
    BOOST_TEST(!h.answer(l, 902).has_value());
    raft::MemoryStorage& storage = h.node(l).storage;
    storage.append(first.persist->entries);
    if (first.persist->hard_state) storage.set_hard_state(*first.persist->hard_state);
    c.persist_started(h.now());
    c.persisted(h.now());
    h.settle();  // the next Ready writes "b" on the leader
    as<Granted>(h.answer(l, 901));
    as<Granted>(h.answer(l, 902));
    BOOST_TEST(c.table().applied_index() == a_index + 1);
}

// With Config::early_appends off (the default), an entry proposed while the
// leader's write is outstanding leaves only with the next Ready, once that
// write is durable.
BOOST_AUTO_TEST_CASE(without_early_appends_an_entry_waits_for_the_leaders_write) {
    Harness h(3);
    const raft::NodeId l = h.elect();
    Core& c = h.core(l);
    auto [first, second, a_index] = propose_b_while_a_is_written(h, l);
    BOOST_TEST(!second.persist);
    raft::MemoryStorage& storage = h.node(l).storage;
    storage.append(first.persist->entries);
    if (first.persist->hard_state) storage.set_hard_state(*first.persist->hard_state);
    c.persist_started(h.now());
    Effects started = c.take_effects();
    for (const Effects* fx : {&second, &started}) {  // nothing of "b" while "a" is written
        for (const raft::Message& m : fx->send) {
            const auto* req = std::get_if<raft::AppendRequest>(&m.body);
            BOOST_TEST((req == nullptr || req->entries.empty()));
        }
    }
    c.persisted(h.now());
    c.turn(h.now());
    Effects next = c.take_effects();
    BOOST_REQUIRE(next.persist);  // "b" in the next Ready, its appends with it
    BOOST_TEST(next.persist->entries.back().index == a_index + 1);
    BOOST_TEST(appended_up_to(next, a_index + 1).size() == 2u);
}

// With Config::early_appends, a waiter's Grant, proposed when
// persist_started() applies the release before it, goes to the followers
// with that call's effects: no turn comes
// while the Persist is outstanding (wants_turn() is false).
BOOST_AUTO_TEST_CASE(a_grant_proposed_at_persist_started_is_sent_with_its_effects) {
    Harness h(3, [](Config& cfg) { cfg.early_appends = true; });
    const raft::NodeId l = h.elect();
    Core& c = h.core(l);
    raft::MemoryStorage& storage = h.node(l).storage;
    const auto write = [&storage](const raft::Ready& rd) {
        if (rd.snapshot) storage.apply_snapshot(*rd.snapshot);
        storage.append(rd.entries);
        if (rd.hard_state) storage.set_hard_state(*rd.hard_state);
    };
    std::vector<raft::Message> later;  // to the followers once the leader checked them
    const auto keep = [&later](Effects& fx) {
        for (raft::Message& m : fx.send) later.push_back(std::move(m));
    };
    const Granted a = as<Granted>(h.answer(l, h.send(l, acq("k", 5000, "a"))));
    const RequestId b = h.send(l, acq("k", 5000, "b", 10000));
    BOOST_REQUIRE(c.waiter_count() == 1u);
    // The release's write outstanding; the followers ack it.
    c.request(903, Release{"k", a.token}, h.now());
    c.turn(h.now());
    Effects first = c.take_effects();
    BOOST_REQUIRE(first.persist);
    for (const raft::Message& m : first.send) h.core(m.to).step(m, h.now());
    h.settle();
    write(*first.persist);
    c.persist_started(h.now());
    c.persisted(h.now());  // the release commits
    Effects done = c.take_effects();
    keep(done);
    // The next Persist carries the committed release and a new entry.
    c.request(904, acq("j", 1000, "x"), h.now());
    c.turn(h.now());
    Effects second = c.take_effects();
    BOOST_REQUIRE(second.persist);
    BOOST_REQUIRE(!second.persist->entries.empty());
    keep(second);
    const raft::Index grant_index = second.persist->entries.back().index + 1;
    c.persist_started(h.now());  // applies the release: b's Grant proposed
    BOOST_TEST(!c.wants_turn());
    Effects started = c.take_effects();
    BOOST_TEST(appended_up_to(started, grant_index).size() == 2u);
    keep(started);
    for (const raft::Message& m : later) h.core(m.to).step(m, h.now());
    write(*second.persist);
    c.persisted(h.now());
    h.settle();
    BOOST_TEST(as<Granted>(h.answer(l, b)).owner == "b");
}

BOOST_AUTO_TEST_SUITE_END()
