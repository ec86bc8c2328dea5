// A tiny in-test cluster for the Raft core's unit tests.
//
// Members share one message queue; tests deliver messages by hand
// (deliver_one / deliver_all / filters) so each scenario is exact and
// deterministic. Every Ready is processed in the order raft.h prescribes:
// persist into the member's MemoryStorage, then queue messages, then apply.
// After every step the members' check_invariants() must be empty.
#pragma once

#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "raft/raft.h"

namespace pgfence::raft {
// Printable enums for Boost.Test messages (found by ADL).
inline std::ostream& operator<<(std::ostream& os, Role r) {
    return os << to_string(r);
}
inline std::ostream& operator<<(std::ostream& os, ProposeError e) {
    return os << to_string(e);
}
inline std::ostream& operator<<(std::ostream& os, ReplicationState s) {
    return os << to_string(s);
}
inline std::ostream& operator<<(std::ostream& os, EntryType t) {
    return os << (t == EntryType::kNoop ? "noop" : t == EntryType::kConfig ? "config" : "normal");
}
}  // namespace pgfence::raft

namespace pgfence::raft::test {

constexpr std::uint64_t kClusterId = 0xC1u;

struct Member {
    Config cfg;
    MemoryStorage storage;
    std::unique_ptr<Raft> raft;
    std::vector<Entry> applied;  // committed entries applied, in order
    Index applied_index = 0;
    std::optional<Snapshot> restored;  // last snapshot restored into the "state machine"
    std::vector<ReadState> reads;
    std::vector<std::uint64_t> dropped_reads;
    bool persist = true;           // false: Ready stays un-advanced (slow disk)
    std::optional<Ready> pending;  // a Ready taken but not yet persisted
};

inline Config make_config(NodeId id, std::vector<NodeId> members, std::uint64_t seed = 1) {
    Config c;
    c.id = id;
    c.members = std::move(members);
    c.cluster_id = kClusterId;
    c.heartbeat_ticks = 1;
    c.election_ticks = 10;
    c.random_seed = seed;
    return c;
}

inline std::vector<NodeId> ids(std::size_t n) {
    std::vector<NodeId> v;
    for (NodeId i = 1; i <= n; ++i) v.push_back(i);
    return v;
}

inline Message msg(NodeId from, NodeId to, Term term, MessageBody body) {
    return Message{kClusterId, from, to, term, std::move(body)};
}

class Cluster {
public:
    using Preload = std::function<void(NodeId, MemoryStorage&)>;

    // `tweak` adjusts every member's Config; `preload` fills a member's
    // storage before its core is built (a log from earlier terms).
    explicit Cluster(std::size_t n, std::function<void(Config&)> tweak = {},
                     const Preload& preload = {}, std::uint64_t seed = 1) {
        for (NodeId id : ids(n)) {
            Member& m = members_[id];
            m.cfg = make_config(id, ids(n), seed);
            if (tweak) tweak(m.cfg);
            if (preload) preload(id, m.storage);
            m.raft = std::make_unique<Raft>(m.cfg, m.storage);
            m.applied_index = m.storage.snapshot().meta.index;
        }
    }

    // A member joining the running cluster: it knows no configuration yet
    // (Config::members empty) and waits to be told by the leader.
    void join(NodeId id) {
        Member& m = members_[id];
        m.cfg = make_config(id, {}, members_.begin()->second.cfg.random_seed);
        m.raft = std::make_unique<Raft>(m.cfg, m.storage);
        check();
    }

    Member& member(NodeId id) { return members_.at(id); }
    Raft& raft(NodeId id) { return *members_.at(id).raft; }
    std::deque<Message>& net() { return net_; }

    // Messages on links in `cut` (from, to) are dropped when delivered.
    void isolate(NodeId id) {
        for (auto& [other, m] : members_) {
            if (other == id) continue;
            cut_.insert({id, other});
            cut_.insert({other, id});
        }
    }
    void cut(NodeId from, NodeId to) { cut_.insert({from, to}); }
    void heal() { cut_.clear(); }

    // One Ready cycle of `id`, in raft.h's order. Returns false if nothing ready.
    bool process(NodeId id) {
        Member& m = member(id);
        if (m.pending) {
            if (!m.persist) return false;
            finish(m, *m.pending);
            m.pending.reset();
            check();
            return true;
        }
        if (!m.raft->has_ready()) return false;
        Ready rd = m.raft->ready();
        for (Message& msg_now : rd.messages_now) net_.push_back(msg_now);  // before persisting
        if (!m.persist) {
            m.pending = std::move(rd);
            check();
            return true;
        }
        finish(m, rd);
        check();
        return true;
    }

    void process_all() {
        for (int round = 0; round < 1000; ++round) {
            bool any = false;
            for (auto& [id, m] : members_) any = process(id) || any;
            if (!any) return;
        }
        BOOST_FAIL("process_all: members never quiesced");
    }

    // Delivers the oldest queued message (dropping it on a cut link).
    bool deliver_one() {
        if (net_.empty()) return false;
        Message m = net_.front();
        net_.pop_front();
        if (cut_.count({m.from, m.to}) == 0 && members_.count(m.to) != 0) {
            raft(m.to).step(m);
            check();
        }
        return true;
    }

    // Processes and delivers until nothing is left (bounded).
    void deliver_all(std::size_t max_messages = 100000) {
        for (std::size_t n = 0; n < max_messages; ++n) {
            process_all();
            if (n + 20 > max_messages && !net_.empty()) {
                BOOST_TEST_MESSAGE("storm: " << net_.front().from << "->" << net_.front().to
                                             << " term " << net_.front().term << " body "
                                             << net_.front().body.index());
            }
            if (!deliver_one()) return;
        }
        BOOST_FAIL("deliver_all: more than " << max_messages << " messages");
    }

    // deliver_all(), counting the delivered messages that match `pred`.
    std::size_t deliver_all_counting(const std::function<bool(const Message&)>& pred) {
        std::size_t n = 0;
        for (std::size_t i = 0; i < 100000; ++i) {
            process_all();
            if (net_.empty()) return n;
            n += pred(net_.front()) ? 1 : 0;
            deliver_one();
        }
        BOOST_FAIL("deliver_all_counting: too many messages");
        return n;
    }

    // Delivers until the first message matching `pred` would be delivered;
    // removes and returns it instead (nullopt if none came).
    std::optional<Message> intercept(const std::function<bool(const Message&)>& pred) {
        for (std::size_t i = 0; i < 100000; ++i) {
            process_all();
            if (net_.empty()) return std::nullopt;
            if (pred(net_.front())) {
                Message m = net_.front();
                net_.pop_front();
                return m;
            }
            deliver_one();
        }
        return std::nullopt;
    }

    // Removes and returns queued messages matching `pred` (for hand delivery).
    std::vector<Message> take(const std::function<bool(const Message&)>& pred) {
        std::vector<Message> out;
        std::deque<Message> keep;
        for (Message& m : net_) {
            if (pred(m)) {
                out.push_back(m);
            } else {
                keep.push_back(m);
            }
        }
        net_.swap(keep);
        return out;
    }
    void drop_all() { net_.clear(); }

    void tick(NodeId id, int n = 1) {
        for (int i = 0; i < n; ++i) {
            raft(id).tick();
            check();
        }
    }
    void tick_all(int n = 1) {
        for (int i = 0; i < n; ++i) {
            for (auto& [id, m] : members_) tick(id);
            deliver_all();
        }
    }

    // Makes `id` campaign (ticks it alone past its election timeout) and
    // delivers everything; returns true if it became leader.
    bool elect(NodeId id) {
        Raft& r = raft(id);
        for (int i = 0; i < 2 * member(id).cfg.election_ticks + 1 && r.role() == Role::kFollower;
             ++i) {
            tick(id);
        }
        deliver_all();
        return r.role() == Role::kLeader;
    }

    NodeId leader() const {
        for (const auto& [id, m] : members_) {
            if (m.raft->role() == Role::kLeader) return id;
        }
        return kNoNode;
    }

    // Crash: everything not yet persisted (a pending Ready) is lost; the
    // member restarts from its storage. Its queued messages stay queued.
    void restart(NodeId id) {
        Member& m = member(id);
        m.pending.reset();
        m.persist = true;
        m.raft = std::make_unique<Raft>(m.cfg, m.storage);
        m.applied.clear();
        m.restored = m.storage.snapshot();
        m.applied_index = m.restored->meta.index;
        check();
    }

    void check() const {
        for (const auto& [id, m] : members_) {
            const std::string broken = m.raft->check_invariants();
            if (!broken.empty()) BOOST_FAIL("member " << id << ": " << broken);
        }
    }

    std::map<NodeId, Member>& members() { return members_; }

private:
    void finish(Member& m, const Ready& rd) {
        if (rd.snapshot) m.storage.apply_snapshot(*rd.snapshot);
        if (!rd.entries.empty()) m.storage.append(rd.entries);
        if (rd.hard_state) m.storage.set_hard_state(*rd.hard_state);
        for (const Message& x : rd.messages) net_.push_back(x);
        if (rd.snapshot) {
            m.restored = rd.snapshot;
            m.applied_index = rd.snapshot->meta.index;
        }
        for (const Entry& e : rd.committed) {
            BOOST_REQUIRE_EQUAL(e.index, m.applied_index + 1);
            m.applied.push_back(e);
            m.applied_index = e.index;
        }
        m.reads.insert(m.reads.end(), rd.reads.begin(), rd.reads.end());
        m.dropped_reads.insert(m.dropped_reads.end(), rd.dropped_reads.begin(),
                               rd.dropped_reads.end());
        m.raft->advance(rd);
    }

    std::map<NodeId, Member> members_;
    std::deque<Message> net_;
    std::set<std::pair<NodeId, NodeId>> cut_;
};

// Entries with the given terms at indexes first, first+1, ...
inline std::vector<Entry> entries_with_terms(Index first, const std::vector<Term>& terms) {
    std::vector<Entry> out;
    for (Term t : terms) {
        out.push_back(Entry{t, first + out.size(), EntryType::kNormal, "t" + std::to_string(t)});
    }
    return out;
}

// Helpers for single-member scenarios driven by hand.
inline Ready drain(Raft& r, MemoryStorage& s) {
    Ready rd = r.ready();
    if (rd.snapshot) s.apply_snapshot(*rd.snapshot);
    if (!rd.entries.empty()) s.append(rd.entries);
    if (rd.hard_state) s.set_hard_state(*rd.hard_state);
    r.advance(rd);
    return rd;
}

template <class T>
std::vector<std::pair<Message, T>> bodies_of(const std::vector<Message>& msgs) {
    std::vector<std::pair<Message, T>> out;
    for (const Message& m : msgs) {
        if (const T* b = std::get_if<T>(&m.body)) out.emplace_back(m, *b);
    }
    return out;
}

inline std::vector<std::string> datas(const std::vector<Entry>& entries) {
    std::vector<std::string> out;
    for (const Entry& e : entries) {
        if (e.type == EntryType::kNormal) out.push_back(e.data);
    }
    return out;
}

}  // namespace pgfence::raft::test
