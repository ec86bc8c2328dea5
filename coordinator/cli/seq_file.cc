#include "cli/seq_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cli/args.h"
#include "cli/exit_codes.h"
#include "client/sequence.h"

namespace pgfence::cli {
namespace {

constexpr std::string_view kHeld = "held";
constexpr std::string_view kLost = "lost";

struct Line {
    std::uint64_t token = 0;
    std::int64_t last = 0;
    std::string_view state;
};

std::string errno_text(const std::string& what, const std::string& path) {
    return what + " " + path + ": " + std::strerror(errno);
}

// The file's line, blanks padded to kSeqLineSize - 1, then '\n'.
std::string format_line(const Line& line) {
    std::string s = std::to_string(line.token) + ' ' + std::to_string(line.last) + ' ' + std::string(line.state);
    s.resize(kSeqLineSize - 1, ' ');
    s.push_back('\n');
    return s;
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
    if (!number(field(text), line.token) || !number(field(text), line.last) || line.last < 0) return std::nullopt;
    line.state = field(text);
    if ((line.state != kHeld && line.state != kLost) || !field(text).empty()) return std::nullopt;
    return line;
}

// An open file descriptor with the file's exclusive lock, closed (and so
// unlocked) on destruction.
class LockedFile {
public:
    explicit LockedFile(const std::string& path) : path_(path) {
        fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd_ < 0) {
            error_ = errno_text("cannot open", path);
        } else if (::flock(fd_, LOCK_EX) != 0) {
            error_ = errno_text("cannot lock", path);
        }
    }
    ~LockedFile() {
        if (fd_ >= 0) ::close(fd_);
    }
    LockedFile(const LockedFile&) = delete;
    LockedFile& operator=(const LockedFile&) = delete;

    const std::string& error() const { return error_; }

    std::optional<Line> read(std::string& why) {
        char buf[kSeqLineSize + 1];
        const ssize_t n = ::pread(fd_, buf, sizeof buf, 0);
        if (n < 0) {
            why = errno_text("cannot read", path_);
            return std::nullopt;
        }
        auto line = parse_line(std::string_view(buf, static_cast<std::size_t>(n)));
        if (!line) why = path_ + " is not a fencectl sequence file (expected one line \"TOKEN LAST held|lost\")";
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
    int fd_ = -1;
};

}  // namespace

std::string create_seq_file(std::uint64_t token, SeqFile& out) {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/fencectl-run.XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) return errno_text("cannot make a directory like", dir);
    out.dir = dir;
    out.path = dir + "/seq";
    const int fd = ::open(out.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno_text("cannot create", out.path);
    const std::string text = format_line(Line{token, 0, kHeld});
    const ssize_t n = ::write(fd, text.data(), text.size());
    const int saved = errno;
    ::close(fd);
    errno = saved;
    if (n < 0) return errno_text("cannot write", out.path);
    if (static_cast<std::size_t>(n) != text.size()) return "short write to " + out.path;
    return {};
}

void remove_seq_file(const SeqFile& file) {
    if (file.dir.empty()) return;
    ::unlink(file.path.c_str());
    ::rmdir(file.dir.c_str());
}

std::string mark_seq_file_lost(const std::string& path) {
    LockedFile f(path);
    if (!f.error().empty()) return f.error();
    std::string why;
    auto line = f.read(why);
    if (!line) return why;
    line->state = kLost;
    return f.write(*line);
}

SeqDraw draw_seq(const std::string& path, std::optional<std::uint64_t> token) {
    SeqDraw d;
    LockedFile f(path);
    if (!f.error().empty()) {
        d.exit_code = kExitOther;
        d.error = f.error();
        return d;
    }
    auto line = f.read(d.error);
    if (!line) {
        d.exit_code = kExitOther;
        return d;
    }
    if (token && *token != line->token) {
        d.exit_code = kExitUsage;
        d.error = path + " belongs to token " + std::to_string(line->token) + ", but FENCE_TOKEN is " +
                  std::to_string(*token) + " (run fencectl seq in the command of the fencectl run that set both)";
        return d;
    }
    if (line->state == kLost) {
        d.exit_code = kExitLostLease;
        d.error = "the lease of token " + std::to_string(line->token) +
                  " is lost: start no new write with it (last sequence handed out: " + std::to_string(line->last) +
                  ")";
        return d;
    }
    const std::optional<std::int64_t> next = client::seq_after(line->last);
    if (!next) {
        d.exit_code = kExitOther;
        d.error = "the sequence of token " + std::to_string(line->token) + " is exhausted (" +
                  std::to_string(line->last) + " was the last bigint): acquire a new token";
        return d;
    }
    line->last = *next;
    if (d.error = f.write(*line); !d.error.empty()) {
        d.exit_code = kExitOther;
        return d;
    }
    d.seq = next;
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
            err << "fencectl seq: FENCE_TOKEN '" << t << "' is not a token (an integer 1..9223372036854775807)\n";
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
