// The token history's memory (member/token_history.h): how much a member's
// resident set grows per million tokens kept, each granted and ended (two
// events of the log: a Grant and its Release or Expire), with keys and
// owners of a typical size, against what the history counts (bytes(), the
// --token-history-bytes bound).
//
//   bench_token_history [TOKENS] [KEY_BYTES] [KEYS]   (defaults 1000000, 16, shared)
//
// KEYS: `shared` (a key per ten tokens, like jobs retaken) or `unique` (a
// key of its own per token: the key index then holds an entry per token).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "member/token_history.h"
#include "rss.h"

using pgfence::bench::rss_kib;

int main(int argc, char** argv) {
    const std::size_t tokens = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
    const std::size_t key_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 16;
    const std::string keys = argc > 3 ? argv[3] : "shared";
    if (tokens == 0 || key_bytes < 8 || key_bytes > 512 || (keys != "shared" && keys != "unique")) {
        std::fprintf(stderr, "usage: bench_token_history [TOKENS >= 1] [KEY_BYTES 8..512] [shared|unique]\n");
        return 2;
    }
    const std::size_t tokens_per_key = keys == "unique" ? 1 : 10;
    const long before = rss_kib();
    {
        pgfence::member::TokenHistory h(tokens, std::uint64_t{1} << 40);
        constexpr std::uint64_t kWall = 1'796'000'000'000;
        for (std::size_t i = 0; i < tokens; ++i) {
            // Every token ended.
            std::string key = "job:" + std::to_string(i / tokens_per_key);
            key.resize(key_bytes, '_');
            const pgfence::raft::Index index = 2 * i + 1;
            h.granted(index, kWall + i, index, {std::move(key)}, "worker-" + std::to_string(i % 64), 10'000);
            h.ended(index, pgfence::member::TokenEnd::kReleased, index + 1, kWall + i + 5);
            if (i % 4 == 0) h.keepalive_ok(index, kWall + i + 2);  // a leader's: one token in four kept alive
        }
        const long after = rss_kib();
        const double per_token = static_cast<double>(after - before) * 1024.0 / static_cast<double>(tokens);
        std::printf("tokens=%zu key_bytes=%zu keys=%s rss_growth_kib=%ld rss_bytes_per_token=%.0f "
                    "counted_bytes=%llu counted_bytes_per_token=%.0f rss_mib_per_1m_tokens=%.0f "
                    "rss_mib_per_1m_events=%.0f\n",
                    tokens, key_bytes, keys.c_str(), after - before, per_token, static_cast<unsigned long long>(h.bytes()),
                    static_cast<double>(h.bytes()) / static_cast<double>(tokens), per_token * 1e6 / (1 << 20),
                    per_token * 0.5e6 / (1 << 20));
    }
    return 0;
}
