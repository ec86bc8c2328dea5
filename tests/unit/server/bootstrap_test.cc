// How a member starts (server/bootstrap.h): a new cluster from --peers, a
// restart from the identity file, a version 1 identity, a joining member.
#include <boost/test/unit_test.hpp>

#include "member/addresses.h"
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

BOOST_AUTO_TEST_SUITE_END()
