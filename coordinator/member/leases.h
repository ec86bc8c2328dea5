// The leader's leases, one per held lock (lease.h), with an index of the
// running ones by expire_at, so that finding the leases due for expiry costs
// what is due, not what is held.
//
// Why an index: the leader checks expiries on every tick (and after a phantom
// release). Scanning every lease costs O(held) each time: with a million
// locks held, tens of milliseconds of every 100 ms tick, whether anything
// expires or not. The index is a min-heap by (expire_at, key) holding
// exactly the leases in LeasePhase::kRunning; take_due() takes from its top
// and stops at the first lease not yet due, so it hands leases out earliest
// expire_at first, ties by key. The leases with a checkpoint due are a
// second heap of the same kind, by (checkpoint_at, key).
//
// Every change of a lease's expire_at or phase goes through a method here, so
// the index cannot go stale; find() hands out const leases only.
//
// Cost per operation, which the leader pays several times per request: the
// leases are a hash map (a lookup touches a bucket and a node, where a tree
// of a million leases touches some twenty nodes), each lease keeps its
// place in each heap (removing it does not search: O(log4 n) moves), a
// lease started at the latest expire_at so far goes in at the heap's end
// with one comparison (leases of one length started in time order: the
// common case, O(1); else O(log4 n)), and a restart moves the lease's entry
// from its place (one sift, O(log4 n)). The heaps' entries point at the map's own
// nodes (a hash map's node never moves, rehashing included), so take_due()
// reaches a lease without a lookup; an entry is removed before the lease it
// names. Ties of expire_at go by key: unique, so the order is total.
//
// Memory per lease (what the leader holds per held lock besides the lock,
// bench_lock_memory measures it), with libstdc++ on LP64 and a key of at
// most 15 bytes (kept in the std::string itself; a longer key adds its own
// allocation): its map node of 104 bytes (next pointer, key, the 56-byte
// Lease, its two heap places; 112 with glibc's malloc header, and in
// jemalloc's size class, which fence-coordinator links), a bucket pointer, and 16
// bytes in each heap it is in (expire_at and the node): about 160 bytes. A
// lease's kid is a 2-byte number (kid()), not its name. A heap's vector
// gives memory back once a quarter full, when above 4096 entries of
// capacity (after a storm); clear() gives everything back.
//
// Pure and deterministic: std only, time is passed in. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
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
    // (Lease::checkpoint_at()), taken by take_checkpoints().
    explicit LeaseSet(bool checkpoints = false) : checkpoints_(checkpoints) {}
    // Not copied: the heaps' entries point at the map's nodes, and each slot
    // holds its u32 places in the heaps. A move keeps both: the map moves its
    // nodes and the vectors their buffers, nothing is reallocated.
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
    // The name of `lease`'s kid (Lease::kid): kNoProofKid, kUnknownProofKid
    // or one a Granted answer's proof was signed with. Valid only until the
    // set next changes (its number may then go to another kid, or the names
    // move): a caller copies it at once.
    std::string_view kid(const Lease& lease) const { return kid_names_[lease.kid]; }
    // Held leases by kid (Lease::kid), kids with none left out.
    const std::map<std::string, std::size_t, std::less<>>& by_kid() const { return by_kid_; }
    // One Granted answer counted by answered() was not written: the lease,
    // with one answer fewer (never below 0), or nullptr when there is none.
    const Lease* unanswered(std::string_view key, lock::Token token);
    // Brings deadline and expire_at forward to `now` when later (a phantom
    // release), for a lease with `token` that is not kExpiring. False when
    // there is none.
    bool cut(std::string_view key, lock::Token token, Time now);
    // Makes `key`'s lease with `token` kRunning again, back in the index at
    // its expire_at (false, nothing changed: there is none): a lease that
    // settle_expiring() made kExpiring whose Expire could not be proposed.
    bool set_running(std::string_view key, lock::Token token);
    // Ends the confirmation of `key`'s lease with `token`, taken by
    // take_due() and confirmed (or not: `ok`) by a round asked for at
    // `asked`, in one lookup:
    //   kGone     no such lease in kConfirming (released, re-granted,
    //             expired meanwhile): nothing changed;
    //   kDue      the round confirmed and was asked for at or after its
    //             expire_at: now kExpiring, out of both indexes (its Expire
    //             is proposed next; set_running() takes it back if that fails);
    //   kRunning  the round failed, or the lease was restarted after it was
    //             asked for: running again, in the index.
    enum class Settled { kGone, kDue, kRunning };
    Settled settle_expiring(std::string_view key, lock::Token token, Time asked, bool ok);
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

    // "" or the first broken: the expiry heap holds exactly the running
    // leases, each at its expire_at, and the checkpoint heap exactly those
    // with a checkpoint due, at its checkpoint_at; each slot's places name its
    // entries; each heap is in (at, key) order; by_kid() counts every lease
    // once. O(held): for tests and the simulation.
    std::string check_invariants() const;

private:
    struct Slot;
    using Node = std::pair<const std::string, Slot>;  // the map's value
    struct Due {
        Time at;      // the lease's expire_at (or checkpoint_at)
        Node* lease;  // the map's node: then by its key
    };
    // A place is a u32: a lease per lock, and no table holds kNotIndexed
    // locks (kMaxTableBytes over the smallest lock's lock_bytes(), below).
    static constexpr std::uint32_t kNotIndexed = 0xffff'ffff;
    static_assert(lock::kMaxTableBytes / lock::lock_bytes(0, 0) < kNotIndexed);
    // Its node in the map: 104 bytes (next pointer, key, the lease's 56
    // bytes and its two places), 112 as either malloc allocates it.
    struct Slot {
        Lease lease;
        std::uint32_t at = kNotIndexed;          // its place in running_ while kRunning
        std::uint32_t checkpoint = kNotIndexed;  // its place in checkpoints_due_ while checkpoint_due
    };
    // A 4-ary min-heap of Due by (at, key) in one vector (16 bytes a lease,
    // no node), each entry's place kept in its slot (the field `place`), so
    // that a lease leaves it without a search: push, pop and erase cost
    // O(log4 n), a push due last O(1).
    class DueHeap {
    public:
        explicit DueHeap(std::uint32_t Slot::*place) : place_(place) {}
        bool empty() const { return heap_.empty(); }
        std::size_t size() const { return heap_.size(); }
        const Due& top() const { return heap_.front(); }
        const Due& at(std::uint32_t i) const { return heap_[i]; }
        void push(Due due);
        void erase(std::uint32_t i);  // its slot's place becomes kNotIndexed
        // Entry i's lease is now due at `at` (a restart): it moves up or down
        // from where it is, one sift (O(log4 n)) where erase and push were two.
        void update(std::uint32_t i, Time at);
        void clear() { std::vector<Due>().swap(heap_); }  // its memory too (a deposed leader)
        std::string check() const;  // "" or the first entry before its parent

    private:
        static bool before(const Due& a, const Due& b) {
            return a.at != b.at ? a.at < b.at : a.lease->first < b.lease->first;
        }
        void put(std::uint32_t i, const Due& due) {
            heap_[i] = due;
            due.lease->second.*place_ = i;
        }
        void sift_up(std::uint32_t i, Due due);
        void sift_down(std::uint32_t i, Due due);
        std::vector<Due> heap_;
        std::uint32_t Slot::*place_;
    };
    struct Hash {
        using is_transparent = void;
        // noexcept: libstdc++'s unordered_map then keeps no hash code in each
        // node (8 bytes a lease; other libraries decide otherwise). The price:
        // a lookup walking a bucket compares keys instead of cached codes, and
        // erase and rehash hash their keys again (docs/decisions.md).
        std::size_t operator()(std::string_view key) const noexcept { return std::hash<std::string_view>{}(key); }
    };
    using Map = std::unordered_map<std::string, Slot, Hash, std::equal_to<>>;

    Slot* find_token(std::string_view key, lock::Token token, Map::iterator* at);
    void unindex(Map::iterator it);  // from both indexes
    void index(Map::iterator it);    // in those its lease belongs in
    void count_kid(std::uint16_t number, bool add);
    std::uint16_t kid_number(std::string_view kid);

    // Lease::kid numbers: the two fixed (lease.h), then one per kid a lease
    // was answered with; a number no lease uses any more (by_kid_ lacks its
    // name) is given to the next new kid, so there are at most the most kids
    // in use at once, plus the two fixed.
    std::vector<std::string> kid_names_{std::string(kNoProofKid), std::string(kUnknownProofKid)};

    std::map<std::string, std::size_t, std::less<>> by_kid_;  // held leases by kid
    Map leases_;
    DueHeap running_{&Slot::at};  // every kRunning lease, by (expire_at, key)
    DueHeap checkpoints_due_{&Slot::checkpoint};  // every lease with a checkpoint due, by (checkpoint_at, key)
    bool checkpoints_ = false;
};

}  // namespace pgfence::member
