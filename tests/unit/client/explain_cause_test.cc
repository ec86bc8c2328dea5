// The cause classifier of `fencectl explain` (cli/explain_cause.h): each
// rule on both sides of its boundary, the order of the rules, and the
// client log's CSV lines (cli/client_log.h).
#define BOOST_TEST_MODULE explain_cause
#include "cli/explain_cause.h"

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <fstream>

#include "cli/client_log.h"
#include "cli/explain_command.h"

using namespace pgfence::cli::explain;

namespace {

constexpr std::int64_t kGrant = 1'000'000;  // wall ms
constexpr std::int64_t kLease = 3'000;
constexpr std::int64_t kMs = 1'000'000;  // ns

// Token 41, granted at kGrant, renewed at +1000, expired at +4000; token 42
// next; one stale rejection at `write_at`; the database was read.
Evidence expired_token(std::int64_t write_at) {
    Evidence ev;
    ev.life = Life{41, "k", kLease, kGrant, "expired", kGrant + 4'000, kGrant + 1'000, 42};
    ev.keepalives.members_answered = 3;
    ev.keepalives.members_as_leader = 1;
    ev.keepalives.ok = 1;
    ev.keepalives.last_ok_wall_ms = kGrant + 1'000;
    ev.next = NextGrant{42, kGrant + 4'010};
    ev.rejections_read = true;
    ev.rejections_cover_token = true;
    ev.rejections.push_back(Rejection{write_at, 41, 42, "t", "guard", "stale", "w", ""});
    return ev;
}

ClientEvent line(const char* event, std::int64_t send_ms, std::int64_t ack_ms, const char* outcome,
                 std::int64_t value = 0) {
    return ClientEvent{event, 41, send_ms * kMs, ack_ms * kMs, outcome, value};
}

// expired_token with the holder's log given: `lines`, the write at +5000.
Evidence with_log(std::vector<ClientEvent> lines) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.client_log_given = true;
    ev.client_log = std::move(lines);
    return ev;
}

Cause cause_of(const Evidence& ev) {
    return classify(ev).cause;
}

}  // namespace

BOOST_AUTO_TEST_CASE(without_the_database_nothing_is_decided) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.rejections_read = false;
    const Explanation x = classify(ev);
    BOOST_TEST(to_string(x.cause) == "undetermined");
    BOOST_TEST(x.missing.front().find("--dsn") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(contention_is_a_follower_without_a_late_holder_rejection) {
    Evidence ev = expired_token(0);
    ev.rejections.clear();
    BOOST_TEST(to_string(cause_of(ev)) == "contention");
    ev.rejections.push_back(Rejection{kGrant + 5'000, 41, 42, "t", "guard", "proof", "w", ""});
    BOOST_TEST(to_string(cause_of(ev)) == "contention");  // a bad proof: not a late holder
    ev.life.next_token.reset();
    ev.next.reset();
    BOOST_TEST(to_string(cause_of(ev)) == "undetermined");  // nobody followed, nothing refused
    ev.life.next_token = 42;
    ev.rejections.push_back(Rejection{kGrant + 5'000, 41, 42, "t", "guard", "stale", "w", ""});
    BOOST_TEST(to_string(cause_of(ev)) != "contention");
}

// Every reason but 'proof' is a late holder's refusal.
BOOST_AUTO_TEST_CASE(in_flight_and_preempted_are_late_holder_refusals) {
    for (const char* reason : {"stale", "in_flight", "preempted"}) {
        Evidence ev = expired_token(kGrant + 5'000);
        ev.rejections.front().reason = reason;
        BOOST_TEST(to_string(cause_of(ev)) == "paused_holder", reason);
    }
    Evidence ev = expired_token(kGrant + 5'000);
    ev.rejections.front().reason = "proof";
    BOOST_TEST(to_string(cause_of(ev)) == "contention");
}

// A missing row means no refusal only when the ring covers the token.
BOOST_AUTO_TEST_CASE(contention_needs_the_ring_to_cover_the_token) {
    Evidence ev = expired_token(0);
    ev.rejections.clear();
    ev.rejections_cover_token = false;
    ev.ring_gap = "pg_fence.rejection_log_size is 0: the ring is off";
    const Explanation x = classify(ev);
    BOOST_TEST(to_string(x.cause) == "undetermined");
    BOOST_TEST_REQUIRE(!x.missing.empty());
    BOOST_TEST(x.missing.front().find("the rejection ring no longer covers the token") !=
               std::string::npos);
    BOOST_TEST(x.missing.front().find("rejection_log_size is 0") != std::string::npos);
    // Covered, but the holder's log shows a write refused as stale: not contention.
    ev.rejections_cover_token = true;
    ev.client_log_given = true;
    ev.client_log = {line("acquire", 100, 110, "ok"), line("write", 5000, 5010, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) == "undetermined");
    ev.client_log = {line("acquire", 100, 110, "ok"), line("write", 5000, 5010, "published")};
    BOOST_TEST(to_string(cause_of(ev)) == "contention");
}

BOOST_AUTO_TEST_CASE(paused_holder_from_the_coordinator_needs_the_write_after_the_expiry) {
    const std::int64_t expiry = kGrant + 4'000;
    BOOST_TEST(to_string(cause_of(expired_token(expiry + 1))) == "paused_holder");
    BOOST_TEST(to_string(cause_of(expired_token(expiry))) == "undetermined");
    const Explanation x = classify(expired_token(expiry + 1));
    bool says_cut_looks_same = false;
    for (const std::string& e : x.evidence)
        says_cut_looks_same |= e.find("--client-log") != std::string::npos;
    BOOST_TEST(says_cut_looks_same);
}

BOOST_AUTO_TEST_CASE(paused_holder_needs_the_keepalives_to_stop_before_the_expiry) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.keepalives.last_ok_wall_ms = kGrant + 3'999;
    ev.life.last_keepalive_wall_ms.reset();
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
    ev.keepalives.last_ok_wall_ms = kGrant + 4'000;
    BOOST_TEST(to_string(cause_of(ev)) == "undetermined");
    // No keepalive at all: the grant was the last sign of life.
    ev.keepalives.last_ok_wall_ms.reset();
    ev.keepalives.ok = 0;
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
}

BOOST_AUTO_TEST_CASE(a_lease_that_did_not_run_out_is_not_a_pause) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.life.ended_how = "released";
    const Explanation x = classify(ev);
    BOOST_TEST(to_string(x.cause) == "undetermined");
    BOOST_TEST(!x.missing.empty());
    ev.life.ended_how = "expired";
    ev.life.ended_wall_ms.reset();  // an entry without a wall time
    BOOST_TEST(to_string(cause_of(ev)) == "undetermined");
}

BOOST_AUTO_TEST_CASE(a_refused_keepalive_counts_only_by_the_write) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.keepalives.refused = 1;
    ev.keepalives.last_refused_wall_ms = kGrant + 5'000;
    ev.keepalives.last_refused_reason = "not_held";
    BOOST_TEST(to_string(cause_of(ev)) == "continued_after_failed_renewal");
    ev.keepalives.last_refused_wall_ms = kGrant + 5'001;
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
}

BOOST_AUTO_TEST_CASE(a_refusal_in_the_client_log_counts_only_before_the_write) {
    Evidence ev =
        with_log({line("keepalive", 100, 110, "not_held"), line("write", 110, 120, "stale")});
    BOOST_TEST(to_string(cause_of(ev)) == "continued_after_failed_renewal");
    ev.client_log = {line("keepalive", 100, 111, "not_held"), line("write", 110, 120, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");  // answered after the write was sent
    // An error with an answer (a 5xx) is a refusal too; without one it is not.
    ev.client_log = {line("keepalive", 100, 105, "error"), line("write", 110, 120, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) == "continued_after_failed_renewal");
}

// A refusal followed by a successful renewal was a blip: only refusals sent
// after the last ok keepalive before the write count.
BOOST_AUTO_TEST_CASE(a_refusal_then_renewals_is_not_a_failed_renewal) {
    Evidence ev = with_log({line("keepalive", 100, 105, "error"), line("keepalive", 200, 205, "ok"),
                            line("write", 300, 310, "stale")});
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");  // rule 7
    ev.client_log[1] = line("keepalive", 100, 104, "ok");    // the ok one sent first
    ev.client_log[0] = line("keepalive", 101, 105, "error");
    BOOST_TEST(to_string(cause_of(ev)) == "continued_after_failed_renewal");
}

// The members' refused count speaks only when the client log holds no write
// of the token: the holder's own log says what it saw.
BOOST_AUTO_TEST_CASE(members_refusals_yield_to_the_client_logs_write) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.keepalives.refused = 1;
    ev.keepalives.last_refused_wall_ms = kGrant + 4'500;
    ev.client_log_given = true;
    ev.client_log = {line("keepalive", 100, 105, "ok"), line("write", 5000, 5010, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
    ev.client_log = {line("keepalive", 100, 105, "ok")};
    BOOST_TEST(to_string(cause_of(ev)) == "continued_after_failed_renewal");
}

BOOST_AUTO_TEST_CASE(partitioned_holder_is_unanswered_keepalives_after_the_last_ok_one) {
    Evidence ev = with_log({line("keepalive", 100, 105, "ok"), line("keepalive", 1100, 0, "error"),
                            line("write", 5000, 5010, "stale")});
    BOOST_TEST(to_string(cause_of(ev)) == "partitioned_holder");
    // Sent before the last acknowledged one: a blip, not the cut.
    ev.client_log = {line("keepalive", 90, 0, "error"), line("keepalive", 100, 105, "ok"),
                     line("write", 5000, 5010, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
    // Sent after the write: not why the write was late.
    ev.client_log = {line("keepalive", 100, 105, "ok"), line("write", 5000, 5010, "stale"),
                     line("keepalive", 5001, 0, "error")};
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
    // A member answered 503 (no leader): an answer, not a cut.
    ev.client_log = {line("keepalive", 100, 105, "ok"),
                     line("keepalive", 1100, 1150, "unavailable"),
                     line("write", 5000, 5010, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
}

// A keepalive lost because the holder was stopped mid-request (its request,
// at most a lease long, overlaps a stall) is the pause's, not a cut's.
BOOST_AUTO_TEST_CASE(a_keepalive_lost_to_a_stall_is_not_a_cut) {
    Evidence ev =
        with_log({line("keepalive", 100, 105, "ok"), line("keepalive", 1100, 0, "error"),
                  line("stall", 1100 + kLease, 4500, ""), line("write", 5000, 5010, "stale")});
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
    ev.client_log[2] = line("stall", 1100 + kLease + 1, 4500, "");  // after the request's end
    BOOST_TEST(to_string(cause_of(ev)) == "partitioned_holder");
}

BOOST_AUTO_TEST_CASE(a_stall_counts_from_a_third_of_the_lease) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.client_log_given = true;
    // The lease ends at 100 + kLease = 3100, inside the stall.
    ev.client_log = {line("keepalive", 100, 105, "ok"), line("stall", 3000, 3000 + kLease / 3, ""),
                     line("work", 200, 4000, "", 500), line("write", 5000, 5010, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) ==
               "paused_holder");  // before the long piece of work: rule 4 first
    ev.client_log[1] = line("stall", 3099, 3099 + kLease / 3 - 1, "");
    BOOST_TEST(to_string(cause_of(ev)) == "lease_too_short");
}

// A stall the lease outlived did not cost it: it must span the lease's end
// (the last ok keepalive sent before it, or the acquire, + the lease), or
// hold a `deadline` line.
BOOST_AUTO_TEST_CASE(a_stall_counts_only_across_the_lease_end) {
    Evidence ev = with_log({line("acquire", 50, 60, "ok"), line("keepalive", 100, 105, "ok"),
                            line("stall", 2000, 3100, ""), line("write", 5000, 5010, "stale")});
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
    for (const std::string& e : classify(ev).evidence) {
        if (e.find("did not run") != std::string::npos)
            BOOST_TEST(e.find("across its lease's end") != std::string::npos);
    }
    ev.client_log[2] =
        line("stall", 2000, 3099, "");  // woke 1 ms before the lease end: renewed in time
    ev.life.ended_how = "released";     // and rule 7 out of the way
    BOOST_TEST(to_string(cause_of(ev)) == "undetermined");
    ev.client_log[2] = line("stall", 3101, 4100, "");  // began after it
    BOOST_TEST(to_string(cause_of(ev)) == "undetermined");
    // Without a keepalive the acquire's send counts: 50 + 3000 = 3050.
    ev.client_log = {line("acquire", 50, 60, "ok"), line("stall", 2000, 3050, ""),
                     line("write", 5000, 5010, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
    ev.client_log[1] = line("stall", 2000, 3049, "");
    BOOST_TEST(to_string(cause_of(ev)) == "undetermined");
    // A `deadline` line inside the stall.
    ev.client_log.push_back(line("deadline", 2500, 3049, ""));
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
}

// A client log without a line of the token counts as not given.
BOOST_AUTO_TEST_CASE(a_client_log_without_the_token_counts_as_not_given) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.client_log_given = true;
    const Explanation x = classify(ev);
    BOOST_TEST(to_string(x.cause) == "paused_holder");
    bool says_cut = false, says_missing = false;
    for (const std::string& e : x.evidence) says_cut |= e.find("--client-log") != std::string::npos;
    for (const std::string& m : x.missing)
        says_missing |= m.find("--client-log has none") != std::string::npos;
    BOOST_TEST(says_cut);
    BOOST_TEST(says_missing);
}

// The undetermined line when the last keepalive arrived at or after the expiry.
BOOST_AUTO_TEST_CASE(a_keepalive_at_the_expiry_is_said) {
    Evidence ev = expired_token(kGrant + 5'000);
    ev.keepalives.last_ok_wall_ms = kGrant + 4'000;
    ev.life.last_keepalive_wall_ms.reset();
    const Explanation x = classify(ev);
    BOOST_TEST(to_string(x.cause) == "undetermined");
    BOOST_TEST_REQUIRE(!x.missing.empty());
    BOOST_TEST(x.missing.front().find("no member saw one") == std::string::npos);
    BOOST_TEST(x.missing.front().find("last keepalive arrival before the expiry") !=
               std::string::npos);
}

BOOST_AUTO_TEST_CASE(lease_too_short_is_a_piece_of_work_longer_than_the_lease) {
    Evidence ev = with_log({line("keepalive", 100, 105, "ok"),
                            line("work", 200, 200 + kLease + 1, "", kLease + 1),
                            line("write", 5000, 5010, "stale")});
    const Explanation x = classify(ev);
    BOOST_TEST(to_string(x.cause) == "lease_too_short");
    BOOST_TEST(
        x.evidence.front().find("no keepalive sent during it, after 1 successful keepalive") !=
        std::string::npos);
    ev.client_log[1] = line("work", 200, 200 + kLease, "", kLease);
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
    // A keepalive sent during the piece: the piece did not stop the renewals.
    ev.client_log[1] = line("work", 200, 200 + kLease + 1, "", kLease + 1);
    ev.client_log.insert(ev.client_log.begin() + 2,
                         line("keepalive", 200 + kLease, 200 + kLease + 1, "ok"));
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
}

BOOST_AUTO_TEST_CASE(a_local_deadline_passed_before_the_write_is_a_failed_renewal) {
    Evidence ev = with_log({line("deadline", 950, 5000, ""), line("work", 200, 4800, "", 1500),
                            line("write", 5000, 5010, "stale")});
    BOOST_TEST(to_string(cause_of(ev)) ==
               "continued_after_failed_renewal");        // before rule 6's long piece
    ev.client_log[0] = line("deadline", 950, 5001, "");  // noticed after the write
    BOOST_TEST(to_string(cause_of(ev)) == "lease_too_short");
    // A stall explains why the deadline passed: rule 4 first.
    ev.client_log = {line("stall", 300, 2000, ""), line("deadline", 950, 2000, ""),
                     line("write", 5000, 5010, "stale")};
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
}

BOOST_AUTO_TEST_CASE(a_grant_that_arrived_after_a_whole_lease_is_said) {
    Evidence ev =
        with_log({line("acquire", 100, 100 + kLease, "ok"), line("write", 4000, 4010, "stale")});
    const Explanation x = classify(ev);
    BOOST_TEST(to_string(x.cause) == "paused_holder");  // rule 7: what the coordinator saw
    BOOST_TEST(x.evidence.at(x.evidence.size() - 2).find("the grant arrived 3000 ms after") !=
               std::string::npos);
    ev.client_log[0] = line("acquire", 100, 100 + kLease - 1, "ok");
    for (const std::string& e : classify(ev).evidence)
        BOOST_TEST(e.find("grant arrived") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_rules_go_in_order) {
    Evidence ev =
        with_log({line("keepalive", 100, 105, "ok"), line("keepalive", 3300, 0, "error"),
                  line("stall", 3000, 3200, ""), line("keepalive", 3250, 3260, "not_held"),
                  line("write", 5000, 5010, "stale")});
    BOOST_TEST(to_string(cause_of(ev)) == "continued_after_failed_renewal");
    ev.client_log.erase(ev.client_log.begin() + 3);
    BOOST_TEST(to_string(cause_of(ev)) == "partitioned_holder");
    ev.client_log.erase(ev.client_log.begin() + 1);
    BOOST_TEST(to_string(cause_of(ev)) == "paused_holder");
}

BOOST_AUTO_TEST_CASE(client_log_lines_parse_as_fence_worker_writes_them) {
    ClientEvent e;
    BOOST_TEST(parse_client_log_line("w-a,keepalive,report:7,41,100,0,,error,0", e));
    BOOST_TEST(e.event == "keepalive");
    BOOST_TEST(e.token == 41u);
    BOOST_TEST(e.ack_ns == 0);
    BOOST_TEST(parse_client_log_line("\"w,a\",write,\"k,\"\"q\",41,100,200,guard,stale,0", e));
    BOOST_TEST(e.outcome == "stale");
    BOOST_TEST(!parse_client_log_line("w-a,write,k,41,100,200,guard,stale", e));      // 8 fields
    BOOST_TEST(!parse_client_log_line("w-a,write,k,41,100,200,guard,stale,0,1", e));  // 10
    BOOST_TEST(!parse_client_log_line("w-a,write,k,x41,100,200,guard,stale,0", e));
    BOOST_TEST(!parse_client_log_line("w-a,write,\"k,41,100,200,guard,stale,0", e));  // torn
}

BOOST_AUTO_TEST_CASE(client_log_keeps_the_tokens_asked_for) {
    const std::string path = "explain_cause_test.csv";
    {
        std::ofstream out(path);
        out << "w,acquire,k,41,1,2,guard,ok,0\nw,acquire,k,43,1,2,guard,ok,0\ntorn,li\nw,write,k,"
               "41,3,4,guard,stale,0\n";
    }
    const ClientLog log = read_client_log(path, {41});
    BOOST_TEST(log.events.size() == 2u);
    BOOST_TEST(log.bad_lines == 1u);
    BOOST_TEST(!log.truncated);
    {
        std::ofstream out(path);
        out << std::string(kMaxClientLogLineBytes + 10, 'x')
            << "\nw,write,k,41,3,4,guard,stale,0";  // no last newline
    }
    const ClientLog tail = read_client_log(path, {41});
    BOOST_TEST(tail.bad_lines == 1u);  // the long line, skipped to its end
    BOOST_TEST_REQUIRE(tail.events.size() == 1u);
    BOOST_TEST(tail.events[0].outcome == "stale");
    std::remove(path.c_str());
    BOOST_TEST(read_client_log(path, {41}).error.find(path) != std::string::npos);
}

// explain keeps the member answer that tells most: ended over held, the later
// end, the next token known.
BOOST_AUTO_TEST_CASE(the_most_advanced_member_answer_wins) {
    pgfence::client::TokenLife held, ended, later, with_next;
    held.ended.how = "held";
    ended.ended.how = "expired";
    ended.ended.index = 10;
    later.ended.how = "expired";
    later.ended.index = 12;
    with_next = ended;
    with_next.next_token = 42;
    using pgfence::cli::more_advanced;
    BOOST_TEST(more_advanced(ended, held));
    BOOST_TEST(!more_advanced(held, ended));
    BOOST_TEST(more_advanced(later, ended));
    BOOST_TEST(!more_advanced(ended, later));
    BOOST_TEST(more_advanced(with_next, ended));
    BOOST_TEST(!more_advanced(ended, with_next));
    BOOST_TEST(!more_advanced(ended, ended));
}
