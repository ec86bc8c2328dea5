// RaftLog implementation; see log.h for layout and invariants.
#include "raft/log.h"

#include <algorithm>
#include <stdexcept>

namespace pgfence::raft {

namespace {
constexpr std::size_t kMaxCheckedEntries = 64;  // invariant check window (keeps it O(1))
}

void RaftLog::restore(const Storage& storage) {
    const Snapshot snap = storage.snapshot();
    base_index_ = snap.meta.index;
    base_term_ = snap.meta.term;
    entries_.clear();
    const Index first = storage.first_index();
    const Index last = storage.last_index();
    if (first > base_index_ + 1) {
        throw std::invalid_argument("Storage: first_index " + std::to_string(first) +
                                    " leaves a gap after snapshot index " +
                                    std::to_string(base_index_));
    }
    if (last > base_index_) {
        for (Entry& e : storage.entries(base_index_ + 1, last + 1))
            entries_.push_back(std::move(e));
    }
    stable_ = handed_ = last_index();
    const std::string broken = check();
    if (!broken.empty()) throw std::invalid_argument("Storage: " + broken);
}

Term RaftLog::last_term() const {
    return entries_.empty() ? base_term_ : entries_.back().term;
}

std::optional<Term> RaftLog::term(Index index) const {
    if (index == base_index_) return base_term_;
    if (index < base_index_ || index > last_index()) return std::nullopt;
    return entries_[index - base_index_ - 1].term;
}

bool RaftLog::matches(Index index, Term term_at) const {
    const std::optional<Term> t = term(index);
    return t && *t == term_at;
}

const Entry& RaftLog::at(Index index) const {
    if (index <= base_index_ || index > last_index()) {
        throw std::out_of_range("RaftLog::at: index " + std::to_string(index) + " outside [" +
                                std::to_string(first_index()) + ", " +
                                std::to_string(last_index()) + "]");
    }
    return entries_[index - base_index_ - 1];
}

bool RaftLog::is_up_to_date(Index last_index_other, Term last_term_other) const {
    // §3.6.1: later last term wins; same last term, longer log wins.
    return last_term_other > last_term() ||
           (last_term_other == last_term() && last_index_other >= last_index());
}

std::vector<Entry> RaftLog::slice(Index lo, Index hi, std::size_t max_bytes) const {
    std::vector<Entry> out;
    std::size_t bytes = 0;
    hi = std::min(hi, last_index() + 1);
    for (Index i = std::max(lo, first_index()); i < hi; ++i) {
        const Entry& e = at(i);
        if (!out.empty() && bytes + e.data.size() > max_bytes) break;
        bytes += e.data.size();
        out.push_back(e);
    }
    return out;
}

void RaftLog::append(Entry entry) {
    if (entry.index != last_index() + 1 || entry.term < last_term()) {
        throw std::logic_error("RaftLog::append: entry (" + std::to_string(entry.index) + ", " +
                               std::to_string(entry.term) + ") does not extend log ending (" +
                               std::to_string(last_index()) + ", " + std::to_string(last_term()) +
                               ")");
    }
    entries_.push_back(std::move(entry));
}

void RaftLog::truncate_after(Index index) {
    entries_.resize(index - base_index_);
    stable_ = std::min(stable_, index);
    handed_ = std::min(handed_, index);
}

void RaftLog::append_from_leader(const std::vector<Entry>& entries, Index commit) {
    for (const Entry& e : entries) {
        if (e.index <= base_index_) continue;  // covered by our snapshot: committed
        const std::optional<Term> existing = term(e.index);
        if (existing && *existing == e.term) continue;  // Figure 2 rule 4: already present
        if (existing) {
            // Figure 2 rule 3: conflicting entry -> delete it and all that follow.
            if (e.index <= commit) {
                throw std::logic_error("RaftLog: leader overwrites committed entry " +
                                       std::to_string(e.index) + " (commit " +
                                       std::to_string(commit) + ")");
            }
            truncate_after(e.index - 1);
        }
        append(e);
    }
}

std::pair<Index, Term> RaftLog::find_conflict_by_term(Index index, Term t) const {
    index = std::min(index, last_index());
    // Walk back over entries whose term is newer than `t`: none of them can
    // match the other log at (index, t) or below. Bounded by the log length.
    for (;;) {
        const std::optional<Term> ours = term(index);
        if (!ours) return {index, 0};
        if (*ours <= t) return {index, *ours};
        --index;
    }
}

void RaftLog::restore_snapshot(Index index, Term t) {
    entries_.clear();
    base_index_ = index;
    base_term_ = t;
    stable_ = handed_ = index;
}

void RaftLog::compact_to(Index index) {
    if (index <= base_index_) return;
    if (index > stable_) {
        throw std::logic_error("RaftLog::compact_to: index " + std::to_string(index) +
                               " is not durable yet (stable " + std::to_string(stable_) + ")");
    }
    base_term_ = at(index).term;
    entries_.erase(entries_.begin(),
                   entries_.begin() + static_cast<std::ptrdiff_t>(index - base_index_));
    base_index_ = index;
}

std::vector<Entry> RaftLog::take_unstable() {
    std::vector<Entry> out;
    for (Index i = handed_ + 1; i <= last_index(); ++i) out.push_back(at(i));
    handed_ = last_index();
    return out;
}

void RaftLog::stable_to(const std::vector<Entry>& written) {
    for (const Entry& e : written) {
        if (!matches(e.index, e.term) || e.index <= base_index_) break;
        if (e.index > handed_) break;  // overwritten and re-appended since ready()
        stable_ = std::max(stable_, e.index);
    }
}

std::string RaftLog::check() const {
    if (!(base_index_ <= stable_ && stable_ <= handed_ && handed_ <= last_index())) {
        return "log: want base " + std::to_string(base_index_) + " <= stable " +
               std::to_string(stable_) + " <= handed " + std::to_string(handed_) + " <= last " +
               std::to_string(last_index());
    }
    const std::size_t from =
        entries_.size() > kMaxCheckedEntries ? entries_.size() - kMaxCheckedEntries : 0;
    Term prev_term = from == 0 ? base_term_ : entries_[from - 1].term;
    for (std::size_t k = from; k < entries_.size(); ++k) {
        const Entry& e = entries_[k];
        if (e.index != base_index_ + 1 + k) {
            return "log: entry at slot " + std::to_string(k) + " has index " +
                   std::to_string(e.index) + ", want " + std::to_string(base_index_ + 1 + k);
        }
        if (e.term < prev_term) {
            return "log: term decreases at index " + std::to_string(e.index) + " (" +
                   std::to_string(e.term) + " < " + std::to_string(prev_term) + ")";
        }
        prev_term = e.term;
    }
    return "";
}

}  // namespace pgfence::raft
