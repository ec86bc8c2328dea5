// How a member starts (server/bootstrap.h): a new cluster from --peers, a
// restart from the identity file, a version 1 identity, a joining member.
#include <boost/test/unit_test.hpp>

#include "lock/commands.h"
#include "lock/table.h"
#include "member/addresses.h"
#include "raft/storage.h"
#include "server/bootstrap.h"

using namespace pgfence;
using namespace pgfence::server;

namespace {

Options three(std::uint64_t id) {
    Options o;
    o.id = id;
    o.data_dir = "/tmp/d" + std::to_string(id);
    o.client_addr = "127.0.0.1:750" + std::to_string(id);
    for (std::uint64_t i = 1; i <= 3; ++i) {
        o.peers.push_back(PeerSpec{i, "127.0.0.1", static_cast<std::uint16_t>(7400 + i)});
    }
    return o;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

JoinAnswer answer_for(std::uint64_t id, bool listed) {
    JoinAnswer a;
    a.cluster_id = 99;
    a.listed = listed;
    a.members[1] = Addresses{"127.0.0.1:7401", "127.0.0.1:7501"};
    if (listed) a.members[id] = Addresses{"127.0.0.1:740" + std::to_string(id), "127.0.0.1:750" + std::to_string(id)};
    return a;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(bootstrap)

BOOST_AUTO_TEST_CASE(a_new_cluster_records_its_members_with_their_peer_addresses) {
    StartPlan a, b;
    BOOST_TEST(plan_start(three(1), std::nullopt, std::nullopt, a) == "");
    BOOST_TEST(plan_start(three(2), std::nullopt, std::nullopt, b) == "");
    BOOST_TEST(a.identity.cluster_id == derive_cluster_id(three(1).peers));
    BOOST_TEST(a.identity.member_id == 1u);
    // Every member records the same first configuration: voters 1..3 with their peer addresses.
    BOOST_TEST((a.identity.first_config == b.identity.first_config));
    const raft::Configuration& c = *a.identity.first_config;
    BOOST_TEST((c.voters() == std::vector<raft::NodeId>{1, 2, 3}));
    member::MemberAddresses m;
    BOOST_TEST(member::decode_addresses(c.members[1].context, m) == "");
    BOOST_TEST(m.peer_addr == "127.0.0.1:7402");
    BOOST_TEST(a.addresses[3].peer_addr == "127.0.0.1:7403");
    // --initial-cluster-token and --cluster-id make other clusters.
    Options token = three(1);
    token.initial_cluster_token = "staging";
    StartPlan t;
    BOOST_TEST(plan_start(token, std::nullopt, std::nullopt, t) == "");
    BOOST_TEST(t.identity.cluster_id != a.identity.cluster_id);
    Options explicit_id = three(1);
    explicit_id.cluster_id = 1234;
    BOOST_TEST(plan_start(explicit_id, std::nullopt, std::nullopt, t) == "");
    BOOST_TEST(t.identity.cluster_id == 1234u);
}

BOOST_AUTO_TEST_CASE(a_restart_reads_its_identity_and_never_derives_it_again) {
    StartPlan first;
    BOOST_TEST(plan_start(three(1), std::nullopt, std::nullopt, first) == "");
    // Restarted with another list, a token and no --peers at all: the same identity.
    Options changed = three(1);
    changed.peers.pop_back();
    changed.initial_cluster_token = "other";
    StartPlan again;
    BOOST_TEST(plan_start(changed, first.identity, std::nullopt, again) == "");
    BOOST_TEST((again.identity == first.identity));
    BOOST_TEST(again.notes.size() == 1u);
    BOOST_TEST(has(again.notes.front(), "--initial-cluster-token"));
    Options bare = three(1);
    bare.peers.clear();
    BOOST_TEST(plan_start(bare, first.identity, std::nullopt, again) == "");
    BOOST_TEST((again.identity == first.identity));
    // Another member's directory is refused.
    BOOST_TEST(has(plan_start(three(2), first.identity, std::nullopt, again), "belongs to member 1"));
}

BOOST_AUTO_TEST_CASE(a_version_1_identity_takes_its_first_configuration_from_peers_once) {
    const Options o = three(2);
    const storage::Identity v1{derive_cluster_id(o.peers), 2, std::nullopt};
    StartPlan p;
    BOOST_TEST(plan_start(o, v1, std::nullopt, p) == "");
    BOOST_TEST(p.identity.first_config.has_value());
    // Voters only, as the release that wrote it had them (its snapshots stay version 1).
    BOOST_TEST(p.identity.first_config->voters_only());
    BOOST_TEST((p.identity.first_config->voters() == std::vector<raft::NodeId>{1, 2, 3}));
    Options bare = o;
    bare.peers.clear();
    BOOST_TEST(has(plan_start(bare, v1, std::nullopt, p), "version 1 identity"));
    Options other = o;
    other.peers.back().port = 9999;
    BOOST_TEST(has(plan_start(other, v1, std::nullopt, p), "exactly as the cluster was started with"));
}

BOOST_AUTO_TEST_CASE(a_joining_member_must_have_been_added) {
    Options o;
    o.id = 4;
    o.data_dir = "/tmp/d4";
    o.join = "127.0.0.1:7501";
    StartPlan p;
    BOOST_TEST(has(plan_start(o, std::nullopt, answer_for(4, false), p), "member 4 is not in the configuration"));
    BOOST_TEST(has(plan_start(o, std::nullopt, std::nullopt, p), "no member of 127.0.0.1:7501 answered"));
    BOOST_TEST(plan_start(o, std::nullopt, answer_for(4, true), p) == "");
    BOOST_TEST(p.identity.cluster_id == 99u);
    BOOST_TEST((p.identity.first_config && p.identity.first_config->members.empty()));
    BOOST_TEST(p.client_addr == "127.0.0.1:7504");  // as it was added
    BOOST_TEST(p.addresses[1].peer_addr == "127.0.0.1:7401");
    o.client_addr = "127.0.0.1:9999";
    BOOST_TEST(has(plan_start(o, std::nullopt, answer_for(4, true), p), "is not the client address"));
    // A joined member restarting learns addresses again, but only from its own cluster.
    o.client_addr.clear();
    const storage::Identity joined{99, 4, raft::Configuration{}};
    BOOST_TEST(plan_start(o, joined, answer_for(4, true), p) == "");
    JoinAnswer other = answer_for(4, true);
    other.cluster_id = 7;
    BOOST_TEST(has(plan_start(o, joined, other, p), "belongs to cluster 99"));
}

BOOST_AUTO_TEST_CASE(a_new_member_needs_peers_or_join) {
    Options o = three(1);
    o.peers.clear();
    StartPlan p;
    BOOST_TEST(has(plan_start(o, std::nullopt, std::nullopt, p), "--peers (to bootstrap a new cluster) or --join"));
}

// A backup's state: the table at index 10 holding "k" with token 9, floor 0.
RestoreSource backup_source() {
    lock::LockTable t;
    for (std::uint64_t i = 1; i <= 8; ++i) t.apply_noop(i);
    t.apply(9, lock::Grant{"k", 60000, "w"});
    t.apply_noop(10);
    RestoreSource s;
    s.cluster_id = 555;
    s.state.meta.index = 10;
    s.state.meta.term = 4;
    s.state.meta.config = raft::Configuration::of_voters({1, 2, 3});
    s.state.data = t.snapshot();
    return s;
}

BOOST_AUTO_TEST_CASE(a_restored_cluster_has_a_new_id_and_tokens_above_the_headroom) {
    Options a = three(1), b = three(2);
    a.restore_file = b.restore_file = "/backups/x.bak";
    a.restore_token_headroom = b.restore_token_headroom = 1000;
    StartPlan pa, pb;
    BOOST_TEST(plan_start(a, std::nullopt, std::nullopt, pa, backup_source()) == "");
    BOOST_TEST(plan_start(b, std::nullopt, std::nullopt, pb, backup_source()) == "");
    // Every member restoring the same file agrees on the new cluster, which is
    // neither the old one nor the one --peers alone would give.
    BOOST_TEST(pa.identity.cluster_id == pb.identity.cluster_id);
    BOOST_TEST(pa.identity.cluster_id != 555u);
    BOOST_TEST(pa.identity.cluster_id != derive_cluster_id(a.peers));
    BOOST_REQUIRE(pa.first_snapshot.has_value());
    BOOST_TEST((*pa.first_snapshot == *pb.first_snapshot));
    BOOST_TEST(pa.first_snapshot->meta.index == 11u);
    BOOST_TEST(pa.first_term == 4u);
    BOOST_TEST((pa.first_snapshot->meta.config == *pa.identity.first_config));
    auto t = lock::LockTable::restore(pa.first_snapshot->data);
    BOOST_REQUIRE(std::holds_alternative<lock::LockTable>(t));
    lock::LockTable& table = std::get<lock::LockTable>(t);
    BOOST_TEST(table.find("k")->token == 9u);  // the locks held are kept
    // The next grant (index 12 at the earliest) is above index 10 + floor 0 + 1000.
    const lock::Result next = table.apply(12, lock::Grant{"n", 1000, ""});
    BOOST_TEST(std::get<lock::Granted>(next).token > 10u + 1000u);
    // A restart of a restored member: --restore is a bootstrap flag, not used again.
    StartPlan again;
    BOOST_TEST(plan_start(a, pa.identity, std::nullopt, again) == "");
    BOOST_TEST(!again.first_snapshot.has_value());
    BOOST_TEST(has(again.notes.front(), "--restore"));
}

BOOST_AUTO_TEST_CASE(a_restore_whose_tokens_would_pass_the_largest_is_refused) {
    Options o = three(1);
    o.restore_file = "/backups/x.bak";
    o.restore_token_headroom = lock::kMaxToken - 5;
    StartPlan p;
    BOOST_TEST(has(plan_start(o, std::nullopt, std::nullopt, p, backup_source()), "would pass the largest token"));
}

BOOST_AUTO_TEST_CASE(force_new_cluster_makes_this_member_alone_a_new_cluster) {
    Options o = three(2);
    o.peers.clear();
    o.force_new_cluster = true;
    const storage::Identity stored{555, 2, first_configuration(three(2).peers)};
    RestoreSource own = backup_source();
    own.state.meta.config = *stored.first_config;  // its peer address comes from the configuration it had
    StartPlan p;
    BOOST_TEST(plan_start(o, stored, std::nullopt, p, own) == "");
    BOOST_TEST(p.identity.cluster_id != 555u);
    BOOST_TEST((p.identity.first_config->voters() == std::vector<raft::NodeId>{2}));
    BOOST_TEST(p.addresses[2].peer_addr == "127.0.0.1:7402");
    BOOST_REQUIRE(p.first_snapshot.has_value());
    BOOST_TEST(p.first_snapshot->meta.index == 11u);
    // Without a known peer address it asks for --peers.
    own.state.meta.config = raft::Configuration::of_voters({1, 2, 3});
    BOOST_TEST(has(plan_start(o, stored, std::nullopt, p, own), "give this member's peer address"));
}

BOOST_AUTO_TEST_CASE(replay_log_applies_every_entry_committed_or_not) {
    raft::MemoryStorage s;
    std::vector<raft::Entry> entries;
    entries.push_back({1, 1, raft::EntryType::kNoop, {}});
    entries.push_back({1, 2, raft::EntryType::kNormal, lock::encode(lock::Command{lock::Grant{"a", 5000, ""}})});
    entries.push_back({2, 3, raft::EntryType::kNormal, lock::encode(lock::Command{lock::Grant{"b", 5000, ""}})});
    s.append(entries);
    s.set_hard_state(raft::HardState{2, 1, 1});  // only index 1 known committed
    raft::Configuration grown = raft::Configuration::of_voters({1, 2, 3});
    grown.members.push_back(raft::ConfigMember{4, false, "ctx"});
    entries.clear();
    entries.push_back({2, 4, raft::EntryType::kConfig, raft::encode_configuration(grown)});
    s.append(entries);
    raft::Snapshot out;
    BOOST_TEST(replay_log(s, raft::Configuration::of_voters({1, 2, 3}), out) == "");
    BOOST_TEST(out.meta.index == 4u);
    BOOST_TEST(out.meta.term == 2u);
    BOOST_TEST((out.meta.config == grown));  // the last configuration in the log
    auto t = lock::LockTable::restore(out.data);
    BOOST_REQUIRE(std::holds_alternative<lock::LockTable>(t));
    BOOST_TEST(std::get<lock::LockTable>(t).find("a")->token == 2u);
    BOOST_TEST(std::get<lock::LockTable>(t).find("b")->token == 3u);
    raft::MemoryStorage empty;
    BOOST_TEST(has(replay_log(empty, {}, out), "holds no state"));
}

BOOST_AUTO_TEST_SUITE_END()
