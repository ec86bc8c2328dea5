// Where one commit's time goes on the leader: the shell's timestamps of each
// batch (one Ready's entries: one WAL write, one fdatasync) and of each turn's
// AppendRequests (with --early-appends on, the entries proposed while the
// previous write was outstanding go to the followers before their batch is
// taken: raft.h take_messages_now), and per answered proposal the phases from its request
// read to its answer handed to its connection. GET /metrics renders them as
// pgfence_commit_phase_seconds{phase=...} (docs/http-api.md), and
// bench-coordinator prints them beside the floor (bench/coordinator/run.sh).
//
// One proposal's phases (a request answered from the entry at `index`):
//   queue          request read -> its batch taken (the Ready handed out: its
//                  appends handed to the transport, its write to the writer)
//   to_writer      batch taken -> the writer thread begins the write
//   write          encode and write() of the WAL record (with any segment
//                  rotation or preallocation that write needs)
//   fdatasync      the WAL's fdatasync
//   to_loop        fdatasync returned -> the loop hears of it (persisted()),
//                  with the rest of the persist after the fdatasync
//                  (check_append, any hard-state write)
//   early          the appends that first carried its entry handed to the
//                  transport -> its batch taken (about 0 when they went out
//                  with the batch, always so with --early-appends off; the
//                  part of follower_rtt before `replicate`)
//   follower_rtt   those appends handed to the transport -> the quorum's
//                  acks of them read (the followers' own write and
//                  fdatasync, acks back; 0 for a voter alone, whose own
//                  write is the quorum)
//   replicate      batch taken -> committed here: the later of the loop
//                  hearing of its own write and of the quorum's acks
//   to_apply       committed -> applied (its answer produced by the core)
//   to_answer      applied -> the answer handed to its connection (with
//                  --token-signing-key-file: before its proof is attached)
//   total          request read -> answer handed to its connection
// queue + replicate + to_apply + to_answer = total. The leader's path
// (to_writer .. to_loop) and follower_rtt - early run side by side; replicate
// is the longer of the two. pgfence_proposal_commit_seconds (member metrics) times
// propose() -> applied in the core: replicate and to_apply, and the part of
// queue after the core proposed the entry. Requests
// answered without an entry (reads, refusals) are not observed; neither are
// batches written while not leading, nor acquires that waited in a key's
// queue (their wait is the lock's, not the commit's: the shell drops their
// read time when the core says they wait). A proposal is counted in
// unobserved() instead when its timestamps are incomplete when it is
// answered: its entry first left after its batch was taken (a follower's
// inflight window full, or a configuration entry before it not yet written
// by the leader), the appends that first carried it had not reached their
// quorum of acks when it committed (the appends sent together gave
// followers different ranges: see sent()), or its batch or send is no longer kept
// (more than kMaxBatches batches or kMaxSends sends in flight).
//
// A follower observes its side of follower_rtt, once per AppendRequest with
// entries that it acknowledges after writing them on its loop:
//   f_wait         append read -> the write that holds its entries begins
//   f_fdatasync    that write's fdatasync
//   f_local        append read -> its ack handed to the transport
// follower_rtt - f_local is the wire both ways, the wake-ups on each side and
// the time an append waited in the follower's socket while the follower was
// busy (in its previous fdatasync: a follower writes on its loop). f_socket
// bounds that wait from above: append read -> the end of the follower's
// previous write on its loop (observed when that write ended before the read;
// it also holds the time the loop idled before the append arrived).
// The appends a follower times are of its current term (cleared when the
// term changes or it becomes leader); those acknowledged without a write of
// their own (already in its log) are dropped unobserved.
//
// Cost, on the loop: a leader reads the steady clock once per batch taken,
// once per turn that sends appends with entries, once when its write's
// completion is heard (the writer reads it once more
// when it begins), once per follower ack, and per batch of answers once for
// `applied` and once per answer after it is handed on; a follower once per
// append read, once before its write, once after it and once per ack sent.
// Maps of the few batches and sends in flight (at most kMaxBatches and
// kMaxSends kept).
//
// Threading: the loop thread only (the writer's timestamps come back with
// its completion).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "member/counters.h"
#include "raft/types.h"

namespace pgfence::server {

// Bounds fine enough for the commit path's phases: 5 us .. 1 s, finer
// between 100 us and 2 ms.
inline constexpr std::array<double, 31> kPhaseBounds = {
    0.000005, 0.00001, 0.000025, 0.00005, 0.000075, 0.0001, 0.000125, 0.00015, 0.000175, 0.0002, 0.0003,
    0.0004,   0.0005,  0.0006,   0.0007,  0.00075,  0.0008, 0.0009,   0.001,   0.00125,  0.0015, 0.00175,
    0.002,    0.003,   0.005,    0.01,    0.025,    0.05,   0.1,      0.25,    1.0};
using PhaseHistogram = member::BoundedHistogram<kPhaseBounds>;

class CommitPhases {
public:
    using TimePoint = std::chrono::steady_clock::time_point;
    enum Phase : std::uint8_t {
        kQueue,
        kToWriter,
        kWrite,
        kFdatasync,
        kToLoop,
        kEarly,
        kFollowerRtt,
        kReplicate,
        kToApply,
        kToAnswer,
        kTotal,
        kFollowerWait,
        kFollowerFdatasync,
        kFollowerLocal,
        kFollowerSocket,
        kPhases
    };
    static const char* name(Phase p);
    static constexpr std::size_t kMaxBatches = 64;
    static constexpr std::size_t kMaxSends = 256;

    // A leader's Ready with entries [first, last] was taken at `at`.
    void taken(raft::Index first, raft::Index last, TimePoint at);
    // A leader handed AppendRequests whose entries end at `last` (the
    // highest of them) to the transport at `at`; `followers_needed`: acks
    // that make a quorum with the leader's own log. Only entries above every
    // `last` sent before are timed by this send: a resend (to a lagging or
    // restarted follower) of entries sent already is ignored, and an entry
    // is timed by the appends that first carried it. Each execute()'s appends
    // are one send (a loop turn has up to two: the turn's, then those
    // persist_started() left), whose quorum counts only acks of `last` or
    // above: when they
    // gave followers different ranges (one lagging), an entry below `last`
    // can commit on a lower ack first, and is then counted unobserved (or,
    // when that send's quorum came before its answer, with `replicate`
    // overstated).
    void sent(raft::Index last, std::size_t followers_needed, TimePoint at);
    // The write of the batch ending at `last`: the writer began at `began`,
    // encode+write and fdatasync took `write` and `sync` (on the writer's
    // clock), the loop heard of it at `seen`.
    void written(raft::Index last, TimePoint began, std::chrono::nanoseconds write, std::chrono::nanoseconds sync,
                 TimePoint seen);
    // A follower's successful AppendResponse of the batches' term, read at `at`.
    void acked(raft::NodeId peer, raft::Index match, TimePoint at);
    // A proposal at `index` answered: read at `read`, applied (its answer
    // taken from the core) at `applied`, written at `answered`.
    void answered(raft::Index index, TimePoint read, TimePoint applied, TimePoint answered);
    // Leadership won or lost: the batches in flight and a follower's appends
    // not yet acked are forgotten.
    void reset();

    // A follower read an AppendRequest of `term` whose entries end at `last`
    // (an older term than the last seen: ignored; a newer one: the appends
    // of the older are forgotten).
    void append_read(raft::Term term, raft::Index last, TimePoint at);
    // A follower wrote on its loop (began at `began`, fdatasync `sync`) and
    // handed its ack of `match` to the transport at `acked`.
    void follower_acked(raft::Index match, TimePoint began, std::chrono::nanoseconds sync, TimePoint acked);
    // A follower's write on its loop ended at `at` (f_socket's start).
    void follower_wrote(TimePoint at) { follower_wrote_ = at; }
    // A follower acknowledged `match` without a write (the entries were in
    // its log already): its appends up to `match` are dropped unobserved.
    void drop_appends(raft::Index match);

    // Every persist with entries (leader or follower): the batch sizes.
    void persisted_batch(std::size_t entries, std::uint64_t bytes) {
        ++batches_;
        entries_ += entries;
        bytes_ += bytes;
    }

    const PhaseHistogram& histogram(Phase p) const { return phases_[p]; }
    std::uint64_t batches() const { return batches_; }
    std::uint64_t entries() const { return entries_; }
    std::uint64_t bytes() const { return bytes_; }
    // Proposals answered from an entry of a batch of this leadership but not
    // observed (see above).
    std::uint64_t unobserved() const { return unobserved_; }

private:
    struct Batch {
        raft::Index first = 0;
        TimePoint taken;
        TimePoint began;  // the writer began (zero until written())
        std::chrono::nanoseconds write{0};
        std::chrono::nanoseconds sync{0};
        TimePoint seen;  // the loop heard of the write (zero until then)
    };
    struct Send {
        raft::Index first = 0;  // the lowest entry these appends first carried
        TimePoint at;
        std::size_t acks_needed = 0;
        std::size_t acks = 0;
        TimePoint quorum_ack;  // zero until acks == acks_needed
    };
    std::map<raft::Index, Batch> batches_in_flight_;  // by last index
    std::map<raft::Index, Send> sends_in_flight_;     // by last index sent
    raft::Index highest_sent_ = 0;                    // the highest last index sent()
    std::map<raft::NodeId, raft::Index> acked_;       // per follower: the highest match seen
    struct AppendRead {
        TimePoint at;
        TimePoint socket_from;  // the previous write's end, when before `at` (zero if not)
    };
    std::map<raft::Index, AppendRead> appends_read_;  // a follower's appends not yet acked, by last index
    raft::Term appends_term_ = 0;                     // their term
    TimePoint follower_wrote_;                        // the end of the follower's last write on its loop
    std::array<PhaseHistogram, kPhases> phases_;
    std::uint64_t batches_ = 0;
    std::uint64_t entries_ = 0;
    std::uint64_t bytes_ = 0;
    std::uint64_t unobserved_ = 0;
};

// Renders pgfence_commit_phase_seconds{phase=...} and the batch counters.
void render_commit_phases(std::string& out, const CommitPhases& c);

}  // namespace pgfence::server
