// Progress and Inflights; see progress.h.
#include "raft/progress.h"

#include <algorithm>

namespace pgfence::raft {

void Inflights::add(Index last, std::size_t bytes) {
    items_.push_back(Item{last, bytes});
    bytes_ += bytes;
}

void Inflights::free_to(Index index) {
    while (!items_.empty() && items_.front().last <= index) free_first();
}

void Inflights::free_first() {
    if (items_.empty()) return;
    bytes_ -= items_.front().bytes;
    items_.pop_front();
}

void Inflights::reset() {
    items_.clear();
    bytes_ = 0;
}

bool Inflights::full(std::size_t max_count, std::size_t max_bytes) const {
    return items_.size() >= max_count || bytes_ >= max_bytes;
}

void Progress::become_probe() {
    // After a snapshot, the follower presumably has it: probe right after it.
    if (state == ReplicationState::kSnapshot) {
        next = std::max(match + 1, pending_snapshot + 1);
    } else {
        next = match + 1;
    }
    state = ReplicationState::kProbe;
    probe_sent = false;
    pending_snapshot = 0;
    sending.reset();
    inflights.reset();
}

void Progress::become_replicate() {
    state = ReplicationState::kReplicate;
    next = match + 1;
    probe_sent = false;
    pending_snapshot = 0;
    sending.reset();
    inflights.reset();
}

void Progress::become_snapshot(std::shared_ptr<const Snapshot> snapshot) {
    state = ReplicationState::kSnapshot;
    pending_snapshot = snapshot->meta.index;
    sending = std::move(snapshot);
    snapshot_elapsed_ticks = 0;
    snapshot_sent = 0;
    snapshot_acked = 0;
    probe_sent = false;
    inflights.reset();
}

bool Progress::maybe_update(Index index) {
    bool updated = false;
    if (match < index) {
        match = index;
        updated = true;
        probe_sent = false;  // the probe found its answer
    }
    next = std::max(next, index + 1);
    return updated;
}

bool Progress::maybe_decrease_to(Index rejected, Index probe_to) {
    if (state == ReplicationState::kReplicate) {
        // A rejection at or below match answers an old request: the follower
        // has since acknowledged more.
        if (rejected <= match) return false;
        next = match + 1;  // caller switches to probe
        return true;
    }
    // Probe: only the answer to the outstanding probe counts.
    if (next == 0 || next - 1 != rejected) return false;
    next = std::max(std::min(rejected, probe_to + 1), match + 1);
    probe_sent = false;
    return true;
}

void Progress::sent_append(Index last, std::size_t bytes, bool had_entries) {
    if (state == ReplicationState::kReplicate) {
        if (had_entries) next = last + 1;  // optimistic (pipelining)
        inflights.add(last, bytes);
    } else if (state == ReplicationState::kProbe) {
        probe_sent = true;
    }
}

bool Progress::paused(std::size_t max_count, std::size_t max_bytes) const {
    switch (state) {
        case ReplicationState::kProbe:
            return probe_sent;
        case ReplicationState::kReplicate:
            return inflights.full(max_count, max_bytes);
        case ReplicationState::kSnapshot:
            return true;
    }
    return true;
}

std::string Progress::check(std::size_t max_count, std::size_t max_bytes) const {
    if (match >= next) {
        return "progress: match " + std::to_string(match) + " >= next " + std::to_string(next);
    }
    if (snapshot_acked > snapshot_sent) {
        return "progress: snapshot bytes acked " + std::to_string(snapshot_acked) + " > sent " +
               std::to_string(snapshot_sent);
    }
    if ((state == ReplicationState::kSnapshot) != (sending != nullptr)) {
        return "progress: a snapshot being sent outside snapshot state, or none in it";
    }
    if (sending != nullptr && sending->meta.index != pending_snapshot) {
        return "progress: the snapshot being sent is at " + std::to_string(sending->meta.index) + ", pending " +
               std::to_string(pending_snapshot);
    }
    if (state != ReplicationState::kReplicate && inflights.count() != 0) {
        return "progress: inflights outside replicate state";
    }
    if (inflights.count() > max_count) {
        return "progress: " + std::to_string(inflights.count()) + " inflight appends > max " +
               std::to_string(max_count);
    }
    if (inflights.bytes() > max_bytes) {
        return "progress: " + std::to_string(inflights.bytes()) + " inflight bytes > bound " +
               std::to_string(max_bytes);
    }
    return "";
}

}  // namespace pgfence::raft
