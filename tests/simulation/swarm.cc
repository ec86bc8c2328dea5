// Per-run fault settings: see swarm.h.
#include "swarm.h"

#include <algorithm>

#include <sstream>

namespace pgfence::sim {

FaultConfig draw_fault_config(SimRandom& random) {
    FaultConfig c;
    const bool calm = random.chance(0.125);
    c.drop_probability = calm ? 0 : random.swarm_probability(0.3, 0.25);
    c.duplicate_probability = calm ? 0 : random.swarm_probability(0.2, 0.4);
    c.delay_min_us = random.between(50, 500);
    c.delay_max_us = c.delay_min_us + random.between(100, 15'000);
    c.long_delay_probability = calm ? 0 : random.swarm_probability(0.1, 0.4);
    c.partition_per_s = calm ? 0 : random.swarm_probability(2.0, 0.3);
    c.one_way_share = random.unit();
    c.partition_ms_max = random.between(50, 2'000);
    c.crash_per_s = calm ? 0 : random.swarm_probability(1.5, 0.3);
    c.crash_while_persisting = calm ? 0 : random.swarm_probability(0.05, 0.3);
    c.crash_new_leader = calm ? 0 : random.swarm_probability(0.5, 0.3);
    c.downtime_ms_max = random.between(10, 1'500);
    c.persist_us_min = random.between(10, 500);
    c.persist_us_max = c.persist_us_min + random.between(0, 8'000);
    c.tick_us_base = random.between(5'000, 20'000);
    c.tick_drift = static_cast<double>(random.between(0, 10)) / 100.0;
    c.election_ticks = static_cast<int>(random.between(5, 15));
    c.heartbeat_ticks = static_cast<int>(random.between(1, 3));
    if (random.chance(0.5)) {
        // 1 B .. 2 KiB: below one command's size every append carries a single entry.
        c.max_append_bytes = std::size_t{1} << random.between(0, 11);
        c.max_inflight_appends = random.between(1, 8);
        c.max_inflight_bytes = c.max_append_bytes * random.between(1, 8);
    }
    if (random.chance(0.2)) c.max_uncommitted_bytes = std::size_t{512} << random.between(0, 4);
    if (!calm && random.chance(0.35)) {  // leader churn
        c.isolate_new_leader = 0.1 + 0.5 * random.unit();
        c.crash_new_leader = 0.1 + 0.5 * random.unit();
        c.max_append_bytes = std::size_t{1} << random.between(0, 4);
        c.max_inflight_appends = random.between(1, 4);
        c.max_inflight_bytes = c.max_append_bytes * random.between(1, 4);
    }
    c.compact_every_entries = random.between(5, 200);
    c.keep_entries = random.between(0, 20);
    c.transfer_per_s = random.swarm_probability(0.5, 0.5);
    c.clients = static_cast<int>(random.between(1, 5));
    c.think_us_max = random.between(1'000, 50'000);
    c.hard_state_first = random.chance(0.5);  // drawn late: earlier draws keep their values
    // Snapshots in chunks of 256 B .. 2 KiB (a table's snapshot is hundreds of
    // bytes and more; smaller chunks, with this network's losses, are too
    // slow for the liveness bound), or whole.
    if (random.chance(0.5)) c.max_snapshot_chunk_bytes = std::size_t{1} << random.between(8, 11);
    // Snapshots by entry count alone, or also waiting for log bytes of up to
    // 4x the table's (drawn last, as above).
    c.snapshot_log_pct = random.chance(0.5) ? 0 : random.between(1, 400);
    // Snapshots built a few locks per turn, so that entries apply while one
    // is being built (this simulation's tables hold tens of locks), or whole.
    if (random.chance(0.5)) c.snapshot_slice_locks = random.between(1, 4);
    // Expiry one Expire to an entry (--max-expire-batch 1, while upgrading
    // from a release before ExpireMany) or batched (the server's default: 1024).
    c.max_expire_batch = random.chance(0.25) ? 1 : random.between(2, 1024);
    // Waves of a few leases, so that leases due together go in several
    // waves back to back (this simulation holds tens of locks), or the default.
    if (random.chance(0.5)) c.expiry_wave = random.between(1, 4);
    // Lease checkpoints on in most runs (the server's default), a few per
    // tick in some, so that due checkpoints wait for a later tick.
    c.lease_checkpoints = !random.chance(0.15);
    if (random.chance(0.3)) c.max_checkpoints_per_tick = random.between(1, 3);
    return c;
}

std::uint64_t liveness_bound_us(const FaultConfig& c, std::uint64_t election_timeouts,
                                std::uint64_t slowest_tick_us, std::uint64_t backlog_entries) {
    const std::uint64_t elections_us =
        election_timeouts * 2 * static_cast<std::uint64_t>(c.election_ticks) * slowest_tick_us;
    const std::uint64_t round_trip_us = 2 * c.delay_max_us + c.persist_us_max;
    // An append carries at least one entry, and at least max_append_bytes
    // of entries no larger than kLargeEntryBytes (most of this
    // simulation's are 20-60 bytes).
    constexpr std::uint64_t kLargeEntryBytes = 256;
    const std::uint64_t per_round_trip = std::max<std::uint64_t>(1, c.max_append_bytes / kLargeEntryBytes);
    return elections_us + (backlog_entries + per_round_trip - 1) / per_round_trip * round_trip_us;
}

void make_fault_free(FaultConfig& c) {
    c.drop_probability = 0;
    c.duplicate_probability = 0;
    c.long_delay_probability = 0;
    c.partition_per_s = 0;
    c.crash_per_s = 0;
    c.crash_while_persisting = 0;
    c.isolate_new_leader = 0;
    c.crash_new_leader = 0;
    c.transfer_per_s = 0;
    c.clients = 5;
    c.think_us_max = 1'000;
}

void make_checkpoint_churn(FaultConfig& c, SimRandom& random) {
    c.lease_checkpoints = true;
    c.max_checkpoints_per_tick = 1024;
    c.think_us_max = c.tick_us_base * random.between(20, 60);
    c.transfer_per_s = static_cast<double>(random.between(2, 6));
    c.isolate_new_leader = std::min(c.isolate_new_leader, 0.05);
    c.crash_new_leader = std::min(c.crash_new_leader, 0.05);
}

std::string FaultConfig::describe() const {
    std::ostringstream out;
    out << "drop=" << drop_probability << " dup=" << duplicate_probability << " delay_us=[" << delay_min_us
        << "," << delay_max_us << "] long_delay=" << long_delay_probability << " partition_per_s="
        << partition_per_s << " one_way=" << one_way_share << " partition_ms_max=" << partition_ms_max
        << " crash_per_s=" << crash_per_s << " crash_while_persisting=" << crash_while_persisting
        << " isolate_new_leader=" << isolate_new_leader << " crash_new_leader=" << crash_new_leader        << " downtime_ms_max=" << downtime_ms_max << " persist_us=[" << persist_us_min << ","
        << persist_us_max << "] tick_us=" << tick_us_base << " drift=" << tick_drift << " election_ticks="
        << election_ticks << " heartbeat_ticks=" << heartbeat_ticks << " max_append_bytes=" << max_append_bytes
        << " max_inflight_appends=" << max_inflight_appends << " max_inflight_bytes=" << max_inflight_bytes
        << " max_snapshot_chunk_bytes=" << max_snapshot_chunk_bytes
        << " max_uncommitted_bytes=" << max_uncommitted_bytes << " compact_every="
        << compact_every_entries << " snapshot_log_pct=" << snapshot_log_pct
        << " snapshot_slice_locks=" << snapshot_slice_locks << " max_expire_batch=" << max_expire_batch
        << " expiry_wave=" << expiry_wave << " lease_checkpoints=" << lease_checkpoints
        << " max_checkpoints_per_tick=" << max_checkpoints_per_tick
        << " keep_entries=" << keep_entries
        << " transfer_per_s=" << transfer_per_s
        << " clients=" << clients << " think_us_max=" << think_us_max
        << " hard_state_first=" << hard_state_first;
    return out.str();
}

}  // namespace pgfence::sim
