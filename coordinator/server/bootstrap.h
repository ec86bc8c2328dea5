// How a member starts: from its data directory's identity when it has one,
// else from its flags — a new cluster (--peers), or a member added to a
// running cluster (--join, with what the cluster answered about it).
//
// Rules (etcd's --initial-cluster flags work the same way):
//   - An identity, once written, is what the member is: its cluster ID and
//     first configuration are read from it, never derived again, and the
//     configurations after that come from the log. --cluster-id,
//     --initial-cluster-token and --peers' member list are then bootstrap
//     flags that are not used for either; --peers still gives the peer
//     addresses of members whose configuration entry has none.
//   - A version 1 identity (no first configuration recorded) takes its first
//     configuration from --peers, checked against the cluster ID as before,
//     and records it (voters only, as the releases before wrote them).
//   - --restore FILE (no identity yet; --peers names the new members): a
//     new cluster whose ID is derived as for --peers but also from the
//     backup's cluster ID and index (so it never equals the old one), whose
//     first snapshot is the backup's table with tokens moved above its last
//     token + --restore-token-headroom. Every member restores the same file.
//     Once the directory exists, --restore is a bootstrap flag not used.
//   - --force-new-cluster (an identity): this member alone, as a new cluster
//     (a new ID) whose first snapshot is its own state (replay_log) with the
//     same token rule; the caller moves the old directory aside.
//   - No identity: with --peers, a new cluster whose first configuration is
//     the --peers list (each member's peer address in its context, so members
//     added later learn them from the log) and whose ID is --cluster-id or
//     derived from the list and --initial-cluster-token; with --join, a
//     member the cluster has added (else it refuses to start), whose first
//     configuration is empty (it learns the cluster's from the leader).
// Pure: no I/O (the caller reads the identity file and asks the cluster).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "raft/storage.h"
#include "server/options.h"
#include "storage/meta_files.h"

namespace pgfence::server {

// A member's addresses as this member knows them ("" where unknown).
struct Addresses {
    std::string peer_addr;    // HOST:PORT
    std::string client_addr;  // HOST:PORT
};

// What a running cluster told a joining member (GET /v1/members/join).
struct JoinAnswer {
    std::uint64_t cluster_id = 0;
    bool listed = false;  // the member asked about is in the configuration
    std::map<std::uint64_t, Addresses> members;  // every member of the configuration, with its addresses
};

// The state a new cluster starts from (--restore: a backup; --force-new-cluster:
// this member's own data directory with its whole log applied).
struct RestoreSource {
    std::uint64_t cluster_id = 0;  // the cluster it came from
    raft::Snapshot state;          // index >= 1: the lock table at that index
};

struct StartPlan {
    storage::Identity identity;  // what the data directory holds, or is created with
    // A restored cluster's first snapshot, written (with term `first_term`)
    // into the new data directory before the member starts.
    std::optional<raft::Snapshot> first_snapshot;
    raft::Term first_term = 0;
    std::string client_addr;     // where this member serves its HTTP API
    // Addresses from --peers or the join answer (the configuration's own
    // contexts, read from the log later, take precedence over these).
    std::map<std::uint64_t, Addresses> addresses;
    std::vector<std::string> notes;  // flags that were given but are not used, and why
};

// Fills `out` from the flags, the identity read from the data directory (if
// any) and the join answer (with --join, when one was had). Returns "" or
// why the member cannot start, naming the flag or the file.
// `restore`: with --restore (the backup) or --force-new-cluster (this
// member's state; `stored` is the identity of the directory it came from).
std::string plan_start(const Options& options, const std::optional<storage::Identity>& stored,
                       const std::optional<JoinAnswer>& join, StartPlan& out,
                       const std::optional<RestoreSource>& restore = std::nullopt);

// The first snapshot of a restored cluster: the lock table of `from` with
// its token floor raised so that every token granted from now on exceeds
// from's last token + headroom (a SetTokenFloor applied at from's index + 1),
// and `config` as its configuration. "" or why not (a table that does not
// restore, tokens that would pass the largest one).
std::string restored_snapshot(const raft::Snapshot& from, std::uint64_t headroom, const raft::Configuration& config,
                              raft::Snapshot& out);

// The state of a data directory's member with every entry of its log
// applied, committed or not (after the loss of quorum, entries this member
// has may have been committed by the members lost): its snapshot's table,
// then each entry in order; its configuration the last one in force (from
// `first` when neither the snapshot nor the log has one). "" or why not.
std::string replay_log(const raft::Storage& storage, const raft::Configuration& first, raft::Snapshot& out);

// The first configuration of a new cluster from --peers: every member a
// voter, its context its peer address (member/addresses.h).
raft::Configuration first_configuration(const std::vector<PeerSpec>& peers);

}  // namespace pgfence::server
