// log_event's line format: timestamp, level, event, then key=value fields,
// values quoted and escaped when they must be; debug lines dropped at info.
#define BOOST_TEST_MODULE log_unit_tests
#include "log/log.h"

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <string>

namespace pgfence::log {
namespace {

// Runs `fn` with stderr going to a temporary file; returns what was written.
template <typename Fn>
std::string capture_stderr(Fn fn) {
    log_flush();  // nothing logged before this test lands in its capture
    std::fflush(stderr);
    char path[] = "/tmp/pgfence-log-test-XXXXXX";
    const int fd = ::mkstemp(path);
    BOOST_REQUIRE(fd >= 0);
    const int saved = ::dup(2);
    ::dup2(fd, 2);
    fn();
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::string out;
    char buf[4096];
    ::lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    ::unlink(path);
    return out;
}

// "ts=YYYY-MM-DDTHH:MM:SS.mmmZ" followed by exactly `rest`.
bool has_timestamp_then(std::string_view line, std::string_view rest) {
    constexpr std::string_view kShape = "ts=dddd-dd-ddTdd:dd:dd.dddZ";
    if (line.size() != kShape.size() + rest.size()) return false;
    for (std::size_t i = 0; i < kShape.size(); ++i) {
        const bool ok =
            kShape[i] == 'd' ? (line[i] >= '0' && line[i] <= '9') : line[i] == kShape[i];
        if (!ok) return false;
    }
    return line.substr(kShape.size()) == rest;
}

BOOST_AUTO_TEST_SUITE(log)

BOOST_AUTO_TEST_CASE(lines_carry_time_level_event_and_fields_quoted_when_needed) {
    set_log_level(LogLevel::kInfo);
    const std::string out = capture_stderr([] {
        log_event(LogLevel::kInfo, "grant",
                  {{"key", "report:7"}, {"token", log_value(41)}, {"owner", "a b"}});
        log_event(LogLevel::kDebug, "hidden", {{"key", "x"}});
        log_event(LogLevel::kInfo, "odd",
                  {{"empty", ""}, {"quote", "say \"hi\"\\"}, {"nl", "a\nb"}, {"eq", "k=v"}});
        log_flush();
    });
    const std::size_t split = out.find('\n') + 1;
    BOOST_TEST(has_timestamp_then(out.substr(0, split),
                                  " level=info event=grant key=report:7 token=41 owner=\"a b\"\n"),
               out);
    BOOST_TEST(has_timestamp_then(out.substr(split),
                                  " level=info event=odd empty=\"\" quote=\"say \\\"hi\\\"\\\\\" "
                                  "nl=\"a\\nb\" eq=\"k=v\"\n"),
               out);
}

BOOST_AUTO_TEST_CASE(a_limiter_lets_n_lines_a_second_through_and_reports_the_rest) {
    set_log_level(LogLevel::kInfo);
    constexpr std::int64_t kSecond = 1'000'000'000;
    const std::string out = capture_stderr([] {
        Limiter limiter(3);
        for (int i = 0; i < 10; ++i) limiter.log_at(5 * kSecond + i, LogLevel::kInfo, "refused", {{"n", log_value(i)}});
        limiter.log_at(6 * kSecond - 1, LogLevel::kInfo, "refused", {{"n", "late"}});  // the same window
        limiter.log_at(6 * kSecond + 9, LogLevel::kInfo, "refused", {{"n", "next"}});   // a new one
        limiter.log_at(6 * kSecond + 10, LogLevel::kInfo, "refused", {{"n", "after"}});
        limiter.log_at(6 * kSecond + 11, LogLevel::kDebug, "hidden", {});  // below the level: not counted
        log_flush();
    });
    BOOST_TEST(out.find(" n=0\n") != std::string::npos, out);
    BOOST_TEST(out.find(" n=2\n") != std::string::npos, out);
    BOOST_TEST(out.find(" n=3") == std::string::npos, out);
    BOOST_TEST(out.find("n=late") == std::string::npos, out);
    BOOST_TEST(out.find("n=next suppressed_before=8\n") != std::string::npos, out);
    BOOST_TEST(out.find(" n=after\n") != std::string::npos, out);
    BOOST_TEST(out.find("hidden") == std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(a_warning_is_written_at_once_with_the_lines_before_it) {
    set_log_level(LogLevel::kInfo);
    const std::string out = capture_stderr([] {  // no log_flush(): the warning writes
        log_event(LogLevel::kInfo, "first", {});
        log_event(LogLevel::kWarn, "trouble", {{"what", "disk"}});
    });
    BOOST_TEST(out.find("event=first") != std::string::npos);
    BOOST_TEST(out.find("event=trouble what=disk") != std::string::npos);
    BOOST_TEST(out.find("event=first") < out.find("event=trouble"));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::log
