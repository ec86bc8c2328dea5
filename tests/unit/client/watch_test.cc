// Client::watch against scripted fake members that stream chunked ndjson:
// events in order, lines split across chunks, resume on another member after
// a break (inside a revision, after a torn last line, after progress, after
// an error line, after silence) with no gap and no duplicate, 410 compacted,
// and the resume rule (WatchCursor) on its own.
#define BOOST_TEST_MODULE client_watch
#include <boost/test/unit_test.hpp>

#include "client/client.h"
#include "client/exit_codes.h"
#include "fake_server.h"

using namespace pgfence;
using namespace std::chrono_literals;
using client::WatchAction;
using client::WatchEvent;
using client::WatchEventType;
using client::WatchRequest;
using test::FakeReply;
using test::FakeRequest;
using test::FakeServer;
using test::reply;
using test::stream;

namespace {

client::Options options_for(std::vector<client::Endpoint> endpoints) {
    client::Options o;
    o.endpoints = std::move(endpoints);
    o.timeout = 3s;
    o.attempt_timeout = 1s;
    o.backoff_initial = 10ms;
    o.backoff_max = 100ms;
    return o;
}

std::string start(std::uint64_t applied, std::uint64_t member = 1) {
    return R"({"type":"start","revision":)" + std::to_string(applied) + R"(,"member":)" + std::to_string(member) + "}\n";
}
std::string granted(std::uint64_t rev, const std::string& key, std::uint64_t token) {
    return R"({"type":"granted","revision":)" + std::to_string(rev) + R"(,"key":")" + key + R"(","token":)" +
           std::to_string(token) + R"(,"owner":"w","lease_ms":5000})" + "\n";
}
std::string released(std::uint64_t rev, const std::string& key, std::uint64_t token) {
    return R"({"type":"released","revision":)" + std::to_string(rev) + R"(,"key":")" + key + R"(","token":)" +
           std::to_string(token) + "}\n";
}
std::string expired(std::uint64_t rev, const std::string& key, std::uint64_t token) {
    return R"({"type":"expired","revision":)" + std::to_string(rev) + R"(,"key":")" + key + R"(","token":)" +
           std::to_string(token) + R"(,"existed":true})" + "\n";
}
std::string progress(std::uint64_t rev) { return R"({"type":"progress","revision":)" + std::to_string(rev) + "}\n"; }

// "granted@5:a/5" for every event delivered, in order.
std::string brief(const WatchEvent& e) {
    std::string s = std::string(client::to_string(e.type)) + "@" + std::to_string(e.revision);
    if (!e.key.empty()) s += ":" + e.key + "/" + std::to_string(e.token);
    return s;
}

// Watches until `count` events were delivered (then stops); the events seen.
struct Run {
    std::vector<std::string> seen;
    std::vector<std::string> resumes;  // on_resume's "why|rev"
    client::Result<client::WatchEnd> result = client::Error{};
};

Run watch(client::Client& c, WatchRequest request, std::size_t count) {
    Run run;
    request.on_resume = [&](const std::string& why, std::uint64_t rev) {
        run.resumes.push_back(why + "|" + std::to_string(rev));
    };
    run.result = c.watch(request, [&](const WatchEvent& e) {
        run.seen.push_back(brief(e));
        return run.seen.size() >= count ? WatchAction::kStop : WatchAction::kContinue;
    });
    return run;
}

using Lines = std::vector<std::string>;

}  // namespace

BOOST_AUTO_TEST_CASE(delivers_events_in_order_across_chunk_boundaries) {
    const std::string g5 = granted(5, "a", 5);
    FakeServer s([&](const FakeRequest&) {
        // One line in two chunks, two lines in one chunk.
        return stream({start(4) + g5.substr(0, 10), g5.substr(10), released(6, "a", 5) + granted(7, "a", 7)}, true);
    });
    client::Client c(options_for({s.endpoint()}));
    const Run run = watch(c, WatchRequest::of_key("a", 5), 3);
    BOOST_TEST_REQUIRE(run.result.ok(), run.result.message());
    BOOST_TEST(run.seen == (Lines{"granted@5:a/5", "released@6:a/5", "granted@7:a/7"}), boost::test_tools::per_element());
    BOOST_TEST(run.result.value().last_revision == 7u);
    BOOST_TEST_REQUIRE(s.requests().size() == 1u);
    BOOST_TEST(s.requests()[0].target == "/v1/watch?key=a&rev=5&progress=1");
}

BOOST_AUTO_TEST_CASE(start_and_progress_lines_only_when_asked_and_the_line_as_sent) {
    FakeServer s([&](const FakeRequest&) { return stream({start(4, 2) + progress(4) + granted(5, "p/x", 5)}, true); });
    client::Client c(options_for({s.endpoint()}));
    WatchRequest req = WatchRequest::of_prefix("p/");
    req.progress = true;
    std::vector<WatchEvent> events;
    const auto r = c.watch(req, [&](const WatchEvent& e) {
        events.push_back(e);
        return events.size() == 3 ? WatchAction::kStop : WatchAction::kContinue;
    });
    BOOST_TEST_REQUIRE(r.ok(), r.message());
    BOOST_TEST_REQUIRE(events.size() == 3u);
    BOOST_TEST((events[0].type == WatchEventType::kStart && events[0].member == 2u && events[0].revision == 4u));
    BOOST_TEST((events[1].type == WatchEventType::kProgress && events[1].revision == 4u));
    BOOST_TEST(events[2].owner == "w");
    BOOST_TEST(events[2].lease_ms == 5000u);
    BOOST_TEST(events[2].line + "\n" == granted(5, "p/x", 5));
    BOOST_TEST(s.requests()[0].target == "/v1/watch?prefix=p%2F&progress=1");
}

BOOST_AUTO_TEST_CASE(resumes_inside_a_revision_on_another_member_without_gap_or_duplicate) {
    // Revision 7 made two events (one entry expired two keys); a dies between them.
    FakeServer a([&](const FakeRequest&) { return stream({start(6) + granted(5, "k1", 5) + expired(7, "k1", 5)}); });
    FakeServer b([&](const FakeRequest&) {
        return stream({start(9) + expired(7, "k1", 5) + expired(7, "k2", 3) + granted(8, "k2", 8)}, true);
    });
    client::Client c(options_for({a.endpoint(), b.endpoint()}));
    const Run run = watch(c, WatchRequest::of_prefix("k", 1), 4);
    BOOST_TEST_REQUIRE(run.result.ok(), run.result.message());
    BOOST_TEST(run.seen == (Lines{"granted@5:k1/5", "expired@7:k1/5", "expired@7:k2/3", "granted@8:k2/8"}),
               boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(b.requests().size() == 1u);
    BOOST_TEST(b.requests()[0].target == "/v1/watch?prefix=k&rev=7&progress=1");
    BOOST_TEST_REQUIRE(run.resumes.size() == 1u);
    BOOST_TEST(run.resumes[0].ends_with("|7"), run.resumes[0]);
}

BOOST_AUTO_TEST_CASE(a_torn_last_line_is_dropped_and_comes_whole_after_the_resume) {
    const std::string g6 = granted(6, "a", 6);
    FakeServer a([&](const FakeRequest&) { return stream({start(5) + granted(5, "a", 5) + g6.substr(0, 25)}); });
    FakeServer b([&](const FakeRequest&) { return stream({start(6) + granted(5, "a", 5) + g6 + released(9, "a", 6)}, true); });
    client::Client c(options_for({a.endpoint(), b.endpoint()}));
    const Run run = watch(c, WatchRequest::of_key("a", 1), 3);
    BOOST_TEST_REQUIRE(run.result.ok(), run.result.message());
    BOOST_TEST(run.seen == (Lines{"granted@5:a/5", "granted@6:a/6", "released@9:a/6"}), boost::test_tools::per_element());
    BOOST_TEST(b.requests().at(0).target == "/v1/watch?key=a&rev=5&progress=1");
    BOOST_TEST_REQUIRE(run.resumes.size() == 1u);
    BOOST_TEST(run.resumes[0].find("torn last line (25 bytes) was dropped") != std::string::npos, run.resumes[0]);
}

BOOST_AUTO_TEST_CASE(progress_moves_the_resume_point_past_quiet_revisions) {
    FakeServer a([&](const FakeRequest&) { return stream({start(3) + granted(4, "a", 4) + progress(20)}); });
    FakeServer b([&](const FakeRequest&) { return stream({start(21) + granted(22, "a", 22)}, true); });
    client::Client c(options_for({a.endpoint(), b.endpoint()}));
    const Run run = watch(c, WatchRequest::of_key("a", 1), 2);
    BOOST_TEST_REQUIRE(run.result.ok(), run.result.message());
    BOOST_TEST(run.seen == (Lines{"granted@4:a/4", "granted@22:a/22"}), boost::test_tools::per_element());
    BOOST_TEST(b.requests().at(0).target == "/v1/watch?key=a&rev=21&progress=1");
}

BOOST_AUTO_TEST_CASE(a_watch_from_now_resumes_after_the_first_start) {
    FakeServer a([&](const FakeRequest&) { return stream({start(10)}); });
    FakeServer b([&](const FakeRequest&) { return stream({start(12) + granted(11, "a", 11)}, true); });
    client::Client c(options_for({a.endpoint(), b.endpoint()}));
    const Run run = watch(c, WatchRequest::of_key("a"), 1);
    BOOST_TEST_REQUIRE(run.result.ok(), run.result.message());
    BOOST_TEST(a.requests().at(0).target == "/v1/watch?key=a&progress=1");
    BOOST_TEST(b.requests().at(0).target == "/v1/watch?key=a&rev=11&progress=1");
    BOOST_TEST(run.seen == Lines{"granted@11:a/11"});
}

BOOST_AUTO_TEST_CASE(an_error_line_ends_the_stream_and_the_watch_resumes) {
    // The member says why and keeps the connection open: the client closes it.
    FakeServer a([&](const FakeRequest&) {
        return stream({start(5) + granted(5, "a", 5) +
                       R"({"type":"error","error":"watcher_too_slow","message":"buffer full"})" + "\n"},
                      true);
    });
    FakeServer b([&](const FakeRequest&) { return stream({start(6) + granted(5, "a", 5) + released(6, "a", 5)}, true); });
    client::Client c(options_for({a.endpoint(), b.endpoint()}));
    const Run run = watch(c, WatchRequest::of_key("a", 5), 2);
    BOOST_TEST_REQUIRE(run.result.ok(), run.result.message());
    BOOST_TEST(run.seen == (Lines{"granted@5:a/5", "released@6:a/5"}), boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(run.resumes.size() == 1u);
    BOOST_TEST(run.resumes[0].find("watcher_too_slow (buffer full)") != std::string::npos, run.resumes[0]);
}

BOOST_AUTO_TEST_CASE(a_silent_member_is_left_after_the_idle_timeout) {
    FakeServer a([&](const FakeRequest&) { return stream({start(5) + granted(5, "a", 5)}, true); });
    FakeServer b([&](const FakeRequest&) { return stream({start(6) + granted(6, "a", 6)}, true); });
    client::Client c(options_for({a.endpoint(), b.endpoint()}));
    WatchRequest req = WatchRequest::of_key("a", 5);
    req.idle_timeout = 300ms;
    const auto began = client::Clock::now();
    const Run run = watch(c, req, 2);
    BOOST_TEST_REQUIRE(run.result.ok(), run.result.message());
    BOOST_TEST(run.seen == (Lines{"granted@5:a/5", "granted@6:a/6"}), boost::test_tools::per_element());
    BOOST_TEST((client::Clock::now() - began >= 300ms));
    BOOST_TEST_REQUIRE(run.resumes.size() == 1u);
    BOOST_TEST(run.resumes[0].find("sent nothing for 300ms") != std::string::npos, run.resumes[0]);
}

BOOST_AUTO_TEST_CASE(compacted_is_an_error_carrying_the_oldest_revision) {
    FakeServer s([&](const FakeRequest&) {
        return reply(410, R"({"error":"compacted","message":"revision 3 is compacted","oldest_revision":42})");
    });
    client::Client c(options_for({s.endpoint()}));
    const Run run = watch(c, WatchRequest::of_key("a", 3), 1);
    BOOST_TEST_REQUIRE(!run.result.ok());
    BOOST_TEST((run.result.error().kind == client::ErrorKind::kCompacted));
    BOOST_TEST(run.result.error().oldest_revision == 42u);
    BOOST_TEST(run.result.error().message.find("revision 3 is compacted") != std::string::npos);
    BOOST_TEST(client::exit_code_of(run.result.error().kind) == kExitCompacted);
}

BOOST_AUTO_TEST_CASE(a_410_moves_on_to_a_member_that_still_keeps_the_revision) {
    // a restarted (its history starts at 40); b did not.
    FakeServer a([&](const FakeRequest&) {
        return reply(410, R"({"error":"compacted","message":"revision 3 is compacted","oldest_revision":40})");
    });
    FakeServer b([&](const FakeRequest&) { return stream({start(9) + granted(3, "a", 3)}, true); });
    client::Client c(options_for({a.endpoint(), b.endpoint()}));
    const Run run = watch(c, WatchRequest::of_key("a", 3), 1);
    BOOST_TEST_REQUIRE(run.result.ok(), run.result.message());
    BOOST_TEST(run.seen == Lines{"granted@3:a/3"});
    // Every member compacted: the error names the lowest revision any keeps.
    FakeServer c2([&](const FakeRequest&) {
        return reply(410, R"({"error":"compacted","message":"revision 3 is compacted","oldest_revision":20})");
    });
    client::Client both(options_for({a.endpoint(), c2.endpoint()}));
    const Run gone = watch(both, WatchRequest::of_key("a", 3), 1);
    BOOST_TEST_REQUIRE(!gone.result.ok());
    BOOST_TEST((gone.result.error().kind == client::ErrorKind::kCompacted));
    BOOST_TEST(gone.result.error().oldest_revision == 20u);
}

BOOST_AUTO_TEST_CASE(a_revision_going_down_in_one_stream_is_a_protocol_error) {
    FakeServer s([&](const FakeRequest&) { return stream({start(9) + granted(8, "a", 8) + released(7, "a", 8)}, true); });
    client::Client c(options_for({s.endpoint()}));
    const Run run = watch(c, WatchRequest::of_key("a", 1), 5);
    BOOST_TEST_REQUIRE(!run.result.ok());
    BOOST_TEST((run.result.error().kind == client::ErrorKind::kProtocol));
    BOOST_TEST(run.seen == Lines{"granted@8:a/8"});
}

BOOST_AUTO_TEST_CASE(gives_up_when_no_member_serves_a_line_for_the_timeout) {
    // Every member opens the stream and ends it at once, with nothing in it.
    FakeServer s([&](const FakeRequest&) { return stream({}); });
    client::Options o = options_for({s.endpoint()});
    o.timeout = 500ms;
    client::Client c(o);
    const auto began = client::Clock::now();
    const Run run = watch(c, WatchRequest::of_key("a", 1), 1);
    BOOST_TEST_REQUIRE(!run.result.ok());
    BOOST_TEST((run.result.error().kind == client::ErrorKind::kUnavailable), run.result.message());
    BOOST_TEST((client::Clock::now() - began < 3s));
    BOOST_TEST(s.requests().size() < 20u);  // backoff between streams that brought nothing
}

BOOST_AUTO_TEST_CASE(cursor_skips_only_what_was_delivered_at_the_resume_revision) {
    client::WatchCursor cur(1);
    auto ev = [](WatchEventType t, std::uint64_t rev, std::string key, std::uint64_t token) {
        WatchEvent e;
        e.type = t;
        e.revision = rev;
        e.key = std::move(key);
        e.token = token;
        return e;
    };
    using V = client::WatchCursor::Verdict;
    cur.open();
    BOOST_TEST((cur.accept(ev(WatchEventType::kExpired, 7, "x", 1)) == V::kDeliver));
    BOOST_TEST(cur.resume_revision() == 7u);
    cur.open();
    BOOST_TEST((cur.accept(ev(WatchEventType::kExpired, 7, "x", 1)) == V::kSkip));
    BOOST_TEST((cur.accept(ev(WatchEventType::kExpired, 7, "y", 1)) == V::kDeliver));
    BOOST_TEST((cur.accept(ev(WatchEventType::kGranted, 7, "x", 1)) == V::kDeliver));  // another type: new
    BOOST_TEST((cur.accept(ev(WatchEventType::kGranted, 6, "z", 6)) == V::kOutOfOrder));
    cur.open();
    BOOST_TEST((cur.accept(ev(WatchEventType::kGranted, 6, "z", 6)) == V::kSkip));  // below the resume point
    BOOST_TEST((cur.accept(ev(WatchEventType::kProgress, 30, "", 0)) == V::kDeliver));
    BOOST_TEST(cur.resume_revision() == 31u);
    BOOST_TEST(cur.last_revision() == 7u);
}

BOOST_AUTO_TEST_CASE(parse_refuses_lines_that_are_not_the_wire_and_ignores_unknown_types) {
    using K = client::WatchLine::Kind;
    BOOST_TEST((client::parse_watch_line("not json").kind == K::kBad));
    BOOST_TEST((client::parse_watch_line(R"({"type":"granted","revision":5,"token":1})").kind == K::kBad));
    BOOST_TEST((client::parse_watch_line(R"({"type":"granted","revision":0,"key":"a","token":1})").kind == K::kBad));
    BOOST_TEST((client::parse_watch_line(R"({"type":"elected","revision":5})").kind == K::kIgnore));
    const auto e = client::parse_watch_line(R"({"type":"error","error":"shutting_down"})");
    BOOST_TEST((e.kind == K::kError));
    BOOST_TEST(e.error == "shutting_down");
}
