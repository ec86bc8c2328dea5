// A libpq connection for the programs that talk to PostgreSQL themselves
// (fencectl's --advance, fence-worker): RAII over PGconn and PGresult,
// statements with text parameters (NULL as std::nullopt), and the SQLSTATE
// and messages of a failure. libpq is linked here and by the programs above
// this module (cli/, worker/); the layers below never see it.
//
// Threading: one Connection per thread at a time (libpq's rule); a Result
// may outlive its Connection.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

struct pg_conn;
struct pg_result;

namespace pgfence::pgconn {

// A statement parameter, sent as text; std::nullopt is SQL NULL.
using Param = std::optional<std::string>;

// SQLSTATE of a stale fencing token (pg_fence, docs/sql.md "Errors and SQLSTATEs").
inline constexpr const char* kStaleSqlstate = "55F01";

class Result {
  public:
    Result() = default;
    bool ok() const;  // PGRES_COMMAND_OK or PGRES_TUPLES_OK
    // The server's SQLSTATE; "" when there is none (the connection broke, no
    // result at all).
    std::string sqlstate() const;
    // The error's primary message with any trailing newline removed (the
    // connection's message when there is no result); "" when ok().
    std::string message() const;
    // The server's primary message alone (no "ERROR:", DETAIL or HINT);
    // message() when the server sent none.
    std::string primary() const;
    std::string detail() const;  // the server's DETAIL, "" when none
    int rows() const;
    bool is_null(int row, int column) const;
    std::string value(int row, int column) const;  // "" for NULL

  private:
    friend class Connection;
    struct Clear {
        void operator()(pg_result* r) const;
    };
    std::unique_ptr<pg_result, Clear> res_;
    std::string connection_error_;  // PQerrorMessage when there is no result
};

// What a connection may be given unless the conninfo (or, for the timeout,
// PGCONNECT_TIMEOUT) says otherwise.
struct ConnectDefaults {
    std::string application_name;  // libpq's fallback_application_name
    int connect_timeout_s = 0;      // 0: libpq's default (wait as long as TCP does)
};

class Connection {
  public:
    Connection() = default;
    Connection(Connection&&) noexcept = default;
    Connection& operator=(Connection&&) noexcept = default;

    // Connects with `conninfo` (a keyword=value string or a postgresql://
    // URI; "" takes everything from the PG* environment, as psql does).
    // Returns "" or the reason, prefixed "cannot connect to PostgreSQL: ".
    // The conninfo is never part of the message (it may hold a password): a
    // string libpq cannot parse, or one that an unencoded character in the
    // password leaves with a port or host that is not one, is refused
    // before connecting as "invalid connection string (not shown: it may
    // hold a password)"; any other reason is libpq's, which names host and
    // port (and user or database), never the password.
    std::string connect(const std::string& conninfo, const ConnectDefaults& defaults);
    bool connected() const;
    void close() { conn_.reset(); }

    // One statement; with parameters through PQexecParams (one statement
    // only), without through PQexec (several statements allowed).
    Result exec(const char* sql) const;
    Result exec(const char* sql, std::initializer_list<Param> params) const;

  private:
    struct Finish {
        void operator()(pg_conn* c) const;
    };
    Result wrap(pg_result* r) const;
    std::unique_ptr<pg_conn, Finish> conn_;
};

}  // namespace pgfence::pgconn
