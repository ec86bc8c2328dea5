#include "cli/client_log.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

namespace pgfence::cli::explain {
namespace {

constexpr std::size_t kFields = 9;

// Splits one CSV line; a quoted field may hold commas and doubled quotes.
bool split(const std::string& line, std::vector<std::string>& fields) {
    fields.assign(1, {});
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char ch = line[i];
        if (quoted) {
            if (ch != '"') {
                fields.back() += ch;
            } else if (i + 1 < line.size() && line[i + 1] == '"') {
                fields.back() += '"';
                ++i;
            } else {
                quoted = false;
            }
        } else if (ch == '"' && fields.back().empty()) {
            quoted = true;
        } else if (ch == ',') {
            if (fields.size() == kFields) return false;
            fields.emplace_back();
        } else {
            fields.back() += ch;
        }
    }
    return !quoted && fields.size() == kFields;
}

template <class T>
bool number(const std::string& text, T& out) {
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return !text.empty() && ec == std::errc() && ptr == end;
}

}  // namespace

bool parse_client_log_line(const std::string& line, ClientEvent& out) {
    std::vector<std::string> f;
    if (!split(line, f)) return false;
    out.event = f[1];
    out.outcome = f[7];
    return !out.event.empty() && number(f[3], out.token) && number(f[4], out.send_ns) && number(f[5], out.ack_ns) &&
           number(f[8], out.value);
}

ClientLog read_client_log(const std::string& path, const std::set<std::uint64_t>& tokens) {
    ClientLog log;
    std::ifstream in(path);
    if (!in) {
        log.error = "cannot read --client-log '" + path + "': " + std::strerror(errno);
        return log;
    }
    std::size_t read = 0;
    std::string line(kMaxClientLogLineBytes + 1, '\0');
    while (in) {
        // A line longer than the limit is read up to it, then skipped to its end.
        in.getline(line.data(), static_cast<std::streamsize>(line.size()));
        const auto got = static_cast<std::size_t>(in.gcount());
        const bool too_long = in.fail() && !in.eof() && got + 1 >= line.size();
        if (got == 0 && !in) break;
        read += got;
        if (too_long) {
            in.clear();
            in.ignore(static_cast<std::streamsize>(kMaxClientLogBytes), '\n');
            read += static_cast<std::size_t>(in.gcount());
        }
        if (read > kMaxClientLogBytes || log.events.size() >= kMaxClientLogLines) {
            log.truncated = true;
            break;
        }
        if (too_long) {
            ++log.bad_lines;
            continue;
        }
        const std::string text(line.data(), got > 0 && !in.eof() ? got - 1 : got);
        ClientEvent e;
        if (!parse_client_log_line(text, e)) {
            ++log.bad_lines;
        } else if (tokens.contains(e.token)) {
            log.events.push_back(std::move(e));
        }
    }
    return log;
}

}  // namespace pgfence::cli::explain
