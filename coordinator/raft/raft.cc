// Raft: construction from Storage, step() dispatch with the term rules, and
// the Ready/advance handshake. Role-specific handlers live in the other files
// (see core.h).
#include "raft/raft.h"

#include <algorithm>
#include <stdexcept>

#include "raft/core.h"

namespace pgfence::raft {

namespace {

// Every message has one handler; this names the body for the step dispatch.
template <class... Ts>
struct Overloaded : Ts... {
    using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

void validate(const Config& c) {
    auto bad = [](const std::string& what) {
        throw std::invalid_argument("raft::Config: " + what);
    };
    if (c.id == kNoNode) bad("id must not be 0");
    if (!c.members.empty() && std::find(c.members.begin(), c.members.end(), c.id) == c.members.end()) {
        bad("id " + std::to_string(c.id) + " is not in members");
    }
    std::vector<NodeId> sorted = c.members;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
        bad("members has duplicates");
    if (std::find(sorted.begin(), sorted.end(), kNoNode) != sorted.end()) bad("member id 0");
    for (const auto& [id, context] : c.contexts) {
        if (!std::binary_search(sorted.begin(), sorted.end(), id)) {
            bad("contexts names member " + std::to_string(id) + ", not in members");
        }
        if (context.size() > kMaxMemberContextBytes) bad("context of member " + std::to_string(id) + " too long");
    }
    if (c.heartbeat_ticks < 1) bad("heartbeat_ticks " + std::to_string(c.heartbeat_ticks) + " < 1");
    if (c.election_ticks <= c.heartbeat_ticks) {
        bad("election_ticks " + std::to_string(c.election_ticks) + " must exceed heartbeat_ticks " +
            std::to_string(c.heartbeat_ticks));
    }
    if (c.max_inflight_appends < 1) bad("max_inflight_appends must be >= 1");
    if (c.max_inflight_bytes < 1 || c.max_append_bytes < 1) bad("byte limits must be >= 1");
}

bool sent_by_leader_without_waiting(const MessageBody& body) {
    return std::holds_alternative<AppendRequest>(body) || std::holds_alternative<Heartbeat>(body) ||
           std::holds_alternative<SnapshotRequest>(body) ||
           std::holds_alternative<TimeoutNow>(body) || std::holds_alternative<Removed>(body);
}

}  // namespace

Raft::Impl::Impl(const Config& config, const Storage& storage)
    : cfg((validate(config), config)),
      rng(config.random_seed ^ (config.id * 0x9E3779B97F4A7C15ull)) {
    log.restore(storage);
    snapshot = std::make_shared<const Snapshot>(storage.snapshot());
    restore_configs();
    const HardState hs = storage.hard_state();
    term = hs.term;
    vote = hs.vote;
    if (log.last_term() > term) {
        // A crash persisted entries of a newer term but not the hard state
        // that came with them (a torn group commit). Nothing of that Ready was
        // sent (messages wait for the whole write), so no vote was cast in
        // the newer term: adopt it with no vote. Keeps last log term <= term.
        term = log.last_term();
        vote = kNoNode;
    }
    // A crash between writing entries and hard state may leave commit outside
    // the stored log; clamp it (the snapshot is committed by definition).
    commit = std::clamp(hs.commit, log.base_index(), std::max(log.base_index(), log.last_index()));
    applied = handed_commit = snapshot->meta.index;
    durable_commit = commit;  // the stored log holds every entry up to it
    handed_hs = hs;  // a clamped commit or raised term differs, so it is persisted again
    durable_term = hs.term;
    become_follower(term, kNoNode);
}

NodeId Raft::Impl::known_leader() const {
    if (const auto* f = std::get_if<Follower>(&role)) return f->leader;
    return is_leader() ? cfg.id : kNoNode;
}

Role Raft::Impl::role_kind() const {
    switch (role.index()) {
        case 0:
            return Role::kFollower;
        case 1:
            return Role::kPreCandidate;
        case 2:
            return Role::kCandidate;
        default:
            return Role::kLeader;
    }
}

void Raft::Impl::send(NodeId to, MessageBody body, Term msg_term) {
    Message m{cfg.cluster_id, cfg.id, to, msg_term, std::move(body)};
    // §10.2.1: the leader's replication traffic does not wait for its own
    // disk; everything else acknowledges or asks for durable state.
    if (is_leader() && sent_by_leader_without_waiting(m.body)) {
        msgs_now.push_back(std::move(m));
    } else {
        msgs.push_back(std::move(m));
    }
}

void Raft::Impl::fail_two_leaders(const Message& m, const char* what) const {
    throw std::logic_error("Election Safety broken: leader " + std::to_string(cfg.id) + " got " +
                           what + " from " + std::to_string(m.from) + " in its own term " +
                           std::to_string(term));
}

void Raft::Impl::step(const Message& m) {
    // Any member of the cluster is heard, in our configuration or not (§4.1:
    // a member behind on the log does not know a newer leader or candidate
    // yet). Votes from non-voters are not counted, and the leader ignores
    // answers from members it does not replicate to.
    if (m.cluster_id != cfg.cluster_id || m.to != cfg.id || m.from == cfg.id || m.from == kNoNode) {
        ++dropped;  // another cluster, or misrouted: never mix clusters
        return;
    }
    if (is_leader() && std::holds_alternative<VoteRequest>(m.body) && !config().contains(m.from) &&
        !config_at(commit).contains(m.from)) {
        // A removed member campaigning: it never learnt of its removal.
        send(m.from, Removed{});
        return;
    }
    if (!step_term(m)) return;
    step_current(m);
}

// Term rules (Figure 2 "all servers", §9.6, §6.2). Returns false when the
// message was fully handled (ignored or answered) here.
bool Raft::Impl::step_term(const Message& m) {
    if (m.term > term) {
        if (const auto* req = std::get_if<VoteRequest>(&m.body)) {
            // §6.2 leader stickiness: a member that heard from a live leader
            // within the minimum election timeout ignores vote requests, so a
            // partitioned or flaky member cannot depose it; TimeoutNow-driven
            // campaigns (§3.10) are exempt.
            if (in_lease() && !req->transfer) return false;
            // §9.6: a pre-vote never changes anybody's term.
            if (req->pre_vote) return true;
            become_follower(m.term, kNoNode);
            return true;
        }
        if (const auto* resp = std::get_if<VoteResponse>(&m.body)) {
            // A granted pre-vote carries the term we would campaign in.
            if (resp->pre_vote && resp->granted) return true;
        }
        const bool from_leader = std::holds_alternative<AppendRequest>(m.body) ||
                                 std::holds_alternative<Heartbeat>(m.body) ||
                                 std::holds_alternative<SnapshotRequest>(m.body);
        become_follower(m.term, from_leader ? m.from : kNoNode);
        return true;
    }
    if (m.term < term) {
        // Figure 2: reply false to stale requests so the sender learns our
        // term. A stale leader's append/heartbeat gets a rejected append
        // response (it steps down); a stale (pre-)vote request a rejection
        // (a stuck pre-candidate learns the term, §9.6). Stale responses are
        // ignored.
        if (const auto* req = std::get_if<VoteRequest>(&m.body)) {
            send(m.from, VoteResponse{req->pre_vote, false});
        } else if (std::holds_alternative<AppendRequest>(m.body) ||
                   std::holds_alternative<Heartbeat>(m.body) ||
                   std::holds_alternative<SnapshotRequest>(m.body)) {
            send(m.from, AppendResponse{});
        }
        return false;
    }
    return true;
}

void Raft::Impl::step_current(const Message& m) {
    std::visit(Overloaded{
                   [&](const VoteRequest& b) { handle_vote_request(m, b); },
                   [&](const VoteResponse& b) { handle_vote_response(m, b); },
                   [&](const AppendRequest& b) { handle_append(m, b); },
                   [&](const AppendResponse& b) { handle_append_response(m, b); },
                   [&](const SnapshotRequest& b) { handle_snapshot(m, b); },
                   [&](const SnapshotAck& b) { handle_snapshot_ack(m, b); },
                   // Only a leader sends it, in its term (not older than ours:
                   // step_term dropped those).
                   [&](const Removed&) { told_removed = told_removed || !is_leader(); },
                   [&](const Heartbeat& b) { handle_heartbeat(m, b); },
                   [&](const HeartbeatResponse& b) { handle_heartbeat_response(m, b); },
                   [&](const TimeoutNow&) {
                       // §3.10: only this term's leader sends TimeoutNow; a
                       // follower campaigns at once, skipping PreVote.
                       if (std::holds_alternative<Follower>(role) && is_voter(cfg.id))
                           campaign(CampaignKind::kTransfer);
                   },
               },
               m.body);
}

bool Raft::Impl::has_ready() const {
    if (ready_outstanding) return false;
    if (HardState{term, vote, durable_commit} != handed_hs) return true;
    if (unsent_snapshot || log.has_unhanded() || !msgs_now.empty() || !msgs.empty()) return true;
    if (!reads_out.empty() || !dropped_reads_out.empty()) return true;
    if (std::min(commit, log.stable()) > handed_commit) return true;
    const Leader* l = leader_state();
    return l != nullptr && wants_flush(*l);
}

Ready Raft::Impl::ready() {
    if (ready_outstanding) throw std::logic_error("Raft::ready: previous Ready not advance()d");
    if (Leader* l = leader_state()) flush_appends(*l);
    Ready rd;
    const HardState hs{term, vote, durable_commit};  // see core.h: never ahead of the durable log
    // A leader's message may go out before this Ready is durable only if its
    // term is: handed out in an earlier Ready, advance()d before this one was
    // taken (durable_term). A single voter elects itself within one tick, so
    // its new term comes in the same Ready as its first appends (to learners,
    // to removed members being told): those wait for the write, else a crash
    // before it lets the member lead that term again with other entries under
    // the same index and term (Log Matching, Figure 3).
    if (hs != handed_hs) rd.hard_state = handed_hs = hs;
    if (unsent_snapshot) {
        rd.snapshot = std::move(unsent_snapshot);
        unsent_snapshot.reset();
    }
    rd.entries = log.take_unstable();
    rd.messages_now.swap(msgs_now);
    rd.messages.swap(msgs);
    if (hs.term != durable_term) {
        std::vector<Message> now;
        for (Message& m : rd.messages_now) (m.term > durable_term ? rd.messages : now).push_back(std::move(m));
        rd.messages_now.swap(now);
    }
    rd.committed = hand_committed();
    rd.reads.swap(reads_out);
    rd.dropped_reads.swap(dropped_reads_out);
    ready_outstanding = true;
    outstanding_snapshot = rd.snapshot.has_value();
    return rd;
}

// Only locally durable entries are applied (a follower may know a commit
// index beyond what it has persisted). Bounded per batch.
std::vector<Entry> Raft::Impl::hand_committed() {
    std::vector<Entry> out;
    const Index apply_to = std::min(commit, log.stable());
    std::size_t bytes = 0;
    for (Index i = handed_commit + 1; i <= apply_to; ++i) {
        const Entry& e = log.at(i);
        if (!out.empty() && bytes + e.data.size() > cfg.max_append_bytes) break;
        bytes += e.data.size();
        out.push_back(e);
    }
    if (!out.empty()) handed_commit = out.back().index;
    return out;
}

std::vector<Entry> Raft::Impl::take_committed() {
    if (!ready_outstanding || outstanding_snapshot || unsent_snapshot) return {};
    std::vector<Entry> out = hand_committed();
    if (!out.empty()) applied = out.back().index;
    return out;
}

// §10.2.1 while the leader's Ready is written: what ready() would send at
// once, sent now (raft.h). flush_appends() sends up to sendable_last(), so a
// configuration entry still waits for its write.
std::vector<Message> Raft::Impl::take_messages_now() {
    Leader* l = leader_state();
    if (!ready_outstanding || l == nullptr || term != durable_term) return {};
    flush_appends(*l);
    std::vector<Message> out;
    out.swap(msgs_now);
    return out;
}

void Raft::Impl::advance(const Ready& rd) {
    if (!ready_outstanding) throw std::logic_error("Raft::advance: no Ready outstanding");
    ready_outstanding = false;
    durable_term = handed_hs.term;
    if (rd.snapshot) applied = std::max(applied, rd.snapshot->meta.index);
    if (!rd.committed.empty()) applied = std::max(applied, rd.committed.back().index);
    if (!rd.entries.empty()) {
        log.stable_to(rd.entries);
        // §10.2.1: the leader's own log now counts toward the quorum.
        if (is_leader()) maybe_commit();
    }
    // Everything up to min(commit, stable) is durable now, unless a snapshot
    // received since ready() replaced the log and is not written yet (its
    // restore already moved the log's stable index to the snapshot point).
    if (!unsent_snapshot) durable_commit = std::max(durable_commit, std::min(commit, log.stable()));
}

Status Raft::Impl::status() const {
    Status s;
    s.id = cfg.id;
    s.role = role_kind();
    s.term = term;
    s.leader = known_leader();
    s.vote = vote;
    s.commit = commit;
    s.applied = applied;
    s.last_index = log.last_index();
    s.snapshot_index = snapshot->meta.index;
    s.stable_index = log.stable();
    s.config_index = configs.back().index;
    if (const Leader* l = leader_state()) {
        s.transfer_target = l->transfer_target;
        for (const auto& [id, pr] : l->progress) {
            s.peers.push_back(PeerStatus{id, is_voter(id), !is_voter(id) && pr.removed_at == 0 && caught_up(pr),
                                         pr.removed_at != 0, pr.match, pr.next, pr.recently_active, pr.state,
                                         pr.inflights.count(), pr.inflights.bytes()});
        }
    }
    return s;
}

// ---- public wrapper --------------------------------------------------------

Raft::Raft(const Config& config, const Storage& storage)
    : impl_(std::make_unique<Impl>(config, storage)) {}
Raft::~Raft() = default;
Raft::Raft(Raft&&) noexcept = default;
Raft& Raft::operator=(Raft&&) noexcept = default;

void Raft::tick() {
    impl_->tick();
}
void Raft::step(const Message& m) {
    impl_->step(m);
}
ProposeResult Raft::propose(std::string command) {
    return impl_->propose(std::move(command));
}
ProposeResult Raft::propose_config(const ConfigChange& change) {
    return impl_->propose_config(change);
}
const Configuration& Raft::configuration() const {
    return impl_->config();
}
Index Raft::configuration_index() const {
    return impl_->configs.back().index;
}
bool Raft::told_removed() const { return impl_->told_removed; }
Configuration Raft::configuration_at(Index index) const {
    return impl_->config_at(index);
}
Index Raft::configuration_index_at(Index index) const {
    return impl_->config_entry_at(index).index;
}
bool Raft::read_index(std::uint64_t context) {
    return impl_->read_index(context);
}
bool Raft::transfer_leadership(NodeId target) {
    return impl_->transfer_leadership(target);
}
void Raft::compact(Index index, std::string data, Index keep_entries) {
    impl_->compact(index, std::move(data), keep_entries);
}
void Raft::compact(std::shared_ptr<const Snapshot> snapshot, Index keep_entries) {
    impl_->compact(std::move(snapshot), keep_entries);
}
bool Raft::has_ready() const {
    return impl_->has_ready();
}
Ready Raft::ready() {
    return impl_->ready();
}
std::vector<Entry> Raft::take_committed() {
    return impl_->take_committed();
}
std::vector<Message> Raft::take_messages_now() {
    return impl_->take_messages_now();
}
void Raft::advance(const Ready& rd) {
    impl_->advance(rd);
}
Status Raft::status() const {
    return impl_->status();
}
Role Raft::role() const {
    return impl_->role_kind();
}
Term Raft::term() const {
    return impl_->term;
}
NodeId Raft::leader() const {
    return impl_->known_leader();
}
NodeId Raft::id() const {
    return impl_->cfg.id;
}
std::uint64_t Raft::dropped_messages() const {
    return impl_->dropped;
}
std::string Raft::check_invariants() const {
    return impl_->check_invariants();
}

}  // namespace pgfence::raft
