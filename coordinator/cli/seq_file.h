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
// Layout: $FENCE_SEQ_FILE = DIR/seq, DIR a fresh directory (mode 0700) under
// $TMPDIR (else /tmp), made by `fencectl run` before CMD starts and removed
// when run ends. The file is one line, kSeqLineSize bytes with the newline,
// rewritten in place:  "<token> <last> <state>"  padded with blanks, state
// "held" or "lost". run marks it lost as soon as the lease counts as lost,
// before it signals CMD: from then on `fencectl seq` refuses (exit 4), so the
// child starts no new write under the token.
//
// The number is stored before it is printed: a number once printed is never
// printed again, even if the printing process dies.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace pgfence::cli {

constexpr std::size_t kSeqLineSize = 64;
constexpr const char* kSeqFileEnv = "FENCE_SEQ_FILE";

struct SeqFile {
    std::string dir;   // "" when none was made
    std::string path;  // dir + "/seq"
};

// Makes DIR and the file for `token` (last 0, held). "" or why not.
std::string create_seq_file(std::uint64_t token, SeqFile& out);
// Removes the file and DIR (best effort; nothing when none was made).
void remove_seq_file(const SeqFile& file);
// Sets the state to lost (the numbers handed out stay). "" or why not.
std::string mark_seq_file_lost(const std::string& path);

struct SeqDraw {
    std::optional<std::int64_t> seq;  // the number, stored before it was returned
    int exit_code = 0;                // when !seq: kExitUsage, kExitLostLease or kExitOther
    std::string error;                // when !seq: what is wrong, naming the file
};

// The next number of the file at `path`, under its lock. With `token` set,
// refuses a file that belongs to another token (a FENCE_SEQ_FILE inherited
// from an outer `fencectl run`).
SeqDraw draw_seq(const std::string& path, std::optional<std::uint64_t> token);

// `fencectl seq`: prints the next number of $FENCE_SEQ_FILE (checked against
// $FENCE_TOKEN when set) and a newline; returns the exit code.
int seq_command(std::ostream& out, std::ostream& err);

}  // namespace pgfence::cli
