// RaftLog: the core's in-memory copy of the log, with its durable/unstable split.
//
// Layout: entries_ holds base_index_+1 .. last_index(); base_index_/base_term_
// identify the entry just before (a snapshot point or a compaction point; 0/0
// for a fresh log). Entries at or below base_index_ are not in memory.
//
// Durability (thesis §10.2.1, etcd's unstable log): entries up to stable_ are
// known durable (advance() said so); entries in (handed_, last] have not yet
// been handed out in a Ready. Between ready() and advance(), entries in
// (stable_, handed_] are being written by the caller.
//
// Invariants:
//   entries_[k].index == base_index_ + 1 + k            (contiguous)
//   entries_ terms are non-decreasing, all >= base_term_ (Figure 3, log matching)
//   base_index_ <= stable_ <= handed_ <= last_index()
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "raft/storage.h"
#include "raft/types.h"

namespace pgfence::raft {

class RaftLog {
public:
    // Loads snapshot point and entries from storage; everything loaded is durable.
    void restore(const Storage& storage);

    Index base_index() const { return base_index_; }
    Term base_term() const { return base_term_; }
    Index first_index() const { return base_index_ + 1; }
    Index last_index() const { return base_index_ + entries_.size(); }
    Term last_term() const;
    Index stable() const { return stable_; }
    Index handed() const { return handed_; }

    // Term of entry `index`; nullopt if compacted away or beyond the end.
    std::optional<Term> term(Index index) const;
    bool matches(Index index, Term term_at) const;
    const Entry& at(Index index) const;  // precondition: first_index() <= index <= last_index()

    // §3.6.1 up-to-date check: is (last_term, last_index) at least as new as ours?
    bool is_up_to_date(Index last_index_other, Term last_term_other) const;

    // Entries [lo, hi) with total data bytes <= max_bytes, but at least one.
    std::vector<Entry> slice(Index lo, Index hi, std::size_t max_bytes) const;

    // Leader: appends its own new entry at last_index()+1.
    void append(Entry entry);

    // Follower, Figure 2 AppendEntries rules 3-4: skips entries already
    // present, truncates the first conflicting suffix and appends the rest.
    // Precondition: matches(entries.front().index - 1, ...) was checked and a
    // conflict is never at or below `commit` (committed entries never change,
    // Leader Completeness). Throws std::logic_error if it would be.
    void append_from_leader(const std::vector<Entry>& entries, Index commit);

    // Fast back-off (thesis §5.3 optimization, etcd's findConflictByTerm):
    // the largest index <= `index` whose term is <= `term`, with its term
    // (0 if unknown because compacted).
    std::pair<Index, Term> find_conflict_by_term(Index index, Term term) const;

    // InstallSnapshot: the whole log is replaced by the snapshot point.
    void restore_snapshot(Index index, Term term);

    // Drops entries at or below `index` from memory (index <= stable()).
    void compact_to(Index index);

    // Unstable entries not yet handed out; marks them handed.
    std::vector<Entry> take_unstable();
    bool has_unhanded() const { return handed_ < last_index(); }

    // The caller persisted `written`: advances stable_ over the prefix that
    // still matches the in-memory log (a conflicting overwrite may have
    // happened since ready(); etcd's stableTo term check).
    void stable_to(const std::vector<Entry>& written);

    // For the invariant checker: description of a broken structural invariant.
    std::string check() const;

private:
    void truncate_after(Index index);

    Index base_index_ = 0;
    Term base_term_ = 0;
    std::deque<Entry> entries_;
    Index stable_ = 0;
    Index handed_ = 0;
};

}  // namespace pgfence::raft
