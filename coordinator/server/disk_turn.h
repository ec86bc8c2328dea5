// Whose turn it is at the member's log: the core's Persist (a Ready's write)
// and its snapshot save, carried out by three threads: the loop, the writer
// thread (writer.h) and the snapshot thread. DiskTurn decides, from what the
// core hands out and what finished, where each piece of disk work runs and
// when it may begin; the shell (member.cc) does what it says.
//
// ---- states -------------------------------------------------------------------
//   persist   kNone      no Persist outstanding
//             kOnLoop    the loop is writing it inline (a follower or candidate:
//                        its acks wait for the write anyway, and two thread
//                        hand-offs cost more than the stall)
//             kOnWriter  queued on or running on the writer thread (a leader: its
//                        loop goes on reading requests and acks meanwhile)
//   save      kNone      no SaveSnapshot outstanding
//             kWaiting   taken while a Persist was outstanding: its file waits
//                        for that Persist to be durable
//             kFile      the snapshot thread writes its file (encode, fdatasync,
//                        rename), beside any Persist
//             kAdopting  its adoption (the log records it and drops the entries
//                        it covers) is queued on or running on the writer thread
//
// ---- the transition: step(event) -> what to do --------------------------------
//   PersistTaken{leader}  on the writer when leader or save == kAdopting (a
//                         follower's Persist queues behind the adoption); else
//                         on the loop
//   PersistDone           persist -> kNone; a kWaiting save's file begins now
//   SaveTaken{snapshot}   its file begins now if no Persist is outstanding,
//                         else it waits (kWaiting)
//   FileWritten           kFile -> kAdopting: queue the adoption on the writer
//                         (refused while the loop writes a Persist)
//   Adopted               kAdopting -> kNone: tell the core snapshot_saved()
// An event the state does not allow (a second Persist or save while one is
// outstanding, a completion of nothing) changes nothing and answers kBroken,
// naming the rule: the shell stops the member (exit 70, a broken invariant).
//
// ---- invariant (check(); holds after every step) ---------------------------------
//   One writer of the log at a time. Log writes are a Persist and an
//   adoption (the snapshot file is not the log). There is at most one
//   Persist and one save outstanding (the core's rule, member/core.h;
//   DiskTurn refuses a second), and the writer thread runs its jobs one
//   after another, so the only overlap left would be a Persist on the loop
//   beside an adoption on the writer: never persist == kOnLoop while
//   save == kAdopting.
//   A snapshot's file is begun only while no Persist is outstanding, so that
//   every entry it covers is in the log whatever the order of the threads'
//   writes: save == kWaiting only while a Persist is outstanding.
//   The save's snapshot is held exactly while save != kNone.
//
// LogWriteCheck (below) checks the same rule at run time on the threads
// themselves, should a decision here ever be wrong.
//
// Threading: DiskTurn is owned by the loop thread (every event is seen
// there: the writer threads' completions are posted to it). LogWriteCheck:
// any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <variant>

#include "raft/types.h"

namespace pgfence::server {

class DiskTurn {
public:
    enum class Persist : std::uint8_t { kNone, kOnLoop, kOnWriter };
    enum class Save : std::uint8_t { kNone, kWaiting, kFile, kAdopting };

    // ---- events ----
    struct PersistTaken {
        bool leader = false;  // the core leads now (core->is_leader())
    };
    struct PersistDone {};
    struct SaveTaken {
        std::shared_ptr<const raft::Snapshot> snapshot;  // not null
    };
    struct FileWritten {};
    struct Adopted {};
    using Event = std::variant<PersistTaken, PersistDone, SaveTaken, FileWritten, Adopted>;

    // ---- what the shell does next ----
    struct Action {
        enum Kind : std::uint8_t {
            kNothing,
            kPersistOnLoop,    // write the Persist inline now, then PersistDone
            kPersistOnWriter,  // submit it to the writer; PersistDone from its completion
            kWriteFile,        // submit `snapshot`'s file to the snapshot thread; then FileWritten
            kAdoptOnWriter,    // submit `snapshot`'s adoption to the writer; then Adopted
            kSaved,            // `snapshot` is saved: core->snapshot_saved()
            kBroken,           // the event breaks `broken`; nothing changed
        };
        Kind kind = kNothing;
        std::shared_ptr<const raft::Snapshot> snapshot;  // kWriteFile, kAdoptOnWriter, kSaved
        std::string_view broken;                         // kBroken: the rule, in words
    };

    Action step(const Event& event);

    Persist persist() const { return persist_; }
    Save save() const { return save_; }
    // The invariant above: "" or the part that does not hold.
    std::string_view check() const;

private:
    Action on(const PersistTaken& e);
    Action on(const PersistDone& e);
    Action on(const SaveTaken& e);
    Action on(const FileWritten& e);
    Action on(const Adopted& e);

    Persist persist_ = Persist::kNone;
    Save save_ = Save::kNone;
    // The save's snapshot while save_ != kNone (the core keeps the same one).
    std::shared_ptr<const raft::Snapshot> snapshot_;
};

// The run-time check that two log writes never overlap: each write (a
// Persist, an adoption, the commit written at a removed member's shutdown)
// runs between try_begin() and end(), on whichever thread runs it.
class LogWriteCheck {
public:
    // False: another write is running (the rule is broken; the caller stops
    // the member). True: the caller writes, then calls end().
    bool try_begin() { return !busy_.exchange(true, std::memory_order_acquire); }
    void end() { busy_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> busy_{false};
};

}  // namespace pgfence::server
