// A deliberately simple sequential model of the lock table (docs/design.md
// "Replicated commands"), written independently of lock::LockTable so the
// simulation can check the real table against it.
//
// A set (GrantMany) is the keys held with one token; the model finds it by
// scanning its few keys, not with an index like the table's.
//
// It replays the committed log in index order and remembers, for every index,
// the result the command had, and for every key the history of its holder
// token, so a read served at any applied index can be checked.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lock/commands.h"

namespace pgfence::sim {

struct ModelHolder {
    lock::Token token = 0;
    std::string owner;
    std::string user{};
    std::uint64_t lease_ms = 0;  // the longer of the Grants' (a retry never shortens it)
    std::uint64_t remaining_ms = 0;  // the last Checkpoint's; a re-grant clears it
    bool operator==(const ModelHolder&) const = default;
};

class LockModel {
public:
    // Applies the committed entry at `index` (= applied_index() + 1).
    lock::Result apply(std::uint64_t index, const lock::Command& cmd);
    lock::Result apply_noop(std::uint64_t index);

    std::uint64_t applied_index() const { return applied_index_; }
    const std::map<std::string, ModelHolder>& holders() const { return holders_; }

    // The token holding `key` right after index `index` was applied (0: free).
    // `index` must be <= applied_index().
    lock::Token token_at(const std::string& key, std::uint64_t index) const;

private:
    bool remove(const std::string& key, lock::Token token);  // held with `token`: removed (true)
    std::uint32_t set_size(lock::Token token) const;         // keys held with `token` (a set: >= 2)
    lock::Result grant_many(std::uint64_t index, const lock::GrantMany& g);
    lock::Result release_many(const lock::ReleaseMany& r);
    void record(const std::string& key, lock::Token token);

    std::map<std::string, ModelHolder> holders_;
    // key -> (index, token after that index), in index order
    std::map<std::string, std::vector<std::pair<std::uint64_t, lock::Token>>> history_;
    std::uint64_t applied_index_ = 0;
    lock::Token floor_ = 0;
};

}  // namespace pgfence::sim
