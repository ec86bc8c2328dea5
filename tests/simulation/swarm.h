// Per-run fault settings (swarm testing): every probability and rate of a run
// is itself drawn from the run's seed, so different seeds stress different
// mixes (one run drops a third of all messages, another never drops but
// partitions constantly, some are nearly fault-free).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "member/core.h"
#include "sim_random.h"

namespace pgfence::sim {

struct FaultConfig {
    // Network.
    double drop_probability = 0;
    double duplicate_probability = 0;
    std::uint64_t delay_min_us = 100;
    std::uint64_t delay_max_us = 2000;
    double long_delay_probability = 0;  // a message takes up to 20x delay_max_us (reordering)
    double partition_per_s = 0;         // partitions started per simulated second
    double one_way_share = 0;           // share of partitions that block one direction only
    std::uint64_t partition_ms_max = 0; // partitions heal after up to this long

    // Members.
    double crash_per_s = 0;                 // crashes per simulated second (cluster-wide)
    double crash_while_persisting = 0;      // chance a persist is cut short by a crash
    double isolate_new_leader = 0;          // chance a new leader is partitioned off at once
    double crash_new_leader = 0;            // chance a new leader crashes within a few round trips
                                            // (Figure 8 needs leaders that fail before their no-op spreads)
    std::uint64_t downtime_ms_max = 0;      // crashed members restart after up to this long
    bool hard_state_first = false;          // disk writes a Ready's hard state before its entries
    std::uint64_t persist_us_min = 50;      // a Ready's fsync takes [min, max]
    std::uint64_t persist_us_max = 500;
    std::uint64_t tick_us_base = 10'000;    // nominal tick period; per member +-30%
    double tick_drift = 0.02;               // each tick period varies by up to this share

    // Raft and workload.
    int election_ticks = 10;
    int heartbeat_ticks = 1;
    // Replication limits (raft::Config): small values split batches, so a
    // follower can acknowledge a prefix of the leader's log (Figure 8 needs it).
    std::size_t max_append_bytes = 1u << 20;
    std::size_t max_snapshot_chunk_bytes = 1u << 20;  // raft::Config's
    std::size_t max_inflight_appends = 64;
    std::size_t max_inflight_bytes = 8u << 20;
    std::size_t max_uncommitted_bytes = 64u << 20;
    std::uint64_t compact_every_entries = 64;  // a member snapshots after this many applies
    std::uint64_t snapshot_log_pct = 0;        // and after this % of its table's bytes of log (member::Config's)
    std::size_t snapshot_slice_locks = 16384;  // locks a snapshot encodes per turn (member::Config's)
    std::size_t max_expire_batch = member::kDefaultMaxExpireBatch;  // Expires per entry (member::Config's)
    std::size_t expiry_wave = member::kDefaultExpiryWave;  // leases a wave takes (member::Config's)
    bool lease_checkpoints = true;             // member::Config's
    std::size_t max_checkpoints_per_tick = 1024;  // member::Config's
    std::uint64_t keep_entries = 8;            // entries kept in memory behind a snapshot
    double transfer_per_s = 0;                 // leadership transfers per simulated second
    int clients = 3;
    std::uint64_t think_us_max = 20'000;       // a client waits up to this between operations

    std::string describe() const;
};

// The liveness phase's bound on the time from healing to a new proposal
// committed and applied on every member of the leader's configuration:
// `election_timeouts` election timeouts of the slowest clock (randomized up
// to twice election_ticks), plus one worst-case round trip per append's
// worth of `backlog_entries` (the entries some member still has to
// receive; an append counted as max_append_bytes / 256 entries, at least one).
// A leader-churn run's flow limits (appends of at most 16 B, at most 64 B
// in flight; a command is tens of bytes) keep one or two appends of one
// entry each in flight, and a log can grow by hundreds of entries that never
// commit while every leader of a two-voter configuration is crashed or
// isolated at once: a follower then catches up an entry per round trip, at
// the network's pace, not in a number of election timeouts. Once healed
// there are no long delays, drops or duplicates: a round trip takes at
// most two delays and the follower's write.
std::uint64_t liveness_bound_us(const FaultConfig& c, std::uint64_t election_timeouts,
                                std::uint64_t slowest_tick_us, std::uint64_t backlog_entries);

// Turns every fault off and keeps five clients busy (throughput runs).
void make_fault_free(FaultConfig& c);

// The fault settings of raft_sim --checkpoint-churn, over a drawn run's:
// checkpoints on, as many per tick as are due; clients that think for
// 20..60 ticks between operations, so that a holder's keepalive often comes
// after its lease's checkpoint (at half the run) and no later keepalive
// follows at once; leadership transfers 2..6 times a second, and new leaders
// seldom crashed or isolated at once, so that a new leader often restarts a
// lease just kept alive from its lock's checkpoint and keeps leading until
// that checkpoint's time ran out. (The workload's long leases and the
// transfers after keepalives: sim_cluster.h RunOptions::checkpoint_churn.)
void make_checkpoint_churn(FaultConfig& c, SimRandom& random);

// Draws a run's settings; about one run in eight is nearly fault-free, and
// about one in three is a "leader churn" run: new leaders are often isolated
// or crashed before their entries spread and appends carry one entry each, the
// mix that produces paper Figure 8's logs (divergent uncommitted suffixes of
// different terms, later re-replicated by a leader of a newer term).
FaultConfig draw_fault_config(SimRandom& random);

}  // namespace pgfence::sim
