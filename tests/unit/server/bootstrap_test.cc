// How a member starts (server/bootstrap.h): a new cluster from --peers, a
// restart from the identity file, a version 1 identity, a joining member.
#include <boost/test/unit_test.hpp>
#include <limits>

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

StartInputs inputs(std::optional<storage::Identity> stored, std::optional<JoinAnswer> join,
                   std::optional<RestoreSource> restore = std::nullopt) {
    StartInputs in;
    in.stored = std::move(stored);
    in.join = std::move(join);
    in.restore = std::move(restore);
    return in;
}

// What the seed answers (GET /v1/members/seed) once it has started with `plan`.
SeedAnswer answer_of(const StartPlan& plan) {
    return SeedAnswer{plan.identity.member_id, plan.identity.cluster_id, *plan.identity.first_config,
                      plan.identity.origin};
}

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
    Options one = three(1), two = three(2);
    one.initial_cluster_token = two.initial_cluster_token = "prod";
    StartPlan a, b;
    BOOST_TEST(plan_start(one, inputs(std::nullopt, std::nullopt), a) == "");
    BOOST_TEST(plan_start(two, inputs(std::nullopt, std::nullopt), b) == "");
    // With a token the ID is derived, by every member alike, with no seed.
    BOOST_TEST(seed_of(one, false) == 0u);
    BOOST_TEST(a.identity.cluster_id == derive_cluster_id(one.peers, "prod"));
    BOOST_TEST(b.identity.cluster_id == a.identity.cluster_id);
    BOOST_TEST(a.identity.member_id == 1u);
    BOOST_TEST(!a.identity.origin.has_value());
    // Every member records the same first configuration: voters 1..3 with their peer addresses.
    BOOST_TEST((a.identity.first_config == b.identity.first_config));
    const raft::Configuration& c = *a.identity.first_config;
    BOOST_TEST((c.voters() == std::vector<raft::NodeId>{1, 2, 3}));
    member::MemberAddresses m;
    BOOST_TEST(member::decode_addresses(c.members[1].context, m) == "");
    BOOST_TEST(m.peer_addr == "127.0.0.1:7402");
    BOOST_TEST(a.addresses[3].peer_addr == "127.0.0.1:7403");
    // Another token, or --cluster-id, makes another cluster.
    Options token = three(1);
    token.initial_cluster_token = "staging";
    StartPlan t;
    BOOST_TEST(plan_start(token, inputs(std::nullopt, std::nullopt), t) == "");
    BOOST_TEST(t.identity.cluster_id != a.identity.cluster_id);
    Options explicit_id = three(1);
    explicit_id.cluster_id = 1234;
    BOOST_TEST(seed_of(explicit_id, false) == 0u);
    BOOST_TEST(plan_start(explicit_id, inputs(std::nullopt, std::nullopt), t) == "");
    BOOST_TEST(t.identity.cluster_id == 1234u);
}

BOOST_AUTO_TEST_CASE(a_new_cluster_without_a_token_takes_a_random_id_from_its_seed) {
    // Two clusters started with the same --peers and no token: their seeds
    // draw different random numbers, so the clusters differ.
    StartInputs first = inputs(std::nullopt, std::nullopt), second = first;
    first.random = 0x1111222233334444ull;
    second.random = 0x5555666677778888ull;
    StartPlan s1, s2;
    BOOST_TEST(seed_of(three(1), false) == 1u);
    BOOST_TEST(seed_of(three(3), false) == 1u);
    BOOST_TEST(seed_of(three(1), true) == 0u);  // a restart reads its identity
    BOOST_TEST(plan_start(three(1), first, s1) == "");
    BOOST_TEST(plan_start(three(1), second, s2) == "");
    BOOST_TEST(s1.identity.cluster_id == 0x1111222233334444ull);
    BOOST_TEST(s2.identity.cluster_id == 0x5555666677778888ull);
    BOOST_TEST(!s1.identity.origin.has_value());
    // 0 is no cluster: a zero draw still gives one.
    StartInputs zero = inputs(std::nullopt, std::nullopt);
    StartPlan z;
    BOOST_TEST(plan_start(three(1), zero, z) == "");
    BOOST_TEST(z.identity.cluster_id != 0u);
    // The others take the seed's ID; without its answer they do not start.
    StartInputs member2 = inputs(std::nullopt, std::nullopt);
    StartPlan p;
    BOOST_TEST(has(plan_start(three(2), member2, p), "member 1 (the seed: the lowest ID in --peers) did not answer"));
    member2.random = 99;  // not the seed's to use
    member2.seed = answer_of(s1);
    BOOST_TEST(plan_start(three(2), member2, p) == "");
    BOOST_TEST(p.identity.cluster_id == s1.identity.cluster_id);
    BOOST_TEST((p.identity.first_config == s1.identity.first_config));
    // ... but only the seed's, started with the same --peers and without a backup.
    StartInputs wrong = member2;
    wrong.seed->member_id = 3;
    BOOST_TEST(has(plan_start(three(2), wrong, p), "member 3 answered instead"));
    wrong = member2;
    wrong.seed->first_config = raft::Configuration::of_voters({1, 2});
    BOOST_TEST(has(plan_start(three(2), wrong, p), "give every member the same --peers"));
    wrong = member2;
    wrong.seed->origin = storage::Origin{555, 10, 1'000'000};
    BOOST_TEST(has(plan_start(three(2), wrong, p), "start this member with the same --restore FILE"));
}

BOOST_AUTO_TEST_CASE(a_restart_reads_its_identity_and_never_derives_it_again) {
    StartPlan first;
    BOOST_TEST(plan_start(three(1), inputs(std::nullopt, std::nullopt), first) == "");
    // Restarted with another list, a token and no --peers at all: the same identity.
    Options changed = three(1);
    changed.peers.pop_back();
    changed.initial_cluster_token = "other";
    StartPlan again;
    BOOST_TEST(plan_start(changed, inputs(first.identity, std::nullopt), again) == "");
    BOOST_TEST((again.identity == first.identity));
    BOOST_TEST(again.notes.size() == 1u);
    BOOST_TEST(has(again.notes.front(), "--initial-cluster-token"));
    Options bare = three(1);
    bare.peers.clear();
    BOOST_TEST(plan_start(bare, inputs(first.identity, std::nullopt), again) == "");
    BOOST_TEST((again.identity == first.identity));
    // Another member's directory is refused.
    BOOST_TEST(has(plan_start(three(2), inputs(first.identity, std::nullopt), again), "belongs to member 1"));
}

BOOST_AUTO_TEST_CASE(a_version_1_identity_takes_its_first_configuration_from_peers_once) {
    const Options o = three(2);
    const storage::Identity v1{derive_cluster_id(o.peers), 2, std::nullopt, std::nullopt};
    StartPlan p;
    BOOST_TEST(plan_start(o, inputs(v1, std::nullopt), p) == "");
    BOOST_TEST(p.identity.first_config.has_value());
    // Voters only, as the release that wrote it had them (its snapshots stay version 1).
    BOOST_TEST(p.identity.first_config->voters_only());
    BOOST_TEST((p.identity.first_config->voters() == std::vector<raft::NodeId>{1, 2, 3}));
    Options bare = o;
    bare.peers.clear();
    BOOST_TEST(has(plan_start(bare, inputs(v1, std::nullopt), p), "version 1 identity"));
    Options other = o;
    other.peers.back().port = 9999;
    BOOST_TEST(has(plan_start(other, inputs(v1, std::nullopt), p), "exactly as the cluster was started with"));
}

BOOST_AUTO_TEST_CASE(a_joining_member_must_have_been_added) {
    Options o;
    o.id = 4;
    o.data_dir = "/tmp/d4";
    o.join = "127.0.0.1:7501";
    StartPlan p;
    BOOST_TEST(has(plan_start(o, inputs(std::nullopt, answer_for(4, false)), p), "member 4 is not in the configuration"));
    BOOST_TEST(has(plan_start(o, inputs(std::nullopt, std::nullopt), p), "no member of 127.0.0.1:7501 answered"));
    BOOST_TEST(plan_start(o, inputs(std::nullopt, answer_for(4, true)), p) == "");
    BOOST_TEST(p.identity.cluster_id == 99u);
    BOOST_TEST((p.identity.first_config && p.identity.first_config->members.empty()));
    BOOST_TEST(p.client_addr == "127.0.0.1:7504");  // as it was added
    BOOST_TEST(p.addresses[1].peer_addr == "127.0.0.1:7401");
    o.client_addr = "127.0.0.1:9999";
    BOOST_TEST(has(plan_start(o, inputs(std::nullopt, answer_for(4, true)), p), "is not the client address"));
    // A joined member restarting learns addresses again, but only from its own cluster.
    o.client_addr.clear();
    const storage::Identity joined{99, 4, raft::Configuration{}, std::nullopt};
    BOOST_TEST(plan_start(o, inputs(joined, answer_for(4, true)), p) == "");
    JoinAnswer other = answer_for(4, true);
    other.cluster_id = 7;
    BOOST_TEST(has(plan_start(o, inputs(joined, other), p), "belongs to cluster 99"));
}

BOOST_AUTO_TEST_CASE(a_new_member_needs_peers_or_join) {
    Options o = three(1);
    o.peers.clear();
    StartPlan p;
    BOOST_TEST(has(plan_start(o, inputs(std::nullopt, std::nullopt), p), "--peers (to bootstrap a new cluster) or --join"));
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

// The seed's inputs for a restore at `now_us` with the random draw `random`.
StartInputs restore_at(std::uint64_t random, std::uint64_t now_us) {
    StartInputs in = inputs(std::nullopt, std::nullopt, backup_source());
    in.random = random;
    in.now_us = now_us;
    return in;
}

// The token the table of `plan`'s first snapshot grants at `index`.
lock::Token token_at(const StartPlan& plan, raft::Index index) {
    auto t = lock::LockTable::restore(plan.first_snapshot->data);
    lock::LockTable& table = std::get<lock::LockTable>(t);
    for (raft::Index i = table.applied_index() + 1; i < index; ++i) table.apply_noop(i);
    return std::get<lock::Granted>(table.apply(index, lock::Grant{"n", 1000, ""})).token;
}

BOOST_AUTO_TEST_CASE(a_restored_cluster_has_a_new_id_and_tokens_above_the_headroom_and_the_time) {
    Options a = three(1);
    a.restore_file = "/backups/x.bak";
    a.restore_token_headroom = 1000;
    const std::uint64_t t1 = 1'700'000'000'000'000ull;  // microseconds since the epoch
    StartPlan pa;
    BOOST_TEST(plan_start(a, restore_at(555, t1), pa) == "");
    // The draw equals the old cluster's ID: the new one still differs from it.
    BOOST_TEST(pa.identity.cluster_id != 555u);
    BOOST_TEST(pa.identity.cluster_id != 0u);
    BOOST_REQUIRE(pa.identity.origin.has_value());
    // Floor = the backup's last token (index 10 + floor 0) + headroom + the time.
    BOOST_TEST((*pa.identity.origin == storage::Origin{555, 10, 10 + 1000 + t1}));
    BOOST_REQUIRE(pa.first_snapshot.has_value());
    BOOST_TEST(pa.first_snapshot->meta.index == 11u);
    BOOST_TEST(pa.first_term == 4u);
    BOOST_TEST((pa.first_snapshot->meta.config == *pa.identity.first_config));
    auto t = lock::LockTable::restore(pa.first_snapshot->data);
    BOOST_REQUIRE(std::holds_alternative<lock::LockTable>(t));
    lock::LockTable& table = std::get<lock::LockTable>(t);
    BOOST_TEST(table.find("k")->token == 9u);  // the locks held are kept
    BOOST_TEST(table.token_floor() == 10u + 1000u + t1);
    // The next grant (index 12 at the earliest) is above the floor.
    BOOST_TEST(token_at(pa, 12) > 10u + 1000u + t1);
    // A restart of a restored member: --restore is a bootstrap flag, not used again.
    StartPlan again;
    BOOST_TEST(plan_start(a, inputs(pa.identity, std::nullopt), again) == "");
    BOOST_TEST(!again.first_snapshot.has_value());
    BOOST_TEST((again.identity == pa.identity));
    BOOST_TEST(has(again.notes.front(), "--restore"));
}

// docs/guarantees.md, "Every restore a new generation": a second restore of
// the same backup, 1000 microseconds after the first, is another cluster and
// grants above every token the first could have issued by then at fewer
// than one log entry per microsecond.
BOOST_AUTO_TEST_CASE(two_restores_of_one_backup_are_two_generations) {
    Options a = three(1);
    a.restore_file = "/backups/x.bak";
    a.restore_token_headroom = 1000;
    const std::uint64_t t1 = 1'700'000'000'000'000ull, gap_us = 1000;
    StartPlan first, second;
    BOOST_TEST(plan_start(a, restore_at(0xAAAA, t1), first) == "");
    BOOST_TEST(plan_start(a, restore_at(0xBBBB, t1 + gap_us), second) == "");
    BOOST_TEST(first.identity.cluster_id != second.identity.cluster_id);
    BOOST_TEST(first.identity.origin->token_floor < second.identity.origin->token_floor);
    // The first cluster's entries 12 .. 11 + gap_us: its last token by then.
    const lock::Token first_last = token_at(first, 11 + gap_us);
    const lock::Token second_first = token_at(second, 12);
    BOOST_TEST(first_last < second_first);
    // Restored at the same microsecond, only the ID would differ: the time is what orders them.
    StartPlan same;
    BOOST_TEST(plan_start(a, restore_at(0xCCCC, t1), same) == "");
    BOOST_TEST(token_at(same, 12) == token_at(first, 12));
}

BOOST_AUTO_TEST_CASE(the_other_members_of_a_restore_take_the_seeds_id_and_floor) {
    Options seed = three(1), other = three(2);
    seed.restore_file = other.restore_file = "/backups/x.bak";
    seed.restore_token_headroom = other.restore_token_headroom = 1000;
    StartPlan ps, po;
    BOOST_TEST(plan_start(seed, restore_at(0xAAAA, 1'700'000'000'000'000ull), ps) == "");
    StartInputs in = inputs(std::nullopt, std::nullopt, backup_source());
    in.random = 0xBBBB;  // a member that is not the seed uses neither its draw nor its clock
    in.now_us = 1'800'000'000'000'000ull;
    BOOST_TEST(has(plan_start(other, in, po), "--restore /backups/x.bak: member 1 (the seed"));
    in.seed = answer_of(ps);
    BOOST_TEST(plan_start(other, in, po) == "");
    BOOST_TEST(po.identity.cluster_id == ps.identity.cluster_id);
    BOOST_TEST((po.identity.origin == ps.identity.origin));
    BOOST_REQUIRE(po.first_snapshot.has_value());
    BOOST_TEST((*po.first_snapshot == *ps.first_snapshot));
    // A seed that restored another backup, or none, is refused.
    StartInputs wrong = in;
    wrong.seed->origin->from_index = 9;
    BOOST_TEST(has(plan_start(other, wrong, po), "restored cluster 555 at index 9, but --restore /backups/x.bak "
                                                 "holds cluster 555 at index 10"));
    wrong = in;
    wrong.seed->origin->from_cluster = 556;
    BOOST_TEST(has(plan_start(other, wrong, po), "give every member the same backup file"));
    wrong = in;
    wrong.seed->origin.reset();
    BOOST_TEST(has(plan_start(other, wrong, po), "without --restore"));
    // So is a floor below what this member's own headroom asks for.
    Options more = other;
    more.restore_token_headroom = 2'000'000'000'000'000ull;
    BOOST_TEST(has(plan_start(more, in, po), "give every member the same --restore-token-headroom"));
}

BOOST_AUTO_TEST_CASE(a_restore_whose_tokens_would_pass_the_largest_is_refused) {
    Options o = three(1);
    o.restore_file = "/backups/x.bak";
    o.restore_token_headroom = lock::kMaxToken - 5;
    StartPlan p;
    const std::string why = plan_start(o, restore_at(1, 0), p);
    BOOST_TEST(has(why, "its last token 10 + --restore-token-headroom 9223372036854775802"));
    BOOST_TEST(has(why, "would pass the largest token 9223372036854775807"));
    // The headroom alone fits; with the time it does not.
    o.restore_token_headroom = lock::kMaxToken - 1'000'000;
    BOOST_TEST(has(plan_start(o, restore_at(1, 2'000'000), p), "+ the time 2000000 (microseconds since the epoch)"));
    BOOST_TEST(plan_start(o, restore_at(1, 1000), p) == "");
    // Near the top of uint64: no wrap-around lets it through.
    o.restore_token_headroom = std::numeric_limits<std::uint64_t>::max() - 5;
    BOOST_TEST(has(plan_start(o, restore_at(1, 10), p), "would pass the largest token"));
}

BOOST_AUTO_TEST_CASE(a_seed_clock_before_2026_is_refused) {
    BOOST_TEST(check_seed_clock(kEarliestSeedClockUs) == "");
    BOOST_TEST(check_seed_clock(1'800'000'000'000'000ull) == "");
    BOOST_TEST(has(check_seed_clock(1'000'000), "the wall clock reads 1000000 microseconds since the epoch, before 2026-01-01"));
    BOOST_TEST(has(check_seed_clock(kEarliestSeedClockUs - 1), "set the clock"));
}

BOOST_AUTO_TEST_CASE(a_restore_never_takes_a_given_cluster_id) {
    Options o = three(1);
    o.restore_file = "/backups/x.bak";
    o.cluster_id = 1234;
    StartPlan p;
    BOOST_TEST(has(plan_start(o, restore_at(1, 1), p), "--cluster-id"));
}

BOOST_AUTO_TEST_CASE(force_new_cluster_makes_this_member_alone_a_new_cluster) {
    Options o = three(2);
    o.peers.clear();
    o.force_new_cluster = true;
    o.restore_token_headroom = 1000;
    const storage::Identity stored{555, 2, first_configuration(three(2).peers), std::nullopt};
    RestoreSource own = backup_source();
    own.state.meta.config = *stored.first_config;  // its peer address comes from the configuration it had
    BOOST_TEST(seed_of(o, true) == 2u);  // the seed of its own new cluster
    StartInputs in = inputs(stored, std::nullopt, own);
    in.random = 0xF00D;
    in.now_us = 1'700'000'000'000'000ull;
    StartPlan p;
    BOOST_TEST(plan_start(o, in, p) == "");
    BOOST_TEST(p.identity.cluster_id == 0xF00Du);
    BOOST_TEST((*p.identity.origin == storage::Origin{555, 10, 10 + 1000 + in.now_us}));
    BOOST_TEST((p.identity.first_config->voters() == std::vector<raft::NodeId>{2}));
    BOOST_TEST(p.addresses[2].peer_addr == "127.0.0.1:7402");
    BOOST_REQUIRE(p.first_snapshot.has_value());
    BOOST_TEST(p.first_snapshot->meta.index == 11u);
    // Two survivors forced alike (or one forced twice) are two clusters.
    StartInputs again = in;
    again.random = 0xBEEF;
    StartPlan q;
    BOOST_TEST(plan_start(o, again, q) == "");
    BOOST_TEST(q.identity.cluster_id != p.identity.cluster_id);
    // Without a known peer address it asks for --peers.
    in.restore->state.meta.config = raft::Configuration::of_voters({1, 2, 3});
    BOOST_TEST(has(plan_start(o, in, p), "give this member's peer address"));
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
