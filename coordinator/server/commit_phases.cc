#include "server/commit_phases.h"

#include <algorithm>

#include "server/metrics.h"

namespace pgfence::server {

const char* CommitPhases::name(Phase p) {
    switch (p) {
        case kQueue: return "queue";
        case kToWriter: return "to_writer";
        case kWrite: return "write";
        case kFdatasync: return "fdatasync";
        case kToLoop: return "to_loop";
        case kEarly: return "early";
        case kFollowerRtt: return "follower_rtt";
        case kReplicate: return "replicate";
        case kToApply: return "to_apply";
        case kToAnswer: return "to_answer";
        case kTotal: return "total";
        case kFollowerWait: return "f_wait";
        case kFollowerFdatasync: return "f_fdatasync";
        case kFollowerLocal: return "f_local";
        case kFollowerSocket: return "f_socket";
        case kPhases: break;
    }
    return "?";
}

void CommitPhases::taken(raft::Index first, raft::Index last, TimePoint at) {
    Batch& b = batches_in_flight_[last];
    b = Batch{};
    b.first = first;
    b.taken = at;
    while (batches_in_flight_.size() > kMaxBatches) batches_in_flight_.erase(batches_in_flight_.begin());
}

void CommitPhases::sent(raft::Index last, std::size_t followers_needed, TimePoint at) {
    if (last <= highest_sent_) return;  // a resend: the entries' first appends are timed
    Send& s = sends_in_flight_[last];
    s = Send{highest_sent_ + 1, at, followers_needed, 0, {}};
    if (followers_needed == 0) s.quorum_ack = at;
    highest_sent_ = last;
    while (sends_in_flight_.size() > kMaxSends) sends_in_flight_.erase(sends_in_flight_.begin());
}

void CommitPhases::written(raft::Index last, TimePoint began, std::chrono::nanoseconds write,
                           std::chrono::nanoseconds sync, TimePoint seen) {
    const auto it = batches_in_flight_.find(last);
    if (it == batches_in_flight_.end()) return;
    it->second.began = began;
    it->second.write = write;
    it->second.sync = sync;
    it->second.seen = seen;
}

void CommitPhases::acked(raft::NodeId peer, raft::Index match, TimePoint at) {
    raft::Index& prev = acked_[peer];
    if (match <= prev) return;
    for (auto it = sends_in_flight_.upper_bound(prev);
         it != sends_in_flight_.end() && it->first <= match; ++it) {
        Send& s = it->second;
        if (s.acks < s.acks_needed && ++s.acks == s.acks_needed) s.quorum_ack = at;
    }
    prev = match;
}

void CommitPhases::answered(raft::Index index, TimePoint read, TimePoint applied, TimePoint answered) {
    const auto it = batches_in_flight_.lower_bound(index);
    if (it == batches_in_flight_.end() || it->second.first > index) {
        ++unobserved_;
        return;
    }
    const Batch& b = it->second;
    // The first appends that carried the entry (none kept when they were
    // dropped from the map: a later send does not cover it).
    const auto sit = sends_in_flight_.lower_bound(index);
    const TimePoint zero{};
    if (b.seen == zero || sit == sends_in_flight_.end() || sit->second.first > index ||
        sit->second.quorum_ack == zero || read > b.taken || sit->second.at > b.taken) {
        ++unobserved_;
        return;
    }
    const Send& s = sit->second;
    const TimePoint committed = std::max(b.seen, s.quorum_ack);
    const TimePoint durable = b.began + b.write + b.sync;
    phases_[kQueue].observe(b.taken - read);
    phases_[kToWriter].observe(b.began - b.taken);
    phases_[kWrite].observe(b.write);
    phases_[kFdatasync].observe(b.sync);
    phases_[kToLoop].observe(std::max(b.seen - durable, std::chrono::nanoseconds{0}));
    phases_[kEarly].observe(b.taken - s.at);
    phases_[kFollowerRtt].observe(s.quorum_ack - s.at);
    phases_[kReplicate].observe(committed - b.taken);
    phases_[kToApply].observe(std::max(applied - committed, std::chrono::nanoseconds{0}));
    phases_[kToAnswer].observe(answered - applied);
    phases_[kTotal].observe(answered - read);
}

void CommitPhases::reset() {
    batches_in_flight_.clear();
    sends_in_flight_.clear();
    highest_sent_ = 0;
    acked_.clear();
    appends_read_.clear();
}

void CommitPhases::append_read(raft::Term term, raft::Index last, TimePoint at) {
    if (term < appends_term_) return;
    if (term > appends_term_) {
        appends_read_.clear();
        appends_term_ = term;
    }
    const TimePoint socket_from =
        follower_wrote_ != TimePoint{} && follower_wrote_ <= at ? follower_wrote_ : TimePoint{};
    appends_read_.emplace(last, AppendRead{at, socket_from});  // a resent append keeps the first read
    while (appends_read_.size() > kMaxBatches) appends_read_.erase(appends_read_.begin());
}

void CommitPhases::drop_appends(raft::Index match) {
    appends_read_.erase(appends_read_.begin(), appends_read_.upper_bound(match));
}

void CommitPhases::follower_acked(raft::Index match, TimePoint began, std::chrono::nanoseconds sync,
                                  TimePoint acked) {
    const auto end = appends_read_.upper_bound(match);
    for (auto it = appends_read_.begin(); it != end; ++it) {
        const AppendRead& r = it->second;
        phases_[kFollowerWait].observe(std::max(began - r.at, std::chrono::nanoseconds{0}));
        phases_[kFollowerFdatasync].observe(sync);
        phases_[kFollowerLocal].observe(acked - r.at);
        if (r.socket_from != TimePoint{}) phases_[kFollowerSocket].observe(r.at - r.socket_from);
    }
    appends_read_.erase(appends_read_.begin(), end);
}

void render_commit_phases(std::string& out, const CommitPhases& c) {
    out += "# HELP pgfence_commit_phase_seconds One proposal's commit, by phase: the leader's phases and a "
           "follower's f_* (server/commit_phases.h).\n"
           "# TYPE pgfence_commit_phase_seconds histogram\n";
    for (std::size_t p = 0; p < CommitPhases::kPhases; ++p) {
        const auto phase = static_cast<CommitPhases::Phase>(p);
        const std::string label = "phase=\"" + std::string(CommitPhases::name(phase)) + "\"";
        histogram_series(out, "pgfence_commit_phase_seconds", label, c.histogram(phase));
    }
    out += "# HELP pgfence_commit_phase_unobserved_total Proposals answered by the leader from a batch of its term but "
           "not timed (first sent after its batch was taken, its first appends short of a quorum when it "
           "committed, or no longer kept).\n"
           "# TYPE pgfence_commit_phase_unobserved_total counter\n"
           "pgfence_commit_phase_unobserved_total " + std::to_string(c.unobserved()) + "\n";
    out += "# HELP pgfence_persist_batches_total Log writes with entries (one fdatasync each) on this member.\n"
           "# TYPE pgfence_persist_batches_total counter\n"
           "pgfence_persist_batches_total " + std::to_string(c.batches()) + "\n";
    out += "# HELP pgfence_persist_entries_total Entries in those writes.\n"
           "# TYPE pgfence_persist_entries_total counter\n"
           "pgfence_persist_entries_total " + std::to_string(c.entries()) + "\n";
    out += "# HELP pgfence_persist_bytes_total WAL record bytes in those writes.\n"
           "# TYPE pgfence_persist_bytes_total counter\n"
           "pgfence_persist_bytes_total " + std::to_string(c.bytes()) + "\n";
}

}  // namespace pgfence::server
