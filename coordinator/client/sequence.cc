#include "client/sequence.h"

namespace pgfence::client {

std::optional<std::int64_t> WriteSequence::next() {
    std::int64_t last = last_.load(std::memory_order_relaxed);
    for (;;) {
        const std::optional<std::int64_t> n = seq_after(last);
        if (!n) return std::nullopt;
        if (last_.compare_exchange_weak(last, *n, std::memory_order_acq_rel,
                                        std::memory_order_relaxed))
            return n;
    }
}

}  // namespace pgfence::client
