// One simulated member: see sim_member.h.
#include "sim_member.h"

#include "sim_failure.h"

namespace pgfence::sim {

namespace {

ClientReply make_reply(int client, std::uint64_t op_id, int attempt, ClientReply::Kind kind) {
    ClientReply r;
    r.client = client;
    r.op_id = op_id;
    r.attempt = attempt;
    r.kind = kind;
    return r;
}

}  // namespace

Member::Member(raft::Config config, std::uint64_t compact_every_entries, std::uint64_t keep_entries,
               bool hard_state_first, bool eager, SafetyChecker& checker)
    : config_(std::move(config)),
      compact_every_entries_(compact_every_entries),
      keep_entries_(keep_entries),
      eager_(eager),
      checker_(checker) {
    disk_.set_hard_state_first(hard_state_first);
}

void Member::start(std::uint64_t random_seed) {
    require(!up(), "member ", id(), " started twice");
    check_restart();
    raft::Config config = config_;
    config.random_seed = random_seed;
    raft_ = std::make_unique<raft::Raft>(config, disk_.durable());
    const raft::Status status = raft_->status();
    const raft::HardState hs = disk_.durable().hard_state();
    // A torn write can keep entries of a newer term than the stored hard state:
    // the core then starts in that term with no vote (raft CHANGES-TO-CONTRACT, F1).
    const raft::Term log_term = disk_.durable().term_at(disk_.durable().last_index()).value_or(0);
    const bool raised = log_term > hs.term;
    const raft::Term want_term = raised ? log_term : hs.term;
    const raft::NodeId want_vote = raised ? raft::kNoNode : hs.vote;
    require(status.term == want_term && status.vote == want_vote, "member ", id(), " restarted with term ",
            status.term, " vote ", status.vote, " but its disk holds term ", hs.term, " vote ", hs.vote,
            " and a last entry of term ", log_term, " (expected term ", want_term, " vote ", want_vote, ")");
    require(status.last_index == disk_.durable().last_index(), "member ", id(), " restarted with last index ",
            status.last_index, " but its disk holds ", disk_.durable().last_index());
    table_ = lock::LockTable{};
    const raft::Snapshot snap = disk_.durable().snapshot();
    if (!snap.empty()) restore(snap);
    leader_term_ = 0;
    check_core();
}

// The durable-ack invariant: what this member acknowledged before its crash
// is still on its disk, unless the core itself overwrote it since.
void Member::check_restart() const {
    const SimStorage& durable = disk_.durable();
    if (acked_entry_) {
        const auto [index, term] = *acked_entry_;
        const bool overwritten = durable.lowest_overwritten() <= index;
        const bool compacted = index < durable.first_index();
        require(overwritten || compacted || durable.term_at(index) == term, "member ", id(),
                " acknowledged entry ", index, " term ", term,
                " before crashing, but after restart its disk does not hold it (last index ", durable.last_index(),
                ")");
    }
    if (acked_vote_) {
        const auto [term, candidate] = *acked_vote_;
        const raft::HardState hs = durable.hard_state();
        require(hs.term > term || (hs.term == term && hs.vote == candidate), "member ", id(),
                " granted its vote in term ", term, " to member ", candidate,
                " before crashing, but after restart its disk holds term ", hs.term, " vote ", hs.vote);
    }
}

CrashLoss Member::crash(SimRandom& random) {
    require(up(), "member ", id(), " crashed twice");
    raft_.reset();
    in_flight_.reset();
    applied_early_ = false;
    durable_ = false;
    inline_ = false;
    saving_snapshot_ = false;
    proposals_.clear();
    reads_.clear();
    leader_term_ = 0;
    return disk_.crash(random);
}

void Member::tick(Outbox& out) {
    raft_->tick();
    after_input(out);
}

void Member::step(const raft::Message& m, Outbox& out) {
    raft_->step(m);
    after_input(out);
}

bool Member::transfer(raft::NodeId target) { return raft_->transfer_leadership(target); }

raft::ProposeResult Member::propose_raw(const lock::Command& cmd) { return raft_->propose(lock::encode(cmd)); }

void Member::handle_client(const ClientRequest& request, Outbox& out) {
    if (raft_->role() != raft::Role::kLeader) {
        out.replies.push_back(ClientReply{request.client, request.op_id, request.attempt, ClientReply::Kind::kRedirect,
                                          raft_->leader(), 0, 0, lock::Noop{}, 0});
        return;
    }
    if (request.is_read) {
        const std::uint64_t context = next_read_context_++;
        if (raft_->read_index(context)) {
            reads_.emplace(context, PendingRead{request.client, request.op_id, request.attempt, request.read_key, std::nullopt});
        } else {
            out.replies.push_back(make_reply(request.client, request.op_id, request.attempt, ClientReply::Kind::kUnknown));
        }
    } else {
        const raft::ProposeResult r = raft_->propose(lock::encode(request.command));
        if (r.error == raft::ProposeError::kNone) {
            proposals_[r.index] = Proposal{request.client, request.op_id, request.attempt, r.term};
        } else {
            out.replies.push_back(make_reply(request.client, request.op_id, request.attempt, ClientReply::Kind::kUnknown));
        }
    }
    after_input(out);
}

void Member::after_input(Outbox& out) {
    if (eager_ && in_flight_) {
        // The server's pipelining: apply commits learnt during the write
        // without waiting for it.
        const std::vector<raft::Entry> committed = raft_->take_committed();
        for (const auto& e : committed) apply_entry(e, out);
        if (!committed.empty()) serve_reads(out);
    }
    const raft::Role role = raft_->role();
    const raft::Term term = raft_->term();
    checker_.observe_role(id(), role, term);
    const raft::Term now_leading = role == raft::Role::kLeader ? term : 0;
    if (now_leading != leader_term_) {
        fail_pending(out);
        leader_term_ = now_leading;
    }
    check_core();
}

void Member::check_core() {
    const std::string broken = raft_->check_invariants();
    require(broken.empty(), "member ", id(), " check_invariants(): ", broken);
}

// Leadership was lost (or changed term): the outcome of every proposal in
// flight is unknown to its client.
void Member::fail_pending(Outbox& out) {
    for (const auto& [index, p] : proposals_) {
        out.replies.push_back(make_reply(p.client, p.op_id, p.attempt, ClientReply::Kind::kUnknown));
    }
    proposals_.clear();
}

void Member::send(const raft::Message& m, Outbox& out) {
    checker_.observe_sent(m, disk_.durable());
    if (const auto* a = std::get_if<raft::AppendResponse>(&m.body); a && a->success) {
        if (const auto term = disk_.durable().term_at(a->match_index)) {
            acked_entry_ = {a->match_index, *term};
            disk_.reset_overwritten();
        }
    }
    if (const auto* v = std::get_if<raft::VoteResponse>(&m.body); v && v->granted && !v->pre_vote) {
        acked_vote_ = {m.term, m.to};
    }
    out.messages.push_back(m);
}

bool Member::begin_persist(Outbox& out) {
    if (in_flight_ || !raft_->has_ready()) return false;
    in_flight_ = raft_->ready();
    disk_.write(*in_flight_);
    checker_.observe_written(id(), in_flight_->entries, disk_.volatile_image());
    for (const auto& m : in_flight_->messages_now) send(m, out);
    // Eager (the server's order): a leader's Ready's committed entries are
    // durable already, so they are applied while its write is in flight,
    // unless a snapshot must be restored first. A follower writes inline and
    // applies after the sync, except for the first Ready after a compaction:
    // the server saves snapshots on its writer thread, and a follower's Ready
    // that comes meanwhile queues behind the save there (written as a
    // leader's is).
    inline_ = eager_ && raft_->role() != raft::Role::kLeader && !saving_snapshot_;
    saving_snapshot_ = false;
    applied_early_ = eager_ && !inline_ && !in_flight_->snapshot;
    if (applied_early_) apply_ready(*in_flight_, out);
    return true;
}

void Member::persist_durable(Outbox& out) {
    require(in_flight_.has_value(), "member ", id(), " synced a persist it never began");
    require(!durable_, "member ", id(), " synced the same persist twice");
    disk_.sync();
    for (const auto& m : in_flight_->messages) send(m, out);
    durable_ = true;
    if (!eager_ || inline_) finish_persist(out);
}

void Member::finish_persist(Outbox& out) {
    require(in_flight_.has_value(), "member ", id(), " advanced a persist it never began");
    require(durable_, "member ", id(), " advanced a persist not yet synced");
    const raft::Ready ready = std::move(*in_flight_);
    in_flight_.reset();
    durable_ = false;
    inline_ = false;
    if (!applied_early_) apply_ready(ready, out);
    applied_early_ = false;
    raft_->advance(ready);
    maybe_compact();
    after_input(out);
}

void Member::apply_ready(const raft::Ready& ready, Outbox& out) {
    if (ready.snapshot) restore(*ready.snapshot);
    for (const auto& e : ready.committed) apply_entry(e, out);
    for (const auto& rs : ready.reads) {
        auto it = reads_.find(rs.context);
        if (it != reads_.end()) it->second.read_index = rs.index;
    }
    for (const std::uint64_t context : ready.dropped_reads) {
        auto it = reads_.find(context);
        if (it == reads_.end()) continue;
        out.replies.push_back(make_reply(it->second.client, it->second.op_id, it->second.attempt, ClientReply::Kind::kUnknown));
        reads_.erase(it);
    }
    serve_reads(out);
}

void Member::restore(const raft::Snapshot& snap) {
    auto restored = lock::LockTable::restore(snap.data);
    const auto* table = std::get_if<lock::LockTable>(&restored);
    require(table != nullptr, "member ", id(), " cannot restore the snapshot at index ", snap.meta.index, ": ",
            table ? "" : std::get<lock::DecodeError>(restored).message);
    table_ = *table;
    ++stats_.snapshots_restored;
    checker_.observe_restored(id(), snap.meta, table_);
}

void Member::apply_entry(const raft::Entry& e, Outbox& out) {
    checker_.before_apply(id(), e, table_, disk_.durable());
    std::optional<lock::Command> cmd;
    if (e.type == raft::EntryType::kNormal) {
        auto decoded = lock::decode_command(e.data);
        if (auto* c = std::get_if<lock::Command>(&decoded)) cmd = std::move(*c);
    }
    std::optional<lock::Lock> prior;
    if (cmd) {
        const std::string* key = std::visit(
            [](const auto& c) -> const std::string* {
                if constexpr (requires { c.key; }) return &c.key;
                return nullptr;
            },
            *cmd);
        if (key != nullptr) {
            if (const lock::Lock* held = table_.find(*key)) prior = *held;
        }
    }
    const lock::Token prior_last_token = table_.last_token();
    const lock::Result result = cmd ? table_.apply(e.index, *cmd) : table_.apply_noop(e.index);
    ++stats_.applied_entries;
    const std::string table_broken = table_.check_invariants();
    require(table_broken.empty(), "member ", id(), " lock table check_invariants() after index ", e.index, ": ",
            table_broken);
    checker_.after_apply(id(), e, result, prior, prior_last_token, table_);
    auto it = proposals_.find(e.index);
    if (it == proposals_.end()) return;
    const Proposal p = it->second;
    proposals_.erase(it);
    if (p.term == e.term) {
        out.replies.push_back(ClientReply{p.client, p.op_id, p.attempt, ClientReply::Kind::kResult, raft::kNoNode, e.index,
                                          e.term, result, 0});
    } else {
        out.replies.push_back(make_reply(p.client, p.op_id, p.attempt, ClientReply::Kind::kUnknown));
    }
}

void Member::serve_reads(Outbox& out) {
    for (auto it = reads_.begin(); it != reads_.end();) {
        const PendingRead& r = it->second;
        if (!r.read_index || *r.read_index > table_.applied_index()) {
            ++it;
            continue;
        }
        const lock::Lock* held = table_.find(r.key);
        out.replies.push_back(ClientReply{r.client, r.op_id, r.attempt, ClientReply::Kind::kRead, raft::kNoNode,
                                          table_.applied_index(), 0, lock::Noop{}, held ? held->token : 0});
        it = reads_.erase(it);
    }
}

void Member::maybe_compact() {
    const raft::Index applied = table_.applied_index();
    const raft::Index snap_index = disk_.durable().snapshot().meta.index;
    if (applied < snap_index + compact_every_entries_) return;
    const auto term = disk_.durable().term_at(applied);
    require(term.has_value(), "member ", id(), " applied index ", applied, " that is not on its disk");
    raft::Snapshot snap;
    snap.meta = raft::SnapshotMeta{applied, *term, config_.members};
    snap.data = table_.snapshot();
    disk_.compact(snap);
    raft_->compact(applied, snap.data, keep_entries_);
    ++stats_.compactions;
    saving_snapshot_ = true;
}

}  // namespace pgfence::sim
