// raft_sim: runs whole-cluster simulations for seeds S..S+N-1.
//
//   raft_sim --seeds N --from S [--steps K] [--members 3|5] [--verbose] [--fault-free] [--beyond-rho]
//            [--membership] [--twins] [--checkpoint-churn] [--early-appends-off] [--require-overlaps]
//            [--require-counts]
//
// --fault-free turns every fault off (throughput runs: the summary's commits
// over its wall-clock seconds is the core's committed entries per second,
// simulator and checkers included). --beyond-rho runs every seed with its
// clocks beyond rho (sim_cluster.h; one seed in eight is anyway), where
// overlapping leases are counted, not failed; --require-overlaps then also
// fails the run unless some overlapped (the lease checker must catch a core
// whose rho is below its clocks' real error) and the fenced resource refused
// stale writes there. --membership changes every seed's membership (three
// seeds in eight do anyway, the --fault-free ones excepted: members join as
// learners, are promoted, removed). --twins sends twin acquires in every
// seed. --checkpoint-churn keeps checkpointed leases alive around leadership
// transfers in every seed (swarm.h make_checkpoint_churn; the simulation's
// README), and fails the run when no transfer followed a keepalive or no
// Checkpoint set or cleared a lock. --early-appends-off runs the members with
// member::Config::early_appends off, the server's default (on otherwise:
// the leader sends entries proposed while its write is outstanding).
// --require-counts fails the run
// when any count of the summary line is zero (the checks were not exercised).
// Exits 0 when every seed passed, 1 when any failed (each failure prints
// "SIMULATION FAILED seed=... members=... step=...: what" and how to replay
// it), 2 on a usage error. A crash of the process itself (an assertion in
// the core) prints the seed being run before dying.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_cluster.h"

namespace {

volatile std::sig_atomic_t g_running = 0;
std::uint64_t g_seed = 0;  // the seed being run, for the fatal-signal message

// Writes the seed with async-signal-safe calls only, then dies as intended.
void on_fatal_signal(int signal_number) {
    if (g_running) {
        char buffer[96] = "\nSIMULATION CRASHED (signal) seed=";
        std::size_t len = std::strlen(buffer);
        char digits[24];
        int n = 0;
        std::uint64_t v = g_seed;
        do {
            digits[n++] = static_cast<char>('0' + v % 10);
            v /= 10;
        } while (v != 0 && n < 24);
        while (n > 0 && len + 2 < sizeof buffer) buffer[len++] = digits[--n];
        buffer[len++] = '\n';
        [[maybe_unused]] auto written = write(STDERR_FILENO, buffer, len);
    }
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
}

struct Flags {
    std::uint64_t seeds = 1;
    std::uint64_t from = 1;
    std::uint64_t steps = 100'000;
    int members = 0;
    bool verbose = false;
    bool fault_free = false;
    bool beyond_rho = false;        // every seed's clocks beyond its rho
    bool membership = false;        // every seed changes its membership
    bool twins = false;             // every seed sends twin acquires
    bool checkpoint_churn = false;  // every seed keeps checkpointed leases alive around leader changes
    bool early_appends_off = false;  // member::Config::early_appends off (the server's default)
    bool require_overlaps = false;  // fail unless the seeds beyond rho overlapped some leases
    bool require_counts = false;    // fail unless every count of the summary line is above zero
};

bool parse_number(const char* text, std::uint64_t& out) {
    char* end = nullptr;
    out = std::strtoull(text, &end, 10);
    return end != text && *end == '\0';
}

bool parse_flags(int argc, char** argv, Flags& flags) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        std::uint64_t value = 0;
        if (arg == "--verbose" || arg == "--fault-free" || arg == "--beyond-rho" || arg == "--require-overlaps" ||
            arg == "--require-counts" || arg == "--membership" || arg == "--twins" ||
            arg == "--checkpoint-churn" || arg == "--early-appends-off") {
            (arg == "--verbose"            ? flags.verbose
             : arg == "--fault-free"       ? flags.fault_free
             : arg == "--beyond-rho"       ? flags.beyond_rho
             : arg == "--require-overlaps" ? flags.require_overlaps
             : arg == "--membership"       ? flags.membership
             : arg == "--twins"            ? flags.twins
             : arg == "--checkpoint-churn" ? flags.checkpoint_churn
             : arg == "--early-appends-off" ? flags.early_appends_off
                                           : flags.require_counts) = true;
            continue;
        }
        if (i + 1 >= argc || !parse_number(argv[i + 1], value)) {
            std::fprintf(stderr, "raft_sim: %s needs a number\n", arg.c_str());
            return false;
        }
        ++i;
        if (arg == "--seeds") flags.seeds = value;
        else if (arg == "--from") flags.from = value;
        else if (arg == "--steps") flags.steps = value;
        else if (arg == "--members" && (value == 3 || value == 5)) flags.members = static_cast<int>(value);
        else {
            std::fprintf(stderr, "raft_sim: unknown flag or bad value: %s %s\n", arg.c_str(), argv[i]);
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Flags flags;
    if (!parse_flags(argc, argv, flags)) {
        std::fprintf(stderr, "usage: raft_sim --seeds N --from S [--steps K] [--members 3|5] [--verbose] [--fault-free] "
                     "[--beyond-rho] [--membership] [--twins] [--checkpoint-churn] [--early-appends-off] [--require-overlaps] "
                     "[--require-counts]\n");
        return 2;
    }
    std::signal(SIGABRT, on_fatal_signal);
    std::signal(SIGSEGV, on_fatal_signal);
    const auto started = std::chrono::steady_clock::now();
    std::uint64_t failed = 0, steps = 0, elections = 0, commits = 0, crashes = 0, torn = 0, dropped = 0,
                  sent = 0, snapshots = 0, acked = 0, reads = 0, grants = 0, grants_many = 0, waiting_sets = 0, releases = 0, expires = 0, expire_batches = 0,
                  keepalives = 0, waiter_grants = 0, leader_changes = 0, held = 0, phantoms = 0, stale = 0,
                  partitions = 0, beyond = 0, overlaps = 0, beyond_stale = 0, expires_checked = 0,
                  waiters_checked = 0, tokens_checked = 0, client_partitions = 0, membership_seeds = 0, added = 0,
                  promotions = 0, removals = 0, leader_removals = 0, config_changes = 0, removed_stopped = 0,
                  elections_checked = 0, commit_quorums = 0, one_voter_seeds = 0, twins_unwritten = 0, proclaims = 0, token_histories = 0,
                  answered_expires = 0, checkpoints = 0, checkpoint_clears = 0, keepalive_transfers = 0;
    for (std::uint64_t seed = flags.from; seed < flags.from + flags.seeds; ++seed) {
        g_seed = seed;
        g_running = 1;
        const pgfence::sim::RunResult r =
            pgfence::sim::run_simulation({seed, flags.steps, flags.members, flags.verbose, flags.fault_free,
                                          flags.beyond_rho, flags.membership, flags.twins,
                                          flags.checkpoint_churn, !flags.early_appends_off});
        g_running = 0;
        steps += r.step;
        elections += r.elections;
        commits += r.commits;
        crashes += r.crashes;
        torn += r.torn_crashes;
        dropped += r.messages_dropped;
        sent += r.messages_sent;
        snapshots += r.snapshots_installed;
        acked += r.ops_acked;
        reads += r.reads_acked;
        grants += r.grants;
        grants_many += r.grants_many;
        releases += r.releases;
        expires += r.expires;
        expire_batches += r.expire_batches;
        keepalives += r.keepalives;
        checkpoints += r.checkpoints;
        checkpoint_clears += r.checkpoint_clears;
        waiter_grants += r.waiter_grants;
        leader_changes += r.leader_changes;
        keepalive_transfers += r.keepalive_transfers;
        held += r.held_intervals;
        phantoms += r.phantom_releases;
        stale += r.stale_writes_refused;
        partitions += r.partitions;
        client_partitions += r.client_partitions;
        expires_checked += r.expires_checked;
        answered_expires += r.answered_expires_checked;
        twins_unwritten += r.twin_grants_unwritten;
        proclaims += r.proclaims;
        token_histories += r.token_histories_checked;
        waiters_checked += r.waiter_order_checked;
        waiting_sets += r.waiting_sets_checked;
        tokens_checked += r.fresh_tokens_checked;
        membership_seeds += r.membership ? 1 : 0;
        added += r.members_added;
        promotions += r.promotions;
        removals += r.removals;
        leader_removals += r.leader_removals;
        config_changes += r.config_changes;
        removed_stopped += r.removed_stopped;
        elections_checked += r.elections_checked;
        commit_quorums += r.commit_quorums_checked;
        one_voter_seeds += r.voters_min == 1 ? 1 : 0;
        if (r.beyond_rho) {
            ++beyond;
            overlaps += r.lease_overlaps;
            beyond_stale += r.stale_writes_refused;
        }
        if (flags.verbose || !r.ok) {
            std::printf("seed=%llu members=%d steps=%llu elections=%llu commits=%llu crashes=%llu acked=%llu "
                        "sim_ms=%llu liveness_ticks=%llu%s%s\n",
                        static_cast<unsigned long long>(seed), r.members, static_cast<unsigned long long>(r.step),
                        static_cast<unsigned long long>(r.elections), static_cast<unsigned long long>(r.commits),
                        static_cast<unsigned long long>(r.crashes), static_cast<unsigned long long>(r.ops_acked),
                        static_cast<unsigned long long>(r.sim_time_us / 1000),
                        static_cast<unsigned long long>(r.liveness_ticks),
                        r.beyond_rho ? (" beyond_rho lease_overlaps=" + std::to_string(r.lease_overlaps)).c_str() : "",
                        r.membership ? (" membership config_changes=" + std::to_string(r.config_changes) +
                                        " voters=" + std::to_string(r.voters_min) + ".." +
                                        std::to_string(r.voters_max))
                                           .c_str()
                                     : "");
        }
        if (!r.ok) {
            ++failed;
            std::printf("SIMULATION FAILED seed=%llu members=%d step=%llu: %s\n",
                        static_cast<unsigned long long>(seed), r.members, static_cast<unsigned long long>(r.step),
                        r.failure.c_str());
            const std::string members =
                flags.members != 0 ? " --members " + std::to_string(flags.members) : std::string();
            std::printf("reproduce with: make sim SEEDS=1 FROM=%llu   (or raft_sim --seeds 1 --from %llu "
                        "--steps %llu%s%s%s%s%s%s%s --verbose)\n",
                        static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
                        static_cast<unsigned long long>(flags.steps), members.c_str(),
                        flags.fault_free ? " --fault-free" : "", flags.beyond_rho ? " --beyond-rho" : "",
                        flags.membership ? " --membership" : "", flags.twins ? " --twins" : "",
                        flags.checkpoint_churn ? " --checkpoint-churn" : "",
                        flags.early_appends_off ? " --early-appends-off" : "");
        }
        std::fflush(stdout);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("raft_sim: seeds %llu..%llu: %llu run, %llu failed; steps %llu, elections %llu, commits %llu, "
                "crashes %llu (%llu torn), snapshots installed %llu, messages sent %llu, dropped %llu, "
                "client ops acknowledged %llu (%llu reads); %.1f s\n",
                static_cast<unsigned long long>(flags.from),
                static_cast<unsigned long long>(flags.from + flags.seeds - 1),
                static_cast<unsigned long long>(flags.seeds), static_cast<unsigned long long>(failed),
                static_cast<unsigned long long>(steps), static_cast<unsigned long long>(elections),
                static_cast<unsigned long long>(commits), static_cast<unsigned long long>(crashes),
                static_cast<unsigned long long>(torn), static_cast<unsigned long long>(snapshots),
                static_cast<unsigned long long>(sent), static_cast<unsigned long long>(dropped),
                static_cast<unsigned long long>(acked), static_cast<unsigned long long>(reads), seconds);
    // One line a reader can trust was exercised: the member cores' own counts
    // (all members, every incarnation), the fenced resource's refusals, faults,
    // what the leader checker checked, and the seeds whose clocks ran beyond
    // rho: how many lease pairs overlapped there, and the stale writes refused.
    std::printf("sim: seeds=%llu failed=%llu grants=%llu grants_many=%llu releases=%llu expires=%llu expire_batches=%llu keepalives=%llu "
                "checkpoints=%llu checkpoint_clears=%llu "
                "waiter_grants=%llu phantom_releases=%llu stale_writes_refused=%llu leader_changes=%llu "
                "crashes=%llu partitions=%llu client_partitions=%llu held_intervals=%llu expires_checked=%llu "
                "waiter_order_checked=%llu waiting_sets_checked=%llu "
                "fresh_tokens_checked=%llu "
                "beyond_rho_seeds=%llu beyond_rho_lease_overlaps=%llu beyond_rho_stale_writes_refused=%llu "
                "membership_seeds=%llu members_added=%llu promotions=%llu removals=%llu leader_removals=%llu "
                "config_changes=%llu removed_stopped=%llu one_voter_seeds=%llu elections_checked=%llu "
                "commit_quorums_checked=%llu twin_grants_unwritten=%llu answered_expires_checked=%llu proclaims=%llu token_histories_checked=%llu\n",
                static_cast<unsigned long long>(flags.seeds), static_cast<unsigned long long>(failed),
                static_cast<unsigned long long>(grants), static_cast<unsigned long long>(grants_many),
                static_cast<unsigned long long>(releases),
                static_cast<unsigned long long>(expires), static_cast<unsigned long long>(expire_batches),
                static_cast<unsigned long long>(keepalives), static_cast<unsigned long long>(checkpoints),
                static_cast<unsigned long long>(checkpoint_clears),
                static_cast<unsigned long long>(waiter_grants), static_cast<unsigned long long>(phantoms),
                static_cast<unsigned long long>(stale), static_cast<unsigned long long>(leader_changes),
                static_cast<unsigned long long>(crashes), static_cast<unsigned long long>(partitions),
                static_cast<unsigned long long>(client_partitions), static_cast<unsigned long long>(held),
                static_cast<unsigned long long>(expires_checked),
                static_cast<unsigned long long>(waiters_checked), static_cast<unsigned long long>(waiting_sets),
                static_cast<unsigned long long>(tokens_checked),
                static_cast<unsigned long long>(beyond),
                static_cast<unsigned long long>(overlaps), static_cast<unsigned long long>(beyond_stale),
                static_cast<unsigned long long>(membership_seeds), static_cast<unsigned long long>(added),
                static_cast<unsigned long long>(promotions), static_cast<unsigned long long>(removals),
                static_cast<unsigned long long>(leader_removals), static_cast<unsigned long long>(config_changes),
                static_cast<unsigned long long>(removed_stopped), static_cast<unsigned long long>(one_voter_seeds),
                static_cast<unsigned long long>(elections_checked), static_cast<unsigned long long>(commit_quorums),
                static_cast<unsigned long long>(twins_unwritten), static_cast<unsigned long long>(answered_expires),
                static_cast<unsigned long long>(proclaims), static_cast<unsigned long long>(token_histories));
    if (flags.require_counts) {
        const std::pair<const char*, std::uint64_t> counts[] = {
            {"grants", grants}, {"grants_many", grants_many}, {"releases", releases}, {"expires", expires},
            {"expire_batches", expire_batches}, {"keepalives", keepalives}, {"checkpoints", checkpoints},
            {"checkpoint_clears", checkpoint_clears},
            {"waiter_grants", waiter_grants}, {"phantom_releases", phantoms}, {"stale_writes_refused", stale},
            {"leader_changes", leader_changes}, {"crashes", crashes}, {"partitions", partitions},
            {"client_partitions", client_partitions}, {"held_intervals", held},
            {"expires_checked", expires_checked}, {"waiter_order_checked", waiters_checked},
            {"waiting_sets_checked", waiting_sets},
            {"fresh_tokens_checked", tokens_checked}, {"beyond_rho_seeds", beyond},
            {"beyond_rho_stale_writes_refused", beyond_stale}, {"membership_seeds", membership_seeds},
            {"members_added", added}, {"promotions", promotions}, {"removals", removals},
            {"leader_removals", leader_removals}, {"config_changes", config_changes},
            {"removed_stopped", removed_stopped}, {"elections_checked", elections_checked},
            {"commit_quorums_checked", commit_quorums}, {"twin_grants_unwritten", twins_unwritten},
            {"answered_expires_checked", answered_expires}, {"proclaims", proclaims},
            {"token_histories_checked", token_histories}};
        std::string zero;
        for (const auto& [name, value] : counts) {
            if (value == 0) zero += std::string(zero.empty() ? "" : ", ") + name;
        }
        if (!zero.empty()) {
            std::printf("raft_sim: --require-counts: nothing exercised %s in these seeds\n", zero.c_str());
            return 1;
        }
    }
    if (flags.checkpoint_churn) {
        // The churn this flag asks for must have happened: leaseholders'
        // keepalives followed by leadership transfers, and checkpoints set.
        std::printf("raft_sim: --checkpoint-churn: %llu leadership transfers after keepalives, %llu checkpoints\n",
                    static_cast<unsigned long long>(keepalive_transfers),
                    static_cast<unsigned long long>(checkpoints));
        if (failed == 0 && (keepalive_transfers == 0 || checkpoints == 0)) {
            std::printf("raft_sim: --checkpoint-churn: no churn in these seeds (no transfer after a keepalive, or "
                        "no checkpoint applied)\n");
            return 1;
        }
    }
    if (flags.require_overlaps && (beyond == 0 || overlaps == 0 || beyond_stale == 0)) {
        std::printf("raft_sim: --require-overlaps: %llu seeds ran beyond rho with %llu leases overlapping and %llu "
                    "stale writes refused: both must be above zero\n", static_cast<unsigned long long>(beyond),
                    static_cast<unsigned long long>(overlaps), static_cast<unsigned long long>(beyond_stale));
        return 1;
    }
    return failed == 0 ? 0 : 1;
}
