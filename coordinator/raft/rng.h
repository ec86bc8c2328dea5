// A small seeded pseudo-random generator (splitmix64) for election timeouts.
//
// The core's only source of randomness: no std::random_device, no global
// state. The same seed gives the same sequence on every platform, which the
// simulation needs to replay a failing seed exactly.
#pragma once

#include <cstdint>

namespace pgfence::raft {

class SplitMix64 {
public:
    explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

    std::uint64_t next() {
        state_ += 0x9E3779B97F4A7C15ull;
        std::uint64_t z = state_;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

    // Uniform-enough integer in [lo, lo + span); span > 0. The modulo bias is
    // irrelevant for spans of a few dozen ticks.
    int in_range(int lo, int span) {
        return lo + static_cast<int>(next() % static_cast<std::uint64_t>(span));
    }

private:
    std::uint64_t state_;
};

}  // namespace pgfence::raft
