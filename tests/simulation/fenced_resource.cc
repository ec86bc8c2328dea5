// The simulated fenced resource: see fenced_resource.h.
#include "fenced_resource.h"

#include "sim_failure.h"

namespace pgfence::sim {

void FencedResource::granted(const std::string& key, lock::Token token) {
    granted_[key].insert(token);  // answers may arrive out of grant order
}

bool FencedResource::write(const std::string& key, lock::Token token) {
    const auto& tokens = granted_[key];
    require(tokens.count(token) > 0, "fenced resource: a write to ", key, " with token ", token,
            ", which was never granted for it");
    lock::Token& fence = fence_[key];
    if (token <= fence) {
        ++refused_;
        return false;
    }
    fence = token;
    ++accepted_;
    return true;
}

}  // namespace pgfence::sim
