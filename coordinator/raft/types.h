// Raft core value types: log entries, hard state, snapshots and messages.
//
// Pure data: no I/O, no Boost, no clocks. Everything here is copied by value
// between the core, the application and the wire codec (net/raft_codec.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pgfence::raft {

using Term = std::uint64_t;
using Index = std::uint64_t;
using NodeId = std::uint64_t;  // 0 means "nobody" (no vote, no leader)

constexpr NodeId kNoNode = 0;

enum class EntryType : std::uint8_t {
    kNormal = 0,  // application command in `data`
    kNoop = 1,    // a new leader's first entry of its term (thesis §6.4); empty data
    kConfig = 2,  // a whole new configuration, encode_configuration() in `data` (thesis §4.1)
};

struct Entry {
    Term term = 0;
    Index index = 0;
    EntryType type = EntryType::kNormal;
    std::string data;

    bool operator==(const Entry&) const = default;
};

// The state that must be durable before a vote or an append is acknowledged
// (Raft paper Figure 2, "Persistent state on all servers"). `commit` is stored
// too so a restart can re-apply without waiting for the leader; it may lag.
struct HardState {
    Term term = 0;
    NodeId vote = kNoNode;
    Index commit = 0;

    bool operator==(const HardState&) const = default;
};

// ---- Configurations (thesis chapter 4) ---------------------------------------

// One member of a configuration. A voter counts in elections and in every
// quorum; a learner (a member being added) only receives the log.
struct ConfigMember {
    NodeId id = kNoNode;
    bool voter = false;
    // Opaque to Raft: what the application keeps about the member (its
    // addresses), at most kMaxMemberContextBytes.
    std::string context;

    bool operator==(const ConfigMember&) const = default;
};

constexpr std::size_t kMaxConfigMembers = 15;
constexpr std::size_t kMaxMemberContextBytes = 1024;

// The members of the cluster, sorted by id, ids unique and non-zero, at most
// kMaxConfigMembers. Empty: not known (a member joining a running cluster
// before the leader has told it).
struct Configuration {
    std::vector<ConfigMember> members;

    const ConfigMember* find(NodeId id) const;
    bool contains(NodeId id) const { return find(id) != nullptr; }
    bool is_voter(NodeId id) const;
    std::vector<NodeId> voters() const;
    // A majority of the voters: how many of their logs (the leader's own
    // among them) commit an entry, or votes win an election.
    std::size_t quorum() const;
    // A configuration of voters without contexts (a cluster's first, from its
    // flags; and what snapshots written before learners existed held).
    static Configuration of_voters(const std::vector<NodeId>& ids);
    // Every member a voter and no contexts: what the formats written before
    // learners existed can hold (written so while true, so that a cluster
    // that never changes its members stays readable by the release before).
    bool voters_only() const;
    // "" when well formed (sorted, unique, non-zero ids, within the limits,
    // at least one voter), else what is wrong.
    std::string check() const;

    bool operator==(const Configuration&) const = default;
};

// The bytes of a kConfig entry: u8 version (1), u32 count, then per member
// u64 id, u8 voter (0 or 1), u32-length context.
std::string encode_configuration(const Configuration& config);
// The data of a kConfig entry: "" when it decodes to a configuration with
// at least one voter, else why not (decoders of the log and of messages
// refuse such an entry as corrupt or hostile).
std::string check_config_entry(std::string_view data);

// "" and `out` set, or why the bytes are not a well-formed configuration
// (no members at all decodes: a configuration not known, in a joining
// member's snapshot).
std::string decode_configuration(std::string_view bytes, Configuration& out);

// The largest snapshot (its data) a member writes, sends, assembles or reads:
// storage and the Raft core share it (raft::Config::max_snapshot_bytes,
// storage::StorageOptions::max_snapshot_bytes); the lock table's size limit
// (lock::kMaxTableBytes) keeps below it.
inline constexpr std::uint64_t kMaxSnapshotBytes = 256u << 20;

// Identifies the state a snapshot captures: everything up to and including
// (index, term), and the configuration in force at that index (the last
// one appended at or before it; it is committed, as the index is) with the
// index of the entry that made it: config_index <= index, 0 for the first
// configuration (Config::members, which no entry holds). A member that
// installs or restores the snapshot reports that index as its
// configuration's, so every member reports the same one for a configuration.
// One written or sent by a release that did not record it has 0: taken as
// the first configuration when it is that one, else as made at `index`
// (the latest it can have been made at).
struct SnapshotMeta {
    Index index = 0;
    Term term = 0;
    Configuration config;
    Index config_index = 0;

    bool operator==(const SnapshotMeta&) const = default;
};

struct Snapshot {
    SnapshotMeta meta;
    std::string data;  // opaque application state (the lock table)

    bool empty() const { return meta.index == 0; }
    bool operator==(const Snapshot&) const = default;
};

// ---- Messages -------------------------------------------------------------
// Every message carries the cluster ID, sender, receiver and the sender's term
// (in Message). The network may lose, delay, duplicate and reorder messages but
// never corrupts them (the wire codec checks that).

// RequestVote (Figure 2) and PreVote (thesis §9.6). For a pre-vote `term` in
// Message is the term the sender *would* campaign in; nobody's term changes.
struct VoteRequest {
    bool pre_vote = false;
    Index last_log_index = 0;
    Term last_log_term = 0;
    bool transfer = false;  // sent after TimeoutNow: ignore the leader-stickiness check (§3.10)
    bool operator==(const VoteRequest&) const = default;
};

struct VoteResponse {
    bool pre_vote = false;
    bool granted = false;
    bool operator==(const VoteResponse&) const = default;
};

// AppendEntries (Figure 2). An empty `entries` is a plain probe/heartbeat-like
// append; dedicated heartbeats use Heartbeat below.
struct AppendRequest {
    Index prev_log_index = 0;
    Term prev_log_term = 0;
    std::vector<Entry> entries;
    Index leader_commit = 0;
    bool operator==(const AppendRequest&) const = default;
};

// On success `match_index` is the last index known to match the leader's log.
// On rejection the hints implement fast back-off (thesis §5.3 "optimization"):
// `reject_hint` is the follower's best guess of where the logs may agree
// (<= its last index) and `hint_term` the follower's term at that index.
struct AppendResponse {
    bool success = false;
    Index match_index = 0;
    Index reject_index = 0;  // the prev_log_index of the rejected request
    Index reject_hint = 0;
    Term hint_term = 0;
    bool operator==(const AppendResponse&) const = default;
};

// InstallSnapshot (thesis §5.4.2, Figure 5.3), in chunks: every chunk has
// the whole `snapshot.meta`; `snapshot.data` holds the data's bytes from
// `offset` on; `done` marks the last. A snapshot whose data fits one chunk
// goes whole (offset 0, done).
struct SnapshotRequest {
    Snapshot snapshot;
    std::uint64_t offset = 0;
    bool done = true;
    bool operator==(const SnapshotRequest&) const = default;
};

// A follower's answer to a chunk that was not the last: it holds the first
// `received` bytes of the snapshot at `index`. `rejected`: the chunk did not
// start at `received` (one before it was lost, or the follower holds none of
// this transfer): send again from `received` (told once per offset). The
// last chunk is answered with an AppendResponse once the snapshot is durable.
struct SnapshotAck {
    Index index = 0;
    std::uint64_t received = 0;
    bool rejected = false;
    bool operator==(const SnapshotAck&) const = default;
};

// Heartbeat: keeps followers' election timers quiet, carries the commit index
// (capped at the follower's match index) and the ReadIndex round number.
struct Heartbeat {
    Index commit = 0;
    std::uint64_t read_round = 0;
    bool operator==(const Heartbeat&) const = default;
};

struct HeartbeatResponse {
    std::uint64_t read_round = 0;
    bool operator==(const HeartbeatResponse&) const = default;
};

// Leadership transfer (thesis §3.10): the target campaigns at once.
struct TimeoutNow {
    bool operator==(const TimeoutNow&) const = default;
};

// The leader's answer to a (pre-)vote request from a member that neither
// the configuration in force nor the committed one names: it was removed
// (while it was down, say, so it never applied its removal) and is to stop.
struct Removed {
    bool operator==(const Removed&) const = default;
};

using MessageBody = std::variant<VoteRequest, VoteResponse, AppendRequest, AppendResponse,
                                 SnapshotRequest, Heartbeat, HeartbeatResponse, TimeoutNow, SnapshotAck, Removed>;

struct Message {
    std::uint64_t cluster_id = 0;
    NodeId from = kNoNode;
    NodeId to = kNoNode;
    Term term = 0;
    MessageBody body;

    bool operator==(const Message&) const = default;
};

// A confirmed ReadIndex (thesis §6.4): once the application has applied up to
// `index`, a read (or a leadership-dependent action) tagged `context` is safe.
struct ReadState {
    std::uint64_t context = 0;
    Index index = 0;
    bool operator==(const ReadState&) const = default;
};

enum class Role : std::uint8_t { kFollower, kPreCandidate, kCandidate, kLeader };

const char* to_string(Role role);

}  // namespace pgfence::raft
