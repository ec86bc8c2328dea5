// The sequence file `fencectl run` shares with its child, so that every
// process the child starts (subshells, pipelines, parallel jobs) draws its
// write numbers for pg_fence's sequenced mode (docs/sql.md, "Mode sequenced")
// from one counter: `fencectl seq` prints the next one.
//
// Why a file: a shell script cannot count in an environment variable across
// `( ... ) &`, `xargs -P` or a pipeline (each gets a copy), and two writes
// given the same number under one token make the later one stale. The file is
// read and rewritten under an exclusive flock(), so concurrent `fencectl seq`
// calls get distinct numbers, in the order they took the lock.
//
// Layout: DIR, a fresh directory (mode 0700) under $TMPDIR (else /tmp), made
// by `fencectl run` before CMD starts and removed when run ends, holds
//   DIR/seq    $FENCE_SEQ_FILE: one line "<token> <last>" padded with blanks
//              to kSeqLineSize bytes with the newline, rewritten in place;
//   DIR/lost   made (empty) when run counts the lease as lost, before it
//              signals CMD;
//   DIR/ended  made when CMD has exited, before run releases the lock.
// Either mark makes `fencectl seq` refuse (exit 4), so nothing CMD left
// running starts a new write under the token. The marks are files of their
// own so that run never waits for the file's lock (a stopped `fencectl seq`
// may hold it); a draw checks them once it holds the lock.
//
// The number is stored before it is printed: a number once printed is never
// printed again, even if the printing process dies.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace pgfence::cli {

constexpr std::size_t kSeqLineSize = 64;
constexpr const char* kSeqFileEnv = "FENCE_SEQ_FILE";
// How long `fencectl seq` waits for the file's lock before it gives up (exit 1).
constexpr std::chrono::milliseconds kSeqLockWait{5'000};

enum class SeqEnd : std::uint8_t { kLost, kEnded };

// A sequence file and its directory, removed on destruction (or by remove()).
class SeqFile {
  public:
    SeqFile() = default;
    ~SeqFile() { remove(); }
    SeqFile(const SeqFile&) = delete;
    SeqFile& operator=(const SeqFile&) = delete;

    // Makes DIR and DIR/seq for `token` (last 0). "" or why not.
    std::string create(std::uint64_t token);
    // Marks the lease over (DIR/lost or DIR/ended). "" or why not.
    std::string end(SeqEnd how) const;
    // Removes what create() made (nothing when it made nothing).
    void remove();

    const std::string& path() const { return path_; }  // "" before create()
    const std::string& dir() const { return dir_; }

  private:
    std::string dir_, path_;
};

struct SeqDraw {
    std::optional<std::int64_t> seq;  // the number, stored before it was returned
    int exit_code = 0;                // when !seq: kExitUsage, kExitLostLease or kExitOther
    std::string error;                // when !seq: what is wrong, naming the file
};

// The next number of the file at `path`, under its lock (waiting at most
// `lock_wait`). With `token` set, refuses a file that belongs to another token
// (a FENCE_SEQ_FILE inherited from an outer `fencectl run`).
SeqDraw draw_seq(const std::string& path, std::optional<std::uint64_t> token,
                 std::chrono::milliseconds lock_wait = kSeqLockWait);

// `fencectl seq`: prints the next number of $FENCE_SEQ_FILE (checked against
// $FENCE_TOKEN when set) and a newline; returns the exit code.
int seq_command(std::ostream& out, std::ostream& err);

}  // namespace pgfence::cli
