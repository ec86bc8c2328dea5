#include "cli/commands.h"

#include <boost/json.hpp>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <set>

#include "client/duration.h"

#include "client/exit_codes.h"
#include "cli/explain_command.h"
#include "cli/output.h"
#include "cli/publish.h"
#include "cli/snapshot_command.h"
#include "cli/watch_command.h"

namespace pgfence::cli {
namespace json = boost::json;

namespace {

// Where the endpoints came from, as the user set them (or did not).
std::string endpoints_source(const Args& args) {
    if (!args.endpoints.empty()) return "from --endpoints";
    if (const char* env = std::getenv("FENCE_ENDPOINTS"); env != nullptr && *env != '\0') {
        return "from FENCE_ENDPOINTS";
    }
    return "the default endpoints: FENCE_ENDPOINTS is not set and no --endpoints given";
}

// The line fencectl prints once a call keeps retrying: which endpoints, from
// where, what failed, and until when it goes on.
std::function<void(const std::string&)> retry_notice(const Args& args, const client::Options& options) {
    std::string tried;
    for (const client::Endpoint& e : options.endpoints) tried += (tried.empty() ? "" : ",") + e.to_string();
    // The deadline the command's call really has (snapshot save has its own default).
    std::string until = "--timeout " + client::format_duration(args.command == "snapshot"
                                                                   ? args.timeout.value_or(kSnapshotTimeout)
                                                                   : options.timeout);
    if (args.command == "acquire") until += " + --wait " + client::format_duration(args.wait.value_or(kDefaultWait));
    return [line = "no usable answer yet from " + tried + " (" + endpoints_source(args) + "); retrying for up to " +
                   until + "; last error: "](const std::string& why) {
        std::cerr << "fencectl: " << line << why << std::endl;
    };
}

}  // namespace

bool client_options(const Args& args, client::Options& options, std::string& error) {
    client::EndpointsParse parsed = client::endpoints_from(args.endpoints);
    if (!parsed.error.empty()) {
        error = parsed.error;
        return false;
    }
    options.endpoints = std::move(parsed.endpoints);
    if (auto why = client::load_credentials(args.cacert, args.cert, args.key, args.bearer_file, options); !why.empty()) {
        error = why;
        return false;
    }
    options.timeout = args.timeout.value_or(kDefaultTimeout);
    options.attempt_timeout = std::min(options.attempt_timeout, options.timeout);
    options.max_clock_drift_ppm = args.max_clock_drift_ppm.value_or(client::kDefaultMaxClockDriftPpm);
    // run has its own warnings while it holds a lease; status asks each endpoint once.
    const bool holds = args.command == "run" || args.command == "elect";
    if (!holds && args.command != "status") options.on_retry = retry_notice(args, options);
    if (holds) {
        // A stopped or cut-off leader must not eat the lease: give each
        // keepalive request an eighth of it before trying the next member, so
        // that several attempts fit between the first keepalive (lease/3) and
        // the SIGTERM (run_command.cc).
        const milliseconds eighth = args.lease.value_or(kDefaultLease) / 8;
        options.keepalive_attempt_timeout = std::clamp(eighth, kMinAttemptTimeout, options.attempt_timeout);
    }
    return true;
}

int exit_code_of(const client::Error& error, const std::string& command) {
    return client::exit_code_of(error.kind, command == "keepalive");
}

std::string in_flag_terms(const client::Error& error, const Args& args) {
    return client::in_flag_terms(error, args.lease.value_or(kDefaultLease), args.wait.value_or(kDefaultWait));
}

namespace {

int fail(const client::Error& error, const Args& args, std::ostream& err) {
    err << "fencectl " << args.command << ": ";
    const std::string key = args.positional.empty() ? "" : args.positional[0];
    if (error.kind == client::ErrorKind::kBadRequest) {
        err << in_flag_terms(error, args) << '\n';
    } else if (error.kind == client::ErrorKind::kNotFound) {
        err << "no lock on '" << key << "' (" << error.message << ")\n";
    } else if (error.kind == client::ErrorKind::kNotHeld) {
        const bool election = args.command == "proclaim" || args.command == "resign";
        err << (election ? "election '" : "'") << key << (election ? "' is not led" : "' is not held")
            << " with token " << args.token << " (" << error.message << ")\n";
    } else {
        err << error.message << '\n';
    }
    return exit_code_of(error, args.command);
}

int acquire(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    client::AcquireRequest req{args.positional[0], args.lease.value_or(kDefaultLease),
                               args.wait.value_or(kDefaultWait), args.owner};
    if (args.positional.size() > 1) req.keys = args.positional;  // a set under one lease
    auto r = c.acquire(req);
    if (!r) return fail(r.error(), args, err);
    const client::Lease& lease = r.value();
    // --advance: published before the token is printed, by deadline - margin (run's margin).
    const auto margin = std::max(milliseconds(10), lease.lease / 10);
    if (const Publication p = publish_first(args, lease, lease.deadline() - margin); p.code != kExitOk) {
        err << "fencectl acquire: " << p.message << "; releasing the lock (token " << lease.token << ")\n";
        if (auto released = c.release(lease.keys, lease.token); !released) {
            err << "fencectl acquire: warning: release of token " << lease.token
                << " failed: " << released.error().message << '\n';
        }
        return p.code;
    }
    out << (args.output == Output::kJson ? lease_json(r.value()) : std::to_string(r.value().token)) << '\n';
    return kExitOk;
}

int release(const Args& args, client::Client& c, std::ostream& err) {
    // KEY [KEY...] TOKEN: several keys are a set, released whole.
    const std::vector<std::string> keys(args.positional.begin(), args.positional.end() - 1);
    auto r = c.release(keys, args.token);
    return r ? kExitOk : fail(r.error(), args, err);
}

int keepalive(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    const std::vector<std::string> keys(args.positional.begin(), args.positional.end() - 1);
    auto r = c.keepalive(keys, args.token);
    if (!r) return fail(r.error(), args, err);
    const auto& k = r.value();
    if (args.output == Output::kJson && k.keys.size() > 1) {
        json::array names;
        for (const std::string& key : k.keys) names.emplace_back(key);
        out << json::serialize(json::object{{"keys", std::move(names)}, {"token", k.token}, {"ttl_ms", k.ttl.count()}})
            << '\n';
    } else if (args.output == Output::kJson) {
        out << json::serialize(json::object{{"key", k.key}, {"token", k.token}, {"ttl_ms", k.ttl.count()}}) << '\n';
    } else {
        out << k.ttl.count() << '\n';
    }
    return kExitOk;
}

// The election's leader: NAME VALUE TOKEN OWNER TTL as a table, or the
// member's answer as JSON; none: exit 6 (kExitNotFound), "no leader" on stderr.
int leader(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    auto r = c.leader(args.positional[0]);
    if (!r) {
        if (r.error().kind != client::ErrorKind::kNotFound) return fail(r.error(), args, err);
        err << "fencectl leader: election '" << args.positional[0] << "' has no leader\n";
        return kExitNotFound;
    }
    const client::LeaderInfo& l = r.value();
    if (args.output == Output::kJson) {
        out << json::serialize(json::object{{"name", l.name},
                                            {"key", l.key},
                                            {"value", l.value},
                                            {"token", l.token},
                                            {"owner", l.owner},
                                            {"lease_ms", l.lease.count()},
                                            {"ttl_ms", l.ttl.count()}})
            << '\n';
    } else {
        print_table(out, {"NAME", "VALUE", "TOKEN", "OWNER", "TTL"},
                    {{l.name, l.value, std::to_string(l.token), l.owner, std::to_string(l.ttl.count()) + "ms"}});
    }
    return kExitOk;
}

int proclaim(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    auto r = c.proclaim(args.positional[0], args.token, args.value);
    if (!r) return fail(r.error(), args, err);
    if (args.output == Output::kJson) {
        out << json::serialize(json::object{{"name", r.value().name}, {"token", r.value().token},
                                            {"value", r.value().value}})
            << '\n';
    }
    return kExitOk;
}

int resign(const Args& args, client::Client& c, std::ostream& err) {
    auto r = c.resign(args.positional[0], args.token);
    return r ? kExitOk : fail(r.error(), args, err);
}

int get(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    auto r = c.get(args.positional[0]);
    if (!r) return fail(r.error(), args, err);
    if (args.output == Output::kJson) {
        out << lock_json(r.value()) << '\n';
    } else {
        print_table(out, lock_header(), {lock_row(r.value())});
    }
    return kExitOk;
}

int list(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    auto r = c.list(args.prefix);
    if (!r) return fail(r.error(), args, err);
    if (args.output == Output::kJson) {
        json::array locks;
        for (const auto& l : r.value()) locks.push_back(json::parse(lock_json(l)));
        out << json::serialize(json::object{{"locks", std::move(locks)}}) << '\n';
        return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& l : r.value()) rows.push_back(lock_row(l));
    print_table(out, lock_header(), rows);
    return kExitOk;
}

// The member's own answer with the endpoint we asked added.
json::value member_json(const client::MemberStatus& s) {
    boost::system::error_code ec;
    json::value v = json::parse(s.json, ec);
    if (ec || !v.is_object()) return json::object{{"endpoint", s.endpoint}};
    v.get_object()["endpoint"] = s.endpoint;
    return v;
}

int status(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    std::vector<client::Endpoint> todo = c.options().endpoints;
    std::set<std::string> asked;
    json::array members;
    std::vector<std::vector<std::string>> rows;
    client::Error last{client::ErrorKind::kUnavailable, "no endpoints", 0};
    bool any = false;
    std::optional<client::Error> foreign;  // the first endpoint that is not a pgfence member
    for (std::size_t i = 0; i < todo.size() && i < client::kMaxEndpoints; ++i) {
        const std::string name = todo[i].to_string();
        if (!asked.insert(name).second) continue;
        auto r = c.status_of(todo[i]);
        if (!r) {
            last = r.error();
            const bool not_member = r.error().kind == client::ErrorKind::kNotPgfence;
            if (not_member && !foreign) foreign = r.error();
            const char* role = not_member ? "not pgfence" : "unreachable";
            members.push_back(json::parse(unreachable_json(name, role, r.error().message)));
            rows.push_back({"-", role, "-", "-", "-", "-", name});
            continue;
        }
        any = true;
        const auto& s = r.value();
        for (const auto& e : s.member_endpoints) todo.push_back(e);
        members.push_back(member_json(s));
        // A follower that does not vote is a learner (it catches up before promotion).
        const std::string role = s.voter == false && s.role == "follower" ? "learner" : s.role;
        rows.push_back({s.id, role, std::to_string(s.term), s.leader.empty() || s.leader == "0" ? "-" : s.leader,
                        std::to_string(s.commit_index), std::to_string(s.applied_index), name});
    }
    if (args.output == Output::kJson) {
        out << json::serialize(json::object{{"members", std::move(members)}}) << '\n';
    } else {
        print_table(out, {"ID", "ROLE", "TERM", "LEADER", "COMMIT", "APPLIED", "ENDPOINT"}, rows);
    }
    if (any) return kExitOk;
    // Something answered, but nothing that is a member: that says more than the last endpoint's error.
    if (foreign) last = *foreign;
    return fail(last, args, err);
}

int member(const Args& args, client::Client& c, std::ostream& out, std::ostream& err) {
    const std::string& sub = args.subcommand;
    client::Result<client::MemberList> r = sub == "list"      ? c.members()
                                           : sub == "add"     ? c.add_member(args.member_id, args.peer_addr, args.client_addr)
                                           : sub == "promote" ? c.promote_member(args.member_id)
                                                              : c.remove_member(args.member_id);
    if (!r) {
        err << "fencectl member " << sub << ": ";
        if (r.error().kind == client::ErrorKind::kUnknownMember) {
            err << "no member " << args.member_id << " in the configuration\n";
        } else {
            err << r.error().message << '\n';
        }
        return exit_code_of(r.error(), "member");
    }
    const client::MemberList& m = r.value();
    if (args.output == Output::kJson) {
        out << m.json << '\n';
        return kExitOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const client::MemberEntry& e : m.members) {
        const std::string role = e.voter ? "voter" : e.caught_up ? "learner (caught up)" : "learner";
        rows.push_back({std::to_string(e.id), role + (e.id == m.leader ? ", leader" : ""),
                        e.peer_addr.empty() ? "-" : e.peer_addr, e.client_addr.empty() ? "-" : e.client_addr,
                        std::to_string(e.match_index)});
    }
    print_table(out, {"ID", "MEMBER", "PEER", "CLIENT", "MATCH"}, rows);
    return kExitOk;
}

}  // namespace

int run_simple_command(const Args& args, client::Client& client, std::ostream& out, std::ostream& err) {
    const std::string& cmd = args.command;
    if (cmd == "acquire") return acquire(args, client, out, err);
    if (cmd == "release") return release(args, client, err);
    if (cmd == "keepalive") return keepalive(args, client, out, err);
    if (cmd == "get") return get(args, client, out, err);
    if (cmd == "leader") return leader(args, client, out, err);
    if (cmd == "proclaim") return proclaim(args, client, out, err);
    if (cmd == "resign") return resign(args, client, err);
    if (cmd == "list") return list(args, client, out, err);
    if (cmd == "status") return status(args, client, out, err);
    if (cmd == "member") return member(args, client, out, err);
    if (cmd == "snapshot") return run_snapshot_command(args, client, out, err);
    if (cmd == "watch") return run_watch_command(args, client, out, err);
    if (cmd == "explain") return run_explain_command(args, client, out, err);
    err << "fencectl: unknown command '" << cmd << "'\n";
    return kExitUsage;
}

}  // namespace pgfence::cli
