#include "member/counters.h"

namespace pgfence::member {

void Histogram::observe(std::chrono::nanoseconds d) {
    const double s = std::chrono::duration<double>(d).count();
    std::size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    ++counts_[i];
    ++count_;
    sum_seconds_ += s;
}

}  // namespace pgfence::member
