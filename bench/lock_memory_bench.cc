// The leader's memory per held lock in its pure state (lock/table.h,
// member/leases.h, member/token_history.h): resident set growth of a member's
// lock table, its leases and its token history holding N locks granted as
// bench-scale's preload grants them (keys held-0 .. held-(N-1), an owner of
// OWNER_BYTES bytes, 0 = none as the preload; 12 and 36 show a short and a
// long one),
// lease 3600 s, checkpoints on as the server's default), each measured after
// the one before. What a member keeps besides (the log between snapshots,
// the snapshot being built or sent) is not here: make bench-scale measures
// the whole member.
//
//   bench_lock_memory [N] [HISTORY_TOKENS] [OWNER_BYTES]
//       (defaults 1000000, 100000 = --token-history-events, 0)
//
// history_b_per_lock is the history's growth over N: it holds at most
// HISTORY_TOKENS tokens (and kDefaultTokenHistoryBytes), so past that cap
// it does not grow with N and the figure per lock falls.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <variant>

#include "lock/table.h"
#include "member/leases.h"
#include "member/token_history.h"
#include "rss.h"

namespace {

using pgfence::bench::rss_kib;

double per_lock(long kib, std::size_t n) { return static_cast<double>(kib) * 1024.0 / static_cast<double>(n); }

}  // namespace

int main(int argc, char** argv) {
    using namespace pgfence;
    const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
    const std::size_t history = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : member::kDefaultTokenHistoryTokens;
    const std::size_t owner_bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
    if (n == 0 || history == 0 || owner_bytes > 1024) {
        std::fprintf(stderr, "usage: bench_lock_memory [N >= 1] [HISTORY_TOKENS >= 1] [OWNER_BYTES <= 1024]\n");
        return 2;
    }
    constexpr std::uint64_t kLeaseMs = 3'600'000;
    const long start = rss_kib();
    lock::LockTable table;
    const std::string owner(owner_bytes, 'o');  // one owner for all: the same bytes, each lock its own copy
    for (std::size_t i = 0; i < n; ++i) {
        const lock::Result r = table.apply(i + 1, lock::Grant{"held-" + std::to_string(i), kLeaseMs, owner});
        if (!std::holds_alternative<lock::Granted>(r)) {
            std::fprintf(stderr, "grant %zu refused\n", i);
            return 1;
        }
    }
    const long after_table = rss_kib();
    member::LeaseSet leases(true);
    const member::Time now{std::chrono::seconds(1000)};
    table.for_each([&](const lock::Lock& l) {
        leases.start(l.key, l.token, l.lease_ms, now + std::chrono::microseconds(l.token), member::kDefaultMaxClockDriftPpm);
        leases.answered(l.key, l.token, "0123456789abcdef");
    });
    const long after_leases = rss_kib();
    member::TokenHistory h(history, member::kDefaultTokenHistoryBytes);
    for (std::size_t i = 0; i < n; ++i) {  // in token order, as the log grants them
        const lock::Lock& l = *table.find("held-" + std::to_string(i));
        h.granted(l.token, 1'796'000'000'000 + l.token, l.token, {l.key}, l.owner.str(), l.lease_ms);
    }
    const long after_history = rss_kib();
    std::printf("locks=%zu owner_bytes=%zu table_b_per_lock=%.1f leases_b_per_lock=%.1f history_tokens=%zu history_mib=%.1f "
                "history_b_per_lock=%.1f total_b_per_lock=%.1f\n",
                n, owner_bytes, per_lock(after_table - start, n), per_lock(after_leases - after_table, n), history,
                static_cast<double>(after_history - after_leases) / 1024.0, per_lock(after_history - after_leases, n),
                per_lock(after_history - start, n));
    return 0;
}
