#include "worker/pg_writer.h"

#include <charconv>
#include <optional>

#include "worker/schema.h"

namespace pgfence::worker {
namespace {

using pgconn::Connection;
using Res = pgconn::Result;

constexpr const char* kBadProofSqlstate = "55F02";

// The failed statement's outcome: stale (55F01), a refused proof (55F02) or an error.
WriteResult failure(const Res& r) {
    WriteResult w;
    const std::string state = r.sqlstate();
    w.outcome = state == pgconn::kStaleSqlstate ? WriteOutcome::kStale
                : state == kBadProofSqlstate    ? WriteOutcome::kBadProof
                                                : WriteOutcome::kError;
    w.message = r.message();
    w.detail = r.detail();
    return w;
}

std::int64_t first_int(const Res& r) {
    std::int64_t v = 0;
    const std::string text = r.value(0, 0);
    std::from_chars(text.data(), text.data() + text.size(), v);
    return v;
}

// Rolls back; the outcome `w` stands (a failed rollback drops the connection).
WriteResult abort_with(const Connection& conn, WriteResult w) {
    conn.exec("ROLLBACK");
    return w;
}

WriteResult accepted(std::int64_t value) {
    return WriteResult{WriteOutcome::kAccepted, value, {}, {}};
}
WriteResult no_row(const std::string& what) {
    return WriteResult{WriteOutcome::kNotFound, 0, what, {}};
}

// Increments through `sql` ($1 key) and returns the new value, or why not.
WriteResult increment(const Connection& conn, const char* sql, const std::string& key) {
    Res r = conn.exec(sql, {key});
    if (!r.ok()) return failure(r);
    if (r.rows() != 1) return no_row("no row for key '" + key + "'");
    return accepted(first_int(r));
}

// Proof for the trigger paths: SET LOCAL pg_fence.proof (none: nothing set).
std::optional<WriteResult> set_proof(const Connection& conn, const std::optional<std::string>& proof) {
    if (!proof) return std::nullopt;
    if (Res r = conn.exec(kSetProofSql, {*proof}); !r.ok()) return failure(r);
    return std::nullopt;
}

// guard: the trigger compares the token in the SET list with the row's fence.
WriteResult guard_step(const Connection& conn, const std::string& key, const std::string& tok,
                       const std::optional<std::string>& proof) {
    if (auto failed = set_proof(conn, proof)) return *failed;
    Res r = conn.exec(kGuardSql, {key, tok});
    if (!r.ok()) return failure(r);
    if (r.rows() != 1) return no_row("no row for key '" + key + "'");
    return accepted(first_int(r));
}

// fenced_update: read under the row lock, then one conditional UPDATE.
WriteResult fenced_update_step(const Connection& conn, const std::string& key, const std::string& tok,
                               const std::optional<std::string>& proof) {
    Res r = conn.exec(kReadForUpdateSql, {key});
    if (!r.ok()) return failure(r);
    if (r.rows() != 1) return no_row("no row for key '" + key + "'");
    const std::int64_t next = first_int(r) + 1;
    r = proof ? conn.exec(kFencedUpdateProofSql, {key, std::to_string(next), tok, *proof})
              : conn.exec(kFencedUpdateSql, {key, std::to_string(next), tok});
    if (!r.ok()) return failure(r);
    const std::string outcome = r.value(0, 0);
    if (outcome == "stale") {
        return WriteResult{WriteOutcome::kStale, 0, "fenced_update returned 'stale'", {}};
    }
    if (outcome != "applied") return no_row("fenced_update returned '" + outcome + "'");
    return accepted(next);
}

// sequenced: the trigger compares (token, seq) in the SET list with the row's pair.
WriteResult sequenced_step(const Connection& conn, const std::string& key, const std::string& tok, std::int64_t seq,
                           const std::optional<std::string>& proof) {
    if (auto failed = set_proof(conn, proof)) return *failed;
    Res r = conn.exec(kSequencedSql, {key, tok, std::to_string(seq)});
    if (!r.ok()) return failure(r);
    if (r.rows() != 1) return no_row("no row for key '" + key + "'");
    return accepted(first_int(r));
}

// admit: the resource fence admits the transaction, then two plain tables.
WriteResult admit_step(const Connection& conn, const std::string& key, const std::string& tok,
                       const std::optional<std::string>& proof) {
    Res r = proof ? conn.exec(kAdmitProofSql, {key, tok, *proof}) : conn.exec(kAdmitSql, {key, tok});
    if (!r.ok()) return failure(r);
    WriteResult b = increment(conn, kLedgerBSql, key);
    if (b.outcome != WriteOutcome::kAccepted) return b;
    return increment(conn, kLedgerASql, key);
}

// The fenced statement(s) of one path; on success `value` is the new counter.
WriteResult fenced_step(const Connection& conn, Mode path, const std::string& key, const std::string& tok,
                        std::int64_t seq, const std::optional<std::string>& proof) {
    switch (path) {
        case Mode::kGuard:
            return guard_step(conn, key, tok, proof);
        case Mode::kFencedUpdate:
            return fenced_update_step(conn, key, tok, proof);
        case Mode::kAdmit:
            return admit_step(conn, key, tok, proof);
        case Mode::kSequenced:
            return sequenced_step(conn, key, tok, seq, proof);
        case Mode::kMixed:
            break;
    }
    return WriteResult{WriteOutcome::kError, 0, "internal: no write path for mode mixed", {}};
}

}  // namespace

const char* to_string(WriteOutcome outcome) {
    switch (outcome) {
        case WriteOutcome::kAccepted:
            return "accepted";
        case WriteOutcome::kStale:
            return "stale";
        case WriteOutcome::kNotFound:
            return "not_found";
        case WriteOutcome::kBadProof:
            return "bad_proof";
        case WriteOutcome::kError:
            return "error";
    }
    return "?";
}

PgWriter::~PgWriter() = default;

std::string PgWriter::connect(const std::string& conninfo, const std::string& application_name) {
    // The message names host and port, never the conninfo (it may hold a password).
    if (std::string why = conn_.connect(conninfo, pgconn::ConnectDefaults{application_name, 0}); !why.empty()) {
        return why;
    }
    // Bounded waits: a paused writer holding a row lock must not block others forever.
    const Res r = conn_.exec(
        "SELECT set_config('application_name', $1, false), "
        "set_config('lock_timeout', '10s', false), "
        "set_config('statement_timeout', '30s', false), "
        "set_config('client_min_messages', 'warning', false)",
        {application_name});
    if (!r.ok()) {
        std::string why = "cannot set session options: " + r.message();
        conn_.close();  // not connected(): the next write connects again, with the timeouts
        return why;
    }
    return {};
}

bool PgWriter::connected() const {
    return conn_.connected();
}

std::string PgWriter::setup(bool proof) {
    if (const Res r = conn_.exec(kSchemaSql); !r.ok()) return "creating the worker schema failed: " + r.message();
    if (!proof) return {};
    const Res r = conn_.exec(kProofSchemaSql);
    return r.ok() ? std::string() : "making the worker tables verify token proofs failed: " + r.message();
}

std::string PgWriter::ensure_key(const std::string& key, bool require_proof) {
    for (const char* sql : {kEnsureKeySql, kEnsureSequencedSql, kEnsureLedgerASql, kEnsureLedgerBSql,
                            require_proof ? kRequireProofSql : nullptr}) {
        if (sql == nullptr) continue;
        const Res r = conn_.exec(sql, {key});
        if (!r.ok()) return "cannot create the rows of key '" + key + "' (did you run --setup?): " + r.message();
    }
    return {};
}

pgconn::PublishResult PgWriter::publish(const std::vector<pgconn::AdvanceTarget>& targets, std::uint64_t token) {
    return pgconn::publish_generation(conn_, targets, token);
}

WriteResult PgWriter::write(Mode path, const std::string& key, std::uint64_t token, std::int64_t seq,
                            const std::string& worker, const std::optional<std::string>& proof,
                            const std::string& audit_path) {
    const Connection& conn = conn_;
    const std::string tok = std::to_string(token);
    if (Res b = conn.exec("BEGIN"); !b.ok()) return failure(b);
    if (path != Mode::kSequenced) seq = 0;
    WriteResult w = fenced_step(conn, path, key, tok, seq, proof);
    if (w.outcome != WriteOutcome::kAccepted) return abort_with(conn, w);
    const char* fence = path == Mode::kAdmit ? "resource" : path == Mode::kSequenced ? "sequenced" : "row";
    const Res a = conn.exec(kAuditSql, {key, fence, tok, std::to_string(seq), worker, std::to_string(w.value),
                                        audit_path.empty() ? std::string(to_string(path)) : audit_path});
    if (!a.ok()) return abort_with(conn, failure(a));
    if (Res c = conn.exec("COMMIT"); !c.ok()) return failure(c);
    return w;
}

}  // namespace pgfence::worker
