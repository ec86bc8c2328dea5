#include "cli/seq_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <thread>

#include "cli/args.h"
#include "client/exit_codes.h"
#include "client/sequence.h"

namespace pgfence::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kLockPoll{2};
constexpr std::size_t kQuoteMax = 40;  // bytes of a bad file quoted in the error

struct Line {
    std::uint64_t token = 0;
    std::int64_t last = 0;
};

std::string errno_text(const std::string& what, const std::string& path) {
    return what + " " + path + ": " + std::strerror(errno);
}

// The file's line, blanks padded to kSeqLineSize - 1, then '\n'.
std::string format_line(const Line& line) {
    std::string s = std::to_string(line.token) + ' ' + std::to_string(line.last);
    s.resize(kSeqLineSize - 1, ' ');
    s.push_back('\n');
    return s;
}

// `text` in quotes, at most kQuoteMax bytes, other than printable ASCII as \xNN.
std::string quoted(std::string_view text) {
    std::string q = "\"";
    for (const unsigned char c : text.substr(0, kQuoteMax)) {
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            q.push_back(static_cast<char>(c));
        } else {
            char buf[5];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            q += buf;
        }
    }
    return q + (text.size() > kQuoteMax ? "\"..." : "\"");
}

// Splits off the next blank-separated field of `rest`.
std::string_view field(std::string_view& rest) {
    const auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) return rest = {};
    rest.remove_prefix(start);
    const auto end = std::min(rest.find(' '), rest.size());
    const std::string_view f = rest.substr(0, end);
    rest.remove_prefix(end);
    return f;
}

template <class T>
bool number(std::string_view text, T& into) {
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), into);
    return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

std::optional<Line> parse_line(std::string_view text) {
    if (text.size() != kSeqLineSize || text.back() != '\n') return std::nullopt;
    text.remove_suffix(1);
    Line line;
    if (!number(field(text), line.token) || !number(field(text), line.last) || line.last < 0)
        return std::nullopt;
    if (!field(text).empty()) return std::nullopt;
    return line;
}

std::string dir_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

const char* mark_name(SeqEnd how) {
    return how == SeqEnd::kLost ? "lost" : "ended";
}

bool marked(const std::string& path, SeqEnd how) {
    return ::access((dir_of(path) + "/" + mark_name(how)).c_str(), F_OK) == 0;
}

// An open file descriptor with the file's exclusive lock, closed (and so
// unlocked) on destruction.
class LockedFile {
  public:
    LockedFile(const std::string& path, std::chrono::milliseconds wait) : path_(path) {
        fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd_ < 0) {
            gone_ = errno == ENOENT;
            error_ = gone_ ? path +
                                 " does not exist: the fencectl run that made it has ended; start "
                                 "no new write "
                                 "with its token"
                           : errno_text("cannot open", path);
            return;
        }
        const auto give_up = Clock::now() + wait;
        while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            if ((errno != EWOULDBLOCK && errno != EINTR) || Clock::now() >= give_up) {
                error_ = errno == EWOULDBLOCK ? "the lock of " + path + " was not free within " +
                                                    std::to_string(wait.count()) +
                                                    "ms (a stopped fencectl seq holds it?)"
                                              : errno_text("cannot lock", path);
                return;
            }
            std::this_thread::sleep_for(kLockPoll);
        }
    }
    ~LockedFile() {
        if (fd_ >= 0) ::close(fd_);
    }
    LockedFile(const LockedFile&) = delete;
    LockedFile& operator=(const LockedFile&) = delete;

    const std::string& error() const { return error_; }
    bool gone() const { return gone_; }  // the file does not exist (any more)

    std::optional<Line> read(std::string& why) {
        char buf[kSeqLineSize + 1];
        const ssize_t n = ::pread(fd_, buf, sizeof buf, 0);
        if (n < 0) {
            why = errno_text("cannot read", path_);
            return std::nullopt;
        }
        const std::string_view text(buf, static_cast<std::size_t>(n));
        auto line = parse_line(text);
        if (!line) {
            why = path_ + " is not a fencectl sequence file: it holds " + quoted(text) +
                  ", not one line \"TOKEN LAST\" of " + std::to_string(kSeqLineSize) + " bytes";
        }
        return line;
    }

    std::string write(const Line& line) {
        const std::string text = format_line(line);
        const ssize_t n = ::pwrite(fd_, text.data(), text.size(), 0);
        if (n < 0) return errno_text("cannot write", path_);
        if (static_cast<std::size_t>(n) != text.size()) return "short write to " + path_;
        return {};
    }

  private:
    std::string path_;
    std::string error_;
    bool gone_ = false;
    int fd_ = -1;
};

}  // namespace

std::string SeqFile::create(std::uint64_t token) {
    const char* tmp = std::getenv("TMPDIR");
    std::error_code ec;
    // Absolute: CMD may change directory before it runs fencectl seq.
    const auto base = std::filesystem::absolute(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", ec);
    if (ec) return "cannot resolve TMPDIR '" + std::string(tmp) + "': " + ec.message();
    std::string dir = (base / "fencectl-run.XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) return errno_text("cannot make a directory like", dir);
    dir_ = dir;
    path_ = dir + "/seq";
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno_text("cannot create", path_);
    const std::string text = format_line(Line{token, 0});
    const ssize_t n = ::write(fd, text.data(), text.size());
    const int saved = errno;
    ::close(fd);
    errno = saved;
    if (n < 0) return errno_text("cannot write", path_);
    if (static_cast<std::size_t>(n) != text.size()) return "short write to " + path_;
    return {};
}

std::string SeqFile::end(SeqEnd how) const {
    if (dir_.empty()) return {};
    const std::string mark = dir_ + "/" + mark_name(how);
    const int fd = ::open(mark.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return errno_text("cannot create", mark);
    ::close(fd);
    return {};
}

void SeqFile::remove() {
    if (dir_.empty()) return;
    for (const char* name : {"seq", "lost", "ended"}) ::unlink((dir_ + "/" + name).c_str());
    ::rmdir(dir_.c_str());
    dir_.clear();
    path_.clear();
}

SeqDraw draw_seq(const std::string& path, std::optional<std::uint64_t> token,
                 std::chrono::milliseconds lock_wait) {
    SeqDraw d;
    d.exit_code = kExitOther;
    LockedFile f(path, lock_wait);
    if (!f.error().empty()) {
        d.error = f.error();
        if (f.gone()) d.exit_code = kExitLostLease;
        return d;
    }
    auto line = f.read(d.error);
    if (!line) return d;
    if (token && *token != line->token) {
        d.exit_code = kExitUsage;
        d.error = path + " belongs to token " + std::to_string(line->token) +
                  ", but FENCE_TOKEN is " + std::to_string(*token) +
                  " (run fencectl seq in the command of the fencectl run that set both)";
        return d;
    }
    for (const SeqEnd how : {SeqEnd::kLost, SeqEnd::kEnded}) {
        if (!marked(path, how)) continue;
        d.exit_code = kExitLostLease;
        d.error = std::string(how == SeqEnd::kLost
                                  ? "the lease of token " + std::to_string(line->token) + " is lost"
                                  : "the fencectl run of token " + std::to_string(line->token) +
                                        " has ended (its command exited, the lock is released)") +
                  ": start no new write with it (last sequence handed out: " +
                  std::to_string(line->last) + ")";
        return d;
    }
    const std::optional<std::int64_t> next = client::seq_after(line->last);
    if (!next) {
        d.error = "the sequence of token " + std::to_string(line->token) + " is exhausted (" +
                  std::to_string(line->last) + " was the last bigint): acquire a new token";
        return d;
    }
    line->last = *next;
    if (d.error = f.write(*line); !d.error.empty()) return d;
    d.seq = next;
    d.exit_code = kExitOk;
    return d;
}

int seq_command(std::ostream& out, std::ostream& err) {
    const char* path = std::getenv(kSeqFileEnv);
    if (path == nullptr || *path == '\0') {
        err << "fencectl seq: FENCE_SEQ_FILE is not set: run it inside the command of "
               "`fencectl run KEY -- CMD`, which sets it\n";
        return kExitUsage;
    }
    std::optional<std::uint64_t> token;
    if (const char* t = std::getenv("FENCE_TOKEN"); t != nullptr && *t != '\0') {
        token = parse_token(t);
        if (!token) {
            err << "fencectl seq: FENCE_TOKEN '" << t
                << "' is not a token (an integer 1..9223372036854775807)\n";
            return kExitUsage;
        }
    }
    const SeqDraw d = draw_seq(path, token);
    if (!d.seq) {
        err << "fencectl seq: " << d.error << '\n';
        return d.exit_code;
    }
    out << *d.seq << '\n';
    out.flush();
    return out ? kExitOk : kExitOther;
}

}  // namespace pgfence::cli
