#include "net/conn_ranks.h"

#include <arpa/inet.h>

#include <cstring>

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

std::string address_group(const std::string& address) {
    in6_addr a{};
    if (::inet_pton(AF_INET6, address.c_str(), &a) != 1) return address;  // IPv4, or not an address
    static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(a.s6_addr, kMapped, sizeof kMapped) == 0) return address;
    std::memset(a.s6_addr + 8, 0, 8);
    char text[INET6_ADDRSTRLEN] = {};
    if (::inet_ntop(AF_INET6, &a, text, sizeof text) == nullptr) return address;
    return std::string(text) + "/64";
}

bool AddressCounts::try_add(const std::string& address) {
    if (limit_ == 0) return false;
    std::size_t& n = counts_[address_group(address)];  // a new entry starts at 0, below any limit
    if (n >= limit_) return false;
    ++n;
    return true;
}

void AddressCounts::remove(const std::string& address) {
    auto it = counts_.find(address_group(address));
    if (it == counts_.end()) return;
    if (--it->second == 0) counts_.erase(it);
}

std::size_t AddressCounts::count(const std::string& address) const {
    auto it = counts_.find(address_group(address));
    return it == counts_.end() ? 0 : it->second;
}

}  // namespace pgfence::net
