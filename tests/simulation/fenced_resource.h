// A fenced resource the simulated clients write to, as pg_fence's strict
// fence does: a write carries the writer's token and is accepted only if it
// is above the token stored for its key (which it then becomes). Holders
// write once after each grant, some while paused past their lease, so stale
// writes happen and must be refused. Checked: every write carries a token
// granted for its key; the accepted tokens of a key strictly rise (the fence),
// so they are a subsequence of its grant order (tokens rise in log order:
// safety_checker.h); the refused ones are counted (stale_writes_refused).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "lock/commands.h"

namespace pgfence::sim {

class FencedResource {
public:
    // A client was told `token` was granted for `key`.
    void granted(const std::string& key, lock::Token token);
    // A holder writes `key` with `token`; true when accepted.
    bool write(const std::string& key, lock::Token token);

    std::uint64_t accepted() const { return accepted_; }
    std::uint64_t refused() const { return refused_; }

private:
    std::map<std::string, std::set<lock::Token>> granted_;  // per key
    std::map<std::string, lock::Token> fence_;              // per key: the last accepted token
    std::uint64_t accepted_ = 0;
    std::uint64_t refused_ = 0;
};

}  // namespace pgfence::sim
