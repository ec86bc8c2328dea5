#include "worker/pg_writer.h"

#include <libpq-fe.h>

#include <array>
#include <charconv>
#include <cstring>

#include "worker/schema.h"

namespace pgfence::worker {
namespace {

constexpr const char* kStaleSqlstate = "55F01";
constexpr const char* kBadProofSqlstate = "55F02";

struct ResultDeleter {
    void operator()(PGresult* r) const { PQclear(r); }
};
using Res = std::unique_ptr<PGresult, ResultDeleter>;

// Runs one parameterized statement (all parameters as text).
template <std::size_t N>
Res run(PGconn* conn, const char* sql, const std::array<std::string, N>& params) {
    std::array<const char*, N> values{};
    for (std::size_t i = 0; i < N; ++i) values[i] = params[i].c_str();
    return Res(
        PQexecParams(conn, sql, static_cast<int>(N), nullptr, values.data(), nullptr, nullptr, 0));
}

bool ok(const Res& r) {
    if (!r) return false;
    const ExecStatusType s = PQresultStatus(r.get());
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

std::string field(const Res& r, int code) {
    const char* v = r ? PQresultErrorField(r.get(), code) : nullptr;
    return v ? std::string(v) : std::string();
}

std::string error_text(PGconn* conn, const Res& r) {
    std::string m = r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn);
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m.empty() ? std::string("no result from the server") : m;
}

// The failed statement's outcome: stale (55F01) or an error.
WriteResult failure(PGconn* conn, const Res& r) {
    WriteResult w;
    const std::string state = field(r, PG_DIAG_SQLSTATE);
    w.outcome = state == kStaleSqlstate      ? WriteOutcome::kStale
                : state == kBadProofSqlstate ? WriteOutcome::kBadProof
                                             : WriteOutcome::kError;
    w.message = error_text(conn, r);
    w.detail = field(r, PG_DIAG_MESSAGE_DETAIL);
    return w;
}

std::int64_t first_int(const Res& r) {
    std::int64_t v = 0;
    const char* text = PQgetvalue(r.get(), 0, 0);
    std::from_chars(text, text + std::strlen(text), v);
    return v;
}

// Rolls back; the outcome `w` stands (a failed rollback drops the connection).
WriteResult abort_with(PGconn* conn, WriteResult w) {
    Res r(PQexec(conn, "ROLLBACK"));
    return w;
}

WriteResult accepted(std::int64_t value) {
    return WriteResult{WriteOutcome::kAccepted, value, {}, {}};
}
WriteResult no_row(const std::string& what) {
    return WriteResult{WriteOutcome::kNotFound, 0, what, {}};
}

// Increments through `sql` ($1 key) and returns the new value, or why not.
WriteResult increment(PGconn* conn, const char* sql, const std::string& key) {
    Res r = run<1>(conn, sql, {key});
    if (!ok(r)) return failure(conn, r);
    if (PQntuples(r.get()) != 1) return no_row("no row for key '" + key + "'");
    return accepted(first_int(r));
}

// Proof for the trigger paths: SET LOCAL pg_fence.proof (none: nothing set).
std::optional<WriteResult> set_proof(PGconn* conn, const std::optional<std::string>& proof) {
    if (!proof) return std::nullopt;
    Res r = run<1>(conn, kSetProofSql, {*proof});
    if (!ok(r)) return failure(conn, r);
    return std::nullopt;
}

// guard: the trigger compares the token in the SET list with the row's fence.
WriteResult guard_step(PGconn* conn, const std::string& key, const std::string& tok,
                       const std::optional<std::string>& proof) {
    if (auto failed = set_proof(conn, proof)) return *failed;
    Res r = run<2>(conn, kGuardSql, {key, tok});
    if (!ok(r)) return failure(conn, r);
    if (PQntuples(r.get()) != 1) return no_row("no row for key '" + key + "'");
    return accepted(first_int(r));
}

// fenced_update: read under the row lock, then one conditional UPDATE.
WriteResult fenced_update_step(PGconn* conn, const std::string& key, const std::string& tok,
                               const std::optional<std::string>& proof) {
    Res r = run<1>(conn, kReadForUpdateSql, {key});
    if (!ok(r)) return failure(conn, r);
    if (PQntuples(r.get()) != 1) return no_row("no row for key '" + key + "'");
    const std::int64_t next = first_int(r) + 1;
    r = proof ? run<4>(conn, kFencedUpdateProofSql, {key, std::to_string(next), tok, *proof})
              : run<3>(conn, kFencedUpdateSql, {key, std::to_string(next), tok});
    if (!ok(r)) return failure(conn, r);
    const std::string outcome = PQgetvalue(r.get(), 0, 0);
    if (outcome == "stale") {
        return WriteResult{WriteOutcome::kStale, 0, "fenced_update returned 'stale'", {}};
    }
    if (outcome != "applied") return no_row("fenced_update returned '" + outcome + "'");
    return accepted(next);
}

// sequenced: the trigger compares (token, seq) in the SET list with the row's pair.
WriteResult sequenced_step(PGconn* conn, const std::string& key, const std::string& tok, std::int64_t seq,
                           const std::optional<std::string>& proof) {
    if (auto failed = set_proof(conn, proof)) return *failed;
    Res r = run<3>(conn, kSequencedSql, {key, tok, std::to_string(seq)});
    if (!ok(r)) return failure(conn, r);
    if (PQntuples(r.get()) != 1) return no_row("no row for key '" + key + "'");
    return accepted(first_int(r));
}

// admit: the resource fence admits the transaction, then two plain tables.
WriteResult admit_step(PGconn* conn, const std::string& key, const std::string& tok,
                       const std::optional<std::string>& proof) {
    Res r = proof ? run<3>(conn, kAdmitProofSql, {key, tok, *proof}) : run<2>(conn, kAdmitSql, {key, tok});
    if (!ok(r)) return failure(conn, r);
    WriteResult b = increment(conn, kLedgerBSql, key);
    if (b.outcome != WriteOutcome::kAccepted) return b;
    return increment(conn, kLedgerASql, key);
}

// The fenced statement(s) of one path; on success `value` is the new counter.
WriteResult fenced_step(PGconn* conn, Mode path, const std::string& key, const std::string& tok,
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
        case WriteOutcome::kBadProof:
            return "bad_proof";
        case WriteOutcome::kNotFound:
            return "not_found";
        case WriteOutcome::kError:
            return "error";
    }
    return "?";
}

void PgWriter::ConnDeleter::operator()(pg_conn* conn) const {
    PQfinish(conn);
}

PgWriter::~PgWriter() = default;

std::string PgWriter::connect(const std::string& conninfo, const std::string& application_name) {
    conn_.reset(PQconnectdb(conninfo.c_str()));
    if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) {
        std::string why = conn_ ? PQerrorMessage(conn_.get()) : "out of memory";
        while (!why.empty() && why.back() == '\n') why.pop_back();
        conn_.reset();
        return "cannot connect to PostgreSQL (conninfo '" + conninfo + "'): " + why;
    }
    // Bounded waits: a paused writer holding a row lock must not block others forever.
    Res r = run<1>(conn_.get(),
                   "SELECT set_config('application_name', $1, false), "
                   "set_config('lock_timeout', '10s', false), "
                   "set_config('statement_timeout', '30s', false), "
                   "set_config('client_min_messages', 'warning', false)",
                   {application_name});
    if (!ok(r)) {
        std::string why = "cannot set session options: " + error_text(conn_.get(), r);
        conn_.reset();  // not connected(): the next write connects again, with the timeouts
        return why;
    }
    return {};
}

bool PgWriter::connected() const {
    return conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
}

std::string PgWriter::exec_plain(const char* sql) {
    Res r(PQexec(conn_.get(), sql));
    return ok(r) ? std::string() : error_text(conn_.get(), r);
}

std::string PgWriter::setup(bool proof) {
    std::string err = exec_plain(kSchemaSql);
    if (!err.empty()) return "creating the worker schema failed: " + err;
    if (proof) err = exec_plain(kProofSchemaSql);
    return err.empty() ? err : "making the worker tables verify token proofs failed: " + err;
}

std::string PgWriter::ensure_key(const std::string& key, bool require_proof) {
    for (const char* sql : {kEnsureKeySql, kEnsureSequencedSql, kEnsureLedgerASql, kEnsureLedgerBSql,
                            require_proof ? kRequireProofSql : nullptr}) {
        if (sql == nullptr) continue;
        Res r = run<1>(conn_.get(), sql, {key});
        if (!ok(r)) {
            return "cannot create the rows of key '" + key +
                   "' (did you run --setup?): " + error_text(conn_.get(), r);
        }
    }
    return {};
}

WriteResult PgWriter::write(Mode path, const std::string& key, std::uint64_t token, std::int64_t seq,
                            const std::string& worker, const std::optional<std::string>& proof,
                            const std::string& audit_path) {
    PGconn* conn = conn_.get();
    const std::string tok = std::to_string(token);
    if (Res b(PQexec(conn, "BEGIN")); !ok(b)) return failure(conn, b);
    if (path != Mode::kSequenced) seq = 0;
    WriteResult w = fenced_step(conn, path, key, tok, seq, proof);
    if (w.outcome != WriteOutcome::kAccepted) return abort_with(conn, w);
    const char* fence = path == Mode::kAdmit ? "resource" : path == Mode::kSequenced ? "sequenced" : "row";
    Res a = run<7>(conn, kAuditSql,
                   {key, fence, tok, std::to_string(seq), worker, std::to_string(w.value),
                    audit_path.empty() ? std::string(to_string(path)) : audit_path});
    if (!ok(a)) return abort_with(conn, failure(conn, a));
    Res c(PQexec(conn, "COMMIT"));
    if (!ok(c)) return failure(conn, c);
    return w;
}

}  // namespace pgfence::worker
