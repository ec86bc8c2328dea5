// The leader's leases, one per held lock (lease.h), with an index of the
// running ones by expire_at, so that finding the leases due for expiry costs
// what is due, not what is held.
//
// Why an index: the leader checks expiries on every tick (and after a phantom
// release). Scanning every lease costs O(held) each time: with a million
// locks held, tens of milliseconds of every 100 ms tick, whether anything
// expires or not. The index is an ordered set by (expire_at, key) holding
// exactly the leases in LeasePhase::kRunning; take_due() walks it from the
// front and stops at the first lease not yet due.
//
// Every change of a lease's expire_at or phase goes through a method here, so
// the index cannot go stale; find() hands out const leases only.
//
// Cost per operation, which the leader pays several times per request: the
// leases are a hash map (a lookup touches a bucket and a node, where a tree
// of a million leases touches some twenty nodes), each lease keeps its
// position in the index (removing it does not search), and a lease
// (re)started at the latest expire_at so far goes in at the index's end
// (leases of one length started in time order: the common case; else
// O(log n)). The index's entries point at the map's own nodes (a hash
// map's node never moves, rehashing included), so take_due() reaches a
// lease without a lookup; an entry is removed before the lease it names.
// Ties of expire_at go by key: unique, and the order a new leader's
// start_all() inserts in.
//
// Pure and deterministic: std only, time is passed in. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lock/table.h"
#include "member/lease.h"

namespace pgfence::member {

// One lease taken by take_due(): its key and token, as they were then.
struct DueLease {
    std::string key;
    lock::Token token = 0;
};

// One lease taken by take_checkpoints(): its key, token and current run.
struct DueCheckpoint {
    std::string key;
    lock::Token token = 0;
    std::uint64_t run_ms = 0;
    Time started{};
};

class LeaseSet {
public:
    // `checkpoints`: each run of a lease has a checkpoint due at its half
    // (Lease::checkpoint_at), taken by take_checkpoints().
    explicit LeaseSet(bool checkpoints = false) : checkpoints_(checkpoints) {}
    // Not copied: the index's entries and the slots' iterators point into this
    // set's own containers (moving keeps them valid: node-based containers).
    LeaseSet(const LeaseSet&) = delete;
    LeaseSet& operator=(const LeaseSet&) = delete;
    LeaseSet(LeaseSet&&) = default;
    LeaseSet& operator=(LeaseSet&&) = default;
    const Lease* find(std::string_view key) const;
    std::size_t size() const { return leases_.size(); }
    bool empty() const { return leases_.empty(); }
    // Calls f(const std::string& key, const Lease&) for every lease, in no particular order.
    template <typename F>
    void for_each(F&& f) const {
        for (const auto& [key, slot] : leases_) f(key, slot.lease);
    }

    // Replaces every lease by one per lock of `table`, each started at
    // `now` (a new leader restarts them all). The locks come in key order,
    // so each goes in at the end of the index when their expire_at only
    // grows (leases of one length): linear in the locks, else O(n log n).
    void start_all(const lock::LockTable& table, Time now, std::uint64_t max_clock_drift_ppm);
    // Starts `key`'s lease at `now`, running, replacing any lease it had;
    // a lease of the same token (a same-owner re-grant) keeps its answers.
    void start(std::string_view key, lock::Token token, std::uint64_t lease_ms, Time now,
               std::uint64_t max_clock_drift_ppm);
    // Restarts `key`'s lease at `now` (a keepalive; a new leader's restart
    // from a checkpoint: a run of `run_ms`, 0 = lease_ms), its phase
    // unchanged: a lease being confirmed stays out of the index until
    // set_running(). False (nothing changed) when `key` has no lease with `token`.
    bool restart(std::string_view key, lock::Token token, Time now, std::uint64_t max_clock_drift_ppm,
                 std::uint64_t run_ms = 0);
    // Records that a Checkpoint naming `key`'s lease with `token` was
    // proposed at log `index` (Lease::checkpoint_index); false when there is none.
    bool checkpoint_proposed(std::string_view key, lock::Token token, std::uint64_t index);
    // One more answer promised `key`'s lease with `token` (a Granted answer
    // handed out, whose proof `kid` signed; a keepalive answered, kid
    // empty: the lease's kid stays); false when there is none.
    bool answered(std::string_view key, lock::Token token, std::string_view kid = {});
    // Held leases by kid (Lease::kid), kids with none left out.
    const std::map<std::string, std::size_t, std::less<>>& by_kid() const { return by_kid_; }
    // One Granted answer counted by answered() was not written: the lease,
    // with one answer fewer (never below 0), or nullptr when there is none.
    const Lease* unanswered(std::string_view key, lock::Token token);
    // Brings deadline and expire_at forward to `now` when later (a phantom
    // release), for a lease with `token` that is not kExpiring. False when
    // there is none.
    bool cut(std::string_view key, lock::Token token, Time now);
    // Phase changes of `key`'s lease with `token` (false, nothing changed:
    // there is none, or, for set_running, it is kExpiring, which is final):
    // kRunning (back in the index), kExpiring.
    bool set_running(std::string_view key, lock::Token token);
    // kExpiring; the lease, or nullptr (nothing changed) when there is none.
    const Lease* set_expiring(std::string_view key, lock::Token token);
    // Ends the confirmation of `key`'s lease with `token`, taken by
    // take_due() and confirmed (or not: `ok`) by a round asked for at
    // `asked`, in one lookup:
    //   kGone     no such lease in kConfirming (released, re-granted,
    //             expired meanwhile): nothing changed;
    //   kDue      the round confirmed and was asked for at or after its
    //             expire_at: it stays kConfirming, and the caller makes it
    //             kExpiring (its Expire proposed) or kRunning (not proposed);
    //   kRunning  the round failed, or the lease was restarted after it was
    //             asked for: running again, in the index.
    enum class Settled { kGone, kDue, kRunning };
    Settled settle(std::string_view key, lock::Token token, Time asked, bool ok);
    // Removes `key`'s lease if it has `token`; true when it did.
    bool erase(std::string_view key, lock::Token token);
    void clear();

    // Moves up to `limit` running leases whose expire_at <= now to
    // kConfirming, earliest expire_at first, appending them to `out`.
    // Returns how many it took.
    std::size_t take_due(Time now, std::size_t limit, std::vector<DueLease>& out);

    // Takes up to `limit` leases whose checkpoint_at <= now, earliest
    // first, while their checkpoints fit `max_bytes` (lock::checkpoint_bytes()),
    // each no longer due in its run; appends those still running before
    // their deadline to `out`. Returns how many it took.
    std::size_t take_checkpoints(Time now, std::size_t limit, std::size_t max_bytes, std::vector<DueCheckpoint>& out);

    // "" or the first broken: the index holds exactly the running leases,
    // each at its expire_at, and by_kid() counts every lease once. O(held):
    // for tests and the simulation.
    std::string check_invariants() const;

private:
    struct Slot;
    using Node = std::pair<const std::string, Slot>;  // the map's value
    struct Due {
        Time at;      // the lease's expire_at
        Node* lease;  // the map's node: then by its key
        bool operator<(const Due& o) const { return at != o.at ? at < o.at : lease->first < o.lease->first; }
    };
    using Index = std::set<Due>;
    struct Slot {
        Lease lease;
        Index::iterator at;  // its place in running_ while kRunning
        Index::iterator checkpoint;  // its place in checkpoints_ while checkpoint_at != kNoCheckpoint
    };
    struct Hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
    };
    using Map = std::unordered_map<std::string, Slot, Hash, std::equal_to<>>;

    Slot* find_token(std::string_view key, lock::Token token, Map::iterator* at);
    void unindex(Map::iterator it);  // from both indexes
    void index(Map::iterator it);    // in those its lease belongs in
    void count_kid(std::string_view kid, bool add);

    std::map<std::string, std::size_t, std::less<>> by_kid_;  // held leases by kid
    Map leases_;
    Index running_;  // every kRunning lease, by (expire_at, key)
    Index checkpoints_due_;  // every lease with a checkpoint due, by (checkpoint_at, key)
    bool checkpoints_ = false;
};

}  // namespace pgfence::member
