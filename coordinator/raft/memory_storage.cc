// MemoryStorage: the in-memory Storage the unit tests and the simulation use.
//
// Invariant: log_ holds exactly the entries snapshot_.meta.index+1 ..
// last_index(), contiguous and in order.
#include <stdexcept>
#include <string>

#include "raft/storage.h"

namespace pgfence::raft {

Index MemoryStorage::last_index() const {
    return snapshot_.meta.index + log_.size();
}

std::vector<Entry> MemoryStorage::entries(Index lo, Index hi) const {
    if (lo < first_index() || hi > last_index() + 1 || lo > hi) {
        throw std::out_of_range("MemoryStorage::entries: range [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + ") outside stored [" +
                                std::to_string(first_index()) + ", " +
                                std::to_string(last_index() + 1) + ")");
    }
    const Index base = snapshot_.meta.index + 1;
    return std::vector<Entry>(log_.begin() + static_cast<std::ptrdiff_t>(lo - base),
                              log_.begin() + static_cast<std::ptrdiff_t>(hi - base));
}

void MemoryStorage::append(const std::vector<Entry>& batch) {
    if (batch.empty()) return;
    const Index first = batch.front().index;
    if (first <= snapshot_.meta.index || first > last_index() + 1) {
        throw std::invalid_argument("MemoryStorage::append: batch starts at " +
                                    std::to_string(first) + ", stored log is [" +
                                    std::to_string(first_index()) + ", " +
                                    std::to_string(last_index()) + "]");
    }
    log_.resize(first - first_index());  // discard the conflicting suffix
    for (const Entry& e : batch) {
        if (e.index != first_index() + log_.size()) {
            throw std::invalid_argument("MemoryStorage::append: batch not contiguous at index " +
                                        std::to_string(e.index));
        }
        log_.push_back(e);
    }
}

void MemoryStorage::apply_snapshot(const Snapshot& snap) {
    const Index idx = snap.meta.index;
    if (idx <= snapshot_.meta.index) return;  // older than what we have
    std::vector<Entry> keep;
    if (idx < last_index()) {
        const Entry& at = log_[idx - first_index()];
        // Keep the suffix only if it agrees with the snapshot (log matching).
        if (at.term == snap.meta.term) {
            keep.assign(log_.begin() + static_cast<std::ptrdiff_t>(idx - first_index() + 1),
                        log_.end());
        }
    }
    snapshot_ = snap;
    log_ = std::move(keep);
}

void MemoryStorage::compact(const Snapshot& snap) {
    const Index idx = snap.meta.index;
    if (idx <= snapshot_.meta.index) return;
    if (idx > last_index()) {
        throw std::invalid_argument("MemoryStorage::compact: snapshot index " +
                                    std::to_string(idx) + " beyond last stored index " +
                                    std::to_string(last_index()));
    }
    log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(idx - first_index() + 1));
    snapshot_ = snap;
}

}  // namespace pgfence::raft
