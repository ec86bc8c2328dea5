#include "worker/worker.h"

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <thread>

#include "client/duration.h"
#include "worker/keepalive.h"

namespace pgfence::worker {
namespace {

std::atomic<bool> g_stop{false};

std::string now_text() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms.count()));
    return buf;
}

}  // namespace

void request_stop() {
    g_stop.store(true);
}
bool stop_requested() {
    return g_stop.load();
}

Worker::Worker(Options options, client::Options client_options)
    : o_(std::move(options)),
      client_options_(std::move(client_options)),
      client_(client_options_),
      rng_(o_.seed != 0 ? o_.seed : std::hash<std::string>{}(o_.worker_id)) {}

void Worker::say(const std::string& line) const {
    if (o_.quiet) return;
    std::printf("[%s] %s: %s\n", now_text().c_str(), o_.worker_id.c_str(), line.c_str());
    std::fflush(stdout);
}

int Worker::failed(int code) {
    return o_.keep_going ? static_cast<int>(kExitOk) : code;
}

Mode Worker::pick_path() {
    if (o_.mode != Mode::kMixed) return o_.mode;
    static constexpr Mode kPaths[] = {Mode::kGuard, Mode::kFencedUpdate, Mode::kAdmit, Mode::kSequenced};
    return kPaths[rng_() % std::size(kPaths)];
}

const std::string& Worker::pick_key() {
    return o_.keys[rng_() % o_.keys.size()];
}

int Worker::prepare() {
    if (std::string err = log_.open(o_.log_path, o_.worker_id); !err.empty()) {
        std::fprintf(stderr, "fence-worker: %s\n", err.c_str());
        return kExitUsage;
    }
    if (!o_.forge_key_file.empty()) {
        if (std::string why = net::TokenSigner::load(o_.forge_key_file, forger_); !why.empty()) {
            // (the loader speaks of the coordinator's flag)
            if (why.starts_with("--token-signing-key-file: ")) why.erase(0, 26);
            std::fprintf(stderr, "fence-worker: invalid --forge '%s': %s\n", o_.forge_key_file.c_str(), why.c_str());
            return kExitUsage;
        }
    }
    std::string err = db_.connect(o_.conninfo, o_.worker_id);
    if (err.empty() && o_.setup) err = db_.setup(o_.proof);
    for (std::size_t i = 0; err.empty() && i < o_.keys.size(); ++i)
        err = db_.ensure_key(o_.keys[i], o_.setup && o_.proof);
    if (!err.empty()) {
        std::fprintf(stderr, "fence-worker: %s\n", err.c_str());
        return kExitDatabase;
    }
    return kExitOk;
}

bool Worker::reconnected(Event& e, long& errors) {
    if (db_.connected()) return true;
    const std::string err = db_.connect(o_.conninfo, o_.worker_id);
    if (err.empty()) return true;
    e.outcome = "error";
    log_.write(e);
    ++errors;
    say(err);
    return false;
}

bool Worker::publish_first(const client::Lease& lease, int& code) {
    if (o_.advance.empty()) return true;
    Event e{"advance", lease.key, lease.token, {}, {}, "", "", static_cast<std::int64_t>(o_.advance.size())};
    if (!reconnected(e, stats_.db_errors)) {
        code = failed(kExitDatabase);
        return false;
    }
    e.sent_at = std::chrono::steady_clock::now();
    const pgconn::PublishResult r =
        db_.publish(pgconn::advance_targets(o_.advance, lease.keys, lease.proofs, lease.proof), lease.token);
    e.acked_at = std::chrono::steady_clock::now();
    e.outcome = r.outcome == pgconn::PublishOutcome::kPublished ? "published"
                : r.outcome == pgconn::PublishOutcome::kStale   ? "stale"
                                                                : "error";
    log_.write(e);
    if (r.outcome == pgconn::PublishOutcome::kPublished) {
        say("token " + std::to_string(lease.token) + " published at " + std::to_string(o_.advance.size()) +
            " resource(s) before the work");
        return true;
    }
    ++(r.outcome == pgconn::PublishOutcome::kStale ? stats_.stale : stats_.db_errors);
    std::fprintf(stderr, "fence-worker: %s; not writing, releasing %s\n", r.message.c_str(), lease.key.c_str());
    code = failed(pgconn::exit_code_of(r.outcome));
    return false;
}

int Worker::write_with(const client::Lease& lease, Mode path, std::int64_t seq, bool lease_lost, bool& accepted) {
    Event e{"write", lease.key, lease.token, {}, {}, to_string(path), "", 0};
    const std::string tok = std::to_string(lease.token) + (seq > 0 ? " seq " + std::to_string(seq) : "");
    accepted = false;
    if (lease_lost) {
        e.outcome = "lease_lost";
        log_.write(e);
        ++stats_.lease_lost;
        say("lease on " + lease.key + " (token " + tok + ") is gone before the write; not writing");
        return failed(kExitLostLease);
    }
    if (!reconnected(e, stats_.db_errors)) return failed(kExitDatabase);
    e.sent_at = std::chrono::steady_clock::now();
    const WriteResult w = db_.write(path, lease.key, lease.token, seq, o_.worker_id, proof_of(lease));
    e.acked_at = std::chrono::steady_clock::now();
    e.outcome = to_string(w.outcome);
    e.value = w.value;
    log_.write(e);
    if (w.outcome == WriteOutcome::kAccepted) {
        ++stats_.accepted;
        accepted = true;
        say("token " + tok + " accepted by PostgreSQL (" + to_string(path) + "): " + lease.key +
            " counter is now " + std::to_string(w.value));
        return kExitOk;
    }
    if (w.outcome == WriteOutcome::kStale) {
        ++stats_.stale;
        say("stale token " + tok + " refused: a newer holder wrote; stopping" +
            (w.detail.empty() ? std::string() : " (" + w.detail + ")"));
        return failed(kExitStale);
    }
    if (w.outcome == WriteOutcome::kBadProof) {
        ++stats_.bad_proofs;
        say("the token proof of " + lease.key + " token " + tok + " was refused (55F02): " + w.message);
        return failed(kExitDatabase);
    }
    ++stats_.db_errors;
    say(std::string("database ") + to_string(w.outcome) + " on " + lease.key + ": " + w.message);
    return failed(kExitDatabase);
}

int Worker::write_sequenced(const client::Lease& lease, const std::function<bool()>& lease_lost) {
    std::int64_t first = 0;
    for (int n = 0; n < kSequencedWrites; ++n) {
        const std::optional<std::int64_t> seq = lease.next_seq();
        if (!seq) {  // a fresh lease's sequence is far from the bigint limit
            say("internal: the sequence of token " + std::to_string(lease.token) + " is exhausted");
            return kExitOther;
        }
        if (first == 0) first = *seq;
        bool accepted = false;
        const int code = write_with(lease, Mode::kSequenced, *seq, lease_lost(), accepted);
        if (!accepted) return code;
    }
    return lease_lost() ? static_cast<int>(kExitOk) : replay(lease, first);
}

// The first write again, after the later ones committed, as a network that
// delayed it (or a driver that retried it) would send it: the sequenced fence
// must refuse it with 55F01. Logged as a "replay" event whose value is its seq.
int Worker::replay(const client::Lease& lease, std::int64_t seq) {
    Event e{"replay", lease.key, lease.token, {}, {}, to_string(Mode::kSequenced), "", seq};
    const std::string pair = "(token " + std::to_string(lease.token) + ", seq " + std::to_string(seq) + ")";
    e.sent_at = std::chrono::steady_clock::now();
    const WriteResult w = db_.write(Mode::kSequenced, lease.key, lease.token, seq, o_.worker_id, proof_of(lease));
    e.acked_at = std::chrono::steady_clock::now();
    e.outcome = to_string(w.outcome);
    log_.write(e);
    switch (w.outcome) {
        case WriteOutcome::kStale:
            ++stats_.replays_refused;
            say("delayed duplicate " + pair + " on " + lease.key + " refused, as it must be");
            return kExitOk;
        case WriteOutcome::kAccepted:
            ++stats_.replays_accepted;
            say("BUG: delayed duplicate " + pair + " on " + lease.key +
                " was accepted after a later write of the same holder");
            return failed(kExitOther);
        default:
            ++stats_.db_errors;
            say(std::string("database ") + to_string(w.outcome) + " on the replay " + pair + ": " + w.message);
            return failed(kExitDatabase);
    }
}

std::optional<std::string> Worker::proof_of(const client::Lease& lease) const {
    if (!o_.proof) return std::nullopt;
    return lease.proof;
}

namespace {

// The proof with one character of its signature changed: still well formed
// (a base64url character in the middle, not the last, whose spare bits
// must be zero), so it reaches the verifier and fails there.
std::string corrupted(std::string proof) {
    const std::size_t i = proof.rfind('.') + 11;
    if (i < proof.size()) proof[i] = proof[i] == 'A' ? 'B' : 'A';
    return proof;
}

// The cluster ID a proof names ("v1.<kid>.<cluster_id>.<signature>"), 0 if none.
std::uint64_t cluster_of(const std::string& proof) {
    const std::size_t a = proof.find('.', proof.find('.') + 1) + 1;
    const std::size_t b = proof.find('.', a);
    std::uint64_t id = 0;
    if (a == 0 || b == std::string::npos) return 0;
    std::from_chars(proof.data() + a, proof.data() + b, id);
    return id;
}

}  // namespace

int Worker::forge(const client::Lease& lease, Mode path) {
    for (const Forgery forgery : kForgeries) {
        if (const int code = forge_one(lease, path, forgery); code != kExitOk) return code;
    }
    return kExitOk;
}

int Worker::forge_one(const client::Lease& lease, Mode path, Forgery forgery) {
    std::string key = lease.key;
    std::uint64_t token = lease.token;
    std::optional<std::string> proof = lease.proof;
    switch (forgery) {
        case Forgery::kCorrupt:
            proof = corrupted(lease.proof);
            break;
        case Forgery::kOtherKey: {
            std::vector<const std::string*> others;
            for (const std::string& k : o_.keys) {
                if (k != lease.key) others.push_back(&k);
            }
            if (others.empty()) return kExitOk;
            key = *others[rng_() % others.size()];
            break;
        }
        case Forgery::kOtherToken:
            token += kForgedTokenOffset;
            break;
        case Forgery::kUntrusted:
            proof = forger_->sign(cluster_of(lease.proof), token, key);
            break;
        case Forgery::kMissing:
            proof.reset();
            break;
    }
    const std::string what = std::string(to_string(path)) + ":" + to_string(forgery);
    Event e{"forge", key, token, {}, {}, what, "", 0};
    if (!reconnected(e, stats_.forged_errors)) return failed(kExitDatabase);
    const std::int64_t seq = path == Mode::kSequenced ? lease.next_seq().value_or(1) : 0;
    e.sent_at = std::chrono::steady_clock::now();
    const WriteResult w = db_.write(path, key, token, seq, o_.worker_id, proof, std::string("forge:") + to_string(forgery));
    e.acked_at = std::chrono::steady_clock::now();
    e.outcome = to_string(w.outcome);
    e.value = w.value;
    log_.write(e);
    ++stats_.forged_sent;
    const std::string told = what + " on " + key + " with token " + std::to_string(token);
    switch (w.outcome) {
        case WriteOutcome::kBadProof:
            ++stats_.forged_refused;
            say("forged " + told + " refused, as it must be: " + w.message);
            return kExitOk;
        case WriteOutcome::kStale:  // fenced_update: a stale row is never written, so no proof is asked
            ++stats_.forged_stale;
            say("forged " + told + " refused as stale");
            return kExitOk;
        case WriteOutcome::kAccepted:
            ++stats_.forged_accepted;
            // (on stderr even with --quiet: it is what the adversary is there to find)
            std::fprintf(stderr, "fence-worker %s: BUG: forged %s was accepted (counter now %lld)\n",
                         o_.worker_id.c_str(), told.c_str(), static_cast<long long>(w.value));
            return failed(kExitOther);
        default:
            ++stats_.forged_errors;
            say("database " + std::string(to_string(w.outcome)) + " on forged " + told + ": " + w.message);
            return failed(kExitDatabase);
    }
}

void Worker::release(const client::Lease& lease) {
    const auto sent_at = std::chrono::steady_clock::now();
    auto r = client_.release(lease.key, lease.token);
    Event e{"release", lease.key, lease.token, sent_at, std::chrono::steady_clock::now(), "", "ok", 0};
    if (!r) {
        e.outcome = r.error().kind == client::ErrorKind::kNotHeld ? "not_held" : "error";
    }
    log_.write(e);
    say("released " + lease.key + " token " + std::to_string(lease.token) + ": " + e.outcome);
}

void Worker::work(const client::Lease& lease, Keepalive& keepalive) {
    for (const milliseconds piece : o_.work) {
        if (o_.renew == Renew::kBetween) keepalive.renew_now(client_);
        const auto start = std::chrono::steady_clock::now();
        std::this_thread::sleep_for(piece);
        const auto end = std::chrono::steady_clock::now();
        log_.write(Event{"work", lease.key, lease.token, start, end, "", "done", piece.count()});
        // A sleep that came back late is the worker's own evidence of a pause.
        keepalive.note_wakeup(start + piece, end);
    }
}

int Worker::iteration(long i) {
    ++stats_.iterations;
    const std::string& key = pick_key();
    const Mode path = pick_path();
    // A fresh owner per iteration: the client's retries of this acquire are
    // idempotent, but two iterations never share a grant.
    const client::AcquireRequest req{key, o_.lease, o_.wait,
                                     o_.worker_id + "#" + std::to_string(i)};
    const auto sent_at = std::chrono::steady_clock::now();
    auto r = client_.acquire(req);
    if (!r) {
        Event e{"acquire", key, 0, sent_at, std::chrono::steady_clock::now(), "", "error", 0};
        const client::ErrorKind kind = r.error().kind;
        e.outcome = kind == client::ErrorKind::kHeld          ? "held"
                    : kind == client::ErrorKind::kUnavailable ? "unavailable"
                                                              : "error";
        log_.write(e);
        ++(kind == client::ErrorKind::kHeld ? stats_.held : stats_.unavailable);
        say("could not acquire " + key + ": " + client::in_flag_terms(r.error(), o_.lease, o_.wait));
        return failed(client::exit_code_of(kind));
    }
    const client::Lease& lease = r.value();
    ++stats_.acquired;
    log_.write(Event{"acquire", key, lease.token, lease.sent_at, lease.received_at, to_string(path),
                     "ok", 0});
    say("acquired " + key + ", token " + std::to_string(lease.token) + " (lease " +
        client::format_duration(lease.lease) + ")");
    if (o_.proof && lease.proof.empty()) {
        say("--proof: the grant of " + key + " (token " + std::to_string(lease.token) +
            ") carries no token proof: the coordinator does not sign grants (--token-signing-key-file)");
        std::fprintf(stderr,
                     "fence-worker: --proof: the grant of key '%s' (token %llu) carries no token proof; "
                     "start the coordinator with --token-signing-key-file\n",
                     key.c_str(), static_cast<unsigned long long>(lease.token));
        release(lease);
        return kExitUsage;
    }
    if (forger_) {
        const int code = forge(lease, path);
        release(lease);
        return code;
    }
    int code = kExitOk;
    {
        Keepalive keepalive(client_options_, lease, &log_, o_.renew == Renew::kThread);
        if (publish_first(lease, code)) {
            work(lease, keepalive);
            const auto lost = [&] { return o_.lease_check && keepalive.lost(); };
            bool accepted = false;
            code = path == Mode::kSequenced ? write_sequenced(lease, lost)
                                            : write_with(lease, path, 0, lost(), accepted);
        }
        stats_.renewals += keepalive.renewals();
    }
    release(lease);
    return code;
}

int Worker::run() {
    if (const int code = prepare(); code != kExitOk || o_.setup) {
        if (code == kExitOk) std::printf("fence-worker: schema ready\n");
        return code;
    }
    const auto start = std::chrono::steady_clock::now();
    int code = kExitOk;
    for (long i = 0; i < o_.iterations && code == kExitOk && !stop_requested(); ++i) {
        if (o_.duration.count() > 0 && std::chrono::steady_clock::now() - start >= o_.duration) {
            break;
        }
        const long before = stats_.held + stats_.unavailable;
        code = iteration(i);
        if (stats_.held + stats_.unavailable > before) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10 + rng_() % 40));
        }
        if (o_.pause.count() > 0 && code == kExitOk) std::this_thread::sleep_for(o_.pause);
    }
    std::printf(
        "fence-worker %s: %ld iterations, %ld acquired, %ld accepted, %ld stale, %ld held, "
        "%ld unavailable, %ld lease_lost, %ld db_errors, %ld keepalives, %ld replays refused, "
        "%ld replays accepted, %ld proofs refused\n",
        o_.worker_id.c_str(), stats_.iterations, stats_.acquired, stats_.accepted, stats_.stale,
        stats_.held, stats_.unavailable, stats_.lease_lost, stats_.db_errors, stats_.renewals,
        stats_.replays_refused, stats_.replays_accepted, stats_.bad_proofs);
    if (forger_) {
        std::printf(
            "fence-worker %s: forged proofs: %ld sent, %ld refused (55F02), %ld refused as stale, "
            "%ld accepted, %ld errors\n",
            o_.worker_id.c_str(), stats_.forged_sent, stats_.forged_refused, stats_.forged_stale,
            stats_.forged_accepted, stats_.forged_errors);
    }
    std::fflush(stdout);
    return code;
}

}  // namespace pgfence::worker
