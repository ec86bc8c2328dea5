// Tokens as clients see them (the token invariants), on the answers
// they receive:
//   - no token is granted twice: a token told to two requests is one lock's
//     token, re-granted to its own owner (the same key, the same non-empty
//     owner: an idempotent re-acquire); never another key or owner. A set's
//     token (GrantMany) is told for its keys, named "k1,k2" sorted; told
//     again it names the same keys, or some of them (what is left of a set
//     whose other keys expired is re-granted to its owner as a set of fewer
//     keys or a lock of its own, lock/table.h);
//   - a fresh grant (its answer's log entry created the lock, as opposed to
//     an idempotent re-grant of a held one) carries a token larger than every
//     token any client had been told before the request was first sent.
// Every answer comes in real (simulated) time order. A violation is a SimFailure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lock/commands.h"

namespace pgfence::sim {

class TokenChecker {
public:
    // A client was told Granted{key, token} at now_us for an acquire by
    // `owner` it first sent at invoked_us; `fresh`: the grant created the lock.
    void granted(const std::string& key, lock::Token token, const std::string& owner, bool fresh,
                 std::uint64_t invoked_us, std::uint64_t now_us);

    std::uint64_t fresh_checked() const { return fresh_checked_; }

private:
    std::map<lock::Token, std::pair<std::string, std::string>> told_;  // token -> (key, owner)
    // (time told, largest token told up to then), in time order.
    std::vector<std::pair<std::uint64_t, lock::Token>> largest_told_;
    std::uint64_t fresh_checked_ = 0;
};

}  // namespace pgfence::sim
