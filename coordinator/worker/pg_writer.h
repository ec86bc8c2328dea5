// fence-worker's PostgreSQL side: the schema and the four ways a fencing
// token reaches a row. Every write is one transaction that (1) does the
// fenced write, (2) takes an audit id from a sequence and (3) appends
// (key, fence, token, seq, worker, value, path) to worker_audit. Because the fence
// row (or resource row) stays locked until commit, writers of one key are
// serialized there, and the audit ids of one key follow commit order.
//
// Threading: one PgWriter per thread (it owns one libpq connection).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pgconn/advance.h"
#include "pgconn/connection.h"
#include "worker/options.h"

namespace pgfence::worker {

enum class WriteOutcome : std::uint8_t {
    kAccepted,  // committed: the token (with seq: the pair) was newer than the fence
    kStale,     // refused: 55F01 or fenced_update() returned 'stale'
    kBadProof,  // refused: 55F02, the token proof was missing or did not verify
    kNotFound,  // the key's row is missing (run --setup / ensure_key)
    kError,     // anything else; message says what
};

const char* to_string(WriteOutcome outcome);

struct WriteResult {
    WriteOutcome outcome = WriteOutcome::kError;
    std::int64_t value = 0;  // the counter after the increment (accepted only)
    std::string message;     // the server's message (stale, error)
    std::string detail;      // the server's detail, e.g. the current fence (stale)
};

class PgWriter {
  public:
    PgWriter() = default;
    ~PgWriter();
    PgWriter(const PgWriter&) = delete;
    PgWriter& operator=(const PgWriter&) = delete;

    // Connects (or reconnects) and sets per-session timeouts. Returns "" or why not.
    std::string connect(const std::string& conninfo, const std::string& application_name);
    bool connected() const;

    // Creates the extension, the tables and the guard trigger if missing;
    // with `proof`, worker_counters and worker_sequenced verify token proofs
    // (lock key: the row's key).
    std::string setup(bool proof);
    // Inserts the key's rows (n = 0, fence = 0) if they are missing; with
    // `require_proof`, the key's resource (fence_admit's) needs proofs too.
    std::string ensure_key(const std::string& key, bool require_proof);

    // --advance: publishes `token` at `targets` in a transaction of its own
    // (pgconn/advance.h), under this connection's timeouts.
    pgconn::PublishResult publish(const std::vector<pgconn::AdvanceTarget>& targets, std::uint64_t token);

    // One fenced read-modify-write through `path` (not kMixed); `seq` is the
    // write's sequence number on kSequenced (1..), ignored on the others.
    // `proof`, when set, goes with the token: SET LOCAL pg_fence.proof on the
    // trigger paths (guard, sequenced), the `proof` argument of fenced_update
    // and fence_admit. The audit row's path is `audit_path`, or `path`'s name
    // when it is empty.
    WriteResult write(Mode path, const std::string& key, std::uint64_t token, std::int64_t seq,
                      const std::string& worker, const std::optional<std::string>& proof,
                      const std::string& audit_path = {});

  private:
    pgconn::Connection conn_;
};

}  // namespace pgfence::worker
