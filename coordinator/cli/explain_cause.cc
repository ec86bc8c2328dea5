#include "cli/explain_cause.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "cli/output.h"

namespace pgfence::cli::explain {
namespace {

std::string ms_text(std::int64_t ms) {
    return std::to_string(ms) + " ms";
}

std::string ns_to_ms_text(std::int64_t ns) {
    return ms_text(ns / 1'000'000);
}

std::string tok(std::uint64_t token) {
    return "token " + std::to_string(token);
}

bool is_write(const ClientEvent& e) {
    return e.event == "write" || e.event == "replay" || e.event == "forge";
}

// The holder's first write of the token that PostgreSQL refused as stale
// (sent, so send_ns > 0), or null.
const ClientEvent* first_stale_write(const std::vector<ClientEvent>& log) {
    for (const ClientEvent& e : log) {
        if (is_write(e) && e.outcome == "stale" && e.send_ns > 0) return &e;
    }
    return nullptr;
}

struct Context {
    const Evidence& ev;
    std::int64_t lease_ms;
    const Rejection* first;    // the first stale rejection
    const ClientEvent* write;  // the holder's refused write in its log, or null
    bool log;                  // a client log with lines of the token was given
    Explanation out;

    // The write's time in the holder's clock; without the write in the log,
    // every line of the token counts as before it.
    std::int64_t write_ns() const { return write != nullptr ? write->send_ns : INT64_MAX; }

    void add(std::string line) { out.evidence.push_back(std::move(line)); }

    Explanation decide(Cause cause) {
        out.cause = cause;
        return std::move(out);
    }

    void add_rejection_line() {
        add("PostgreSQL refused a write carrying " + tok(first->token) + " at " +
            utc_text(first->at_ms) +
            (first->fence ? " (fence: " + tok(*first->fence) + ")" : std::string()) +
            (first->target.empty() ? std::string() : " on " + first->target) +
            (first->lock_key.empty() ? std::string() : " (lock key '" + first->lock_key + "')") +
            (first->path.empty() ? std::string() : ", path " + first->path) +
            (first->reason.empty() || first->reason == "stale" ? std::string()
                                                               : ", reason " + first->reason));
    }

    // The send time of the last ok keepalive of the token sent before `before`; 0: none.
    std::int64_t last_ok_keepalive_before(std::int64_t before) const {
        std::int64_t last = 0;
        for (const ClientEvent& e : ev.client_log) {
            if (e.event == "keepalive" && e.outcome == "ok" && e.send_ns < before)
                last = std::max(last, e.send_ns);
        }
        return last;
    }
};

// Rule 2, client log: a keepalive answered with a refusal after the last
// successful one, then a write (a refusal followed by renewals is a blip).
bool refused_in_log(Context& c) {
    const std::int64_t last_ok_ns = c.last_ok_keepalive_before(c.write_ns());
    for (const ClientEvent& e : c.ev.client_log) {
        if (e.event != "keepalive" || e.send_ns <= last_ok_ns) continue;
        const bool answered_refusal =
            e.outcome == "not_held" || (e.outcome == "error" && e.ack_ns > 0);
        if (!answered_refusal || e.ack_ns > c.write_ns()) continue;
        c.add("the holder's log: a keepalive of " + tok(c.ev.life.token) + " was answered '" +
              e.outcome + "'" +
              (c.write != nullptr
                   ? ", and the holder wrote " + ns_to_ms_text(c.write_ns() - e.ack_ns) + " later"
                   : ", before the refused write"));
        return true;
    }
    return false;
}

// Rule 2, coordinator: a member counted a refused keepalive by the write's
// time; not when the client log holds the write (it said what it saw).
bool refused_by_members(Context& c) {
    const Keepalives& k = c.ev.keepalives;
    if (k.refused == 0 || c.write != nullptr) return false;
    if (k.last_refused_wall_ms && *k.last_refused_wall_ms > c.first->at_ms) return false;
    c.add(std::to_string(k.refused) + " keepalive(s) of " + tok(c.ev.life.token) +
          " were refused by the leader" +
          (k.last_refused_wall_ms ? " (last at " + utc_text(*k.last_refused_wall_ms) + ")"
                                  : std::string()) +
          (k.last_refused_reason.empty() ? std::string() : ": " + k.last_refused_reason) +
          "; writes went on after it");
    return true;
}

// Whether a keepalive request sent at `send_ns` (it lasts at most a lease:
// the holder cuts it at its local deadline) overlaps a stall of the holder.
bool overlaps_stall(const Context& c, std::int64_t send_ns) {
    const std::int64_t end_ns = send_ns + c.lease_ms * 1'000'000;
    for (const ClientEvent& e : c.ev.client_log) {
        if (e.event == "stall" && e.send_ns <= end_ns && send_ns <= e.ack_ns) return true;
    }
    return false;
}

// Rule 3: keepalives sent after the last acknowledged one got no answer at
// all (`unavailable`, a member answering 503, is an answer), and were not
// cut short by a stall of the holder (a SIGSTOP mid-request).
bool unanswered_keepalives(Context& c) {
    const std::int64_t last_ok_ns = c.last_ok_keepalive_before(c.write_ns());
    int lost = 0;
    for (const ClientEvent& e : c.ev.client_log) {
        if (e.event == "keepalive" && e.outcome == "error" && e.ack_ns == 0 &&
            e.send_ns > last_ok_ns && e.send_ns < c.write_ns() && !overlaps_stall(c, e.send_ns)) {
            ++lost;
        }
    }
    if (lost == 0) return false;
    c.add("the holder's log: " + std::to_string(lost) + " keepalive(s) of " + tok(c.ev.life.token) +
          " sent after its last acknowledged one got no answer (sent, not arrived)");
    if (c.ev.keepalives.last_ok_wall_ms) {
        c.add("the last keepalive the leader received arrived at " +
              utc_text(*c.ev.keepalives.last_ok_wall_ms));
    }
    return true;
}

// The holder's lease end as its log tells it before `before`: the last ok
// keepalive's send (or the acquire's) + the lease; 0: no such line.
std::int64_t lease_end_before(const Context& c, std::int64_t before) {
    std::int64_t from = c.last_ok_keepalive_before(before);
    if (from == 0) {
        for (const ClientEvent& e : c.ev.client_log) {
            if (e.event == "acquire" && e.outcome == "ok" && e.send_ns > 0 && e.send_ns < before)
                from = e.send_ns;
        }
    }
    return from == 0 ? 0 : from + c.lease_ms * 1'000'000;
}

// Rule 4: a stall of the holder of at least a third of the lease, across
// its lease's end (or with its local deadline noticed inside it): a shorter
// stall, or one the lease outlived, did not cost the lease.
bool stalled(Context& c) {
    const std::int64_t floor_ns = c.lease_ms * 1'000'000 / kStallLeaseDivisor;
    for (const ClientEvent& e : c.ev.client_log) {
        if (e.event != "stall" || e.ack_ns <= e.send_ns || e.ack_ns - e.send_ns < floor_ns)
            continue;
        if (e.send_ns > c.write_ns()) continue;
        const std::int64_t end = lease_end_before(c, e.send_ns);
        bool spans = end != 0 && end >= e.send_ns && end <= e.ack_ns;
        for (const ClientEvent& d : c.ev.client_log) {
            spans |= d.event == "deadline" && d.send_ns >= e.send_ns && d.send_ns <= e.ack_ns;
        }
        if (!spans) continue;
        c.add("the holder's log: it did not run for " + ns_to_ms_text(e.ack_ns - e.send_ns) +
              " (a timer woke that late; the lease is " + ms_text(c.lease_ms) +
              "), across its lease's end" +
              (c.write != nullptr
                   ? ", and it wrote " + ns_to_ms_text(c.write_ns() - e.ack_ns) + " after waking"
                   : std::string()));
        return true;
    }
    return false;
}

// Rule 5: the holder's own deadline passed without a renewal.
bool deadline_passed(Context& c) {
    for (const ClientEvent& e : c.ev.client_log) {
        if (e.event != "deadline" || e.ack_ns > c.write_ns()) continue;
        c.add("the holder's log: its lease's local deadline passed without a successful keepalive" +
              (c.write != nullptr
                   ? ", and it wrote " + ns_to_ms_text(c.write_ns() - e.ack_ns) + " after noticing"
                   : std::string()));
        return true;
    }
    return false;
}

// Whether the holder sent a keepalive of the token between `from` and `to`.
bool renewed_during(const Context& c, std::int64_t from, std::int64_t to) {
    for (const ClientEvent& e : c.ev.client_log) {
        if (e.event == "keepalive" && e.send_ns >= from && e.send_ns <= to) return true;
    }
    return false;
}

// Rule 6: one piece of work longer than the lease, with no keepalive sent during it.
bool long_work(Context& c) {
    std::uint64_t renewed = 0;
    for (const ClientEvent& e : c.ev.client_log) {
        if (e.event == "keepalive" && e.outcome == "ok") ++renewed;
        if (e.event != "work" || e.ack_ns <= e.send_ns) continue;
        const std::int64_t took_ns = e.ack_ns - e.send_ns;
        if (took_ns <= c.lease_ms * 1'000'000 || e.send_ns > c.write_ns()) continue;
        if (renewed_during(c, e.send_ns, e.ack_ns)) continue;
        c.add("the holder's log: one piece of work took " + ns_to_ms_text(took_ns) +
              ", longer than the lease (" + ms_text(c.lease_ms) +
              ") with no keepalive sent during it, after " + std::to_string(renewed) +
              " successful keepalive(s)");
        return true;
    }
    return false;
}

// Rule 7: the coordinator's view alone.
bool stopped_before_expiry(Context& c) {
    const Life& l = c.ev.life;
    if (l.ended_how != "expired" || !l.ended_wall_ms) return false;
    std::optional<std::int64_t> last = c.ev.keepalives.last_ok_wall_ms;
    if (l.last_keepalive_wall_ms && (!last || *l.last_keepalive_wall_ms > *last))
        last = l.last_keepalive_wall_ms;
    const bool no_keepalive = !last;
    if (no_keepalive) last = l.granted_wall_ms;  // the grant was the last sign of life
    if (!last || *last >= *l.ended_wall_ms || c.first->at_ms <= *l.ended_wall_ms) return false;
    c.add((no_keepalive ? "no keepalive reached a leader after the grant at "
                        : "the last keepalive reached the leader at ") +
          utc_text(*last) + ", " + ms_text(*l.ended_wall_ms - *last) +
          " before the lease expired at " + utc_text(*l.ended_wall_ms));
    c.add("the refused write came " + ms_text(c.first->at_ms - *l.ended_wall_ms) +
          " after the expiry");
    if (!c.log) {
        c.add(
            "without the holder's log (--client-log) a network cut or one long piece of work looks "
            "the same "
            "from the coordinator");
    } else {
        c.add(
            "the holder's log shows no keepalive after its last acknowledged one: they were not "
            "sent");
    }
    return true;
}

// Evidence for any cause: the grant reached the holder after a whole lease
// (the acquire waited in the queue, or the holder was paused or cut off while
// the answer was on its way), so its lease was gone by its own deadline on arrival.
void note_late_grant(Context& c) {
    for (const ClientEvent& e : c.ev.client_log) {
        if (e.event != "acquire" || e.outcome != "ok" || e.ack_ns <= e.send_ns) continue;
        const std::int64_t took_ns = e.ack_ns - e.send_ns;
        if (took_ns < c.lease_ms * 1'000'000) continue;
        c.add("the holder's log: the grant arrived " + ns_to_ms_text(took_ns) +
              " after the acquire was sent (the "
              "lease is " +
              ms_text(c.lease_ms) +
              " from the send): the lease was gone by the holder's own "
              "deadline when it arrived");
        return;
    }
}

Explanation no_stale_rejection(Context& c) {
    const Life& l = c.ev.life;
    const std::size_t other = c.ev.rejections.size();
    if (other > 0) {
        c.add(std::to_string(other) + " rejection(s) carried " + tok(l.token) +
              " for a bad proof (" + c.ev.rejections.front().reason + "), none from a late holder");
    }
    if (!c.ev.rejections_cover_token) {
        c.add("no row of the database's rejection ring carries " + tok(l.token) + " as stale");
        c.out.missing.push_back(
            "the rejection ring no longer covers the token" +
            (c.ev.ring_gap.empty() ? std::string() : " (" + c.ev.ring_gap + ")") +
            ": a refusal may have been dropped");
        return c.decide(Cause::kUndetermined);
    }
    if (c.write != nullptr) {
        c.add("the holder's log: a write of " + tok(l.token) +
              " was refused as stale, yet no row of the "
              "database's rejection ring carries it");
        c.out.missing.push_back(
            "the refused write's row in fence_rejections (another database, or a reset ring?)");
        return c.decide(Cause::kUndetermined);
    }
    if (l.next_token) {
        c.add("no write carrying " + tok(l.token) + " was refused as stale");
        std::string line = tok(*l.next_token) + " followed on '" + l.key + "'";
        if (c.ev.next && c.ev.next->granted_wall_ms && l.ended_wall_ms) {
            line += ", granted " + ms_text(*c.ev.next->granted_wall_ms - *l.ended_wall_ms) +
                    " after " + tok(l.token) + " was " + l.ended_how;
        }
        c.add(line + ": a waiter got the lock, not a stale write");
        return c.decide(Cause::kContention);
    }
    c.add("no write carrying " + tok(l.token) +
          " was refused as stale and no holder followed on '" + l.key + "'");
    c.out.missing.push_back("a refused write: there is nothing stale to explain");
    return c.decide(Cause::kUndetermined);
}

// Rule 8: what is missing.
Explanation undetermined(Context& c) {
    const Life& l = c.ev.life;
    c.add_rejection_line();
    if (l.ended_how != "expired") {
        c.add(tok(l.token) + " ended " +
              (l.ended_how.empty() ? std::string("(unknown)") : l.ended_how) +
              (l.ended_wall_ms ? " at " + utc_text(*l.ended_wall_ms) : std::string()) +
              ", not by its lease running out");
        c.out.missing.push_back(
            "an expiry: the rules for a pause or a cut need the lease to have run out");
    } else if (!l.ended_wall_ms) {
        c.out.missing.push_back("the expiry's time (the log entry carries no leader wall time)");
    } else if (c.first->at_ms <= *l.ended_wall_ms) {
        c.add("the refused write came at " + utc_text(c.first->at_ms) +
              ", not after the expiry at " + utc_text(*l.ended_wall_ms));
        c.out.missing.push_back(
            "a write after the expiry (clocks of coordinator and database may differ)");
    } else {
        std::optional<std::int64_t> last = c.ev.keepalives.last_ok_wall_ms;
        if (l.last_keepalive_wall_ms && (!last || *l.last_keepalive_wall_ms > *last))
            last = l.last_keepalive_wall_ms;
        if (last && *last >= *l.ended_wall_ms) {
            c.add("the last keepalive reached the leader at " + utc_text(*last) +
                  ", not before the expiry at " + utc_text(*l.ended_wall_ms));
            c.out.missing.push_back(
                "a last keepalive arrival before the expiry (the leader's times disagree)");
        } else {
            c.out.missing.push_back(
                "a keepalive arrival before the expiry (no member saw one while leading)");
        }
    }
    if (!c.log) c.out.missing.push_back("the holder's own log (--client-log)");
    return c.decide(Cause::kUndetermined);
}

}  // namespace

bool is_late_holder(const Rejection& r) {
    return r.reason != "proof";
}

const char* to_string(Cause cause) {
    switch (cause) {
        case Cause::kPausedHolder:
            return "paused_holder";
        case Cause::kPartitionedHolder:
            return "partitioned_holder";
        case Cause::kLeaseTooShort:
            return "lease_too_short";
        case Cause::kContinuedAfterFailedRenewal:
            return "continued_after_failed_renewal";
        case Cause::kContention:
            return "contention";
        case Cause::kUndetermined:
            return "undetermined";
    }
    return "undetermined";
}

namespace {

Explanation classify_given(const Evidence& ev) {
    Context c{ev,
              ev.life.lease_ms,
              nullptr,
              first_stale_write(ev.client_log),
              ev.client_log_given && !ev.client_log.empty(),
              {}};
    // Rule 0.
    if (!ev.rejections_read) {
        c.out.missing.push_back(
            "the database's rejections (--dsn): without them no write is known to be refused");
        return c.decide(Cause::kUndetermined);
    }
    if (ev.keepalives.members_answered == 0) {
        c.out.missing.push_back("the token's life: no member answered");
        return c.decide(Cause::kUndetermined);
    }
    for (const Rejection& r : ev.rejections) {
        if (is_late_holder(r) && r.token == ev.life.token &&
            (c.first == nullptr || r.at_ms < c.first->at_ms))
            c.first = &r;
    }
    if (c.first == nullptr) return no_stale_rejection(c);  // rule 1
    const std::pair<bool (*)(Context&), Cause> rules[] = {
        {refused_in_log, Cause::kContinuedAfterFailedRenewal},      // rule 2
        {refused_by_members, Cause::kContinuedAfterFailedRenewal},  // rule 2
        {unanswered_keepalives, Cause::kPartitionedHolder},         // rule 3
        {stalled, Cause::kPausedHolder},                            // rule 4
        {deadline_passed, Cause::kContinuedAfterFailedRenewal},     // rule 5
        {long_work, Cause::kLeaseTooShort},                         // rule 6
        {stopped_before_expiry, Cause::kPausedHolder},              // rule 7
    };
    for (const auto& [holds, cause] : rules) {
        if (holds(c)) {
            note_late_grant(c);
            c.add_rejection_line();
            return c.decide(cause);
        }
    }
    return undetermined(c);  // rule 8
}

}  // namespace

Explanation classify(const Evidence& ev) {
    Explanation x = classify_given(ev);
    if (ev.client_log_given && ev.client_log.empty()) {
        x.missing.push_back(
            "a line of " + tok(ev.life.token) +
            " in the holder's log (--client-log has none: it counted as not given)");
    }
    return x;
}

}  // namespace pgfence::cli::explain
