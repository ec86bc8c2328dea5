// Snapshots, log compaction and InstallSnapshot (thesis §5.1-§5.4).
#include <boost/test/unit_test.hpp>

#include "harness.h"

using namespace pgfence::raft;
using namespace pgfence::raft::test;

namespace {

// 3 members, leader 1; member 3 cut off while `n` commands commit; the
// leader then snapshots its applied state and compacts, keeping `keep` entries.
Cluster lagging_cluster(int n, Index keep) {
    Cluster c(3);
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.isolate(3);
    for (int i = 0; i < n; ++i) c.raft(1).propose("s" + std::to_string(i));
    c.deliver_all();
    c.tick_all(1);
    const Index applied = c.raft(1).status().applied;
    c.member(1).storage.compact(Snapshot{SnapshotMeta{applied, c.raft(1).term(), Configuration::of_voters(ids(3))},
                                         "state@" + std::to_string(applied)});
    c.raft(1).compact(applied, "state@" + std::to_string(applied), keep);
    return c;
}

// As lagging_cluster, with a snapshot of `data` sent in chunks of
// `chunk` bytes, at most `window` bytes un-acked (and `transfer_log_bytes`
// of log kept for a transfer).
Cluster lagging_chunked(const std::string& data, std::size_t chunk, std::size_t window,
                        std::uint64_t transfer_log_bytes = 256u << 20) {
    Cluster c(3, [&](Config& cfg) {
        cfg.max_snapshot_chunk_bytes = chunk;
        cfg.max_inflight_bytes = window;
        cfg.max_transfer_log_bytes = transfer_log_bytes;
    });
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.isolate(3);
    for (int i = 0; i < 5; ++i) c.raft(1).propose("s" + std::to_string(i));
    c.deliver_all();
    c.tick_all(1);
    const Index applied = c.raft(1).status().applied;
    c.member(1).storage.compact(Snapshot{SnapshotMeta{applied, c.raft(1).term(), Configuration::of_voters(ids(3))}, data});
    c.raft(1).compact(applied, data, 0);
    c.heal();
    return c;
}

std::string sample_state(std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + i % 26));
    return s;
}

bool is_chunk(const Message& m) {
    const auto* r = std::get_if<SnapshotRequest>(&m.body);
    return r != nullptr && !(r->offset == 0 && r->done);
}

// Ticks the leader until it starts the transfer; takes its first window of
// chunks off the network, in order.
std::vector<Message> first_window(Cluster& c) {
    for (int i = 0; i < 10; ++i) {
        c.tick(1);
        if (std::optional<Message> first = c.intercept(is_chunk)) {
            std::vector<Message> out{*first};
            for (Message& m : c.take(is_chunk)) out.push_back(std::move(m));
            return out;
        }
    }
    return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(snapshot)

BOOST_AUTO_TEST_CASE(a_large_snapshot_goes_in_chunks_within_the_window_and_installs_whole) {
    const std::string state = sample_state(103);
    Cluster c = lagging_chunked(state, 10, 30);
    // The first send: chunks up to the window only, in order, each with the whole meta.
    std::vector<Message> first = first_window(c);
    BOOST_REQUIRE(first.size() == 3u);
    for (std::size_t i = 0; i < first.size(); ++i) {
        const auto& r = std::get<SnapshotRequest>(first[i].body);
        BOOST_TEST(r.offset == 10 * i);
        BOOST_TEST(r.snapshot.data == state.substr(10 * i, 10));
        BOOST_TEST(r.snapshot.meta.index == c.raft(1).status().snapshot_index);
        BOOST_TEST(!r.done);
    }
    for (Message& m : first) c.net().push_back(std::move(m));
    std::size_t chunks = 0;  // delivered, the first window's too
    for (int i = 0; i < 20 && !c.member(3).restored; ++i) {
        chunks += c.deliver_all_counting(is_chunk);
        c.tick_all(1);
    }
    BOOST_TEST(chunks == 11u);  // 103 bytes in 10-byte chunks, none sent twice
    BOOST_REQUIRE(c.member(3).restored.has_value());
    BOOST_TEST(c.member(3).restored->data == state);
    BOOST_TEST(c.raft(3).status().commit == c.raft(1).status().commit);
    BOOST_TEST(c.raft(1).check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(a_lost_chunk_is_sent_again_from_where_the_follower_stopped) {
    const std::string state = sample_state(95);
    Cluster c = lagging_chunked(state, 10, 40);
    // Lose the second chunk: the third arrives out of place and is rejected once.
    std::vector<Message> first = first_window(c);
    BOOST_TEST_REQUIRE(first.size() == 4u, "first send: " << first.size() << " chunks");
    first.erase(first.begin() + 1);
    for (Message& m : first) c.net().push_back(std::move(m));
    std::size_t rejections = 0;
    for (int i = 0; i < 30 && !c.member(3).restored; ++i) {
        rejections += c.deliver_all_counting([](const Message& m) {
            const auto* a = std::get_if<SnapshotAck>(&m.body);
            return a != nullptr && a->rejected;
        });
        c.tick_all(1);
    }
    BOOST_TEST(rejections == 1u);
    BOOST_REQUIRE(c.member(3).restored.has_value());
    BOOST_TEST(c.member(3).restored->data == state);
    BOOST_TEST(c.raft(1).check_invariants() == "");
    BOOST_TEST(c.raft(3).check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(chunks_reordered_and_duplicated_still_install_exactly_the_snapshot) {
    const std::string state = sample_state(95);
    Cluster c = lagging_chunked(state, 10, 40);
    std::vector<Message> first = first_window(c);
    BOOST_TEST_REQUIRE(first.size() == 4u, "first send: " << first.size() << " chunks");
    // The window arrives backwards, its first chunk twice.
    for (auto it = first.rbegin(); it != first.rend(); ++it) c.net().push_back(*it);
    c.net().push_back(first.front());
    for (int i = 0; i < 30 && !c.member(3).restored; ++i) {
        c.deliver_all();
        c.tick_all(1);
    }
    BOOST_REQUIRE(c.member(3).restored.has_value());
    BOOST_TEST(c.member(3).restored->data == state);
    // A chunk that turns up after the install changes nothing.
    c.net().push_back(first[2]);
    c.deliver_all();
    BOOST_TEST(c.raft(3).status().snapshot_index == c.raft(1).status().snapshot_index);
    BOOST_TEST(c.raft(3).status().commit == c.raft(1).status().commit);
    BOOST_TEST(c.raft(1).check_invariants() == "");
    BOOST_TEST(c.raft(3).check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(a_leader_change_mid_transfer_starts_over_with_the_new_leaders_snapshot) {
    // Two leaders' snapshots at the same index, told apart by their bytes: the
    // follower must install the new leader's whole, never a splice of both.
    const std::string state_1 = sample_state(95);
    const std::string state_2(95, 'Z');
    Cluster c = lagging_chunked(state_1, 10, 40);
    std::vector<Message> first = first_window(c);
    BOOST_TEST_REQUIRE(first.size() == 4u, "first send: " << first.size() << " chunks");
    c.raft(3).step(first[0]);  // 3 holds 20 bytes of leader 1's snapshot
    c.raft(3).step(first[1]);
    c.isolate(1);
    const Index at = c.raft(1).status().snapshot_index;
    const Status st2 = c.raft(2).status();
    BOOST_REQUIRE_EQUAL(st2.applied, at);
    c.member(2).storage.compact(Snapshot{SnapshotMeta{at, c.raft(1).term(), Configuration::of_voters(ids(3))}, state_2});
    c.raft(2).compact(at, state_2, 0);
    // 2 is elected, probes 3 and starts its own transfer: its first window
    // is taken off the network.
    const auto from_2 = [](const Message& m) { return m.from == 2 && is_chunk(m); };
    std::optional<Message> start;
    for (int i = 0; i < 100 && !start; ++i) {
        c.tick(2);
        c.tick(3);
        start = c.intercept(from_2);
    }
    BOOST_REQUIRE(c.raft(2).role() == Role::kLeader);
    BOOST_REQUIRE(start.has_value());
    std::vector<Message> second{*start};
    for (Message& m : c.take(from_2)) second.push_back(std::move(m));
    // It arrives with its third chunk first: at offset 20, just where leader
    // 1's transfer stopped.
    BOOST_TEST_REQUIRE(second.size() == 4u, "leader 2's first send: " << second.size() << " chunks");
    BOOST_TEST(std::get<SnapshotRequest>(second[2].body).offset == 20u);
    for (std::size_t i : {2, 3, 0, 1}) c.net().push_back(second[i]);
    for (int i = 0; i < 30 && !c.member(3).restored; ++i) {
        c.deliver_all();
        c.tick(2);
        c.tick(3);
    }
    BOOST_REQUIRE(c.member(3).restored.has_value());
    BOOST_TEST(c.member(3).restored->data == state_2);
    c.deliver_all();
    BOOST_TEST(c.raft(3).status().commit == c.raft(2).status().commit);
    BOOST_TEST(c.raft(2).check_invariants() == "");
    BOOST_TEST(c.raft(3).check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(a_compaction_during_a_transfer_neither_restarts_it_nor_strands_the_follower) {
    const std::string state = sample_state(103);
    Cluster c = lagging_chunked(state, 10, 30);
    std::vector<Message> first = first_window(c);
    BOOST_REQUIRE(first.size() == 3u);
    const Index pinned = std::get<SnapshotRequest>(first.front().body).snapshot.meta.index;
    // The leader moves on and compacts again, past the snapshot being sent
    // (3 cut off meanwhile, and no tick: the transfer does not time out).
    c.isolate(3);
    for (int i = 0; i < 5; ++i) c.raft(1).propose("later" + std::to_string(i));
    c.deliver_all();
    const Index applied = c.raft(1).status().applied;
    BOOST_REQUIRE(applied > pinned);
    c.member(1).storage.compact(Snapshot{SnapshotMeta{applied, c.raft(1).term(), Configuration::of_voters(ids(3))}, "newer"});
    c.raft(1).compact(applied, "newer", 0);
    BOOST_REQUIRE(c.raft(1).status().snapshot_index == applied);
    c.heal();
    for (Message& m : first) c.net().push_back(std::move(m));
    std::size_t starts = 0;
    for (int i = 0; i < 30 && c.raft(3).status().commit < c.raft(1).status().commit; ++i) {
        starts += c.deliver_all_counting([](const Message& m) {
            const auto* r = std::get_if<SnapshotRequest>(&m.body);
            return r != nullptr && r->offset == 0 && m.to == 3;
        });
        c.tick_all(1);
    }
    BOOST_TEST(starts == 1u);  // the first window's first chunk: the transfer never began again
    BOOST_REQUIRE(c.member(3).restored.has_value());
    BOOST_TEST(c.member(3).restored->data == state);  // the snapshot it began with, whole
    BOOST_TEST(c.raft(3).status().commit == c.raft(1).status().commit);  // then by log
    BOOST_TEST(datas(c.member(3).applied).size() >= 5u);
}

// Two compactions while a transfer waits, with `cap` bytes of log kept for
// it: returns what the follower's last installed snapshot holds once it has
// caught up, and the newest snapshot's data in `newest`.
std::string after_two_compactions(std::uint64_t cap, std::string& newest) {
    Cluster c = lagging_chunked(sample_state(103), 10, 30, cap);
    std::vector<Message> first = first_window(c);
    BOOST_REQUIRE(first.size() == 3u);
    c.isolate(3);
    for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < 5; ++i) c.raft(1).propose("r" + std::to_string(round) + "-" + std::to_string(i));
        c.deliver_all();
        const Index applied = c.raft(1).status().applied;
        newest = "state@" + std::to_string(applied);
        c.member(1).storage.compact(Snapshot{SnapshotMeta{applied, c.raft(1).term(), Configuration::of_voters(ids(3))}, newest});
        c.raft(1).compact(applied, newest, 0);
    }
    c.heal();
    for (Message& m : first) c.net().push_back(std::move(m));
    for (int i = 0; i < 40 && c.raft(3).status().commit < c.raft(1).status().commit; ++i) {
        c.deliver_all();
        c.tick_all(1);
    }
    BOOST_TEST(c.raft(3).status().commit == c.raft(1).status().commit);
    BOOST_TEST(c.raft(1).check_invariants() == "");
    BOOST_REQUIRE(c.member(3).restored.has_value());
    return c.member(3).restored->data;
}

BOOST_AUTO_TEST_CASE(the_log_after_a_snapshot_being_sent_is_kept_up_to_a_byte_limit) {
    std::string newest;
    // Kept (the default limit): the transfer ends and 3 goes on by log, the
    // first snapshot its only one.
    BOOST_TEST(after_two_compactions(256u << 20, newest) == sample_state(103));
    // Over the limit (10 entries of 5 bytes > 20): nothing kept for it, and
    // once its transfer ends 3 gets the newest snapshot.
    BOOST_TEST(after_two_compactions(20, newest) == newest);
}

BOOST_AUTO_TEST_CASE(a_follower_does_not_assemble_more_than_it_accepts) {
    Cluster c(3, [](Config& cfg) {
        cfg.max_snapshot_chunk_bytes = 10;
        if (cfg.id == 3) cfg.max_snapshot_bytes = 50;
    });
    BOOST_REQUIRE(c.elect(1));
    c.tick_all(1);
    c.isolate(3);
    c.raft(1).propose("x");
    c.deliver_all();
    c.tick_all(1);
    const Index applied = c.raft(1).status().applied;
    const std::string state = sample_state(80);
    c.member(1).storage.compact(Snapshot{SnapshotMeta{applied, c.raft(1).term(), Configuration::of_voters(ids(3))}, state});
    c.raft(1).compact(applied, state, 0);
    c.heal();
    for (int i = 0; i < 30; ++i) {
        c.deliver_all();
        c.tick_all(1);
    }
    BOOST_TEST(!c.member(3).restored.has_value());  // it stays behind, the others go on
    BOOST_TEST((c.raft(1).role() == Role::kLeader));
}

BOOST_AUTO_TEST_CASE(snapshot_install_on_lagging_follower) {
    Cluster c = lagging_cluster(10, 0);
    const Index snap_index = c.raft(1).status().snapshot_index;
    BOOST_REQUIRE(snap_index >= 11u);
    c.heal();
    std::size_t snapshots_sent = 0;
    for (int i = 0; i < 5; ++i) {
        c.tick(1);
        snapshots_sent += c.deliver_all_counting(
            [](const Message& m) { return std::holds_alternative<SnapshotRequest>(m.body); });
    }
    BOOST_TEST(snapshots_sent == 1u);
    Member& f = c.member(3);
    BOOST_REQUIRE(f.restored.has_value());
    BOOST_TEST(f.restored->data == "state@" + std::to_string(snap_index));
    BOOST_TEST(f.storage.snapshot().meta.index == snap_index);
    BOOST_TEST(c.raft(3).status().commit >= snap_index);
    // Replication continues with entries after the snapshot.
    c.raft(1).propose("after");
    c.deliver_all();
    c.tick_all(1);
    BOOST_TEST(datas(f.applied) == std::vector<std::string>{"after"});
    BOOST_TEST(c.raft(1).status().peers.at(1).state == ReplicationState::kReplicate);
    // And the follower restarts from its installed snapshot.
    c.restart(3);
    c.process_all();
    BOOST_TEST(c.raft(3).status().snapshot_index == snap_index);
    BOOST_TEST(datas(f.applied) == std::vector<std::string>{"after"});
}

BOOST_AUTO_TEST_CASE(compaction_keeps_tail_so_slightly_lagging_follower_gets_entries) {
    Cluster c = lagging_cluster(5, 100);
    c.heal();
    for (int i = 0; i < 5; ++i) {
        c.tick(1);
        BOOST_TEST(c.deliver_all_counting([](const Message& m) {
            return std::holds_alternative<SnapshotRequest>(m.body);
        }) == 0u);
    }
    BOOST_TEST(!c.member(3).restored.has_value());
    BOOST_TEST(datas(c.member(3).applied).size() == 5u);
}

BOOST_AUTO_TEST_CASE(lost_snapshot_is_resent_after_election_timeout) {
    Cluster c = lagging_cluster(10, 0);
    c.heal();
    c.tick(1);
    const auto lost = c.intercept(
        [](const Message& m) { return std::holds_alternative<SnapshotRequest>(m.body); });
    BOOST_REQUIRE(lost.has_value());
    c.deliver_all();
    BOOST_TEST(c.raft(1).status().peers.at(1).state == ReplicationState::kSnapshot);
    for (int i = 0; i < 12; ++i) c.tick_all(1);
    BOOST_TEST(c.member(3).restored.has_value());
    BOOST_TEST(c.raft(3).status().commit == c.raft(1).status().commit);
}

BOOST_AUTO_TEST_CASE(compact_beyond_applied_is_refused) {
    Cluster c(1);
    c.tick(1, 25);
    c.process_all();
    const Index applied = c.raft(1).status().applied;
    BOOST_CHECK_THROW(c.raft(1).compact(applied + 1, "x", 0), std::invalid_argument);
    c.raft(1).compact(applied, "x", 0);
    BOOST_TEST(c.raft(1).status().snapshot_index == applied);
    c.raft(1).compact(applied, "older", 0);  // not newer: ignored
    BOOST_TEST(c.raft(1).check_invariants() == "");
}

BOOST_AUTO_TEST_CASE(snapshot_matching_our_log_keeps_following_entries) {
    // §5.4.2 rule 6: if our log has the snapshot's last entry, keep what follows.
    MemoryStorage s;
    s.append(entries_with_terms(1, {1, 1, 1, 1}));
    s.set_hard_state(HardState{1, kNoNode, 0});
    Raft r(make_config(1, ids(3)), s);
    r.step(msg(2, 1, 1, SnapshotRequest{Snapshot{SnapshotMeta{2, 1, Configuration::of_voters(ids(3))}, "st"}}));
    const Ready rd = drain(r, s);
    BOOST_TEST(!rd.snapshot.has_value());
    BOOST_TEST(r.status().last_index == 4u);
    BOOST_TEST(r.status().commit == 2u);
    const auto resp = bodies_of<AppendResponse>(rd.messages);
    BOOST_REQUIRE_EQUAL(resp.size(), 1u);
    BOOST_TEST(resp[0].second.match_index == 2u);
}

BOOST_AUTO_TEST_CASE(snapshot_conflicting_with_our_log_replaces_it) {
    MemoryStorage s;
    s.append(entries_with_terms(1, {1, 1, 1, 1}));
    s.set_hard_state(HardState{2, kNoNode, 1});
    Raft r(make_config(1, ids(3)), s);
    r.step(msg(2, 1, 2, SnapshotRequest{Snapshot{SnapshotMeta{3, 2, Configuration::of_voters(ids(3))}, "st"}}));
    const Ready rd = drain(r, s);
    BOOST_REQUIRE(rd.snapshot.has_value());
    BOOST_TEST(rd.committed.empty());  // the snapshot replaces applying entries 2..3
    BOOST_TEST(r.status().last_index == 3u);
    BOOST_TEST(s.last_index() == 3u);  // the conflicting index 4 is gone from storage
    BOOST_TEST(r.status().applied == 3u);
}

BOOST_AUTO_TEST_CASE(stale_snapshot_is_acked_with_commit) {
    MemoryStorage s;
    s.append(entries_with_terms(1, {1, 1, 1, 1}));
    s.set_hard_state(HardState{1, kNoNode, 4});
    Raft r(make_config(1, ids(3)), s);
    r.step(msg(2, 1, 1, SnapshotRequest{Snapshot{SnapshotMeta{2, 1, Configuration::of_voters(ids(3))}, "st"}}));
    const Ready rd = drain(r, s);
    BOOST_TEST(!rd.snapshot.has_value());
    const auto resp = bodies_of<AppendResponse>(rd.messages);
    BOOST_REQUIRE_EQUAL(resp.size(), 1u);
    BOOST_TEST(resp[0].second.match_index == 4u);
}

BOOST_AUTO_TEST_CASE(restart_from_storage_after_compaction) {
    Cluster c = lagging_cluster(6, 0);
    const Index snap_index = c.raft(1).status().snapshot_index;
    c.restart(1);
    BOOST_TEST(c.raft(1).status().applied == snap_index);
    BOOST_TEST(c.raft(1).status().snapshot_index == snap_index);
    c.heal();
    for (int i = 0; i < 60 && c.leader() == kNoNode; ++i) c.tick_all(1);
    BOOST_REQUIRE(c.leader() != kNoNode);
    c.raft(c.leader()).propose("z");
    c.deliver_all();
    for (int i = 0; i < 15; ++i) c.tick_all(1);
    for (NodeId id : ids(3))
        BOOST_TEST(c.raft(id).status().commit == c.raft(c.leader()).status().commit);
}

BOOST_AUTO_TEST_SUITE_END()
