// A holder's write numbers for pg_fence's sequenced mode (docs/sql.md,
// "Mode sequenced"): 1, 2, 3, ... under one fencing token, so that a write of
// the holder's that is delayed or retried cannot overwrite a later one.
//
// - next() hands out last + 1, starting from 1 (0 is the floor a sequenced
//   row or resource stores), never the same number twice, from any number of
//   threads at once.
// - The numbers are PostgreSQL bigints: once kMaxSeq has been handed out,
//   next() answers nullopt (the holder must acquire a new token); it never
//   wraps.
// - One WriteSequence belongs to one grant in one process. An owner that
//   re-acquires its own token in a new process must continue above the last
//   number the old process used (WriteSequence(last)).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

namespace pgfence::client {

constexpr std::int64_t kMaxSeq = INT64_MAX;

class WriteSequence {
  public:
    // The next number is `last` + 1; with `last` outside 0..kMaxSeq - 1,
    // next() answers nullopt.
    explicit WriteSequence(std::int64_t last = 0) : last_(last) {}

    WriteSequence(const WriteSequence&) = delete;
    WriteSequence& operator=(const WriteSequence&) = delete;

    // last + 1, or nullopt once kMaxSeq was handed out.
    std::optional<std::int64_t> next();
    // The last number handed out (0 before the first).
    std::int64_t last() const { return last_.load(std::memory_order_acquire); }

  private:
    std::atomic<std::int64_t> last_{0};
};

// The number after `last` (0..kMaxSeq), or nullopt when last is kMaxSeq or
// out of range. WriteSequence::next() and `fencectl seq` both count with it.
constexpr std::optional<std::int64_t> seq_after(std::int64_t last) {
    if (last < 0 || last >= kMaxSeq) return std::nullopt;
    return last + 1;
}

}  // namespace pgfence::client
