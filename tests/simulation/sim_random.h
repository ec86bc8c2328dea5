// The simulation's only source of randomness: a seeded xoshiro256** generator.
//
// Every decision of a simulation run (network fate, fault settings, workload,
// tick periods, each member's Raft random_seed) is drawn from a SimRandom that
// descends from the run's one 64-bit seed, so a seed replays exactly.
// Independent streams come from fork(tag): adding draws to one stream (say,
// the workload) does not shift the decisions of another (the network).
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

namespace pgfence::sim {

class SimRandom {
public:
    explicit SimRandom(std::uint64_t seed) {
        std::uint64_t x = seed;
        for (auto& word : state_) word = splitmix64(x);
    }

    std::uint64_t next() {
        const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
        const std::uint64_t t = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= t;
        state_[3] = rotl(state_[3], 45);
        return result;
    }

    // Uniform in [lo, hi] (inclusive). Modulo bias is irrelevant here.
    std::uint64_t between(std::uint64_t lo, std::uint64_t hi) {
        assert(lo <= hi);
        const std::uint64_t span = hi - lo + 1;
        return span == 0 ? next() : lo + next() % span;
    }

    // Uniform in [0, 1).
    double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

    bool chance(double probability) { return unit() < probability; }

    // Picks an index into a non-empty container of `size` elements.
    std::size_t index(std::size_t size) {
        assert(size > 0);
        return static_cast<std::size_t>(next() % size);
    }

    // A new, independent stream named by `tag`.
    SimRandom fork(std::uint64_t tag) { return SimRandom(next() ^ (tag * 0x9E3779B97F4A7C15ull)); }

    // A probability drawn for swarm testing: zero with chance `zero_chance`,
    // else log-uniform-ish in [max/64, max].
    double swarm_probability(double max, double zero_chance) {
        if (chance(zero_chance)) return 0.0;
        const double scale = static_cast<double>(1u << between(0, 6));
        return max / scale;
    }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    static std::uint64_t splitmix64(std::uint64_t& x) {
        std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

    std::uint64_t state_[4] = {};
};

}  // namespace pgfence::sim
