#include "pgconn/connection.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace pgfence::pgconn {
namespace {

// The message on one line (libpq breaks a connection error over several,
// with tabs), without trailing blanks.
std::string trimmed(const char* text) {
    std::string m;
    for (const char* c = text != nullptr ? text : ""; *c != '\0'; ++c) {
        const bool blank = *c == '\n' || *c == '\t' || *c == ' ';
        if (!blank) {
            m += *c;
        } else if (!m.empty() && m.back() != ' ') {
            m += ' ';
        }
    }
    while (!m.empty() && m.back() == ' ') m.pop_back();
    return m;
}

// Whether libpq takes `conninfo` as a connection string (a URI or
// keyword=value pairs) rather than a database name: its own rule for
// expand_dbname.
bool is_connection_string(const std::string& conninfo) {
    return conninfo.starts_with("postgresql://") || conninfo.starts_with("postgres://") ||
           conninfo.find('=') != std::string::npos;
}

// Whether a parsed option holds what a password written unencoded into a
// URI leaves there ("postgresql://u:pa/ss@h/db" makes "pa" the port,
// "u:pa@ss@h" makes "ss@h" the host): libpq's connect error would quote it.
bool holds_misplaced_text(const PQconninfoOption& o) {
    if (o.val == nullptr) return false;
    const std::string_view keyword = o.keyword, value = o.val;
    std::size_t begin = 0;
    while (begin <= value.size()) {
        const std::size_t end = std::min(value.find(',', begin), value.size());
        const std::string_view part = value.substr(begin, end - begin);
        if (keyword == "port" && part.find_first_not_of("0123456789") != std::string_view::npos) return true;
        if ((keyword == "host" || keyword == "hostaddr") && !part.empty() && part[0] != '/' && part[0] != '@' &&
            part.find('@') != std::string_view::npos) {
            return true;
        }
        begin = end + 1;
    }
    return false;
}

// "" when libpq can parse `conninfo` and none of its values looks like part
// of a password, else a reason that leaves the conninfo out: libpq's own
// messages quote it (all of a URI, the words after a keyword=value pair,
// a value), password included.
std::string check_conninfo(const std::string& conninfo) {
    if (!is_connection_string(conninfo)) return {};
    char* err = nullptr;
    PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &err);
    PQfreemem(err);
    bool bad = options == nullptr;
    for (const PQconninfoOption* o = options; !bad && o->keyword != nullptr; ++o) bad = holds_misplaced_text(*o);
    PQconninfoFree(options);
    return bad ? "invalid connection string (not shown: it may hold a password)" : "";
}

}  // namespace

void Result::Clear::operator()(pg_result* r) const {
    PQclear(r);
}

bool Result::ok() const {
    if (!res_) return false;
    const ExecStatusType s = PQresultStatus(res_.get());
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

std::string Result::sqlstate() const {
    const char* v = res_ ? PQresultErrorField(res_.get(), PG_DIAG_SQLSTATE) : nullptr;
    return v != nullptr ? v : "";
}

std::string Result::message() const {
    if (ok()) return {};
    std::string m = res_ ? trimmed(PQresultErrorMessage(res_.get())) : connection_error_;
    return m.empty() ? std::string("no result from the server") : m;
}

std::string Result::primary() const {
    const char* v = res_ ? PQresultErrorField(res_.get(), PG_DIAG_MESSAGE_PRIMARY) : nullptr;
    return v != nullptr ? trimmed(v) : message();
}

std::string Result::detail() const {
    const char* v = res_ ? PQresultErrorField(res_.get(), PG_DIAG_MESSAGE_DETAIL) : nullptr;
    return v != nullptr ? v : "";
}

int Result::rows() const {
    return res_ ? PQntuples(res_.get()) : 0;
}

bool Result::is_null(int row, int column) const {
    return !res_ || row >= rows() || column >= PQnfields(res_.get()) || PQgetisnull(res_.get(), row, column) != 0;
}

std::string Result::value(int row, int column) const {
    return is_null(row, column) ? std::string() : std::string(PQgetvalue(res_.get(), row, column));
}

void Connection::Finish::operator()(pg_conn* c) const {
    PQfinish(c);
}

std::string Connection::connect(const std::string& conninfo, const ConnectDefaults& defaults) {
    conn_.reset();
    if (std::string bad = check_conninfo(conninfo); !bad.empty()) return "cannot connect to PostgreSQL: " + bad;
    // Keywords are applied in order and the expanded conninfo ("dbname",
    // last) overrides the defaults before it.
    std::vector<const char*> keys, values;
    const std::string timeout = std::to_string(defaults.connect_timeout_s);
    if (defaults.connect_timeout_s > 0 && std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
        keys.push_back("connect_timeout");
        values.push_back(timeout.c_str());
    }
    if (!defaults.application_name.empty()) {
        keys.push_back("fallback_application_name");
        values.push_back(defaults.application_name.c_str());
    }
    keys.push_back("dbname");
    values.push_back(conninfo.c_str());
    keys.push_back(nullptr);
    values.push_back(nullptr);
    conn_.reset(PQconnectdbParams(keys.data(), values.data(), 1));
    if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) return {};
    const std::string why = conn_ ? trimmed(PQerrorMessage(conn_.get())) : "out of memory";
    conn_.reset();
    return "cannot connect to PostgreSQL: " + why;
}

bool Connection::connected() const {
    return conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
}

Result Connection::wrap(pg_result* r) const {
    Result out;
    out.res_.reset(r);
    if (r == nullptr) out.connection_error_ = conn_ ? trimmed(PQerrorMessage(conn_.get())) : "not connected";
    return out;
}

Result Connection::exec(const char* sql) const {
    return wrap(conn_ ? PQexec(conn_.get(), sql) : nullptr);
}

Result Connection::exec(const char* sql, std::initializer_list<Param> params) const {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const Param& p : params) values.push_back(p ? p->c_str() : nullptr);
    return wrap(conn_ ? PQexecParams(conn_.get(), sql, static_cast<int>(values.size()), nullptr, values.data(),
                                     nullptr, nullptr, 0)
                      : nullptr);
}

}  // namespace pgfence::pgconn
