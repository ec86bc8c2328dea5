#include "cli/explain_command.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "cli/client_log.h"
#include "cli/explain_cause.h"
#include "cli/output.h"
#include "client/exit_codes.h"
#include "pgconn/connection.h"

namespace pgfence::cli {
namespace json = boost::json;
namespace ex = explain;

namespace {

// A failure that ends the command: its exit code and message.
struct Failure {
    int code = kExitOk;
    std::string message;
};

// One token with everything gathered about it.
struct TokenReport {
    client::TokenLife life;  // the most advanced answer of the members (see more_advanced)
    std::vector<client::TokenKeepalives> by_member;
    std::optional<client::TokenLife> next;
    ex::Evidence evidence;
    ex::Explanation explanation;
};

// What the database and the client log said about all tokens looked at.
struct Sources {
    bool db_read = false;
    std::vector<ex::Rejection> rows;  // every token's, oldest first
    bool rows_truncated = false;
    // The rejection ring: pg_fence.rejection_log_size (nullopt: not set) and
    // its oldest row's time (nullopt: empty).
    std::optional<std::int64_t> ring_size;
    std::optional<std::int64_t> ring_oldest_ms;
    bool more_tokens = false;  // --key: the history read was cut at --limit inside the window
    bool log_given = false;
    ex::ClientLog log;
};

std::optional<std::int64_t> signed_ms(std::optional<std::uint64_t> v) {
    if (!v) return std::nullopt;
    return static_cast<std::int64_t>(*v);
}

// The given endpoints and the members the first one that answers lists.
std::vector<client::Endpoint> every_member(client::Client& c) {
    std::vector<client::Endpoint> all = c.options().endpoints;
    for (std::size_t i = 0; i < all.size(); ++i) {
        auto s = c.status_of(all[i]);
        if (!s) continue;
        for (const client::Endpoint& e : s.value().member_endpoints) {
            if (all.size() < client::kMaxEndpoints &&
                std::find(all.begin(), all.end(), e) == all.end()) {
                all.push_back(e);
            }
        }
        break;
    }
    return all;
}

// The token's life from every member in `members`: Failure when none knew it.
// A member that gave no answer for one token is not asked for the next ones
// (`silent`): with --key each would cost a timeout. Two endpoints of one
// member (localhost and 127.0.0.1) count once (observed_by).
Failure gather_life(client::Client& c, const std::vector<client::Endpoint>& members,
                    std::uint64_t token, TokenReport& report, std::set<std::string>& silent) {
    std::optional<client::Error> first_error;
    bool have = false, not_applied = false;
    std::optional<client::Error> unknown;  // a member that applied past it says it was never issued
    for (const client::Endpoint& e : members) {
        if (silent.contains(e.to_string())) continue;
        auto r = c.token_life_of(e, token);
        if (!r && r.error().kind == client::ErrorKind::kUnavailable) silent.insert(e.to_string());
        if (!r) {
            not_applied |= r.error().kind == client::ErrorKind::kNotApplied;
            if (r.error().kind == client::ErrorKind::kUnknownToken && !unknown) unknown = r.error();
            // "no such token" or "compacted" from one member says more than a timeout from another.
            const bool telling = r.error().kind == client::ErrorKind::kUnknownToken ||
                                 r.error().kind == client::ErrorKind::kCompacted;
            if (!first_error || (telling && first_error->kind == client::ErrorKind::kUnavailable))
                first_error = r.error();
            continue;
        }
        const client::TokenKeepalives& k = r.value().keepalives;
        const bool seen = std::any_of(
            report.by_member.begin(), report.by_member.end(),
            [&](const client::TokenKeepalives& m) { return m.observed_by == k.observed_by; });
        if (!have || more_advanced(r.value(), report.life)) report.life = r.value();
        have = true;
        if (!seen) report.by_member.push_back(k);
    }
    if (have) return {};
    if (!first_error)
        return {kExitUnavailable, "no member answered (each was silent for an earlier token)"};
    // "Never issued" from a member that applied past the token is definitive,
    // whatever a lagging member (not_applied) or a silent one said.
    if (unknown) {
        return {kExitNoSuchToken,
                "no such token was issued: " + std::to_string(token) + " (" + unknown->message + ")"};
    }
    const client::Error& e = *first_error;
    if (not_applied && e.kind != client::ErrorKind::kCompacted) {
        return {kExitUnavailable,
                "token " + std::to_string(token) +
                    " is past what some member applied, and no member knows it: not applied yet, "
                    "or never issued (ask again once the members caught up)"};
    }
    if (e.kind == client::ErrorKind::kCompacted) {
        return {kExitCompacted,
                "token " + std::to_string(token) + " is older than the history the members keep" +
                    (e.oldest_token != 0 ? " (oldest kept: " + std::to_string(e.oldest_token) + ")"
                                         : std::string())};
    }
    return {client::exit_code_of(e.kind), e.message};
}

ex::Keepalives merge(const std::vector<client::TokenKeepalives>& members) {
    ex::Keepalives k;
    k.members_answered = static_cast<int>(members.size());
    for (const client::TokenKeepalives& m : members) {
        k.members_as_leader += m.while_leader ? 1 : 0;
        k.ok += m.ok;
        k.refused += m.refused;
        if (m.last_ok_wall_ms &&
            (!k.last_ok_wall_ms || signed_ms(m.last_ok_wall_ms) > k.last_ok_wall_ms)) {
            k.last_ok_wall_ms = signed_ms(m.last_ok_wall_ms);
        }
        if (m.last_refused_wall_ms &&
            (!k.last_refused_wall_ms ||
             signed_ms(m.last_refused_wall_ms) > k.last_refused_wall_ms)) {
            k.last_refused_wall_ms = signed_ms(m.last_refused_wall_ms);
            k.last_refused_reason = m.last_refused_reason;
        }
    }
    return k;
}

// --dsn: the fence_rejections rows carrying `tokens`.
Failure read_rejections(const Args& args, milliseconds timeout,
                        const std::set<std::uint64_t>& tokens, Sources& s) {
    if (!args.dsn_given) return {};
    pgconn::Connection conn;
    const int connect_s =
        static_cast<int>(std::max<std::int64_t>(1, (timeout.count() + 999) / 1000));
    if (std::string why = conn.connect(args.dsn, {"fencectl explain", connect_s}); !why.empty()) {
        return {kExitDatabase, why};
    }
    const std::string set_timeout = "SET statement_timeout = " + std::to_string(timeout.count());
    if (pgconn::Result r = conn.exec(set_timeout.c_str()); !r.ok())
        return {kExitDatabase, r.message()};
    std::string array = "{";
    for (const std::uint64_t t : tokens) array += (array.size() > 1 ? "," : "") + std::to_string(t);
    array += "}";
    // The ring: how far back it reaches, and whether it is on (read after
    // the view: using it loads pg_fence, which defines the setting).
    const pgconn::Result ring =
        conn.exec("SELECT (extract(epoch FROM min(at)) * 1000)::bigint FROM fence_rejections");
    if (ring.ok() && ring.rows() == 1) {
        if (!ring.is_null(0, 0)) s.ring_oldest_ms = std::stoll(ring.value(0, 0));
        const pgconn::Result size =
            conn.exec("SELECT current_setting('pg_fence.rejection_log_size', true)");
        if (!size.ok())
            return {kExitDatabase, "reading pg_fence.rejection_log_size: " + size.message()};
        if (size.rows() == 1 && !size.is_null(0, 0) && !size.value(0, 0).empty()) {
            try {
                s.ring_size = std::stoll(size.value(0, 0));
            } catch (const std::exception&) {
                s.ring_size.reset();
            }
        }
    } else if (!ring.ok() && (ring.sqlstate() == "42P01" || ring.sqlstate() == "42883")) {
        return {kExitDatabase,
                "the database has no fence_rejections view (" + ring.primary() +
                    "): it needs pg_fence 1.6 or later (ALTER EXTENSION pg_fence UPDATE) and "
                    "pg_fence.rejection_log_size above 0"};
    } else if (!ring.ok()) {
        return {kExitDatabase, "reading fence_rejections: " + ring.message()};
    }
    const std::string limit = std::to_string(kMaxRejectionRows + 1);
    const pgconn::Result r = conn.exec(
        "SELECT (extract(epoch FROM at) * 1000)::bigint, token, fence, coalesce(relation::text, "
        "resource, ''), "
        "coalesce(path, ''), coalesce(reason, ''), coalesce(application_name, ''), "
        "coalesce(lock_key, '') "
        "FROM fence_rejections WHERE token = ANY($1::bigint[]) ORDER BY at LIMIT $2::int",
        {array, limit});
    if (!r.ok()) {
        if (r.sqlstate() == "42P01" || r.sqlstate() == "42883") {
            return {kExitDatabase,
                    "the database has no fence_rejections view (" + r.primary() +
                        "): it needs pg_fence 1.6 or later (ALTER EXTENSION pg_fence UPDATE) and "
                        "pg_fence.rejection_log_size above 0"};
        }
        return {kExitDatabase, "reading fence_rejections: " + r.message()};
    }
    s.db_read = true;
    const int rows = std::min(r.rows(), kMaxRejectionRows);
    s.rows_truncated = r.rows() > kMaxRejectionRows;
    for (int i = 0; i < rows; ++i) {
        ex::Rejection x;
        x.at_ms = std::stoll(r.value(i, 0));
        x.token = std::stoull(r.value(i, 1));
        if (!r.is_null(i, 2)) x.fence = std::stoull(r.value(i, 2));
        x.target = r.value(i, 3);
        x.path = r.value(i, 4);
        x.reason = r.value(i, 5);
        x.application_name = r.value(i, 6);
        x.lock_key = r.value(i, 7);
        s.rows.push_back(std::move(x));
    }
    return {};
}

ex::Life life_of(const client::TokenLife& l) {
    ex::Life x;
    x.token = l.token;
    x.key = l.key;
    x.lease_ms = l.lease.count();
    x.granted_wall_ms = signed_ms(l.granted.wall_ms);
    x.ended_how = l.ended.how;
    x.ended_wall_ms = signed_ms(l.ended.wall_ms);
    x.last_keepalive_wall_ms = signed_ms(l.ended.last_keepalive_wall_ms);
    x.next_token = l.next_token;
    return x;
}

// The evidence of one token from what was gathered, then its cause.
void decide(TokenReport& t, const Sources& s) {
    ex::Evidence& ev = t.evidence;
    ev.life = life_of(t.life);
    ev.keepalives = merge(t.by_member);
    if (t.next) ev.next = ex::NextGrant{t.next->token, signed_ms(t.next->granted.wall_ms)};
    ev.rejections_read = s.db_read;
    // Tokens are unique in the cluster: every row of the token is its own,
    // whatever table, resource or lock key it names (--advance R may fence a
    // resource other than the lock key).
    for (const ex::Rejection& r : s.rows) {
        if (r.token == t.life.token) ev.rejections.push_back(r);
    }
    const std::optional<std::int64_t> end = ev.life.ended_how == "held"
                                                ? std::optional<std::int64_t>(INT64_MAX)
                                                : ev.life.ended_wall_ms;
    if (!s.ring_size || *s.ring_size <= 0) {
        ev.ring_gap = "pg_fence.rejection_log_size is " +
                      (s.ring_size ? std::to_string(*s.ring_size) : "not set") +
                      ": the ring is off";
    } else if (!s.ring_oldest_ms) {
        ev.ring_gap = "the ring is empty: restarted or reset since";
    } else if (!end) {
        ev.ring_gap = "the token's end carries no time to compare the ring's oldest row with";
    } else if (*s.ring_oldest_ms > *end) {
        ev.ring_gap =
            "its oldest row is from " + utc_text(*s.ring_oldest_ms) + ", after the token ended";
    } else {
        ev.rejections_cover_token = true;
    }
    ev.client_log_given = s.log_given;
    for (const ex::ClientEvent& e : s.log.events) {
        if (e.token == t.life.token) ev.client_log.push_back(e);
    }
    t.explanation = ex::classify(ev);
}

// ---- output ----

json::value opt(std::optional<std::uint64_t> v) {
    return v ? json::value(*v) : json::value(nullptr);
}

json::object keepalive_json(const client::TokenKeepalives& k) {
    return {{"observed_by", k.observed_by},
            {"while_leader", k.while_leader},
            {"ok", k.ok},
            {"last_ok_wall_ms", opt(k.last_ok_wall_ms)},
            {"refused", k.refused},
            {"last_refused_wall_ms", opt(k.last_refused_wall_ms)},
            {"last_refused_reason", k.last_refused_reason.empty()
                                        ? json::value(nullptr)
                                        : json::value(k.last_refused_reason)}};
}

json::object report_json(const TokenReport& t, const Sources& s, const Args& args) {
    boost::system::error_code ec;
    json::value v = json::parse(t.life.json, ec);
    json::object o = !ec && v.is_object() ? std::move(v.get_object()) : json::object{};
    const ex::Keepalives& k = t.evidence.keepalives;
    json::array members;
    for (const client::TokenKeepalives& m : t.by_member) members.push_back(keepalive_json(m));
    o["keepalives"] = json::object{
        {"ok", k.ok},
        {"last_ok_wall_ms",
         k.last_ok_wall_ms ? json::value(*k.last_ok_wall_ms) : json::value(nullptr)},
        {"refused", k.refused},
        {"last_refused_wall_ms",
         k.last_refused_wall_ms ? json::value(*k.last_refused_wall_ms) : json::value(nullptr)},
        {"members_answered", k.members_answered},
        {"members_as_leader", k.members_as_leader},
        {"by_member", std::move(members)}};
    o["next"] = t.next
                    ? json::value(json::object{{"token", t.next->token},
                                               {"owner", t.next->owner},
                                               {"granted_wall_ms", opt(t.next->granted.wall_ms)}})
                    : json::value(nullptr);
    json::array rows;
    for (const ex::Rejection& r : t.evidence.rejections) {
        rows.push_back(json::object{
            {"at_ms", r.at_ms},
            {"token", r.token},
            {"fence", opt(r.fence)},
            {"target", r.target},
            {"path", r.path},
            {"reason", r.reason},
            {"lock_key", r.lock_key.empty() ? json::value(nullptr) : json::value(r.lock_key)},
            {"application_name", r.application_name}});
    }
    o["rejections_read"] = s.db_read;
    o["rejections_truncated"] = s.rows_truncated;
    o["rejections_cover_token"] = t.evidence.rejections_cover_token;
    o["rejections"] = std::move(rows);
    o["client_log"] = s.log_given
                          ? json::value(json::object{{"file", args.client_log},
                                                     {"lines", t.evidence.client_log.size()},
                                                     {"bad_lines", s.log.bad_lines},
                                                     {"truncated", s.log.truncated}})
                          : json::value(nullptr);
    o["cause"] = ex::to_string(t.explanation.cause);
    json::array evidence, missing;
    for (const std::string& e : t.explanation.evidence) evidence.emplace_back(e);
    for (const std::string& m : t.explanation.missing) missing.emplace_back(m);
    o["evidence"] = std::move(evidence);
    o["missing"] = std::move(missing);
    return o;
}

// `text` with control characters (a terminal's escapes) as \xNN, for
// values others chose: an owner, an application name, a key.
std::string printable(const std::string& text) {
    std::string out;
    for (const char ch : text) {
        const auto u = static_cast<unsigned char>(ch);
        if (u < 0x20 || u == 0x7f || ch == '\\') {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out += ch;
        }
    }
    return out;
}

std::string when(std::optional<std::uint64_t> wall_ms, std::optional<std::uint64_t> index) {
    const std::string s =
        wall_ms ? utc_text(static_cast<std::int64_t>(*wall_ms)) : "(time not recorded)";
    return index ? s + " (log index " + std::to_string(*index) + ")" : s;
}

void print_report(std::ostream& out, const TokenReport& t, const Sources& s) {
    const client::TokenLife& l = t.life;
    const ex::Keepalives& k = t.evidence.keepalives;
    out << "token " << l.token << " on '" << printable(l.key) << "' (owner "
        << (l.owner.empty() ? "-" : printable(l.owner)) << ", lease " << l.lease.count()
        << " ms)\n";
    out << "  granted     " << when(l.granted.wall_ms, l.granted.index) << '\n';
    out << "  ended       " << l.ended.how;
    if (l.ended.how != "held") out << " at " << when(l.ended.wall_ms, l.ended.index);
    out << '\n';
    out << "  keepalives  " << k.ok << " arrived";
    if (k.last_ok_wall_ms)
        out << " (last " << when(static_cast<std::uint64_t>(*k.last_ok_wall_ms), {}) << ")";
    out << ", " << k.refused << " refused";
    if (!k.last_refused_reason.empty())
        out << " (last: " << printable(k.last_refused_reason) << ")";
    out << "; " << k.members_answered << " member(s) answered, " << k.members_as_leader
        << " saw them as leader\n";
    out << "  next        ";
    if (t.next) {
        out << "token " << t.next->token << " (owner " << printable(t.next->owner) << "), granted "
            << when(t.next->granted.wall_ms, t.next->granted.index) << '\n';
    } else {
        out << (l.next_token ? "token " + std::to_string(*l.next_token) + " (its life is not kept)"
                             : "none yet")
            << '\n';
    }
    if (!s.db_read) {
        out << "  refused     (database not read: no --dsn)\n";
    } else {
        out << "  refused     " << t.evidence.rejections.size() << " write(s)"
            << (s.rows_truncated
                    ? " (the rows read were cut at " + std::to_string(kMaxRejectionRows) + ")"
                    : "")
            << (t.evidence.rejections_cover_token
                    ? ""
                    : " (the rejection ring does not cover the token: " + t.evidence.ring_gap + ")")
            << '\n';
        for (const ex::Rejection& r : t.evidence.rejections) {
            out << "    " << when(static_cast<std::uint64_t>(r.at_ms), {}) << "  " << r.reason;
            if (r.fence) out << ", fenced by token " << *r.fence;
            if (!r.target.empty()) out << ", on " << printable(r.target);
            if (!r.lock_key.empty()) out << ", lock key '" << printable(r.lock_key) << "'";
            if (!r.path.empty()) out << ", path " << r.path;
            if (!r.application_name.empty())
                out << ", application " << printable(r.application_name);
            out << '\n';
        }
    }
    out << "cause: " << ex::to_string(t.explanation.cause) << '\n';
    for (const std::string& e : t.explanation.evidence) out << "  - " << printable(e) << '\n';
    if (!t.explanation.missing.empty()) {
        out << "missing:\n";
        for (const std::string& m : t.explanation.missing) out << "  - " << printable(m) << '\n';
    }
}

// ---- the command ----

int fail(std::ostream& err, const Failure& f) {
    err << "fencectl explain: " << f.message << '\n';
    return f.code;
}

// The tokens to explain: TOKEN, or --key's history in the window.
// The history was cut at --limit (`more_tokens`) when it holds --limit tokens
// and its oldest one is not before the window: older ones may be in it.
Failure tokens_to_explain(const Args& args, client::Client& c, std::vector<std::uint64_t>& tokens,
                          bool& more_tokens) {
    if (!args.by_key) {
        tokens.push_back(args.token);
        return {};
    }
    const std::uint64_t limit = args.limit.value_or(kDefaultExplainLimit);
    auto h = c.key_history(args.explain_key, limit);
    if (!h) return {client::exit_code_of(h.error().kind), h.error().message};
    if (!h.value().tokens.empty() && h.value().tokens.size() >= limit) {
        const client::TokenLife& oldest = h.value().tokens.back();
        const auto ended = signed_ms(oldest.ended.wall_ms);
        more_tokens =
            !args.since_ms || oldest.ended.how == "held" || !ended || *ended >= *args.since_ms;
    }
    for (const client::TokenLife& l : h.value().tokens) {
        const auto granted = signed_ms(l.granted.wall_ms);
        const auto ended = signed_ms(l.ended.wall_ms);
        if (args.until_ms && granted && *granted > *args.until_ms) continue;
        if (args.since_ms && l.ended.how != "held" && ended && *ended < *args.since_ms) continue;
        tokens.push_back(l.token);
    }
    return {};
}

}  // namespace

bool more_advanced(const client::TokenLife& a, const client::TokenLife& b) {
    const bool a_ended = a.ended.how != "held", b_ended = b.ended.how != "held";
    if (a_ended != b_ended) return a_ended;
    const std::uint64_t ai = a.ended.index.value_or(0), bi = b.ended.index.value_or(0);
    if (ai != bi) return ai > bi;
    return a.next_token.has_value() && !b.next_token.has_value();
}

int run_explain_command(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    // An unreadable --client-log fails before any network or database read.
    if (!args.client_log.empty()) {
        if (std::ifstream probe(args.client_log); !probe) {
            return fail(err, {kExitUsage, "--client-log: cannot open '" + args.client_log + "'"});
        }
    }
    std::vector<std::uint64_t> tokens;
    Sources s;
    if (Failure f = tokens_to_explain(args, c, tokens, s.more_tokens); f.code != kExitOk)
        return fail(err, f);
    const std::vector<client::Endpoint> members = every_member(c);
    std::vector<TokenReport> reports(tokens.size());
    std::set<std::uint64_t> wanted;
    std::set<std::string> silent;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (Failure f = gather_life(c, members, tokens[i], reports[i], silent); f.code != kExitOk)
            return fail(err, f);
        if (const auto next = reports[i].life.next_token) {
            if (auto n = c.token_life(*next)) reports[i].next = n.value();
        }
        wanted.insert(tokens[i]);
    }
    if (Failure f = read_rejections(args, c.options().timeout, wanted, s); f.code != kExitOk)
        return fail(err, f);
    if (!args.client_log.empty()) {
        s.log_given = true;
        s.log = ex::read_client_log(args.client_log, wanted);
        if (!s.log.error.empty()) return fail(err, {kExitUsage, s.log.error});
        if (s.log.truncated) {
            err << "fencectl explain: warning: --client-log '" << args.client_log
                << "' was read only up to " << ex::kMaxClientLogBytes << " bytes or "
                << ex::kMaxClientLogLines << " lines\n";
        }
    }
    for (TokenReport& t : reports) decide(t, s);
    if (args.output == Output::kJson) {
        if (!args.by_key) {
            out << json::serialize(report_json(reports.front(), s, args)) << '\n';
        } else {
            json::array all;
            for (const TokenReport& t : reports) all.push_back(report_json(t, s, args));
            out << json::serialize(json::object{{"key", args.explain_key},
                                                {"tokens", std::move(all)},
                                                {"more_tokens", s.more_tokens}})
                << '\n';
        }
        return kExitOk;
    }
    const std::string limit = std::to_string(args.limit.value_or(kDefaultExplainLimit));
    if (reports.empty()) {
        out << (s.more_tokens
                    ? "no token of '" + printable(args.explain_key) +
                          "' in the window among the newest " + limit +
                          " (older ones may be in it: raise --limit)\n"
                    : "no token of '" + printable(args.explain_key) + "' in the window\n");
    } else if (s.more_tokens) {
        out << "the newest " << limit << " tokens of '" << printable(args.explain_key)
            << "' were read: older ones may be in the window (raise --limit)\n\n";
    }
    for (std::size_t i = 0; i < reports.size(); ++i) {
        if (i > 0) out << '\n';
        print_report(out, reports[i], s);
    }
    return kExitOk;
}

}  // namespace pgfence::cli
