// One simulated member: see sim_shell.h.
#include "sim_shell.h"

#include "sim_failure.h"

namespace pgfence::sim {

namespace {

// The key a command names (nullptr for SetTokenFloor).
const std::string* key_of(const lock::Command& cmd) {
    return std::visit(
        [](const auto& c) -> const std::string* {
            if constexpr (requires { c.key; }) return &c.key;
            return nullptr;
        },
        cmd);
}

// The keys an acquire asks for: its one key or its set's.
std::vector<std::string> keys_of(const member::Acquire& a) {
    return a.keys.empty() ? std::vector<std::string>{a.key} : a.keys;
}

}  // namespace

Member::Member(member::Config config, bool hard_state_first, SafetyChecker& checker, LeaderChecker& leader_checker,
               QuorumChecker& quorum_checker, const std::uint64_t& clock_us, double clock_rate)
    : config_(std::move(config)), checker_(checker), leader_checker_(leader_checker),
      quorum_checker_(quorum_checker), first_config_(raft::Configuration::of_voters(config_.raft.members)),
      clock_us_(clock_us), clock_rate_(clock_rate) {
    config_.observer = this;
    disk_.set_hard_state_first(hard_state_first);
    leader_checker_.set_rate(id(), clock_rate_);
    quorum_checker_.attach(id(), disk_.durable());
}

member::Time Member::now() const {
    return member::Time(static_cast<std::int64_t>(static_cast<double>(clock_us_) * clock_rate_ * 1000.0));
}

// The member's wall clock: its monotonic reading from a fixed epoch
// (member::Core::wall_clock), told before the inputs that may propose.
void Member::tell_wall_clock() {
    constexpr std::uint64_t kSimEpochMs = 1'800'000'000'000;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now()).count();
    core_->wall_clock(kSimEpochMs + static_cast<std::uint64_t>(ms));
}

void Member::start(std::uint64_t random_seed) {
    require(!up(), "member ", id(), " started twice");
    require(!stopped_, "member ", id(), " started after it stopped for good");
    check_restart();
    member::Config config = config_;
    config.raft.random_seed = random_seed;
    core_ = std::make_unique<member::Core>(config, disk_.durable());
    const raft::Status status = core_->raft().status();
    const raft::HardState hs = disk_.durable().hard_state();
    // A torn write can keep entries of a newer term than the stored hard state:
    // the core then starts in that term with no vote (raft.h, the constructor).
    const raft::Term log_term = disk_.durable().term_at(disk_.durable().last_index()).value_or(0);
    const bool raised = log_term > hs.term;
    const raft::Term want_term = raised ? log_term : hs.term;
    const raft::NodeId want_vote = raised ? raft::kNoNode : hs.vote;
    require(status.term == want_term && status.vote == want_vote, "member ", id(), " restarted with term ",
            status.term, " vote ", status.vote, " but its disk holds term ", hs.term, " vote ", hs.vote,
            " and a last entry of term ", log_term, " (expected term ", want_term, " vote ", want_vote, ")");
    require(status.last_index == disk_.durable().last_index(), "member ", id(), " restarted with last index ",
            status.last_index, " but its disk holds ", disk_.durable().last_index());
    led_term_ = 0;
    configuration_check_due_ = true;  // rebuilt from storage: the log's configuration
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

// The process ends: its core, the Ready being persisted, pending answers
// are gone (their clients time out); the disk is the caller's to settle.
void Member::end_process() {
    core_.reset();
    in_flight_.reset();
    inline_ = false;
    durable_ = false;
    saving_snapshot_ = false;
    effects_.clear();
    pending_.clear();
    gone_.clear();
    twins_.clear();
    expires_proposed_.clear();
    expires_applied_.clear();
    leader_checker_.crashed(id());
}

CrashLoss Member::crash(SimRandom& random) {
    require(up(), "member ", id(), " crashed twice");
    end_process();
    return disk_.crash(random);
}

void Member::stop() {
    require(up() && removed_, "member ", id(), " stopped while ", up() ? "not removed" : "down");
    end_process();
    disk_.sync();  // the writer thread finishes the write it has
    stopped_ = true;
}

void Member::tick(Outbox& out) {
    tell_wall_clock();
    core_->tick(now());
    after_input(out);
}

void Member::step(const raft::Message& m, std::uint64_t sent_us, Outbox& out) {
    leader_checker_.delivered(id(), m, sent_us);
    quorum_checker_.delivered(m);
    tell_wall_clock();
    core_->step(m, now());
    after_input(out);
}

void Member::handle_client(const ClientRequest& request, Outbox& out) {
    const member::RequestId id = next_request_++;
    const auto* acquire = std::get_if<member::Acquire>(&request.request);
    pending_[id] = Pending{request.client, request.op_id, request.attempt,
                           acquire ? keys_of(*acquire) : std::vector<std::string>{}};
    tell_wall_clock();
    core_->request(id, request.request, now());
    after_input(out);
}

void Member::handle_twins(const ClientRequest& twin, const ClientRequest& request, bool gone_first, Outbox& out) {
    const auto* acquire = std::get_if<member::Acquire>(&twin.request);
    require(acquire != nullptr, "member ", id(), ": a twin request that is not an acquire");
    const member::RequestId abandoned = next_request_++;
    core_->request(abandoned, twin.request, now());
    for (const std::string& key : keys_of(*acquire)) {
        leader_checker_.acquire_gone(id(), key);  // its grant, if answered, is reported unwritten
    }
    gone_.insert(abandoned);
    twins_.insert(abandoned);
    if (gone_first) core_->client_gone(abandoned, now());
    const member::RequestId rid = next_request_++;
    pending_[rid] = Pending{request.client, request.op_id, request.attempt, keys_of(*acquire)};
    core_->request(rid, request.request, now());
    after_input(out);
}

void Member::client_gone(int client, std::uint64_t op_id, Outbox& out) {
    for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.client == client && it->second.op_id == op_id) {
            for (const std::string& key : it->second.acquire_keys) leader_checker_.acquire_gone(id(), key);
            leader_checker_.answered(id(), it->first, false);
            core_->client_gone(it->first, now());
            gone_.insert(it->first);
            it = pending_.erase(it);
        } else {
            ++it;
        }
    }
    after_input(out);
}

bool Member::transfer(raft::NodeId target) { return core_->transfer_leadership(target); }

raft::ProposeResult Member::propose_raw(const lock::Command& cmd) { return core_->propose_raw(cmd); }

void Member::after_input(Outbox& out) {
    carry_out(out);
    leader_checker_.leading(id(), core_->leader_term(), core_->raft().configuration(),
                            core_->raft().configuration_index(), core_->table(), now());
    check_core();
}

void Member::check_core() {
    checker_.observe_role(id(), core_->raft().role(), core_->raft().term());
    const std::string broken = core_->check_invariants();
    require(broken.empty(), "member ", id(), " check_invariants(): ", broken);
    check_quorums();
}

// The quorum checker's inputs that need the core's status: a leadership as
// it begins (its votes), each move of a leader's commit index, and the
// configuration in force once the whole log is durable.
void Member::check_quorums() {
    const raft::Raft& r = core_->raft();
    const bool leading = r.role() == raft::Role::kLeader;
    if (!leading && !configuration_check_due_) return;
    const raft::Status st = r.status();
    if (leading && st.term != led_term_) {
        quorum_checker_.elected(id(), st.term, r.configuration());
        led_term_ = st.term;
        led_commit_ = st.commit;
    } else if (leading && st.commit > led_commit_) {
        quorum_checker_.committed(id(), st.term, st.commit, r.configuration());
        led_commit_ = st.commit;
    }
    // Durable: no Persist outstanding (a snapshot being installed counts as
    // stable in the core before it is written) and every entry advanced.
    if (configuration_check_due_ && in_flight_ == nullptr && st.stable_index == st.last_index) {
        quorum_checker_.check_core_configuration(id(), r.configuration(), disk_.durable(), st.last_index,
                                                 first_config_);
        configuration_check_due_ = false;
    }
}

// Everything but the start of a Persist, which only begin_persist() takes.
void Member::carry_out(Outbox& out) {
    for (int round = 0; round < 1000 && core_->has_effects(); ++round) {
        core_->take_effects(effects_);
        require(effects_.persist == nullptr, "member ", id(), " handed out a Persist outside turn()");
        carry_out_batch(out);
    }
    require(!core_->has_effects(), "member ", id(), " kept producing effects with no input");
}

// effects_ but its Persist: sends, the save, answers.
void Member::carry_out_batch(Outbox& out) {
    require(effects_.fatal.empty(), "member ", id(), ": fatal: ", effects_.fatal);
    tell_leader_checker(out);
    if (effects_.removed) removed_ = true;
    if (effects_.configuration) configuration_check_due_ = true;
    bool handover = false;  // this batch began a handover because the leader was asked to remove itself
    for (const member::LogLine& line : effects_.logs) {
        if (std::string_view(line.event) != "leadership_transfer") continue;
        for (std::size_t f = 0; f < line.count; ++f) {
            handover = handover || (std::string_view(line.fields[f].first) == "reason" &&
                                    line.fields[f].second == "removing the leader");
        }
    }
    stats_.handovers += handover ? 1 : 0;
    for (const raft::Message& m : effects_.send) send(m, out);
    if (effects_.save) {
        // Saved at once (temp file, fsync, rename); the server's writer
        // thread would still be on it when the next Persist comes, which then
        // queues behind it (begin_persist).
        disk_.compact(*effects_.save);
        core_->snapshot_saved(effects_.save, now());
        ++stats_.compactions;
        saving_snapshot_ = true;
    }
    for (member::Answer& a : effects_.respond) {
        auto it = pending_.find(a.id);
        if (it == pending_.end() && gone_.erase(a.id) > 0) {
            // Its client left: as the server, a grant nobody receives is
            // reported unwritten (a phantom: expired), anything else dropped.
            const bool twin = twins_.erase(a.id) > 0;
            if (const auto* g = std::get_if<member::Granted>(&a.response)) {
                ++stats_.grants_to_gone;
                stats_.twin_grants_unwritten += twin ? 1 : 0;
                if (g->keys.empty()) leader_checker_.acquire_gone(id(), g->key);
                for (const std::string& key : g->keys) leader_checker_.acquire_gone(id(), key);
                core_->response_written(a.id, false, now());
            }
            continue;
        }
        require(it != pending_.end(), "member ", id(), " answered request ", a.id, " twice or never asked");
        const Pending p = it->second;
        pending_.erase(it);
        const member::RequestId rid = a.id;
        const bool granted = std::holds_alternative<member::Granted>(a.response);
        const bool handed_over = handover && std::holds_alternative<member::Unavailable>(a.response);
        out.replies.push_back(
            ClientReply{p.client, p.op_id, p.attempt, id(), ClientReply::Kind::kAnswer, std::move(a), handed_over});
        if (granted) core_->response_written(rid, true, now());  // written (the network may still lose it)
    }
}

namespace {

// A field of one of the core's log lines: it must be there.
std::string_view field(const member::LogLine& line, std::string_view name) {
    for (std::size_t i = 0; i < line.count; ++i) {
        if (name == line.fields[i].first) return line.fields[i].second;
    }
    require(false, "log line ", line.event, " has no field ", name);
    return {};
}

std::uint64_t number(const member::LogLine& line, std::string_view name) {
    const std::string_view text = field(line, name);
    std::uint64_t v = 0;
    for (char c : text) {
        require(c >= '0' && c <= '9', "log line ", line.event, ": field ", name, " is not a number: ", text);
        v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    require(!text.empty(), "log line ", line.event, ": field ", name, " is empty");
    return v;
}

}  // namespace

// Grouped by kind: the batch's log lines in their order (a leader's grants,
// releases and expiries that removed a lock, Expire proposals, phantom
// releases), then the ids it queued, then the answers. Regrouping is
// harmless: a batch is one instant, a KeptAlive and an Expire proposal of one
// lease never share one in a correct core (either order then fails), and a
// request is queued before it can be answered.
void Member::tell_leader_checker(Outbox& out) {
    leader_checker_.batch_begins(id());
    leader_checker_.batch_begins(id());
    for (const member::LogLine& line : effects_.logs) {
        const std::string_view event = line.event;
        if (line.level != member::LogLevel::kInfo) continue;  // a leader's lines are info
        if (event == "grant") {
            leader_checker_.grant_applied(id(), std::string(field(line, "key")), number(line, "token"),
                                          number(line, "lease_ms"), now());
        } else if (event == "release" && field(line, "released") == "true") {
            leader_checker_.lock_removed(id(), std::string(field(line, "key")), number(line, "token"));
        } else if (event == "expire") {
            // One line per entry: the locks it removed, as its apply saw them.
            const raft::Index index = number(line, "index");
            auto it = expires_applied_.find(index);
            require(it != expires_applied_.end(), "member ", id(), " logged expire index=", index,
                    " but applied no Expire there in this batch");
            const AppliedExpire& applied = it->second;
            const std::set<KeyToken> distinct(applied.removed.begin(), applied.removed.end());
            require(number(line, "locks") == applied.locks && number(line, "expired") == distinct.size(), "member ",
                    id(), " logged expire index=", index, " locks=", field(line, "locks"), " expired=",
                    field(line, "expired"), " but its entry named ", applied.locks, " locks and removed ",
                    distinct.size());
            for (const auto& [key, token] : applied.removed) leader_checker_.lock_removed(id(), key, token);
        } else if (event == "expire_proposed") {
            // One line per entry: its locks, as proposed (proposed()).
            const raft::Index index = number(line, "index");
            auto it = expires_proposed_.find(index);
            require(it != expires_proposed_.end(), "member ", id(), " logged expire_proposed index=", index,
                    " but proposed no Expire there in this batch");
            require(number(line, "batch") == it->second.size() && it->second.front().first == field(line, "key") &&
                        it->second.front().second == number(line, "token"),
                    "member ", id(), " logged expire_proposed index=", index, " key=", field(line, "key"),
                    " batch=", field(line, "batch"), " for an entry of ", it->second.size(), " locks");
            for (const auto& [key, token] : it->second) {
                leader_checker_.expire_proposed(id(), key, token, clock_us_, now());
                out.expires_proposed.emplace_back(key, token);
            }
            expires_proposed_.erase(it);
        } else if (event == "leases_from_checkpoints") {
            leader_checker_.restarted_from_checkpoints(id(), core_->leader_term(), core_->table(), now());
        } else if (event == "phantom_release" && field(line, "expiring") == "true") {
            leader_checker_.phantom_released(id(), std::string(field(line, "key")), number(line, "token"), now());
        }
    }
    require(expires_proposed_.empty(), "member ", id(), " proposed an Expire at index ",
            expires_proposed_.empty() ? 0 : expires_proposed_.begin()->first, " without an expire_proposed line");
    expires_applied_.clear();  // a follower's, or a leader's logged above
    for (const member::RequestId rid : effects_.watch) {
        auto it = pending_.find(rid);
        if (it != pending_.end() && !it->second.acquire_keys.empty()) {
            leader_checker_.queued(id(), rid, it->second.acquire_keys);
        }
    }
    for (const member::Answer& a : effects_.respond) {
        // A KeptAlive restarted the lease whether or not its client is still there.
        if (const auto* k = std::get_if<member::KeptAlive>(&a.response)) {
            if (k->keys.empty()) leader_checker_.kept_alive(id(), k->key, k->token, now());
            for (const std::string& key : k->keys) leader_checker_.kept_alive(id(), key, k->token, now());
        }
        if (pending_.count(a.id) > 0) leader_checker_.answered(id(), a.id, std::holds_alternative<member::Granted>(a.response));
    }
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
    core_->turn(now());
    if (in_flight_ != nullptr || !core_->has_effects()) {
        after_input(out);
        return false;
    }
    core_->take_effects(effects_);
    std::shared_ptr<const raft::Ready> persist = std::move(effects_.persist);
    carry_out_batch(out);  // the Ready's messages_now go out as its write begins
    if (persist == nullptr) {
        after_input(out);
        return false;
    }
    for (const raft::Entry& e : persist->entries) {
        if (core_->leader_term() == 0 || e.type != raft::EntryType::kNormal) continue;
        auto decoded = lock::decode_command(e.data);
        const auto* cmd = std::get_if<lock::Command>(&decoded);
        if (const auto* x = cmd ? std::get_if<lock::Expire>(cmd) : nullptr) {
            leader_checker_.expire_in_ready(id(), e.term, x->key, x->token);
        }
        if (const auto* m = cmd ? std::get_if<lock::ExpireMany>(cmd) : nullptr) {
            for (const lock::Expire& x : m->locks) leader_checker_.expire_in_ready(id(), e.term, x.key, x.token);
        }
    }
    in_flight_ = std::move(persist);
    disk_.write(*in_flight_);
    if (in_flight_->snapshot) configuration_check_due_ = true;
    for (const raft::Entry& e : in_flight_->entries) {
        if (e.type == raft::EntryType::kConfig && core_->leader_term() == e.term) {
            quorum_checker_.config_written(id(), e.term, e.index, previous_config_entry(e.index));
        }
        // A configuration entry written, or one overwritten (a suffix of the
        // log replaced from an index at or below the last one's): the
        // configuration in force may have changed.
        if (e.type == raft::EntryType::kConfig || e.index <= last_config_written_) configuration_check_due_ = true;
        if (e.type == raft::EntryType::kConfig) last_config_written_ = e.index;
    }
    checker_.observe_written(id(), in_flight_->entries, disk_.volatile_image());
    // The server: a follower (or candidate) writes inline on its loop, unless
    // a snapshot save is queued on the writer thread; a leader hands the write
    // to the writer thread and applies its batch meanwhile.
    inline_ = core_->raft().role() != raft::Role::kLeader && !saving_snapshot_;
    saving_snapshot_ = false;
    core_->persist_started(now());
    after_input(out);
    return true;
}

// The index of the configuration entry before `index` in this member's log
// (0: none there; the snapshot's or the first configuration is in force).
raft::Index Member::previous_config_entry(raft::Index index) const {
    const SimStorage& log = disk_.volatile_image();
    for (raft::Index i = index - 1; i >= log.first_index() && i > 0; --i) {
        const raft::Entry* e = log.entry_at(i);
        if (e != nullptr && e->type == raft::EntryType::kConfig) return i;
    }
    return 0;
}

void Member::persist_durable(Outbox& out) {
    require(in_flight_ != nullptr, "member ", id(), " synced a persist it never began");
    require(!durable_, "member ", id(), " synced the same persist twice");
    disk_.sync();
    for (const raft::Message& m : in_flight_->messages) send(m, out);
    durable_ = true;
    if (inline_) finish_persist(out);
}

void Member::finish_persist(Outbox& out) {
    require(in_flight_ != nullptr, "member ", id(), " advanced a persist it never began");
    require(durable_, "member ", id(), " advanced a persist not yet synced");
    in_flight_.reset();
    durable_ = false;
    inline_ = false;
    core_->persisted(now());
    after_input(out);
}

void Member::before_apply(const raft::Entry& entry, const lock::LockTable& table) {
    checker_.before_apply(id(), entry, table, disk_.durable());
    prior_.reset();
    prior_last_token_ = table.last_token();
    expire_before_.clear();
    if (entry.type != raft::EntryType::kNormal) return;
    auto decoded = lock::decode_command(entry.data);
    if (const auto* cmd = std::get_if<lock::Command>(&decoded)) {
        if (const std::string* key = key_of(*cmd)) {
            if (const lock::Lock* held = table.find(*key)) prior_ = *held;
        }
        auto note = [&](const lock::Expire& x) {
            const lock::Lock* l = table.find(x.key);
            expire_before_.push_back({{x.key, x.token}, l != nullptr && l->token == x.token});
        };
        if (const auto* x = std::get_if<lock::Expire>(cmd)) note(*x);
        if (const auto* m = std::get_if<lock::ExpireMany>(cmd)) {
            for (const lock::Expire& x : m->locks) note(x);
        }
    }
}

void Member::proposed(raft::Index index, const lock::Command& cmd) {
    std::vector<KeyToken> locks;
    if (const auto* x = std::get_if<lock::Expire>(&cmd)) locks.emplace_back(x->key, x->token);
    if (const auto* m = std::get_if<lock::ExpireMany>(&cmd)) {
        for (const lock::Expire& x : m->locks) locks.emplace_back(x.key, x.token);
    }
    if (!locks.empty()) expires_proposed_[index] = std::move(locks);
}

void Member::after_apply(const raft::Entry& entry, const lock::Result& result, const lock::LockTable& table) {
    ++stats_.applied_entries;
    const std::string table_broken = table.check_invariants();
    require(table_broken.empty(), "member ", id(), " lock table check_invariants() after index ", entry.index, ": ",
            table_broken);
    checker_.after_apply(id(), entry, result, prior_, prior_last_token_, table);
    if (!expire_before_.empty()) {
        AppliedExpire& applied = expires_applied_[entry.index];
        applied.locks = expire_before_.size();
        for (const auto& [lock, held] : expire_before_) {
            const lock::Lock* now_held = table.find(lock.first);
            if (held && (now_held == nullptr || now_held->token != lock.second)) applied.removed.push_back(lock);
        }
    }
    if (entry.type == raft::EntryType::kConfig) quorum_checker_.config_applied(entry);
}

void Member::restored(const raft::SnapshotMeta& meta, const lock::LockTable& table) {
    ++stats_.snapshots_restored;
    checker_.observe_restored(id(), meta, table);
}

}  // namespace pgfence::sim
