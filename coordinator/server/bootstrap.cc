#include "server/bootstrap.h"

#include <algorithm>

#include "lock/commands.h"
#include "lock/table.h"
#include "member/addresses.h"

namespace pgfence::server {

namespace {

std::string text_of(const PeerSpec& p) { return p.host + ":" + std::to_string(p.port); }

// A new cluster's ID from the OS's randomness: never 0 (no cluster) nor
// `from`, the cluster a new generation's state came from (whose members it
// must refuse).
std::uint64_t random_cluster_id(std::uint64_t random, std::uint64_t from) {
    std::uint64_t id = random;
    while (id == 0 || id == from) ++id;  // twice at most
    return id;
}

// from's lock table, checked, and its last token: the largest any grant up
// to from's index can have had (a grant at index i had i + the floor then).
std::string table_of(const raft::Snapshot& from, lock::LockTable& table, lock::Token& last) {
    auto restored = lock::LockTable::restore(from.data);
    if (auto* bad = std::get_if<lock::DecodeError>(&restored)) return "its lock table does not restore: " + bad->message;
    table = std::move(std::get<lock::LockTable>(restored));
    if (table.applied_index() != from.meta.index) {
        return "its lock table is at index " + std::to_string(table.applied_index()) + ", its snapshot at " +
               std::to_string(from.meta.index);
    }
    last = std::max(table.last_token(), lock::grant_token(from.meta.index, table.token_floor()));
    return {};
}

std::string peers_text(const raft::Configuration& c) {
    std::string out;
    for (const raft::ConfigMember& m : c.members) {
        member::MemberAddresses a;
        if (!member::decode_addresses(m.context, a).empty()) a.peer_addr = "?";
        out += (out.empty() ? "" : ",") + std::to_string(m.id) + "=" + a.peer_addr;
    }
    return out;
}

// The seed's answer, checked against this member's flags and state: "" or
// why this member cannot take its cluster ID (and floor).
std::string check_seed(const Options& o, const StartInputs& in, std::uint64_t seed, const raft::Configuration& mine) {
    const std::string who = "member " + std::to_string(seed) + " (the seed: the lowest ID in --peers)";
    if (!in.seed) return who + " did not answer";
    const SeedAnswer& a = *in.seed;
    if (a.member_id != seed) return who + ": member " + std::to_string(a.member_id) + " answered instead";
    if (a.first_config != mine) {
        return who + " started cluster " + std::to_string(a.cluster_id) + " with --peers " +
               peers_text(a.first_config) + ", not " + peers_text(mine) + ": give every member the same --peers";
    }
    if (!in.restore) {
        if (!a.origin) return {};
        return who + " restored cluster " + std::to_string(a.origin->from_cluster) + " at index " +
               std::to_string(a.origin->from_index) + " into cluster " + std::to_string(a.cluster_id) +
               ": start this member with the same --restore FILE";
    }
    const std::string mine_text =
        "cluster " + std::to_string(in.restore->cluster_id) + " at index " + std::to_string(in.restore->state.meta.index);
    if (!a.origin) {
        return who + " started cluster " + std::to_string(a.cluster_id) + " without --restore, but --restore " +
               o.restore_file + " holds " + mine_text;
    }
    if (a.origin->from_cluster != in.restore->cluster_id || a.origin->from_index != in.restore->state.meta.index) {
        return who + " restored cluster " + std::to_string(a.origin->from_cluster) + " at index " +
               std::to_string(a.origin->from_index) + ", but --restore " + o.restore_file + " holds " + mine_text +
               ": give every member the same backup file";
    }
    return {};
}

// The cluster ID (and, for a new generation, the origin with its floor) of
// a new cluster whose ID is not derived: chosen here when this member is
// the seed, else the seed's, checked. Sets out.cluster_id and out.origin.
std::string choose_generation(const Options& o, const StartInputs& in, storage::Identity& out) {
    const std::uint64_t seed = seed_of(o, in.stored.has_value());
    const RestoreSource* from = in.restore ? &*in.restore : nullptr;
    if (seed != o.id) {
        if (std::string why = check_seed(o, in, seed, *out.first_config); !why.empty()) return why;
        out.cluster_id = in.seed->cluster_id;
        out.origin = in.seed->origin;
        if (!from) return {};
        // Its floor is above the backup's last token + headroom, as this member's would be.
        std::uint64_t least = 0;
        if (std::string why = generation_floor(from->state, o.restore_token_headroom, 0, least); !why.empty()) {
            return why;
        }
        if (out.origin->token_floor < least) {
            return "member " + std::to_string(seed) + " (the seed) chose token floor " +
                   std::to_string(out.origin->token_floor) + ", below this backup's last token + " +
                   "--restore-token-headroom " + std::to_string(o.restore_token_headroom) + " (" +
                   std::to_string(least) + "): give every member the same --restore-token-headroom";
        }
        return {};
    }
    out.cluster_id = random_cluster_id(in.random, from ? from->cluster_id : 0);
    if (!from) return {};
    std::uint64_t floor = 0;
    if (std::string why = generation_floor(from->state, o.restore_token_headroom, in.now_us, floor); !why.empty()) {
        return why;
    }
    out.origin = storage::Origin{from->cluster_id, from->state.meta.index, floor};
    return {};
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

std::string check_seed_clock(std::uint64_t now_us) {
    if (now_us >= kEarliestSeedClockUs) return {};
    return "the wall clock reads " + std::to_string(now_us) +
           " microseconds since the epoch, before 2026-01-01 (" + std::to_string(kEarliestSeedClockUs) +
           "): a new generation's token floor is taken from it; set the clock and start again";
}

std::string generation_floor(const raft::Snapshot& from, std::uint64_t headroom, std::uint64_t now_us,
                             std::uint64_t& out) {
    lock::LockTable table;
    lock::Token last = 0;
    if (std::string why = table_of(from, table, last); !why.empty()) return why;
    // The first grant is at from's index + 2 (lock::grant_token gives its token).
    const lock::Token max = lock::kMaxToken;
    if (last > max || headroom > max - last || now_us > max - last - headroom ||
        lock::grant_token(from.meta.index + 2, last + headroom + now_us) == 0) {
        return "its last token " + std::to_string(last) + " + --restore-token-headroom " + std::to_string(headroom) +
               " + the time " + std::to_string(now_us) + " (microseconds since the epoch) + its index " +
               std::to_string(from.meta.index) + " + 2 would pass the largest token " + std::to_string(max) +
               " (PostgreSQL's bigint): give a smaller --restore-token-headroom";
    }
    out = last + headroom + now_us;
    return {};
}

std::string restored_snapshot(const raft::Snapshot& from, std::uint64_t floor, const raft::Configuration& config,
                              raft::Snapshot& out) {
    lock::LockTable table;
    lock::Token last = 0;
    if (std::string why = table_of(from, table, last); !why.empty()) return why;
    if (floor < last) {
        return "token floor " + std::to_string(floor) + " is below its last token " + std::to_string(last);
    }
    if (lock::grant_token(from.meta.index + 2, floor) == 0) {
        return "token floor " + std::to_string(floor) + " + its index " + std::to_string(from.meta.index) +
               " + 2 would pass the largest token " + std::to_string(lock::kMaxToken);
    }
    const raft::Index index = from.meta.index + 1;
    table.apply(index, lock::SetTokenFloor{floor});
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

std::uint64_t seed_of(const Options& o, bool has_identity) {
    if (o.force_new_cluster) return o.id;
    if (has_identity || !o.join.empty() || o.peers.empty()) return 0;
    if (o.restore_file.empty() && (o.cluster_id != 0 || !o.initial_cluster_token.empty())) return 0;
    std::uint64_t lowest = o.peers.front().id;
    for (const PeerSpec& p : o.peers) lowest = std::min(lowest, p.id);
    return lowest;
}

std::string plan_start(const Options& o, const StartInputs& in, StartPlan& out) {
    out = StartPlan{};
    out.client_addr = o.client_addr;
    for (const PeerSpec& p : o.peers) out.addresses[p.id].peer_addr = text_of(p);
    const std::optional<storage::Identity>& stored = in.stored;
    const std::optional<JoinAnswer>& join = in.join;
    if (stored && stored->member_id != o.id) {
        return "--data-dir " + o.data_dir + " belongs to member " + std::to_string(stored->member_id) +
               ", not --id " + std::to_string(o.id);
    }
    const std::string flag = o.force_new_cluster ? "--force-new-cluster" : "--restore " + o.restore_file;
    const bool restoring = o.force_new_cluster || (!o.restore_file.empty() && !stored);
    if (o.force_new_cluster) {
        if (!stored || !in.restore) return "--force-new-cluster needs the data directory of a member of the cluster";
        // This member's peer address: --peers, else the configuration it had.
        std::string peer = out.addresses[o.id].peer_addr;
        member::MemberAddresses a;
        if (const raft::ConfigMember* m = in.restore->state.meta.config.find(o.id);
            peer.empty() && m != nullptr && member::decode_addresses(m->context, a).empty()) {
            peer = a.peer_addr;
        }
        if (peer.empty()) return "--force-new-cluster: give this member's peer address in --peers (ID=HOST:PORT)";
        out.addresses[o.id].peer_addr = peer;
        raft::Configuration self = raft::Configuration::of_voters({o.id});
        self.members.front().context = member::encode_addresses({peer, ""});
        out.identity = storage::Identity{0, o.id, self, std::nullopt};
    } else if (restoring) {
        if (!in.restore) return flag + ": no backup read";
        out.identity = storage::Identity{0, o.id, first_configuration(o.peers), std::nullopt};
    }
    if (restoring) {
        // A new generation's ID is random: a given one would repeat with the next restore.
        if (o.cluster_id != 0) return flag + ": --cluster-id is not used with it (each restore gets a random ID)";
        if (std::string why = choose_generation(o, in, out.identity); !why.empty()) return flag + ": " + why;
        raft::Snapshot first;
        if (std::string why = restored_snapshot(in.restore->state, out.identity.origin->token_floor,
                                                *out.identity.first_config, first);
            !why.empty()) {
            return flag + ": " + why;
        }
        if (!o.initial_cluster_token.empty()) {
            out.notes.push_back("--initial-cluster-token not used: a restored cluster's ID is random");
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
        out.identity = storage::Identity{join->cluster_id, o.id, raft::Configuration{}, std::nullopt};
        for (const auto& [id, a] : join->members) out.addresses[id] = a;
    } else {
        if (o.peers.empty()) {
            return "--peers (to bootstrap a new cluster) or --join (to join a running one) is required: " + o.data_dir +
                   " holds no member yet";
        }
        out.identity = storage::Identity{o.cluster_id, o.id, first_configuration(o.peers), std::nullopt};
        if (seed_of(o, false) != 0) {
            if (std::string why = choose_generation(o, in, out.identity); !why.empty()) return why;
        } else if (o.cluster_id == 0) {
            out.identity.cluster_id = derive_cluster_id(o.peers, o.initial_cluster_token);
        }
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
