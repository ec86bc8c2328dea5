#include "net/conn_ranks.h"

namespace pgfence::net {

std::string_view conn_class_name(ConnClass c) {
    switch (c) {
        case ConnClass::kAnonymous:
            return "anonymous";
        case ConnClass::kAuthenticated:
            return "authenticated";
        case ConnClass::kLease:
            return "lease";
    }
    return "unknown";
}

bool AddressCounts::try_add(const std::string& address) {
    if (limit_ == 0) return false;
    std::size_t& n = counts_[address];  // a new entry starts at 0, below any limit
    if (n >= limit_) return false;
    ++n;
    return true;
}

void AddressCounts::remove(const std::string& address) {
    auto it = counts_.find(address);
    if (it == counts_.end()) return;
    if (--it->second == 0) counts_.erase(it);
}

std::size_t AddressCounts::count(const std::string& address) const {
    auto it = counts_.find(address);
    return it == counts_.end() ? 0 : it->second;
}

}  // namespace pgfence::net
