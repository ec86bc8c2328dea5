#include "server/bootstrap.h"

#include <algorithm>

#include "lock/commands.h"
#include "lock/table.h"
#include "member/addresses.h"

namespace pgfence::server {

namespace {

std::string text_of(const PeerSpec& p) { return p.host + ":" + std::to_string(p.port); }

// A restored cluster's ID: derived like a new cluster's, and also from where
// its state came from, so it never equals the cluster it was restored from
// (whose members it must refuse).
std::uint64_t new_cluster_id(const Options& o, const char* how, std::uint64_t from, raft::Index index) {
    std::vector<PeerSpec> peers = o.peers;
    if (peers.empty()) peers.push_back(PeerSpec{o.id, "", 0});
    // The member's own ID too: two survivors forced alike are two clusters.
    const std::string token = o.initial_cluster_token + "/" + how + ":" + std::to_string(from) + "@" +
                              std::to_string(index) + (o.force_new_cluster ? "/member " + std::to_string(o.id) : "");
    std::uint64_t id = o.cluster_id != 0 ? o.cluster_id : derive_cluster_id(peers, token);
    if (id == from) id = derive_cluster_id(peers, token + "/again");
    return id;
}

std::string unused_flags(const Options& o) {
    std::string flags;
    auto add = [&flags](bool given, const char* name) {
        if (!given) return;
        flags += flags.empty() ? "" : ", ";
        flags += name;
    };
    add(o.cluster_id != 0, "--cluster-id");
    add(!o.initial_cluster_token.empty(), "--initial-cluster-token");
    add(!o.restore_file.empty(), "--restore");
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

std::string restored_snapshot(const raft::Snapshot& from, std::uint64_t headroom, const raft::Configuration& config,
                              raft::Snapshot& out) {
    auto restored = lock::LockTable::restore(from.data);
    if (auto* bad = std::get_if<lock::DecodeError>(&restored)) return "its lock table does not restore: " + bad->message;
    lock::LockTable& table = std::get<lock::LockTable>(restored);
    if (table.applied_index() != from.meta.index) {
        return "its lock table is at index " + std::to_string(table.applied_index()) + ", its snapshot at " +
               std::to_string(from.meta.index);
    }
    // Tokens are index + floor: with floor = last + headroom every grant
    // after index + 1 is above last + headroom.
    const lock::Token last = std::max(table.last_token(), from.meta.index + table.token_floor());
    if (last > lock::kMaxToken - headroom || from.meta.index + 2 > lock::kMaxToken - (last + headroom)) {
        return "its last token " + std::to_string(last) + " + headroom " + std::to_string(headroom) +
               " would pass the largest token " + std::to_string(lock::kMaxToken);
    }
    const raft::Index index = from.meta.index + 1;
    table.apply(index, lock::SetTokenFloor{last + headroom});
    out = raft::Snapshot{};
    out.meta.index = index;
    out.meta.term = std::max<raft::Term>(from.meta.term, 1);
    out.meta.config = config;
    out.data = table.snapshot();
    return {};
}

std::string replay_log(const raft::Storage& storage, const raft::Configuration& first, raft::Snapshot& out) {
    const raft::Snapshot snap = storage.snapshot();
    lock::LockTable table;
    if (!snap.empty()) {
        auto restored = lock::LockTable::restore(snap.data);
        if (auto* bad = std::get_if<lock::DecodeError>(&restored)) return "the snapshot does not restore: " + bad->message;
        table = std::move(std::get<lock::LockTable>(restored));
    }
    out = raft::Snapshot{};
    out.meta = snap.meta;
    if (snap.empty()) out.meta.config = first;
    constexpr raft::Index kBatch = 4096;
    for (raft::Index lo = storage.first_index(); lo <= storage.last_index(); lo += kBatch) {
        const raft::Index hi = std::min(storage.last_index() + 1, lo + kBatch);
        for (const raft::Entry& e : storage.entries(lo, hi)) {
            if (e.index <= table.applied_index()) continue;
            std::optional<lock::Command> cmd;
            if (e.type == raft::EntryType::kNormal) {
                auto decoded = lock::decode_command(e.data);
                if (auto* c = std::get_if<lock::Command>(&decoded)) cmd = std::move(*c);
            } else if (e.type == raft::EntryType::kConfig) {
                raft::Configuration c;
                if (raft::decode_configuration(e.data, c).empty()) out.meta.config = std::move(c);
            }
            if (cmd) {
                table.apply(e.index, *cmd);
            } else {
                table.apply_noop(e.index);
            }
            out.meta.index = e.index;
            out.meta.term = e.term;
        }
    }
    if (out.meta.index == 0) return "it holds no state (no snapshot and an empty log)";
    out.data = table.snapshot();
    return {};
}

std::string plan_start(const Options& o, const std::optional<storage::Identity>& stored,
                       const std::optional<JoinAnswer>& join, StartPlan& out,
                       const std::optional<RestoreSource>& restore) {
    out = StartPlan{};
    out.client_addr = o.client_addr;
    for (const PeerSpec& p : o.peers) out.addresses[p.id].peer_addr = text_of(p);
    if (stored && stored->member_id != o.id) {
        return "--data-dir " + o.data_dir + " belongs to member " + std::to_string(stored->member_id) +
               ", not --id " + std::to_string(o.id);
    }
    if (o.force_new_cluster) {
        if (!stored || !restore) return "--force-new-cluster needs the data directory of a member of the cluster";
        // This member's peer address: --peers, else the configuration it had.
        std::string peer = out.addresses[o.id].peer_addr;
        member::MemberAddresses a;
        if (const raft::ConfigMember* m = restore->state.meta.config.find(o.id);
            peer.empty() && m != nullptr && member::decode_addresses(m->context, a).empty()) {
            peer = a.peer_addr;
        }
        if (peer.empty()) return "--force-new-cluster: give this member's peer address in --peers (ID=HOST:PORT)";
        out.addresses[o.id].peer_addr = peer;
        raft::Configuration self = raft::Configuration::of_voters({o.id});
        self.members.front().context = member::encode_addresses({peer, ""});
        out.identity = storage::Identity{
            new_cluster_id(o, "force-new-cluster", restore->cluster_id, restore->state.meta.index), o.id, self};
    } else if (!o.restore_file.empty() && !stored) {
        if (!restore) return "--restore " + o.restore_file + ": no backup read";
        out.identity = storage::Identity{new_cluster_id(o, "restore", restore->cluster_id, restore->state.meta.index),
                                         o.id, first_configuration(o.peers)};
    }
    if (out.identity.cluster_id != 0) {
        raft::Snapshot first;
        if (std::string why = restored_snapshot(restore->state, o.restore_token_headroom, *out.identity.first_config,
                                                first);
            !why.empty()) {
            return (o.force_new_cluster ? "--force-new-cluster: " : "--restore " + o.restore_file + ": ") + why;
        }
        out.first_term = first.meta.term;
        out.first_snapshot = std::move(first);
    } else if (stored) {
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
        if (!o.join.empty() && join && !join->listed) {
            return "member " + std::to_string(o.id) + " is no longer in the configuration of the cluster at " + o.join +
                   ": it was removed; delete --data-dir " + o.data_dir + " (or add it again and start it on an empty one)";
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
