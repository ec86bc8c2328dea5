// fencectl watch against scripted fake members: the lines it prints (each
// event once, as the member sent it, start/progress only with --progress)
// and its exit codes (13 compacted, with the oldest revision named).
#define BOOST_TEST_MODULE client_watch_cli
#include <boost/test/unit_test.hpp>

#include <sstream>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/watch_command.h"
#include "client/exit_codes.h"
#include "fake_server.h"

using namespace pgfence;
using test::FakeRequest;
using test::FakeServer;

namespace {

const std::string kStart = R"({"type":"start","revision":4,"member":1})";
const std::string kProgress = R"({"type":"progress","revision":4})";
const std::string kGranted = R"({"type":"granted","revision":5,"key":"a","token":5,"owner":"","lease_ms":900})";
const std::string kReleased = R"({"type":"released","revision":6,"key":"a","token":5})";

struct Printed {
    int code = -1;
    std::string out, err;
};

// fencectl WORDS... against `server`; the watch ends when the server has
// nothing more to send and --timeout passes.
Printed fencectl(const FakeServer& server, std::vector<std::string> words) {
    words.push_back("--endpoints=" + server.endpoint().to_string());
    words.push_back("--timeout=300ms");
    const cli::ArgsParse p = cli::parse_args(words);
    BOOST_TEST_REQUIRE(p.error == "");
    client::Options options;
    std::string error;
    BOOST_TEST_REQUIRE(cli::client_options(p.args, options, error), error);
    client::Client client(options);
    std::ostringstream out, err;
    Printed r;
    r.code = cli::run_watch_command(p.args, client, out, err);
    r.out = out.str();
    r.err = err.str();
    return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(prints_each_event_once_as_sent_and_meta_lines_only_with_progress) {
    std::atomic<int> served = 0;
    FakeServer s([&](const FakeRequest&) {
        // The first stream dies after the grant; the second repeats it; then
        // streams that end at once, empty, until the watch gives up.
        const int n = ++served;
        if (n == 1) return test::stream({kStart + "\n" + kProgress + "\n" + kGranted + "\n"});
        if (n == 2) return test::stream({kStart + "\n" + kGranted + "\n" + kReleased + "\n"});
        return test::stream({});
    });
    const Printed plain = fencectl(s, {"watch", "a", "--rev", "5"});
    BOOST_TEST(plain.out == kGranted + "\n" + kReleased + "\n");
    BOOST_TEST(plain.code == kExitUnavailable, plain.err);  // no member serves once the script ran out
    BOOST_TEST(plain.err.find("resuming from revision 5") != std::string::npos, plain.err);
    served = 0;
    const Printed meta = fencectl(s, {"watch", "a", "--rev", "5", "--progress"});
    BOOST_TEST(meta.out == kStart + "\n" + kProgress + "\n" + kGranted + "\n" + kStart + "\n" + kReleased + "\n");
}

BOOST_AUTO_TEST_CASE(compacted_exits_13_naming_the_oldest_revision) {
    FakeServer s([&](const FakeRequest&) {
        return test::reply(410, R"({"error":"compacted","message":"revision 2 is compacted","oldest_revision":40})");
    });
    const Printed r = fencectl(s, {"watch", "--prefix", "", "--rev", "2"});
    BOOST_TEST(r.code == kExitCompacted);
    BOOST_TEST(r.code == 13);
    BOOST_TEST(r.out == "");
    BOOST_TEST(r.err.find("the oldest revision still kept is 40") != std::string::npos, r.err);
    BOOST_TEST(s.requests().at(0).target == "/v1/watch?prefix=&rev=2&progress=1");
}
