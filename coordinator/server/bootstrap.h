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
//     configuration from --peers, checked against the cluster ID, and
//     records it (every --peers member a voter, as in any first configuration).
//   - A new generation — every --restore and every --force-new-cluster —
//     has a cluster ID no earlier cluster can have (64 random bits, never 0
//     nor the ID of the cluster its state came from) and a token floor above
//     every token an earlier restore of the same state could have issued:
//     the state's last token + --restore-token-headroom + the wall clock at
//     the restore in microseconds since the epoch (docs/guarantees.md,
//     "Every restore a new generation"). The seed chooses both and records
//     them (with where the state came from) in its identity's origin.
//   - The seed: the member with the lowest ID in --peers (with
//     --force-new-cluster, this member alone). The other members of a new
//     generation, or of a new cluster with a random ID, ask it (the shell:
//     server/ask_seed.h) and take its cluster ID and floor; they refuse to
//     start when its first configuration is not theirs, or when it restored
//     another state (compared by cluster ID and index) or none.
//   - --restore FILE (no identity yet; --peers names the new members): a
//     new generation whose first snapshot is the backup's table with the
//     floor above. Every member restores the same file. Once the directory
//     exists, --restore is a bootstrap flag not used.
//   - --force-new-cluster (an identity): this member alone, as a new
//     generation whose first snapshot is its own state (replay_log) with the
//     same floor rule; the caller moves the old directory aside.
//   - No identity: with --peers, a new cluster whose first configuration is
//     the --peers list (each member's peer address in its context, so members
//     added later learn them from the log) and whose ID is --cluster-id, or
//     derived from the list and --initial-cluster-token when one is given,
//     else random (the seed's); with --join, a member the cluster has added
//     (else it refuses to start), whose first configuration is empty (it
//     learns the cluster's from the leader).
// Pure: no I/O (the caller reads the identity file, the backup, the clock
// and the OS's randomness, and asks the cluster or the seed).
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

// What the seed of a new cluster answered (GET /v1/members/seed): its identity.
struct SeedAnswer {
    std::uint64_t member_id = 0;
    std::uint64_t cluster_id = 0;
    raft::Configuration first_config;       // its contexts: the members' peer addresses
    std::optional<storage::Origin> origin;  // a new generation's
};

// What a start draws on besides its flags, read by the shell.
struct StartInputs {
    std::optional<storage::Identity> stored;  // the data directory's identity, if it has one
    std::optional<JoinAnswer> join;           // with --join, when one was had
    // --restore: the backup; --force-new-cluster: this member's state (the
    // directory whose identity is `stored`).
    std::optional<RestoreSource> restore;
    std::optional<SeedAnswer> seed;  // a member that is not the seed: its answer, when one was had
    std::uint64_t random = 0;        // 64 bits from the OS: the seed's new cluster ID
    std::uint64_t now_us = 0;        // wall clock, microseconds since the epoch: the seed's floor
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

// The member whose answer this start takes its cluster ID (and floor) from:
// the seed, when this member has no identity yet and starts a new
// generation or a new cluster without --cluster-id and
// --initial-cluster-token; this member itself with --force-new-cluster; 0
// when no seed is involved (a restart, --join, a derived ID).
std::uint64_t seed_of(const Options& options, bool has_identity);

// Fills `out` from the flags and `in`. Returns "" or why the member cannot
// start, naming the flag or the file.
std::string plan_start(const Options& options, const StartInputs& in, StartPlan& out);

// The earliest wall clock a seed accepts for a new generation's floor:
// 2026-01-01T00:00:00Z, in microseconds since the epoch. A clock reset to
// 1970 would otherwise bring the floor down to the backup's last token +
// headroom, which an earlier restore of the same backup may have passed.
inline constexpr std::uint64_t kEarliestSeedClockUs = 1'767'225'600'000'000ull;

// "" when `now_us` can be a seed's clock (at or after kEarliestSeedClockUs),
// else why not, with the value.
std::string check_seed_clock(std::uint64_t now_us);

// The token floor of a new generation made from `from` at `now_us`:
// from's last token + headroom + now_us, where the first grants (index + 2
// on) stay within lock::kMaxToken. "" or why not, with the values.
std::string generation_floor(const raft::Snapshot& from, std::uint64_t headroom, std::uint64_t now_us,
                             std::uint64_t& out);

// The first snapshot of a new generation: the lock table of `from` with
// its token floor raised to `floor` (a SetTokenFloor applied at from's
// index + 1: every token granted from now on exceeds it), and `config` as
// its configuration. "" or why not (a table that does not restore, a floor
// below its last token, tokens that would pass the largest one).
std::string restored_snapshot(const raft::Snapshot& from, std::uint64_t floor, const raft::Configuration& config,
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
