#include "member/watch_history.h"

#include <algorithm>
#include <stdexcept>

namespace pgfence::member {

std::uint64_t event_bytes(const WatchEvent& e) { return sizeof(WatchEvent) + e.key.size() + e.owner.size() + e.value.size(); }

WatchHistory::WatchHistory(std::size_t max_events, std::uint64_t max_bytes)
    : max_events_(max_events), max_bytes_(max_bytes) {
    if (max_events_ == 0) throw std::invalid_argument("watch history: max_events must be at least 1");
    if (max_bytes_ == 0) throw std::invalid_argument("watch history: max_bytes must be at least 1");
}

void WatchHistory::append(WatchEvent e) {
    if (e.revision < next_revision_min_) {
        throw std::logic_error("watch history: event at revision " + std::to_string(e.revision) +
                               " appended out of order");
    }
    next_revision_min_ = e.revision;
    bytes_ += event_bytes(e);
    events_.push_back(std::move(e));
    while (!events_.empty() && (events_.size() > max_events_ || bytes_ > max_bytes_)) drop_front();
}

void WatchHistory::drop_front() {
    const WatchEvent& e = events_.front();
    bytes_ -= event_bytes(e);
    oldest_revision_ = e.revision + 1;
    events_.pop_front();
    ++begin_seq_;
}

void WatchHistory::reset(raft::Index index) {
    begin_seq_ += events_.size();
    events_.clear();
    bytes_ = 0;
    oldest_revision_ = index + 1;
    next_revision_min_ = index + 1;
    ++resets_;
}

std::uint64_t WatchHistory::seq_of(raft::Index revision) const {
    const auto it = std::lower_bound(events_.begin(), events_.end(), revision,
                                     [](const WatchEvent& e, raft::Index r) { return e.revision < r; });
    return begin_seq_ + static_cast<std::uint64_t>(it - events_.begin());
}

}  // namespace pgfence::member
