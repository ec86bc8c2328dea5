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

struct StartPlan {
    storage::Identity identity;  // what the data directory holds, or is created with
    std::string client_addr;     // where this member serves its HTTP API
    // Addresses from --peers or the join answer (the configuration's own
    // contexts, read from the log later, take precedence over these).
    std::map<std::uint64_t, Addresses> addresses;
    std::vector<std::string> notes;  // flags that were given but are not used, and why
};

// Fills `out` from the flags, the identity read from the data directory (if
// any) and the join answer (with --join, when one was had). Returns "" or
// why the member cannot start, naming the flag or the file.
std::string plan_start(const Options& options, const std::optional<storage::Identity>& stored,
                       const std::optional<JoinAnswer>& join, StartPlan& out);

// The first configuration of a new cluster from --peers: every member a
// voter, its context its peer address (member/addresses.h).
raft::Configuration first_configuration(const std::vector<PeerSpec>& peers);

}  // namespace pgfence::server
