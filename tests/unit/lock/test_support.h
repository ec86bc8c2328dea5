// Helpers shared by the lock unit tests: seeded random commands, and a byte
// builder that writes the documented formats independently of the code under test.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "lock/commands.h"
#include "lock/table.h"

namespace pgfence::lock {
// Boost.Test prints the values it compares.
std::ostream& operator<<(std::ostream& os, const Result& result);
std::ostream& operator<<(std::ostream& os, const Command& cmd);
std::ostream& operator<<(std::ostream& os, const Lock& lock);
}  // namespace pgfence::lock

namespace pgfence::lock::test {

// Builds bytes by hand from the format written in commands.h / table.h.
class Bytes {
  public:
    Bytes& u8(std::uint8_t v) { return le(v, 1); }
    Bytes& u32(std::uint32_t v) { return le(v, 4); }
    Bytes& u64(std::uint64_t v) { return le(v, 8); }
    Bytes& str(const std::string& s) {
        u32(static_cast<std::uint32_t>(s.size()));
        out_ += s;
        return *this;
    }
    const std::string& get() const { return out_; }

  private:
    Bytes& le(std::uint64_t v, int width) {
        for (int i = 0; i < width; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
        return *this;
    }
    std::string out_;
};

// Appends one lock in the snapshot layout of `version` (2: with its user;
// 3: a flags byte, then its user, value and remaining_ms where present).
void put_lock(Bytes& bytes, const Lock& lock, std::uint8_t version = 1);

// A small pool of keys so random commands collide on keys often.
std::vector<std::string> key_pool();

// A random command over `keys`; Release/Expire pick tokens near `table`'s
// tokens (often the holder's, often stale) so both outcomes happen.
Command random_command(std::mt19937_64& rng, const std::vector<std::string>& keys,
                       const LockTable& table);

// Random bytes of random length up to max_bytes.
std::string random_bytes(std::mt19937_64& rng, std::size_t max_bytes);

// `valid` with 1..4 random byte flips, insertions or deletions.
std::string mutate(std::mt19937_64& rng, std::string valid);

}  // namespace pgfence::lock::test
