// The Raft consensus core: a deterministic state machine driven by its caller.
//
// Inputs:  tick(), step(Message), propose(bytes), propose_config(change),
//          read_index(context), transfer_leadership(id), compact(...).
// Output:  ready() -> Ready: what to persist, send and apply, in that order;
//          then advance(ready) once the caller has done it.
//
// No sockets, files, clocks, threads or global random: time is tick() calls
// and randomness comes from Config::random_seed. Given the same constructor
// arguments and the same sequence of calls, the core produces the same
// outputs (the simulation depends on it).
//
// Threading: not thread-safe; one thread (the server's event loop, or the
// simulator) owns a Raft object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "raft/storage.h"
#include "raft/types.h"

namespace pgfence::raft {

// ---- Membership changes (thesis chapter 4) ----------------------------------
// One server at a time (§4.1), not joint consensus (§4.3): every change adds
// or removes a single voter, so any majority of the old configuration and any
// majority of the new one overlap, and no entry needs two majorities. A
// member being added joins as a learner (§4.2.1: it catches up through the
// log or InstallSnapshot without counting in any quorum) and is promoted to
// voter by a second change once it is caught up: the leader replicates to it
// in rounds (a round ends when it holds the leader's last index as of the
// round's start); it is caught up while its last finished round and the one
// under way each took less than an election timeout.
// Rules:
//   - A configuration is in force on a member once its entry is in that
//     member's log, committed or not (§4.1), and the one before it is back in
//     force if the entry is truncated. The configurations in force at the
//     snapshot point and after it are rebuilt from storage at start.
//   - The leader sends a configuration entry (and what follows it) only
//     once it is durable in its own log, not in parallel with its write as
//     other entries: a crash before that write could otherwise leave the
//     entry only on members it makes non-voters, which then neither campaign
//     nor vote for the leader whose log lacks it (removing 2 from {1, 2}).
//   - The leader proposes a change only when no configuration entry of its
//     log is uncommitted and it has committed an entry of its own term (the
//     fix to single-server changes Ongaro gave on raft-dev in 2015: without
//     it, two changes made by leaders of different terms can each reach a
//     quorum that the other does not overlap).
//   - Only voters campaign, vote counts and quorums (commit, ReadIndex,
//     CheckQuorum) count voters of the configuration in force; learners
//     never start elections.
//   - The leader does not remove itself (kRemoveLeader): the caller first
//     hands leadership over (transfer_leadership), then the new leader
//     removes it (the alternative of §4.2.2, a leader managing a cluster it
//     is not part of, is not needed then).
//   - A removal that would leave fewer voters heard from in the last two
//     election periods than the new configuration's quorum is refused
//     (kNoQuorumLeft): it would wedge the cluster until a member that is
//     down came back.
//   - A removed member that never learnt its removal (it was down) and
//     campaigns is answered Removed by the leader (told_removed()).
//   - A removed member is no longer sent to, except until it has learnt that
//     the change that removed it is committed (its removal then applies on it,
//     and the application stops it), at most 2 election timeouts after the
//     commit (and never by InstallSnapshot). Members hear every member of
//     the cluster, in their configuration or not (§4.1: one behind on the log
//     must follow a leader it does not know yet). A removed member that never
//     learnt of its removal cannot disrupt the cluster (§4.2.3): PreVote fails
//     against the majority whose logs hold its removal, and CheckQuorum's
//     leader stickiness ignores its vote requests while a leader is heard.
enum class ConfigChangeType : std::uint8_t { kAddLearner, kPromote, kRemove };

struct ConfigChange {
    ConfigChangeType type = ConfigChangeType::kAddLearner;
    NodeId id = kNoNode;
    std::string context;  // kAddLearner: the new member's ConfigMember::context
};

const char* to_string(ConfigChangeType type);

struct Config {
    NodeId id = kNoNode;
    // The configuration while the storage holds none (no configuration entry
    // and no snapshot): a new cluster's voters, including `id`. Empty for a
    // member joining a running cluster: until the leader's snapshot or
    // entries tell it its configuration, it takes messages from any sender of
    // its cluster and never campaigns.
    std::vector<NodeId> members;
    // The ConfigMember::context of those first members, by id (a member
    // without one has none). Every member of a new cluster must be given the
    // same: it is the configuration at index 0, never sent.
    std::map<NodeId, std::string> contexts;
    std::uint64_t cluster_id = 0;  // messages with another cluster_id are dropped

    int heartbeat_ticks = 1;   // leader sends heartbeats every this many ticks
    int election_ticks = 10;   // election timeout is random in [election_ticks, 2*election_ticks)
    bool pre_vote = true;      // thesis §9.6
    bool check_quorum = true;  // thesis §6.2: leader steps down without a live majority

    std::uint64_t random_seed = 1;  // the only source of randomness (mixed with `id`: members
                                    // sharing a seed still draw different election timeouts)

    // Limits on replication to one follower (pipelining, thesis §10.2.2).
    std::size_t max_inflight_appends = 64;            // un-acked AppendRequests
    std::size_t max_inflight_bytes = 8u << 20;        // their entry bytes in total
    std::size_t max_append_bytes = 1u << 20;          // entry bytes in one AppendRequest
    std::size_t max_entry_bytes = 64u << 10;          // largest command propose() accepts
    std::size_t max_uncommitted_bytes = 64u << 20;    // propose() refuses past this backlog
    // InstallSnapshot in chunks (thesis §5.4.2): the data bytes in one
    // SnapshotRequest; at most max_inflight_bytes of them un-acked at once.
    std::size_t max_snapshot_chunk_bytes = 1u << 20;
    std::size_t max_snapshot_bytes = kMaxSnapshotBytes;  // a follower refuses to assemble a larger one
    // Log entry bytes a compaction keeps after a snapshot still being sent,
    // so that its follower goes on by log (compact()).
    std::uint64_t max_transfer_log_bytes = 256u << 20;
};

// What the caller must do, in this order (each field says where it belongs):
//   1. persist: hard_state, snapshot, entries      (durably, e.g. one fdatasync;
//               the snapshot before the entries; hard_state may be written
//               before or after them: its commit index only covers entries
//               that were durable before this batch, so a crash between the
//               writes never leaves a commit index over a stale entry)
//   2. send:    messages_now may go out at once, in parallel with step 1;
//               messages go out only after step 1 is durable
//   3. apply:   snapshot (restore the state machine), then committed entries
//               in order; then serve reads whose index <= applied index
//   4. advance(ready)
// Between ready() and advance() the caller may keep calling tick/step/propose;
// has_ready() stays false until advance(). Meanwhile take_committed() and
// take_messages_now() hand out what need not wait for that write.
struct Ready {
    // Persist before sending `messages`. Set only when changed. `commit` may
    // lag the core's commit index by a batch (see step 1 above).
    std::optional<HardState> hard_state;

    // A snapshot received from the leader. Persist it (and discard entries it
    // covers, see MemoryStorage::apply_snapshot) before `entries`; restore the
    // state machine from it before applying `committed`.
    std::optional<Snapshot> snapshot;

    // Entries to append durably. If the first entry's index is <= the last
    // persisted index, the persisted suffix from that index on is discarded
    // first (the leader overwrote a conflicting suffix).
    std::vector<Entry> entries;

    // Leader's AppendRequests/Heartbeats/SnapshotRequests/TimeoutNow: these do not depend
    // on this batch being durable, so they may be sent while it is written
    // (thesis §10.2.1). The leader counts its own log in the quorum only after
    // advance() says it is durable. Only once the leader's term is durable (an
    // earlier Ready carried it): a Ready whose hard state brings the term (a
    // single voter elects itself within one tick) has them in `messages`.
    std::vector<Message> messages_now;

    // Everything else (votes, append acks, campaign requests): send only after
    // hard_state and entries are durable.
    std::vector<Message> messages;

    // Committed entries to apply, in index order, contiguous with the last
    // batch. Only entries already durable on this member appear here.
    // Bounded per batch (about max_append_bytes of data, at least one entry):
    // has_ready() stays true while more remain. A commit index learnt with
    // nothing else to hand out comes in a Ready of its own (hard state only).
    std::vector<Entry> committed;

    // ReadIndex results confirmed by a quorum round in this member's current
    // leadership: safe once applied index >= ReadState::index.
    std::vector<ReadState> reads;

    // read_index() contexts that can no longer be confirmed (leadership lost
    // or transfer started): the caller fails them.
    std::vector<std::uint64_t> dropped_reads;

    bool empty() const;
};

// Bound on read_index() requests pending at once on a leader.
constexpr std::size_t kMaxPendingReads = 4096;

enum class ProposeError : std::uint8_t {
    kNone,
    kNotLeader,
    kTransferring,  // leadership transfer in progress
    kTooLarge,      // command larger than max_entry_bytes
    kBacklog,       // max_uncommitted_bytes reached
    // propose_config() only:
    kConfigPending,  // a configuration entry is not committed yet: retry after it
    kNotReady,       // no entry of this leader's term is committed yet: retry soon
    kUnknownMember,  // promote or remove of an id not in the configuration
    kAlreadyMember,  // add of an id already in it
    kNotLearner,     // promote of a voter
    kNotCaughtUp,    // promote of a learner that is not caught up (see above)
    kRemoveLeader,   // remove of the leader itself: transfer leadership first
    kNoQuorumLeft,   // remove that leaves fewer voters heard from lately than the new quorum
    kInvalid,        // id 0, a context over kMaxMemberContextBytes, or kMaxConfigMembers reached
};

const char* to_string(ProposeError err);

struct ProposeResult {
    ProposeError error = ProposeError::kNone;
    Index index = 0;  // where the entry will be if it commits
    Term term = 0;
};

// Per-follower replication mode (etcd's Progress states, thesis §10.2.2):
// probe sends one AppendRequest at a time until the follower's match is found,
// replicate pipelines up to the in-flight limits, snapshot sends an
// InstallSnapshot in chunks and waits for the last to be acknowledged.
enum class ReplicationState : std::uint8_t { kProbe, kReplicate, kSnapshot };

const char* to_string(ReplicationState state);

struct PeerStatus {
    NodeId id = kNoNode;
    bool voter = true;
    bool caught_up = false;  // learners: promotable now (see "Membership changes")
    bool leaving = false;    // removed, told until it learns its removal committed
    Index match = 0;
    Index next = 0;
    bool recently_active = false;
    ReplicationState state = ReplicationState::kProbe;
    std::size_t inflight_appends = 0;  // un-acked AppendRequests (replicate state)
    std::size_t inflight_bytes = 0;    // their entry bytes
};

struct Status {
    NodeId id = kNoNode;
    Role role = Role::kFollower;
    Term term = 0;
    NodeId leader = kNoNode;
    NodeId vote = kNoNode;
    Index commit = 0;
    Index applied = 0;
    Index last_index = 0;
    Index snapshot_index = 0;
    Index stable_index = 0;         // last log index known durable (advance()d)
    NodeId transfer_target = kNoNode;  // leader only: leadership transfer in progress
    Index config_index = 0;            // the entry of the configuration in force (0: from Config::members)
    std::vector<PeerStatus> peers;  // filled on the leader only
};

class Raft {
public:
    // Restores term, vote, commit, snapshot and log from `storage`. The
    // applied index starts at storage.snapshot().meta.index: the caller
    // restores its state machine from that snapshot itself, then applies
    // Ready::committed (entries after the snapshot up to the durable commit).
    // Throws std::invalid_argument for a bad Config (the message says which
    // field and value) or an inconsistent Storage (a gap after the snapshot).
    // A stored commit outside [snapshot index, last stored index] is clamped
    // and the clamped hard state re-persisted in the first Ready. A stored log
    // whose last term exceeds the stored term (a torn write kept the entries
    // but not the hard state) starts the core in that term with no vote,
    // re-persisted likewise.
    Raft(const Config& config, const Storage& storage);
    ~Raft();
    Raft(const Raft&) = delete;
    Raft& operator=(const Raft&) = delete;
    Raft(Raft&&) noexcept;
    Raft& operator=(Raft&&) noexcept;

    // One unit of logical time.
    void tick();

    // A message from the network. Messages for another cluster or member are
    // dropped (and counted in dropped_messages()); a member of the cluster
    // outside our configuration is heard (it may be a newer leader), but its
    // votes count only if it is a voter of the configuration in force. A broken safety property
    // the core can see itself throws std::logic_error: an AppendRequest,
    // SnapshotRequest or Heartbeat reaching a leader in its own term (two
    // leaders), or a leader's entries overwriting a committed entry.
    void step(const Message& m);

    // Appends a command to the leader's log.
    ProposeResult propose(std::string command);

    // Appends a configuration entry that makes `change` (see "Membership
    // changes" above for the rules and errors). It is in force at once;
    // like any entry it may still be lost to a new leader, which the caller
    // learns as it learns of a lost proposal (another term at that index).
    ProposeResult propose_config(const ConfigChange& change);

    // The configuration in force (the last one appended, or from storage, or
    // Config::members), and the index of its entry (0 when it has none).
    const Configuration& configuration() const;
    Index configuration_index() const;
    // A leader told this member it was removed (types.h Removed): the caller
    // stops it. It stays true.
    bool told_removed() const;
    // The configuration in force at `index` (for a snapshot taken there; at
    // most the last index, at least the snapshot index), and the index of
    // the entry that made it (SnapshotMeta::config_index).
    Configuration configuration_at(Index index) const;
    Index configuration_index_at(Index index) const;

    // Asks the leader to confirm it is still leader (thesis §6.4). Returns
    // false at once if this member is not the leader, a leadership transfer is
    // in progress, or kMaxPendingReads reads are already pending; otherwise
    // the context later appears in Ready::reads or Ready::dropped_reads.
    bool read_index(std::uint64_t context);

    // Leader only: hands leadership to `target` (thesis §3.10). Proposals are
    // refused until the transfer completes or aborts (after an election timeout).
    bool transfer_leadership(NodeId target);

    // The application took a snapshot of its state at `index` (<= applied)
    // and persisted it. The core keeps it for InstallSnapshot and drops log
    // entries at or below index - keep_entries from memory, except those
    // after a snapshot still being sent to a follower (its transfer goes on,
    // and the follower continues by log from there) while they hold at most
    // Config::max_transfer_log_bytes; past that the follower gets a newer
    // snapshot after its transfer, so the log kept is bounded. Throws
    // std::invalid_argument if index > applied; an index at or below the
    // current snapshot is ignored (nothing newer to keep).
    void compact(Index index, std::string data, Index keep_entries);
    // The same, keeping `snapshot` itself (shared with whoever else holds
    // it: the application's storage) instead of a copy of its data. Its
    // meta must be what compact(index, ...) would record: the term and the
    // configuration at its index (else std::invalid_argument).
    void compact(std::shared_ptr<const Snapshot> snapshot, Index keep_entries);

    bool has_ready() const;
    // Throws std::logic_error if the previous Ready was not advance()d.
    Ready ready();
    // Throws std::logic_error if no Ready is outstanding.
    void advance(const Ready& ready);

    // For a caller that applies a Ready's `committed` as soon as it has the
    // Ready (those entries are durable already, so applying them waits for
    // nothing in that Ready): the committed entries beyond those handed out so
    // far, while a Ready is outstanding, so that a commit learnt meanwhile (a
    // follower's ack) is applied without waiting for that Ready's write. Apply
    // them in order, after the outstanding Ready's committed entries; the core
    // counts them applied at once. Empty when no Ready is outstanding (ready()
    // hands them out) or the outstanding Ready carries a snapshot (the state
    // machine is restored from it first). Bounded like Ready::committed.
    std::vector<Entry> take_committed();

    // For a leader whose Ready is being written: the messages that may go out
    // at once (as Ready::messages_now), taken now instead of at the next
    // ready(), after sending every follower the entries proposed since that
    // Ready (thesis §10.2.1: a leader sends entries before they are durable
    // on its own disk), within the in-flight limits, with the commit index
    // to followers that have not seen it, and starting a pending ReadIndex
    // round. Send them at once. It moves each follower's progress as a
    // ready() would (next index, appends in flight, commit index sent, the
    // ReadIndex round started); the entries still come in the next Ready's
    // `entries` for this member's own write, and its own log counts toward a
    // quorum only once advance() says they are durable.
    // A configuration entry is not sent before it is durable here (see
    // "Membership changes"). Empty when no Ready is outstanding (ready()
    // hands them out), when this member does not lead, or while the term it
    // leads in is not durable yet (the outstanding Ready brings it: its
    // messages go in the next Ready).
    std::vector<Message> take_messages_now();

    Status status() const;
    Role role() const;
    Term term() const;
    NodeId leader() const;
    NodeId id() const;
    std::uint64_t dropped_messages() const;

    // Debug invariant check (LogCabin's RaftConsensusInvariants): "" when all
    // hold, otherwise a description of the first broken one. Cheap (O(members
    // + a bounded log window)); tests and the simulation call it after every
    // step. See invariants.cc for the list and the thesis sections.
    std::string check_invariants() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pgfence::raft
