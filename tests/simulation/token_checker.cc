// Tokens as clients see them: see token_checker.h.
#include "token_checker.h"

#include <algorithm>

#include "sim_failure.h"

namespace pgfence::sim {

namespace {

// Whether every key of `keys` ("a,b": a set's, sorted) is one of `set`'s.
bool part_of(const std::string& keys, const std::string& set) {
    std::size_t at = 0;
    while (at <= keys.size()) {
        const std::size_t end = std::min(keys.find(',', at), keys.size());
        const std::string key = keys.substr(at, end - at);
        bool found = false;
        for (std::size_t from = 0; from <= set.size() && !found;) {
            const std::size_t stop = std::min(set.find(',', from), set.size());
            found = set.compare(from, stop - from, key) == 0;
            from = stop + 1;
        }
        if (!found) return false;
        at = end + 1;
    }
    return true;
}

}  // namespace

void TokenChecker::granted(const std::string& key, lock::Token token, const std::string& owner, bool fresh,
                           std::uint64_t invoked_us, std::uint64_t now_us) {
    auto [it, first] = told_.try_emplace(token, key, owner);
    if (!first) {
        const auto& [was_key, was_owner] = it->second;
        require((was_key == key || part_of(key, was_key)) && !owner.empty() && was_owner == owner, "token ", token,
                " granted twice: for ", was_key, " to owner '", was_owner, "' and for ", key, " to owner '", owner,
                "'");
        require(!fresh, "token ", token, " of ", key, " told again as a fresh grant");
    }
    if (fresh) {
        // The largest token told strictly before the request was first sent.
        auto before = std::lower_bound(largest_told_.begin(), largest_told_.end(), invoked_us,
                                       [](const auto& told, std::uint64_t at) { return told.first < at; });
        if (before != largest_told_.begin()) {
            const lock::Token earlier = std::prev(before)->second;
            require(token > earlier, "fresh grant of ", key, " with token ", token, " for a request sent at ",
                    invoked_us, "us, but token ", earlier, " had been told to a client before then");
        }
        ++fresh_checked_;
    }
    require(largest_told_.empty() || largest_told_.back().first <= now_us, "answers told out of time order");
    const lock::Token largest = largest_told_.empty() ? token : std::max(largest_told_.back().second, token);
    if (!largest_told_.empty() && largest_told_.back().first == now_us) {
        largest_told_.back().second = largest;
    } else {
        largest_told_.emplace_back(now_us, largest);
    }
}

}  // namespace pgfence::sim
