// Write numbers for pg_fence's sequenced mode: WriteSequence and Lease's
// shared sequence (client/sequence.h), and the sequence file `fencectl run`
// shares with `fencectl seq` (cli/seq_file.h), drawn from threads and from
// separate processes.
#define BOOST_TEST_MODULE client_sequence
#include "client/sequence.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "client/exit_codes.h"
#include "cli/seq_file.h"
#include "client/client.h"

using namespace pgfence;

namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void overwrite(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
}

// A sequence file of token 77, removed at the end of the test.
struct SeqFixture {
    cli::SeqFile file;
    SeqFixture() { BOOST_TEST_REQUIRE(file.create(77).empty()); }
};

// The line a file of token 77 holds after `last`, padded as the module writes it.
std::string line(std::int64_t last) {
    std::string s = "77 " + std::to_string(last);
    s.resize(cli::kSeqLineSize - 1, ' ');
    return s + "\n";
}

// Runs `fencectl seq` (seq_command) with the given environment.
struct SeqRun {
    int code = -1;
    std::string out, err;
};
SeqRun seq_command_with(const char* seq_file, const char* token) {
    auto set = [](const char* name, const char* value) {
        if (value == nullptr) {
            ::unsetenv(name);
        } else {
            ::setenv(name, value, 1);
        }
    };
    set(cli::kSeqFileEnv, seq_file);
    set("FENCE_TOKEN", token);
    std::ostringstream out, err;
    SeqRun r;
    r.code = cli::seq_command(out, err);
    r.out = out.str();
    r.err = err.str();
    ::unsetenv(cli::kSeqFileEnv);
    ::unsetenv("FENCE_TOKEN");
    return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(numbers_start_at_one_and_grow_by_one) {
    client::WriteSequence s;
    BOOST_TEST(s.last() == 0);
    for (std::int64_t want = 1; want <= 5; ++want) BOOST_TEST(s.next().value() == want);
    BOOST_TEST(s.last() == 5);
    client::WriteSequence resumed(41);  // an owner that got its token back continues above 41
    BOOST_TEST(resumed.next().value() == 42);
}

BOOST_AUTO_TEST_CASE(the_last_bigint_is_handed_out_once_then_nothing_wraps) {
    client::WriteSequence s(client::kMaxSeq - 1);
    BOOST_TEST(s.next().value() == client::kMaxSeq);
    BOOST_TEST(!s.next().has_value());
    BOOST_TEST(!s.next().has_value());
    BOOST_TEST(s.last() == client::kMaxSeq);
    client::WriteSequence negative(-1);
    BOOST_TEST(!negative.next().has_value());
    BOOST_TEST(!client::seq_after(-5).has_value());
}

BOOST_AUTO_TEST_CASE(threads_get_every_number_once) {
    client::WriteSequence s;
    constexpr int kThreads = 8, kEach = 5000;
    std::vector<std::vector<std::int64_t>> got(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&s, &mine = got[t]] {
            for (int i = 0; i < kEach; ++i) mine.push_back(s.next().value());
        });
    }
    for (auto& t : threads) t.join();
    std::set<std::int64_t> all;
    for (const auto& mine : got) {
        BOOST_TEST(std::is_sorted(mine.begin(), mine.end()));  // each thread sees its numbers grow
        all.insert(mine.begin(), mine.end());
    }
    BOOST_TEST(all.size() == static_cast<std::size_t>(kThreads * kEach));
    BOOST_TEST(*all.begin() == 1);
    BOOST_TEST(*all.rbegin() == kThreads * kEach);
}

BOOST_AUTO_TEST_CASE(copies_of_a_lease_share_its_sequence_and_a_new_lease_starts_over) {
    client::Lease lease;
    lease.token = 9;
    const client::Lease copy = lease;
    BOOST_TEST(lease.next_seq().value() == 1);
    BOOST_TEST(copy.next_seq().value() == 2);
    BOOST_TEST(lease.next_seq().value() == 3);
    client::Lease next;
    BOOST_TEST(next.next_seq().value() == 1);
}

BOOST_AUTO_TEST_CASE(the_file_hands_out_one_two_three_and_stores_before_it_answers) {
    SeqFixture f;
    BOOST_TEST(read_all(f.file.path()) == line(0));
    BOOST_TEST(std::filesystem::path(f.file.path()).is_absolute());
    BOOST_TEST(((std::filesystem::status(f.file.dir()).permissions() &
                 std::filesystem::perms::all) == std::filesystem::perms::owner_all));
    for (std::int64_t want = 1; want <= 3; ++want) {
        const cli::SeqDraw d = cli::draw_seq(f.file.path(), 77);
        BOOST_TEST_REQUIRE(d.seq.has_value(), d.error);
        BOOST_TEST(*d.seq == want);
        BOOST_TEST(read_all(f.file.path()) == line(want));
    }
    BOOST_TEST(cli::draw_seq(f.file.path(), std::nullopt).seq.value() ==
               4);  // no FENCE_TOKEN to check
}

BOOST_AUTO_TEST_CASE(processes_drawing_at_once_get_every_number_once) {
    SeqFixture f;
    constexpr int kProcs = 6, kEach = 50;
    const std::string out_dir = f.file.dir();  // each child writes its numbers next to the file
    std::vector<pid_t> pids;
    for (int p = 0; p < kProcs; ++p) {
        const pid_t pid = ::fork();
        BOOST_TEST_REQUIRE(pid >= 0);
        if (pid == 0) {
            std::ofstream out(out_dir + "/draws." + std::to_string(p));
            for (int i = 0; i < kEach; ++i) {
                const cli::SeqDraw d = cli::draw_seq(f.file.path(), 77);
                if (!d.seq) ::_exit(3);
                out << *d.seq << '\n';
            }
            out.close();
            ::_exit(0);
        }
        pids.push_back(pid);
    }
    for (const pid_t pid : pids) {
        int status = 0;
        BOOST_TEST_REQUIRE(::waitpid(pid, &status, 0) == pid);
        BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    std::set<std::int64_t> all;
    std::size_t count = 0;
    for (int p = 0; p < kProcs; ++p) {
        const std::string path = out_dir + "/draws." + std::to_string(p);
        std::ifstream in(path);
        std::int64_t n = 0, prev = 0;
        while (in >> n) {
            BOOST_TEST(n > prev);  // within one process they grow
            prev = n;
            all.insert(n);
            ++count;
        }
        std::filesystem::remove(path);
    }
    BOOST_TEST(count == static_cast<std::size_t>(kProcs * kEach));
    BOOST_TEST(all.size() == count);
    BOOST_TEST(*all.rbegin() == kProcs * kEach);
}

BOOST_AUTO_TEST_CASE(a_lost_or_ended_lease_hands_out_nothing_more) {
    for (const cli::SeqEnd how : {cli::SeqEnd::kLost, cli::SeqEnd::kEnded}) {
        SeqFixture f;
        BOOST_TEST(cli::draw_seq(f.file.path(), 77).seq.value() == 1);
        BOOST_TEST(f.file.end(how).empty());
        const cli::SeqDraw d = cli::draw_seq(f.file.path(), 77);
        BOOST_TEST(!d.seq.has_value());
        BOOST_TEST(d.exit_code == kExitLostLease);
        BOOST_TEST(
            d.error.find(how == cli::SeqEnd::kLost ? "is lost" : "has ended") != std::string::npos,
            d.error);
        BOOST_TEST(d.error.find("last sequence handed out: 1") != std::string::npos, d.error);
        BOOST_TEST(read_all(f.file.path()) == line(1));
    }
}

BOOST_AUTO_TEST_CASE(a_removed_file_means_the_run_has_ended) {
    std::string path;
    {
        SeqFixture f;
        path = f.file.path();
    }
    const cli::SeqDraw d = cli::draw_seq(path, 77);
    BOOST_TEST(!d.seq.has_value());
    BOOST_TEST(d.exit_code == kExitLostLease);
    BOOST_TEST(d.error.find("has ended") != std::string::npos, d.error);
}

BOOST_AUTO_TEST_CASE(marking_never_waits_for_the_lock_and_drawing_waits_a_bounded_time) {
    SeqFixture f;
    const int fd = ::open(f.file.path().c_str(), O_RDWR);
    BOOST_TEST_REQUIRE(fd >= 0);
    BOOST_TEST_REQUIRE(::flock(fd, LOCK_EX) == 0);  // as a stopped fencectl seq would hold it
    BOOST_TEST(f.file.end(cli::SeqEnd::kLost).empty());
    const auto start = std::chrono::steady_clock::now();
    const cli::SeqDraw d = cli::draw_seq(f.file.path(), 77, std::chrono::milliseconds(200));
    const auto took = std::chrono::steady_clock::now() - start;
    ::close(fd);
    BOOST_TEST(!d.seq.has_value());
    BOOST_TEST(d.exit_code == kExitOther);
    BOOST_TEST(d.error.find("not free within 200ms") != std::string::npos, d.error);
    BOOST_TEST((took >= std::chrono::milliseconds(200)));
    BOOST_TEST((took < std::chrono::seconds(5)));
}

BOOST_AUTO_TEST_CASE(another_tokens_file_is_refused) {
    SeqFixture f;
    const cli::SeqDraw d = cli::draw_seq(f.file.path(), 78);
    BOOST_TEST(!d.seq.has_value());
    BOOST_TEST(d.exit_code == kExitUsage);
    BOOST_TEST(d.error.find("belongs to token 77, but FENCE_TOKEN is 78") != std::string::npos,
               d.error);
    BOOST_TEST(read_all(f.file.path()) == line(0));  // nothing drawn
}

BOOST_AUTO_TEST_CASE(an_exhausted_sequence_is_refused_not_wrapped) {
    SeqFixture f;
    overwrite(f.file.path(), line(client::kMaxSeq - 1));
    BOOST_TEST(cli::draw_seq(f.file.path(), 77).seq.value() == client::kMaxSeq);
    const cli::SeqDraw d = cli::draw_seq(f.file.path(), 77);
    BOOST_TEST(!d.seq.has_value());
    BOOST_TEST(d.exit_code == kExitOther);
    BOOST_TEST(d.error.find("exhausted") != std::string::npos, d.error);
    BOOST_TEST(read_all(f.file.path()) == line(client::kMaxSeq));
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_a_sequence_file_is_refused_quoting_what_it_holds) {
    SeqFixture f;
    std::string bad_state = "77 1 gone";
    bad_state.resize(cli::kSeqLineSize - 1, ' ');
    for (const std::string& bad : {std::string(), std::string("77 1\n"), line(-1), bad_state + "\n",
                                   std::string(cli::kSeqLineSize, 'x')}) {
        overwrite(f.file.path(), bad);
        const cli::SeqDraw d = cli::draw_seq(f.file.path(), 77);
        BOOST_TEST(!d.seq.has_value(), bad);
        BOOST_TEST(d.exit_code == kExitOther);
        BOOST_TEST(d.error.find(f.file.path()) != std::string::npos, d.error);
        BOOST_TEST(d.error.find("holds \"" + bad.substr(0, 4)) != std::string::npos, d.error);
    }
}

BOOST_AUTO_TEST_CASE(removing_takes_the_file_its_marks_and_its_directory) {
    std::string dir;
    {
        cli::SeqFile file;
        BOOST_TEST_REQUIRE(file.create(5).empty());
        dir = file.dir();
        BOOST_TEST(std::filesystem::exists(file.path()));
        BOOST_TEST(file.end(cli::SeqEnd::kEnded).empty());
    }
    BOOST_TEST(!std::filesystem::exists(dir));
    cli::SeqFile none;
    none.remove();  // none made: nothing to do
    BOOST_TEST(none.end(cli::SeqEnd::kLost).empty());
}

BOOST_AUTO_TEST_CASE(the_command_prints_the_number_alone_or_says_what_is_wrong) {
    SeqFixture f;
    const SeqRun ok = seq_command_with(f.file.path().c_str(), "77");
    BOOST_TEST(ok.code == kExitOk, ok.err);
    BOOST_TEST(ok.out == "1\n");
    BOOST_TEST(ok.err.empty());
    const SeqRun unset = seq_command_with(nullptr, "77");
    BOOST_TEST(unset.code == kExitUsage);
    BOOST_TEST(unset.out.empty());
    BOOST_TEST(unset.err.find("FENCE_SEQ_FILE is not set") != std::string::npos, unset.err);
    const SeqRun bad_token = seq_command_with(f.file.path().c_str(), "seven");
    BOOST_TEST(bad_token.code == kExitUsage);
    BOOST_TEST(bad_token.err.find("FENCE_TOKEN 'seven' is not a token") != std::string::npos,
               bad_token.err);
    const SeqRun other = seq_command_with(f.file.path().c_str(), "78");
    BOOST_TEST(other.code == kExitUsage);
    BOOST_TEST(f.file.end(cli::SeqEnd::kLost).empty());
    const SeqRun lost = seq_command_with(f.file.path().c_str(), nullptr);
    BOOST_TEST(lost.code == kExitLostLease);
    BOOST_TEST(lost.out.empty());
    BOOST_TEST(lost.err.find("fencectl seq: the lease of token 77 is lost") == 0u, lost.err);
}
