#include "worker/options.h"

#include <unistd.h>

#include <charconv>
#include <string_view>

#include "client/duration.h"
#include "lock/commands.h"
#include "pgconn/advance.h"

namespace pgfence::worker {
namespace {

constexpr std::size_t kMaxWorkerIdBytes = 128;

std::string bad(std::string_view flag, std::string_view value, std::string_view why) {
    return "fence-worker: invalid " + std::string(flag) + " '" + std::string(value) +
           "': " + std::string(why);
}

std::string parse_mode(std::string_view text, Mode& out) {
    if (text == "guard") {
        out = Mode::kGuard;
    } else if (text == "fenced_update") {
        out = Mode::kFencedUpdate;
    } else if (text == "admit") {
        out = Mode::kAdmit;
    } else if (text == "sequenced") {
        out = Mode::kSequenced;
    } else if (text == "mixed") {
        out = Mode::kMixed;
    } else {
        return bad("--mode", text, "expected guard, fenced_update, admit, sequenced or mixed");
    }
    return {};
}

std::string parse_keys(std::string_view text, std::vector<std::string>& keys) {
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string_view key = text.substr(start, comma - start);
        if (key.empty() || key.size() > lock::kMaxKeyBytes) {
            return bad("--key", text, "each key must be 1-512 bytes");
        }
        for (const char c : key) {
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
                return bad("--key", text, "control characters are not allowed in keys");
            }
        }
        if (keys.size() >= kMaxKeys) return bad("--key", text, "at most 64 keys");
        keys.emplace_back(key);
        start = comma + 1;
    }
    return {};
}

std::string parse_ms(std::string_view flag, std::string_view text, milliseconds& out) {
    const client::DurationParse d = client::parse_duration(text);
    if (!d.value) return bad(flag, text, d.error);
    out = *d.value;
    return {};
}

// --work D[,D...]: the pieces of work, each a duration.
std::string parse_work(std::string_view text, std::vector<milliseconds>& pieces) {
    pieces.clear();
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const client::DurationParse d = client::parse_duration(text.substr(start, comma - start));
        if (!d.value) return bad("--work", text, d.error);
        if (pieces.size() >= kMaxWorkPieces) {
            return bad("--work", text, "at most " + std::to_string(kMaxWorkPieces) + " pieces");
        }
        pieces.push_back(*d.value);
        start = comma + 1;
    }
    return {};
}

template <class Int>
std::string parse_int(std::string_view flag, std::string_view text, Int min, Int max, Int& out) {
    Int v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
        return bad(flag, text, "not a whole number");
    }
    if (v < min || v > max) {
        return bad(flag, text, "out of range " + std::to_string(min) + ".." + std::to_string(max));
    }
    out = v;
    return {};
}

bool apply_switch(std::string_view flag, Options& o) {
    if (flag == "--keep-going") {
        o.keep_going = true;
    } else if (flag == "--no-lease-check") {
        o.lease_check = false;
    } else if (flag == "--setup") {
        o.setup = true;
    } else if (flag == "--quiet") {
        o.quiet = true;
    } else if (flag == "--clock") {
        o.print_clock = true;
    } else if (flag == "--proof") {
        o.proof = true;
    } else {
        return false;
    }
    return true;
}

// Applies one flag that takes a value.
std::string apply_valued(std::string_view flag, std::string_view v, Options& o) {
    if (flag == "--key") return parse_keys(v, o.keys);
    if (flag == "--lease") return parse_ms(flag, v, o.lease);
    if (flag == "--wait") return parse_ms(flag, v, o.wait);
    if (flag == "--work") return parse_work(v, o.work);
    if (flag == "--renew") {
        if (v != "thread" && v != "between") return bad(flag, v, "expected thread or between");
        o.renew = v == "thread" ? Renew::kThread : Renew::kBetween;
        return {};
    }
    if (flag == "--duration") return parse_ms(flag, v, o.duration);
    if (flag == "--pause") return parse_ms(flag, v, o.pause);
    if (flag == "--mode") return parse_mode(v, o.mode);
    if (flag == "--iterations") return parse_int<long>(flag, v, 1, kMaxIterations, o.iterations);
    if (flag == "--max-clock-drift-ppm") {
        return parse_int<std::uint64_t>(flag, v, 0, client::kMaxClockDriftPpmLimit, o.max_clock_drift_ppm);
    }
    if (flag == "--seed") {
        return parse_int<std::uint64_t>(flag, v, 0, UINT64_MAX, o.seed);
    }
    if (flag == "--advance") {
        if (std::string why = pgconn::check_resource(std::string(v)); !why.empty()) return bad(flag, v, why);
        if (o.advance.size() >= pgconn::kMaxAdvanceResources) return bad(flag, v, "at most 64 resources");
        o.advance.emplace_back(v);
    } else if (flag == "--conninfo") {
        o.conninfo = v;
    } else if (flag == "--endpoints") {
        o.endpoints = v;
    } else if (flag == "--cacert" || flag == "--cert" || flag == "--key" || flag == "--bearer-file") {
        if (v.empty()) return bad(flag, v, "empty path");
        (flag == "--cacert" ? o.cacert : flag == "--cert" ? o.cert : flag == "--key" ? o.key : o.bearer_file) = v;
    } else if (flag == "--forge") {
        if (v.empty()) return bad(flag, v, "empty path (the untrusted Ed25519 key to sign forgeries with)");
        o.forge_key_file = v;
        o.proof = true;
    } else if (flag == "--log") {
        if (v.empty()) return bad(flag, v, "empty path");
        o.log_path = v;
    } else if (flag == "--worker-id") {
        if (v.empty() || v.size() > kMaxWorkerIdBytes) return bad(flag, v, "must be 1-128 bytes");
        if (v.find_first_of(",\"\n\r") != std::string_view::npos) {
            return bad(flag, v, "must not contain a comma, quote or newline (it goes into CSV)");
        }
        o.worker_id = v;
    } else if (Options scratch; apply_switch(flag, scratch)) {
        return "fence-worker: " + std::string(flag) + " takes no value, got '" + std::string(flag) + "=" +
               std::string(v) + "'";
    } else {
        return "fence-worker: unknown option '" + std::string(flag) + "' (see --help)";
    }
    return {};
}

std::string check_bounds(Options& o) {
    if (o.lease < kMinLease || o.lease > kMaxLease) {
        return bad("--lease", client::format_duration(o.lease), "must be within 100ms..1h");
    }
    milliseconds work{0};
    for (const milliseconds piece : o.work) work += piece;
    if (work >= o.lease * 10) {
        return bad("--work", client::format_duration(work), "must be shorter than 10 leases in all");
    }
    if (o.renew == Renew::kBetween && o.work.empty()) {
        return "fence-worker: --renew between renews before each piece of --work: give --work D[,D...]";
    }
    if (!o.setup && !o.print_clock && o.keys.empty()) return "fence-worker: --key is required (see --help)";
    if (o.worker_id.empty()) o.worker_id = "fence-worker-" + std::to_string(::getpid());
    return {};
}

}  // namespace

const char* to_string(Forgery forgery) {
    switch (forgery) {
        case Forgery::kCorrupt:
            return "corrupt";
        case Forgery::kOtherKey:
            return "other_key";
        case Forgery::kOtherToken:
            return "other_token";
        case Forgery::kUntrusted:
            return "untrusted";
        case Forgery::kMissing:
            return "missing";
    }
    return "?";
}

const char* to_string(Mode mode) {
    switch (mode) {
        case Mode::kGuard:
            return "guard";
        case Mode::kFencedUpdate:
            return "fenced_update";
        case Mode::kAdmit:
            return "admit";
        case Mode::kSequenced:
            return "sequenced";
        case Mode::kMixed:
            return "mixed";
    }
    return "?";
}

ParseResult parse_options(int argc, const char* const* argv) {
    ParseResult r;
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            r.help = true;
            return r;
        }
        if (arg == "--version") {
            r.version = true;
            return r;
        }
        if (apply_switch(arg, o)) continue;
        std::string_view value;
        if (const std::size_t eq = arg.find('='); eq != std::string_view::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            r.error = "fence-worker: option '" + std::string(arg) + "' needs a value (see --help)";
            return r;
        }
        r.error = apply_valued(arg, value, o);
        if (!r.error.empty()) return r;
    }
    r.error = check_bounds(o);
    if (r.error.empty()) r.options = std::move(o);
    return r;
}

}  // namespace pgfence::worker
