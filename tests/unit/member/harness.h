// A few member cores in one process, for the core's unit tests: in-memory
// storage, a lossless network that can be cut per link, a test-owned clock.
// Every effect is carried out at once, in the order member/core.h gives
// (sends, save, the Persist then its messages, persisted()).
#pragma once

#include <boost/test/unit_test.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "member/core.h"
#include "raft/storage.h"

namespace pgfence::member::test {

using std::chrono::milliseconds;

struct Node {
    raft::MemoryStorage storage;
    std::unique_ptr<Core> core;
    std::vector<Answer> answers;  // with what decided each (Answer::index, term, result)
    std::vector<LogLine> logs;
    std::set<RequestId> watched;
    std::optional<raft::Configuration> configuration;  // the last Effects::configuration
    int removed = 0;                                   // how many Effects::removed came
    bool up = true;
};

class Harness {
public:
    static constexpr milliseconds kTick{50};

    explicit Harness(int members, std::uint64_t rho_ppm = 50'000, std::uint64_t snapshot_every = 10000,
                     std::uint64_t snapshot_log_pct = 100, std::uint64_t max_table_bytes = lock::kMaxTableBytes,
                     std::size_t max_expire_batch = lock::kMaxExpireMany,
                     std::size_t expiry_wave = kDefaultExpiryWave, bool owner_binding = true,
                     bool lease_checkpoints = false, const std::function<void(Config&)>& configure = {}) {
        for (int i = 1; i <= members; ++i) ids_.push_back(static_cast<raft::NodeId>(i));
        nodes_.resize(static_cast<std::size_t>(members));
        for (int i = 0; i < members; ++i) {
            Config c;
            c.raft.id = ids_[static_cast<std::size_t>(i)];
            c.raft.members = ids_;
            c.raft.cluster_id = 7;
            c.raft.election_ticks = 6;
            c.raft.random_seed = 1000 + static_cast<std::uint64_t>(i) * 7919;
            c.max_clock_drift_ppm = rho_ppm;
            c.snapshot_every = snapshot_every;
            c.snapshot_log_pct = snapshot_log_pct;
            c.max_table_bytes = max_table_bytes;
            c.max_expire_batch = max_expire_batch;
            c.expiry_wave = expiry_wave;
            c.owner_binding = owner_binding;
            c.lease_checkpoints = lease_checkpoints;
            c.snapshot_keep = 5;
            if (configure) configure(c);
            configs_.push_back(c);
            nodes_[static_cast<std::size_t>(i)].core = std::make_unique<Core>(c, nodes_[static_cast<std::size_t>(i)].storage);
        }
    }

    // The defaults above, and `configure` applied to each member's Config
    // (debug_logs, max_proposals, ...).
    Harness(int members, const std::function<void(Config&)>& configure)
        : Harness(members, 50'000, 10000, 100, lock::kMaxTableBytes, lock::kMaxExpireMany, kDefaultExpiryWave, true,
                  false, configure) {}

    // A member joining the running cluster: the next id, knowing no
    // configuration (raft.members empty) until the leader tells it.
    raft::NodeId join() {
        const raft::NodeId id = static_cast<raft::NodeId>(nodes_.size() + 1);
        Config c = configs_.front();
        c.raft.id = id;
        c.raft.members.clear();
        c.raft.random_seed = 1000 + id * 7919;
        ids_.push_back(id);
        configs_.push_back(c);
        nodes_.emplace_back();
        nodes_.back().core = std::make_unique<Core>(c, nodes_.back().storage);
        return id;
    }

    Node& node(raft::NodeId id) { return nodes_[id - 1]; }
    Core& core(raft::NodeId id) { return *node(id).core; }
    Time now() const { return now_; }

    // Cuts (or heals) both directions between a and b.
    void cut(raft::NodeId a, raft::NodeId b) {
        cut_.insert({a, b});
        cut_.insert({b, a});
    }
    void heal() { cut_.clear(); }
    void isolate(raft::NodeId a) {
        for (raft::NodeId b : ids_) {
            if (b != a) cut(a, b);
        }
    }

    // Runs every core's turn and effects until nothing is left to do.
    void settle() {
        for (int round = 0; round < 10000; ++round) {
            bool any = false;
            for (Node& n : nodes_) {
                if (!n.up) continue;
                n.core->turn(now_);
                Effects fx = n.core->take_effects();
                // A turn may leave more for the next (a proposal made while
                // it applied): the shell runs another, so does this.
                if (n.core->wants_turn()) any = true;
                if (fx.empty()) continue;
                any = true;
                carry_out(n, std::move(fx));
            }
            while (!wire_.empty()) {
                any = true;
                raft::Message m = std::move(wire_.front());
                wire_.pop_front();
                Node& to = node(m.to);
                if (to.up && cut_.count({m.from, m.to}) == 0 && !(drop && drop(m))) to.core->step(m, now_);
            }
            if (!any) return;
        }
        throw std::runtime_error("the cores never settled");
    }

    // Moves the clock by `d` in ticks, ticking every live core.
    void advance(milliseconds d) {
        for (milliseconds t{0}; t < d; t += kTick) {
            now_ += kTick;
            for (Node& n : nodes_) {
                if (n.up) n.core->tick(now_);
            }
            settle();
        }
    }

    // Ticks until some member leads (bounded); its id.
    raft::NodeId elect() {
        for (int i = 0; i < 400; ++i) {
            if (raft::NodeId l = leader(); l != raft::kNoNode) return l;
            advance(kTick);
        }
        throw std::runtime_error("no leader elected");
    }

    raft::NodeId leader() const {
        for (std::size_t i = 0; i < nodes_.size(); ++i) {
            if (nodes_[i].up && nodes_[i].core->is_leader() && nodes_[i].core->leader_term() != 0) return ids_[i];
        }
        return raft::kNoNode;
    }

    RequestId send(raft::NodeId to, Request r) {
        const RequestId id = next_id_++;
        core(to).request(id, std::move(r), now_);
        settle();
        return id;
    }

    // The answer to `id` on `at`, if any (removed from the list).
    std::optional<Response> answer(raft::NodeId at, RequestId id) {
        std::optional<Answer> a = decided(at, id);
        if (!a) return std::nullopt;
        return std::move(a->response);
    }
    // The same with what decided it (Answer::index, term, result).
    std::optional<Answer> decided(raft::NodeId at, RequestId id) {
        auto& a = node(at).answers;
        for (auto it = a.begin(); it != a.end(); ++it) {
            if (it->id == id) {
                Answer out = std::move(*it);
                a.erase(it);
                return out;
            }
        }
        return std::nullopt;
    }

    // Whether `at` logged `event` (with field `key`=`value`, if given).
    bool logged(raft::NodeId at, std::string_view event, std::string_view key = {}, std::string_view value = {}) const {
        for (const LogLine& l : nodes_[at - 1].logs) {
            if (event != l.event) continue;
            if (key.empty()) return true;
            for (std::size_t i = 0; i < l.count; ++i) {
                if (key == l.fields[i].first && value == l.fields[i].second) return true;
            }
        }
        return false;
    }

    // How many lines `at` logged of `event` (at `level`).
    std::size_t count_logged(raft::NodeId at, std::string_view event, LogLevel level = LogLevel::kInfo) const {
        std::size_t n = 0;
        for (const LogLine& l : nodes_[at - 1].logs) n += event == l.event && l.level == level ? 1 : 0;
        return n;
    }

    // Grant answers are reported written unless the test says otherwise.
    bool auto_written = true;
    // Messages for which this says true are lost on the way (besides cuts).
    std::function<bool(const raft::Message&)> drop;

private:
    void carry_out(Node& n, Effects fx) {
        for (LogLine& l : fx.logs) n.logs.push_back(std::move(l));
        for (raft::Message& m : fx.send) wire_.push_back(std::move(m));
        for (Answer& a : fx.respond) {
            const bool granted = std::holds_alternative<Granted>(a.response);
            const RequestId id = a.id;
            n.answers.push_back(std::move(a));
            if (granted && auto_written) n.core->response_written(id, true, now_);
        }
        for (RequestId id : fx.watch) n.watched.insert(id);
        if (fx.configuration) n.configuration = std::move(fx.configuration);
        if (fx.removed) ++n.removed;
        if (fx.save) {
            n.storage.compact(*fx.save);
            n.core->snapshot_saved(fx.save, now_);
        }
        if (fx.persist) {
            const raft::Ready& rd = *fx.persist;
            if (rd.snapshot) n.storage.apply_snapshot(*rd.snapshot);
            if (!rd.entries.empty()) n.storage.append(rd.entries);
            if (rd.hard_state) n.storage.set_hard_state(*rd.hard_state);
            n.core->persist_started(now_);
            for (const raft::Message& m : rd.messages) wire_.push_back(m);
            n.core->persisted(now_);
        }
        if (!fx.fatal.empty()) throw std::runtime_error("fatal: " + fx.fatal);
        const std::string broken = n.core->check_invariants();
        if (!broken.empty()) throw std::runtime_error("check_invariants: " + broken);
    }

    std::vector<raft::NodeId> ids_;
    std::vector<Config> configs_;
    std::vector<Node> nodes_;
    std::deque<raft::Message> wire_;
    std::set<std::pair<raft::NodeId, raft::NodeId>> cut_;
    Time now_{std::chrono::seconds(1000)};
    RequestId next_id_ = 1;
};

// The answer `r` as a T (the test fails if there is none, or another kind).
template <class T>
const T& as(const std::optional<Response>& r) {
    BOOST_REQUIRE_MESSAGE(r.has_value(), "no answer");
    BOOST_REQUIRE_MESSAGE(std::holds_alternative<T>(*r), "answer of another kind (index " << r->index() << ")");
    return std::get<T>(*r);
}

}  // namespace pgfence::member::test
