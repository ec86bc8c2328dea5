#include "server/bootstrap.h"

#include "member/addresses.h"

namespace pgfence::server {

namespace {

std::string text_of(const PeerSpec& p) { return p.host + ":" + std::to_string(p.port); }

std::string unused_flags(const Options& o) {
    std::string flags;
    auto add = [&flags](bool given, const char* name) {
        if (!given) return;
        flags += flags.empty() ? "" : ", ";
        flags += name;
    };
    add(o.cluster_id != 0, "--cluster-id");
    add(!o.initial_cluster_token.empty(), "--initial-cluster-token");
    return flags;
}

}  // namespace

raft::Configuration first_configuration(const std::vector<PeerSpec>& peers) {
    std::vector<raft::NodeId> ids;
    for (const PeerSpec& p : peers) ids.push_back(p.id);
    raft::Configuration config = raft::Configuration::of_voters(ids);
    for (raft::ConfigMember& m : config.members) {
        for (const PeerSpec& p : peers) {
            if (p.id == m.id) m.context = member::encode_addresses({text_of(p), ""});
        }
    }
    return config;
}

std::string plan_start(const Options& o, const std::optional<storage::Identity>& stored,
                       const std::optional<JoinAnswer>& join, StartPlan& out) {
    out = StartPlan{};
    out.client_addr = o.client_addr;
    for (const PeerSpec& p : o.peers) out.addresses[p.id].peer_addr = text_of(p);
    if (stored) {
        if (stored->member_id != o.id) {
            return "--data-dir " + o.data_dir + " belongs to member " + std::to_string(stored->member_id) +
                   ", not --id " + std::to_string(o.id);
        }
        out.identity = *stored;
        if (!stored->first_config) {
            // Written by a release that derived everything from --peers.
            if (o.peers.empty()) {
                return "--data-dir " + o.data_dir + " has a version 1 identity file (no first configuration "
                       "recorded): give --peers as it was started with, once, to record it";
            }
            const std::uint64_t expected =
                o.cluster_id != 0 ? o.cluster_id : derive_cluster_id(o.peers, o.initial_cluster_token);
            if (expected != stored->cluster_id) {
                return "--data-dir " + o.data_dir + " belongs to cluster " + std::to_string(stored->cluster_id) +
                       ", not cluster " + std::to_string(expected) + " (derived from --peers" +
                       (o.cluster_id != 0 ? std::string(": --cluster-id") : std::string()) +
                       "): give --peers exactly as the cluster was started with";
            }
            std::vector<raft::NodeId> ids;
            for (const PeerSpec& p : o.peers) ids.push_back(p.id);
            out.identity.first_config = raft::Configuration::of_voters(ids);
        } else if (const std::string flags = unused_flags(o); !flags.empty()) {
            out.notes.push_back(flags + " not used: the cluster's identity is read from " + o.data_dir +
                                " (bootstrap flags count only when it is created)");
        }
        if (!o.join.empty() && join) {
            if (join->cluster_id != stored->cluster_id) {
                return "--join: the cluster at " + o.join + " is cluster " + std::to_string(join->cluster_id) +
                       ", but --data-dir " + o.data_dir + " belongs to cluster " +
                       std::to_string(stored->cluster_id);
            }
            for (const auto& [id, a] : join->members) out.addresses[id] = a;
        }
    } else if (!o.join.empty()) {
        if (!join) return "--join: no member of " + o.join + " answered";
        if (!join->listed) {
            return "member " + std::to_string(o.id) + " is not in the configuration of the cluster at " + o.join +
                   ": add it first (fencectl member add " + std::to_string(o.id) +
                   " --peer-addr HOST:PORT --client-addr HOST:PORT)";
        }
        out.identity = storage::Identity{join->cluster_id, o.id, raft::Configuration{}};
        for (const auto& [id, a] : join->members) out.addresses[id] = a;
    } else {
        if (o.peers.empty()) {
            return "--peers (to bootstrap a new cluster) or --join (to join a running one) is required: " + o.data_dir +
                   " holds no member yet";
        }
        const std::uint64_t id =
            o.cluster_id != 0 ? o.cluster_id : derive_cluster_id(o.peers, o.initial_cluster_token);
        out.identity = storage::Identity{id, o.id, first_configuration(o.peers)};
    }
    const Addresses& self = out.addresses[o.id];
    if (!o.join.empty() && !self.client_addr.empty()) {
        if (out.client_addr.empty()) {
            out.client_addr = self.client_addr;
        } else if (out.client_addr != self.client_addr) {
            return "--client-addr " + out.client_addr + " is not the client address member " + std::to_string(o.id) +
                   " was added with (" + self.client_addr + ")";
        }
    }
    if (out.client_addr.empty()) return "--client-addr is required (HOST:PORT for the HTTP API)";
    return {};
}

}  // namespace pgfence::server
