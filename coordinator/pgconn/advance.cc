#include "pgconn/advance.h"

#include <algorithm>

#include "client/exit_codes.h"

namespace pgfence::pgconn {
namespace {

constexpr std::size_t kMaxResourceBytes = 512;  // pg_fence's bound on a resource name (docs/sql.md)

// Every name is qualified: the DSN's search_path may put a schema that
// others can write before pg_fence's, where a fence_advance of the same
// signature would receive the token and its proof. pg_fence's own schema is
// looked up (quoted) once per publish.
constexpr const char* kSchemaSql =
    "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e "
    "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
    "WHERE e.extname OPERATOR(pg_catalog.=) 'pg_fence'";
constexpr const char* kTimeoutsSql =
    "SELECT pg_catalog.set_config('statement_timeout', $1, false), pg_catalog.set_config('lock_timeout', $1, false)";

// token 42 not published at resource "a" / at resources "a", "b"
std::string not_published(const std::vector<AdvanceTarget>& targets, std::uint64_t token) {
    std::string names;
    for (const AdvanceTarget& t : targets) names += (names.empty() ? "\"" : ", \"") + t.resource + "\"";
    return "token " + std::to_string(token) + " not published at resource" + (targets.size() == 1 ? " " : "s ") +
           names;
}

PublishResult result(PublishOutcome outcome, std::string message) {
    return PublishResult{outcome, std::move(message)};
}

// The failed statement's cause: its message, detail and SQLSTATE.
std::string cause(const Result& r) {
    const std::string state = r.sqlstate(), detail = r.detail();
    return r.primary() + (detail.empty() ? "" : ": " + detail) + (state.empty() ? "" : " (SQLSTATE " + state + ")");
}

// Rolls back; the result `why` stands (a failed rollback ends with the connection).
PublishResult rolled_back(const Connection& conn, PublishResult why) {
    conn.exec("ROLLBACK");
    return why;
}

// One resource's fence_advance inside the open transaction; `schema` is
// pg_fence's, quoted.
PublishResult advance_one(const Connection& conn, const std::string& schema, const AdvanceTarget& t,
                          std::uint64_t token) {
    const std::string tok = std::to_string(token);
    const std::string head = "token " + tok + " not published at resource \"" + t.resource + "\": ";
    const std::string advance_sql =
        "SELECT " + schema + ".fence_advance($1::pg_catalog.text, $2::pg_catalog.int8, $3::pg_catalog.text)";
    const Result r = conn.exec(advance_sql.c_str(), {t.resource, tok, t.proof.empty() ? Param() : Param(t.proof)});
    if (!r.ok()) {
        const bool stale = r.sqlstate() == kStaleSqlstate;
        return result(stale ? PublishOutcome::kStale : PublishOutcome::kError,
                      head + "fence_advance failed: " + cause(r));
    }
    if (r.value(0, 0) == "t") return result(PublishOutcome::kPublished, {});
    const std::string current_sql = "SELECT " + schema + ".fence_current($1::pg_catalog.text)";
    const Result current = conn.exec(current_sql.c_str(), {t.resource});
    const std::string fence = current.ok() && !current.is_null(0, 0) ? current.value(0, 0) : "unknown";
    return result(PublishOutcome::kStale, head + "its fence is " + fence +
                                              " already (a newer holder published first; this token is stale)");
}

}  // namespace

std::vector<AdvanceTarget> advance_targets(const std::vector<std::string>& resources,
                                           const std::vector<std::string>& keys,
                                           const std::vector<std::string>& proofs, const std::string& proof) {
    std::vector<AdvanceTarget> out;
    for (const std::string& resource : resources) {
        AdvanceTarget t{resource, {}};
        for (std::size_t i = 0; i < keys.size(); ++i) {
            if (keys[i] != resource) continue;
            t.proof = i < proofs.size() ? proofs[i] : keys.size() == 1 ? proof : "";
        }
        out.push_back(std::move(t));
    }
    return out;
}

std::string check_resource(const std::string& resource) {
    if (resource.empty() || resource.size() > kMaxResourceBytes) {
        return "resource '" + resource + "' must be 1-512 bytes";
    }
    for (const char c : resource) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            return "resource '" + resource + "' contains a control character";
        }
    }
    return {};
}

PublishResult publish_generation(const Connection& conn, std::vector<AdvanceTarget> targets, std::uint64_t token) {
    std::sort(targets.begin(), targets.end(),
              [](const AdvanceTarget& a, const AdvanceTarget& b) { return a.resource < b.resource; });
    targets.erase(std::unique(targets.begin(), targets.end(),
                              [](const AdvanceTarget& a, const AdvanceTarget& b) { return a.resource == b.resource; }),
                  targets.end());
    if (const Result b = conn.exec("BEGIN"); !b.ok()) {
        return result(PublishOutcome::kError, not_published(targets, token) + ": BEGIN failed: " + cause(b));
    }
    const Result schema = conn.exec(kSchemaSql);
    if (!schema.ok() || schema.rows() == 0) {
        const std::string why = !schema.ok() ? "cannot look up pg_fence's schema: " + cause(schema)
                                             : "pg_fence is not installed in this database (CREATE EXTENSION pg_fence)";
        return rolled_back(conn, result(PublishOutcome::kError, not_published(targets, token) + ": " + why));
    }
    for (const AdvanceTarget& t : targets) {
        PublishResult one = advance_one(conn, schema.value(0, 0), t, token);
        if (one.outcome != PublishOutcome::kPublished) return rolled_back(conn, std::move(one));
    }
    if (const Result c = conn.exec("COMMIT"); !c.ok()) {
        return result(PublishOutcome::kError, not_published(targets, token) + ": COMMIT failed: " + cause(c));
    }
    return result(PublishOutcome::kPublished, {});
}

PublishResult publish_generation(const std::string& conninfo, const std::string& application_name,
                                 std::vector<AdvanceTarget> targets, std::uint64_t token,
                                 std::chrono::milliseconds budget) {
    const long long ms = std::max<long long>(1, budget.count());
    Connection conn;
    // libpq counts connect_timeout in whole seconds, and takes 1 as 2.
    const int connect_s = static_cast<int>(std::clamp<long long>((ms + 999) / 1000, 2, 3600));
    if (std::string why = conn.connect(conninfo, ConnectDefaults{application_name, connect_s}); !why.empty()) {
        return result(PublishOutcome::kError, not_published(targets, token) + ": " + why);
    }
    if (const Result r = conn.exec(kTimeoutsSql, {std::to_string(ms)}); !r.ok()) {
        return result(PublishOutcome::kError,
                      not_published(targets, token) + ": cannot set statement_timeout: " + cause(r));
    }
    return publish_generation(conn, std::move(targets), token);
}

int exit_code_of(PublishOutcome outcome) {
    switch (outcome) {
        case PublishOutcome::kPublished:
            return kExitOk;
        case PublishOutcome::kStale:
            return kExitStale;
        case PublishOutcome::kError:
            break;
    }
    return kExitDatabase;
}

}  // namespace pgfence::pgconn
