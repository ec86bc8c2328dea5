#include "member/counters.h"

#include <cstdio>

namespace pgfence::member {

void Histogram::observe(std::chrono::nanoseconds d) {
    const double s = std::chrono::duration<double>(d).count();
    std::size_t i = 0;
    while (i < kBounds.size() && s > kBounds[i]) ++i;
    ++counts_[i];
    ++count_;
    sum_seconds_ += s;
}

void Histogram::render(std::string& out, const char* name, const char* help) const {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    std::uint64_t cumulative = 0;
    char buf[160];
    for (std::size_t i = 0; i < kBounds.size(); ++i) {
        cumulative += counts_[i];
        std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %llu\n", name, kBounds[i],
                      static_cast<unsigned long long>(cumulative));
        out += buf;
    }
    cumulative += counts_[kBounds.size()];
    std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9f\n%s_count %llu\n", name,
                  static_cast<unsigned long long>(cumulative), name, sum_seconds_, name,
                  static_cast<unsigned long long>(count_));
    out += buf;
}

}  // namespace pgfence::member
