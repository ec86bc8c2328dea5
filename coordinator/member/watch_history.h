// The lock events a member applied, kept for GET /v1/watch (docs/http-api.md
// "GET /v1/watch"): what the shell's watchers (server/watchers.h) stream,
// and where a watch that resumes from a revision starts. Pure, std only.
//
// An event's revision is the Raft log index of the entry that made it. The
// member core (core_apply.cc) appends, as each entry applies:
//   | entry                         | result                    | event                        |
//   | Grant                         | Granted, created          | granted {key, token, owner, lease_ms, value} |
//   | Grant                         | an idempotent re-grant, or refused | none                |
//   | GrantMany                     | Granted, created          | granted {...} for each key, in the set's order |
//   | Release                       | Released                  | released {key, token}        |
//   | ReleaseMany                   | Released                  | released {key, token} for each key, in order |
//   | Release, ReleaseMany          | anything else             | none                         |
//   | Expire                        | Expired{existed}          | expired {key, token, existed} |
//   | ExpireMany                    | per lock, in its order    | expired {key, token, existed} each |
//   | Proclaim                      | Proclaimed                | proclaimed {key, token, value} |
//   | anything else (no-op, config, floor, checkpoint, a refused proclaim) | | none              |
// so one entry makes several events only as an ExpireMany, a GrantMany or a
// ReleaseMany, whose events share its revision in the entry's order.
//
// Bounds: at most max_events events and max_bytes bytes (event_bytes()
// each); appending beyond either drops the oldest events, and with them
// the oldest revisions: a revision r can be served (every event with
// revision >= r is here, or comes later) iff r >= oldest_revision().
// oldest_revision() is one past the last dropped event's revision, or one
// past the snapshot the member restored (reset()): the events of the
// entries a snapshot covers were never applied here.
//
// Events are numbered by a sequence (seq) that never goes back: the first
// kept is begin_seq(), the next appended gets end_seq(). A reader keeps a
// seq as its cursor; a cursor below begin_seq() lost events (dropped).
// reset() also moves begin_seq() to end_seq() (nothing kept) and counts a
// reset: a reader that was at end_seq() before it lost the entries the
// snapshot covered, without a gap in seqs, so it asks resets().
//
// Threading: not thread-safe; the member core's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

#include "lock/commands.h"
#include "raft/types.h"

namespace pgfence::member {

constexpr std::size_t kDefaultWatchHistoryEvents = 100000;
constexpr std::uint64_t kDefaultWatchHistoryBytes = 64u << 20;

enum class WatchEventType : std::uint8_t { kGranted, kReleased, kExpired, kProclaimed };

struct WatchEvent {
    raft::Index revision = 0;
    WatchEventType type = WatchEventType::kGranted;
    std::string key;
    lock::Token token = 0;
    std::string owner;          // granted only
    std::uint64_t lease_ms = 0;  // granted only
    bool existed = false;       // expired only
    std::string value{};        // granted (what the lock publishes, "" = none) and proclaimed
    bool operator==(const WatchEvent&) const = default;
};

// What an event costs the history's byte bound: the struct and its strings.
std::uint64_t event_bytes(const WatchEvent& e);

class WatchHistory {
public:
    // max_events >= 1, max_bytes >= 1 (else std::invalid_argument). Starts
    // empty with oldest_revision() 1.
    WatchHistory(std::size_t max_events, std::uint64_t max_bytes);

    // Appends `e` (e.revision >= every appended event's, and above the
    // index of the last reset(): else std::logic_error), then drops the oldest events while either
    // bound is passed (`e` itself too, if it alone passes max_bytes).
    void append(WatchEvent e);
    // The member restored a snapshot at `index`: nothing kept, oldest_revision()
    // index + 1, resets() one more.
    void reset(raft::Index index);

    raft::Index oldest_revision() const { return oldest_revision_; }
    std::uint64_t begin_seq() const { return begin_seq_; }
    std::uint64_t end_seq() const { return begin_seq_ + events_.size(); }
    // begin_seq() <= seq < end_seq().
    const WatchEvent& at(std::uint64_t seq) const { return events_[seq - begin_seq_]; }
    // The seq of the first kept event with revision >= `revision` (end_seq()
    // when none). Meaningful for revision >= oldest_revision().
    std::uint64_t seq_of(raft::Index revision) const;
    std::uint64_t resets() const { return resets_; }
    std::size_t size() const { return events_.size(); }
    std::uint64_t bytes() const { return bytes_; }

private:
    void drop_front();

    std::size_t max_events_;
    std::uint64_t max_bytes_;
    std::deque<WatchEvent> events_;  // revisions never decrease
    std::uint64_t begin_seq_ = 0;
    std::uint64_t bytes_ = 0;
    raft::Index oldest_revision_ = 1;
    std::uint64_t resets_ = 0;
    raft::Index next_revision_min_ = 1;  // the last appended revision, or the last reset's index + 1
};

}  // namespace pgfence::member
