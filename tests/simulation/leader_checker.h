// The leader's lease and waiter rules (coordinator/member/core.h "rules"),
// checked from outside the core on what it does: the entries it proposes,
// the answers it gives, the messages it receives, by the simulation's real
// clock and each member's own.
//
// Per member, while it leads term X (a view opened by leading(), closed by
// any other term or a crash), the checker keeps its own record of every
// held lock's lease: (re)started when the member begins to lead (every held
// lock, at full length), when its term's first entry applied (a lock with a
// checkpoint, for its remaining_ms), when a Grant applies on it (unless that token's
// Expire was proposed), when it answers KeptAlive; ended at once by a
// phantom release. Checked, each a SimFailure:
//   - Expire{key, token} is proposed only for a lock it leases, once
//     expire_at (start + lease_ms + expiry_margin_ms, lease.h) has passed on
//     the member's own clock, and only after a quorum confirmed its
//     leadership after that point: a majority of the voters of a
//     configuration in force on it at some time since expire_at (itself
//     included) each sent a response of term X (an append or heartbeat
//     response) at or after the real time at which the member's clock
//     reached expire_at, delivered before the proposal. (A change appended
//     between the quorum round and the proposal may change the voters: any
//     configuration in force meanwhile will do. A learner's or removed
//     member's response counts in none.)
//   - KeepAlive is never answered KeptAlive for a lease whose Expire it
//     proposed (nor for a lock it does not lease);
//   - a phantom release names a key that a request reported gone (or a
//     Granted answer that could not be written) had asked for;
//   - waiters are granted in arrival order: when a queued acquire is
//     answered Granted, every acquire of the same key queued before it at
//     the same leader in the same term has been answered or reported gone
//     (a set: on each of its keys, so no later waiter jumps it, nor it an
//     earlier one).
//
// Inputs arrive after each of the member's inputs, grouped: the core's log
// lines in order (grants, removals, Expire proposals, phantom releases),
// then the ids it queued, then its answers, then leading() with the term
// the core leads after the input (so ids queued in the very input that makes
// a member leader are not checked: its view opens after them). All times:
// `real_us` the simulation's clock, `local` the member's (its rate against
// real time is fixed per member).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lock/commands.h"
#include "lock/table.h"
#include "member/lease.h"
#include "raft/types.h"

namespace pgfence::sim {

class LeaderChecker {
public:
    // `members` members at first (ids 1..members; more join with set_rate());
    // rho as the cores are configured (it sets expire_at).
    LeaderChecker(std::size_t members, std::uint64_t rho_ppm);

    // Member `id`'s clock runs at `rate` x real time.
    void set_rate(raft::NodeId id, double rate);

    // After every input: the term the member's core leads (0: none), its
    // configuration in force (and that configuration's entry index), and
    // the locks it holds then. A change of term closes the view; a new
    // nonzero term opens one with every held lock's lease started now.
    void leading(raft::NodeId id, raft::Term term, const raft::Configuration& config, raft::Index config_index,
                 const lock::LockTable& table, member::Time local);
    void crashed(raft::NodeId id);

    // A peer's message delivered to `id` (before the core steps it), sent at sent_us.
    void delivered(raft::NodeId id, const raft::Message& m, std::uint64_t sent_us);

    // A Grant that granted `token` applied on `id` while its Raft role was
    // leader (the core's "grant" line at info level).
    void grant_applied(raft::NodeId id, const std::string& key, lock::Token token, std::uint64_t lease_ms,
                       member::Time local);
    // A Release, Expire or ExpireMany that removed the lock applied on the leading member.
    void lock_removed(raft::NodeId id, const std::string& key, lock::Token token);
    // The core proposed Expire{key, token} at that input, alone or in an
    // ExpireMany: read from the entry it proposed (ApplyObserver::proposed),
    // once the expire_proposed line of that entry is checked against it.
    void expire_proposed(raft::NodeId id, const std::string& key, lock::Token token, std::uint64_t real_us,
                         member::Time local);
    // A lock of an Expire or ExpireMany entry of the member's own term in the Ready it handed out:
    // it must have been announced by expire_proposed().
    void expire_in_ready(raft::NodeId id, raft::Term term, const std::string& key, lock::Token token);
    // A KeptAlive answered after a clearing Checkpoint applied is given
    // in the middle of the batch's applies: a Release or Expire of the lock
    // later in that batch comes before it here (regrouped); it then leases
    // nothing (and the key may be granted to another token since).
    void kept_alive(raft::NodeId id, const std::string& key, lock::Token token, member::Time local);
    // A new batch of the member's effects begins (what lock_removed() said in the last one is forgotten).
    void batch_begins(raft::NodeId id);
    // The core said it restarted its leases from their checkpoints (its
    // term's first entry applied): each lock of `table` (the table after
    // the input: no checkpoint of this term applies before that line) with a
    // remaining_ms restarts for that long.
    // When the core says so in the input that makes it leader of `term`
    // (before leading() opens the view), it is done as leading() opens it.
    void restarted_from_checkpoints(raft::NodeId id, raft::Term term, const lock::LockTable& table,
                                    member::Time local);
    // A request for an acquire of `key` was reported gone, or its Granted
    // answer unwritten (response_written(false)).
    void acquire_gone(raft::NodeId id, const std::string& key);
    // The core said it ended a grant's lease at once (phantom release).
    void phantom_released(raft::NodeId id, const std::string& key, lock::Token token, member::Time local);

    // Waiters: the core asked to watch request `request` (an acquire of
    // `keys`: one key, or a set's, queued on each).
    void queued(raft::NodeId id, std::uint64_t request, const std::vector<std::string>& keys);
    // Request `request` was answered (granted: Granted) or reported gone.
    void answered(raft::NodeId id, std::uint64_t request, bool granted);

    std::uint64_t expires_checked() const { return expires_checked_; }
    std::uint64_t keepalives_checked() const { return keepalives_checked_; }
    std::uint64_t waiter_grants_checked() const { return waiter_grants_checked_; }
    std::uint64_t waiting_sets_checked() const { return waiting_sets_checked_; }  // of them, sets

private:
    struct LeaseRecord {
        lock::Token token = 0;
        std::uint64_t lease_ms = 0;
        member::Time expire_at{};  // on the member's clock
        bool expire_proposed = false;
    };
    struct InForce {  // a configuration of the leader's, in force from `from` (its clock) on
        raft::Index index = 0;
        member::Time from{};
        raft::Configuration config;
    };
    struct View {
        raft::Term term = 0;  // 0: not leading
        std::vector<InForce> configs;  // in the order they came in force; the last is in force now
        std::map<std::string, LeaseRecord> leases;
        std::map<raft::NodeId, std::uint64_t> latest_response_sent_us;  // of term `term`, delivered
        std::set<std::pair<std::string, lock::Token>> announced;       // Expires said proposed
        std::map<std::string, std::deque<std::uint64_t>> queues;       // waiters, arrival order
        std::map<std::uint64_t, std::vector<std::string>> queued_key;   // request -> its keys
        std::set<std::pair<std::string, lock::Token>> removed_in_batch;  // lock_removed() in this batch
    };
    View& view(raft::NodeId id);
    void note_configuration(View& v, const raft::Configuration& config, raft::Index index, member::Time local) const;
    void start(View& v, const std::string& key, lock::Token token, std::uint64_t lease_ms, member::Time local,
               std::uint64_t run_ms = 0) const;

    std::uint64_t rho_ppm_;
    std::vector<View> views_;
    std::vector<double> rates_;  // per member: its clock's rate against real time
    void restore(View& v, const lock::LockTable& table, member::Time local) const;
    // Per member, since its last start: keys of acquires reported gone (a
    // Grant of an earlier term may still apply in a later one).
    std::vector<std::set<std::string>> gone_keys_;
    std::vector<raft::Term> restore_pending_;  // per member: restarted_from_checkpoints() before its view opened
    std::uint64_t expires_checked_ = 0;
    std::uint64_t keepalives_checked_ = 0;
    std::uint64_t waiter_grants_checked_ = 0;
    std::uint64_t waiting_sets_checked_ = 0;
};

}  // namespace pgfence::sim
