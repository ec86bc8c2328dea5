// bench_scale: pgfence at scale (bench/scale/run.sh, `make bench-scale`).
// Prints one key=value line per run on stdout; progress on stderr.
//
//   bench_scale preload --endpoints H:P,... --locks N --lease-ms L --prefix P
//                       [--connections C (64)] [--depth D (16)]
//     N acquires of keys P-0 .. P-(N-1) on the leader, C connections with D
//     requests in flight each. Prints preloaded= errors= seconds= per_s=.
//   bench_scale keepalive --endpoints H:P,... --connections C --seconds S
//                         [--lease-ms L (3000)] [--interval-ms I (1000)] [--ramp-per-s R (5000)]
//     C connections to the leader, opened R a second; each acquires its own
//     key, then sends a keepalive every I ms. Once all hold their lock, S
//     seconds are measured: keepalives answered 200 against C x S / I
//     expected, their latency, errors.
//   bench_scale storm --endpoints H:P,... --locks N --lease-ms L --prefix P
//                     [--kill-pid PID] [--aligned 0|1 (0)] [--timeout-s T (120)] [--drift-ppm R (50000)]
//     Preloads N locks with lease L (as preload), then waits until the leader
//     has applied N more Expires (pgfence_expiries_total{existed="true"} on
//     the leader, against its value before the preload) while one probe
//     connection loops acquire+release (client library, 10 ms apart) and
//     /metrics of every member is polled every 20 ms. The probe's figures
//     (probe_cycles, probe_p99_us, probe_max_us) count only the cycles that
//     overlap the storm: from the first deadline until all were expired
//     (the probe idles on a quiet cluster before). Without --kill-pid the
//     leases' deadlines on the leader run from the first grant answered to
//     the last, each L x (1 + R/1e6) after its grant; expired_all_s counts
//     from the FIRST deadline (as bench_etcd_grpc storm does), after_last_s
//     from the last. With --kill-pid (the leader's process) it is
//     SIGKILLed as soon as the preload ends; the new leader restarts every
//     lease: at full length, ending L x (1 + R/1e6) after the poll first saw
//     the new leader (the last deadline, after_last_s counts from it), or,
//     one checkpointed before the kill (lease checkpoints, on by default:
//     at half its run), with what was left of it, ending no earlier than its
//     first deadline (the first grant's, as without --kill-pid: the window
//     and expired_all_s count from it).
//     With --aligned 1 (no --kill-pid) each acquire asks for what is left of
//     L since the preload began (divided by 1 + R/1e6, at least 1 s), so all
//     N leases end together, L x (1 + R/1e6) after the preload began: the
//     deadline both figures count from. L must exceed the preload's time.
//     term_after is the highest term any member showed until 3 s after the
//     last expiry (a leader change in the storm's aftermath counts).
//
// The endpoint of preload and keepalive is the leader, found by asking each
// of --endpoints for /metrics (pgfence_is_leader 1).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "client/client.h"
#include "client/http_connection.h"
#include "pipeline.h"
#include "report.h"

namespace {

using namespace pgfence;
using namespace std::chrono_literals;
using bench::Clock;

constexpr std::uint64_t kMaxLocks = 5'000'000;
constexpr int kMaxConnections = 15'000;
constexpr auto kPollEvery = 20ms;
constexpr auto kProbeGap = 10ms;
constexpr auto kTermSettle = 3s;  // the storm's term is read until this long after its last expiry

int usage(const std::string& why) {
    std::cerr << "bench_scale: " << why << "\n"
              << "usage: bench_scale preload --endpoints H:P,... --locks N --lease-ms L --prefix P "
                 "[--connections C] [--depth D]\n"
              << "       bench_scale keepalive --endpoints H:P,... --connections C --seconds S "
                 "[--lease-ms L] [--interval-ms I] [--ramp-per-s R]\n"
              << "       bench_scale storm --endpoints H:P,... --locks N --lease-ms L --prefix P "
                 "[--kill-pid PID] [--aligned 0|1] [--timeout-s T] [--drift-ppm R]\n";
    return 2;
}

double since_s(Clock::time_point from, Clock::time_point to = Clock::now()) {
    return std::chrono::duration<double>(to - from).count();
}

// ---- flags ----

class Flags {
  public:
    bool parse(int argc, char** argv) {
        for (int i = 2; i < argc; i += 2) {
            const std::string name = argv[i];
            if (!name.starts_with("--") || i + 1 >= argc) return false;
            values_[name.substr(2)] = argv[i + 1];
        }
        return true;
    }
    std::string text(const std::string& name) const {
        auto it = values_.find(name);
        if (it == values_.end()) throw std::invalid_argument("--" + name + " is required");
        return it->second;
    }
    std::uint64_t number(const std::string& name, std::uint64_t lo, std::uint64_t hi,
                         std::optional<std::uint64_t> fallback = std::nullopt) const {
        auto it = values_.find(name);
        if (it == values_.end()) {
            if (!fallback) throw std::invalid_argument("--" + name + " is required");
            return *fallback;
        }
        std::size_t used = 0;
        const std::uint64_t v = std::stoull(it->second, &used);
        if (used != it->second.size() || v < lo || v > hi)
            throw std::invalid_argument("--" + name + " " + it->second + " not in [" + std::to_string(lo) + ", " +
                                        std::to_string(hi) + "]");
        return v;
    }
    bool has(const std::string& name) const { return values_.contains(name); }

  private:
    std::map<std::string, std::string> values_;
};

// ---- members' /metrics ----

struct MemberMetrics {
    bool ok = false;
    bool is_leader = false;
    std::uint64_t term = 0, locks_held = 0, expiries = 0;
};

std::uint64_t metric_value(const std::string& text, const std::string& name) {
    const std::size_t at = text.find("\n" + name + " ");
    if (at == std::string::npos) return 0;
    return std::stoull(text.substr(at + name.size() + 2));
}

MemberMetrics read_metrics(client::HttpConnection& conn) {
    MemberMetrics m;
    const auto r = conn.roundtrip({"GET", "/metrics", ""}, Clock::now() + 1s);
    if (r.error != client::TransportError::kNone || r.response.status != 200) return m;
    const std::string& t = r.response.body;
    m.ok = true;
    m.is_leader = metric_value(t, "pgfence_is_leader") == 1;
    m.term = metric_value(t, "pgfence_term");
    m.locks_held = metric_value(t, "pgfence_locks_held");
    m.expiries = metric_value(t, "pgfence_expiries_total{existed=\"true\"}");
    return m;
}

// One keep-alive connection per member, for polling.
class Members {
  public:
    explicit Members(const std::vector<client::Endpoint>& endpoints) : endpoints_(endpoints) {
        for (const auto& e : endpoints) conns_.push_back(std::make_unique<client::HttpConnection>(e));
    }
    std::vector<MemberMetrics> poll() {
        std::vector<MemberMetrics> out;
        for (std::size_t i = 0; i < conns_.size(); ++i)
            out.push_back(skip_ == i ? MemberMetrics{} : read_metrics(*conns_[i]));
        return out;
    }
    // The leader's index in the last poll with a leader, within `timeout`.
    std::optional<std::size_t> wait_leader(std::chrono::milliseconds timeout, std::uint64_t above_term = 0) {
        const auto give_up = Clock::now() + timeout;
        while (Clock::now() < give_up) {
            last_ = poll();
            for (std::size_t i = 0; i < last_.size(); ++i)
                if (last_[i].ok && last_[i].is_leader && last_[i].term > above_term) return i;
            std::this_thread::sleep_for(kPollEvery);
        }
        return std::nullopt;
    }
    void skip(std::size_t i) { skip_ = i; }
    const std::vector<MemberMetrics>& last() const { return last_; }
    const client::Endpoint& endpoint(std::size_t i) const { return endpoints_[i]; }

  private:
    std::vector<client::Endpoint> endpoints_;
    std::vector<std::unique_ptr<client::HttpConnection>> conns_;
    std::vector<MemberMetrics> last_;
    std::size_t skip_ = SIZE_MAX;
};

// ---- preload ----

struct PreloadResult {
    std::uint64_t granted = 0, errors = 0;
    double seconds = 0;
    Clock::time_point first_grant, last_grant;
    std::string first_error;
};

class Preloader final : public bench::PipelineHandler {
  public:
    // aligned_ppm > 0: every lease is asked so that it ends when the first
    // would: lease_ms minus the time since the preload began, divided by
    // (1 + rho) for rho = aligned_ppm (the leader's margin scales with the
    // lease), at least 1000 ms. So N leases granted over seconds expire together.
    Preloader(std::uint64_t locks, std::uint64_t lease_ms, std::string prefix, std::size_t depth,
              std::uint64_t aligned_ppm = 0)
        : locks_(locks), lease_ms_(lease_ms), prefix_(std::move(prefix)), depth_(depth), aligned_ppm_(aligned_ppm) {}
    void attach(bench::Pipeline* p, std::size_t connections) {
        pipe_ = p;
        connections_ = connections;
    }

    void on_response(std::size_t, std::uint64_t tag, unsigned status, std::string_view body,
                     std::chrono::microseconds) override {
        ++answered_;
        if (status == 200) {
            const auto now = Clock::now();
            if (r_.granted++ == 0) r_.first_grant = now;
            r_.last_grant = now;
        } else {
            note_error("acquire of " + key(tag) + ": HTTP " + std::to_string(status) + " " + std::string(body));
        }
    }
    void on_error(std::size_t, const std::string& why, std::size_t lost) override {
        answered_ += lost;
        r_.errors += lost > 0 ? lost - 1 : 0;  // note_error counts one more
        note_error(why);
    }
    void on_tick(Clock::time_point now) override {
        for (std::size_t i = 0; i < connections_ && issued_ < locks_; ++i) {
            std::string error;
            if (!pipe_->is_open(i) && !pipe_->open(i, error)) {
                note_error(error);
                continue;
            }
            while (pipe_->is_open(i) && pipe_->in_flight(i) < depth_ && issued_ < locks_) {
                const std::uint64_t k = issued_++;
                pipe_->post(i, "/v1/acquire",
                            "{\"key\":\"" + key(k) + "\",\"lease_ms\":" + std::to_string(lease_at(now)) + "}", k);
            }
        }
        if (now >= next_progress_) {
            next_progress_ = now + 1s;
            std::fprintf(stderr, "bench_scale: preload %llu/%llu granted, %llu errors\n",
                         static_cast<unsigned long long>(r_.granted), static_cast<unsigned long long>(locks_),
                         static_cast<unsigned long long>(r_.errors));
        }
    }
    bool done() const override { return answered_ >= locks_; }
    PreloadResult& result() { return r_; }

  private:
    std::string key(std::uint64_t k) const { return prefix_ + "-" + std::to_string(k); }
    std::uint64_t lease_at(Clock::time_point now) const {
        if (aligned_ppm_ == 0) return lease_ms_;
        const double since_ms = std::chrono::duration<double, std::milli>(now - start_).count();
        const double ms = static_cast<double>(lease_ms_) - since_ms / (1.0 + static_cast<double>(aligned_ppm_) / 1e6);
        return ms < 1000 ? 1000 : static_cast<std::uint64_t>(ms);
    }
    void note_error(const std::string& why) {
        if (r_.errors++ == 0) r_.first_error = why;
    }

    std::uint64_t locks_, lease_ms_;
    std::string prefix_;
    std::size_t depth_, connections_ = 0;
    std::uint64_t aligned_ppm_ = 0;
    Clock::time_point start_ = Clock::now();
    bench::Pipeline* pipe_ = nullptr;
    std::uint64_t issued_ = 0, answered_ = 0;
    Clock::time_point next_progress_ = Clock::now() + 1s;
    PreloadResult r_;
};

PreloadResult preload(const client::Endpoint& leader, std::uint64_t locks, std::uint64_t lease_ms,
                      const std::string& prefix, std::size_t connections, std::size_t depth,
                      std::uint64_t aligned_ppm = 0) {
    Preloader h(locks, lease_ms, prefix, depth, aligned_ppm);
    bench::Pipeline pipe(leader, connections, h);
    h.attach(&pipe, connections);
    const auto start = Clock::now();
    // A bound far beyond any sane rate (1000 grants/s) so a stuck run ends.
    if (!pipe.run(start + std::chrono::seconds(60 + locks / 1000))) h.result().errors += 1;
    h.result().seconds = since_s(start);
    return h.result();
}

client::Endpoint find_leader(const std::vector<client::Endpoint>& endpoints) {
    Members m(endpoints);
    const auto i = m.wait_leader(10s);
    if (!i) throw std::runtime_error("no member of --endpoints reports pgfence_is_leader 1 within 10s");
    return endpoints[*i];
}

int run_preload(const Flags& f, const std::vector<client::Endpoint>& endpoints) {
    const auto connections = f.number("connections", 1, 4096, 64);
    bench::raise_open_files(connections + 64);
    const PreloadResult r = preload(find_leader(endpoints), f.number("locks", 1, kMaxLocks),
                                    f.number("lease-ms", 1000, 86'400'000), f.text("prefix"), connections,
                                    f.number("depth", 1, 1024, 16));
    std::printf("preloaded=%llu errors=%llu seconds=%.2f per_s=%.0f\n",
                static_cast<unsigned long long>(r.granted), static_cast<unsigned long long>(r.errors), r.seconds,
                static_cast<double>(r.granted) / r.seconds);
    if (r.errors > 0) std::cerr << "bench_scale: preload: " << r.errors << " errors, first: " << r.first_error << '\n';
    return r.errors == 0 ? 0 : 1;
}

// ---- keepalive: many connections, each holding its own lock ----

class Holders final : public bench::PipelineHandler {
  public:
    struct Settings {
        std::size_t connections;
        std::uint64_t lease_ms, interval_ms, ramp_per_s;
        std::chrono::seconds measure;
    };
    Holders(const Settings& s, std::string prefix)
        : s_(s), prefix_(std::move(prefix)), tokens_(s.connections, 0) {}
    void attach(bench::Pipeline* p) { pipe_ = p; }

    void on_response(std::size_t conn, std::uint64_t tag, unsigned status, std::string_view body,
                     std::chrono::microseconds latency) override {
        const auto now = Clock::now();
        if (tag == kAcquire) {
            const auto at = body.find("\"token\":");
            if (status != 200 || at == std::string_view::npos) return note_error("acquire: HTTP " + std::to_string(status) + " " + std::string(body));
            tokens_[conn] = std::stoull(std::string(body.substr(at + 8, 24)));
            due_.push_back({now + interval(), conn});
            if (++holding_ == s_.connections) start_measuring(now);
            return;
        }
        if (!measuring(now)) return;
        if (status != 200) return note_error("keepalive: HTTP " + std::to_string(status) + " " + std::string(body));
        ++ok_;
        latencies_us_.push_back(static_cast<std::uint32_t>(latency.count()));
    }
    void on_error(std::size_t conn, const std::string& why, std::size_t) override {
        if (tokens_[conn] != 0) --holding_;
        tokens_[conn] = 0;
        note_error(why);  // the connection stays closed: its lock is lost
    }
    void on_tick(Clock::time_point now) override {
        open_more(now);
        while (!due_.empty() && due_.front().at <= now) {
            const Due d = due_.front();
            due_.pop_front();
            if (tokens_[d.conn] == 0 || !pipe_->is_open(d.conn)) continue;
            if (pipe_->in_flight(d.conn) > 0) {
                if (measuring(now)) ++late_;  // the previous one is not answered yet: skip this one
            } else {
                pipe_->post(d.conn, "/v1/keepalive", body(d.conn), kKeepalive);
                if (measuring(now)) ++sent_;
            }
            due_.push_back({d.at + interval(), d.conn});
        }
        if (now >= next_progress_) {
            next_progress_ = now + 1s;
            std::fprintf(stderr, "bench_scale: keepalive: %zu connections open, %zu holding, %llu errors\n", opened_,
                         holding_, static_cast<unsigned long long>(errors_));
        }
    }
    bool done() const override { return started_ && Clock::now() >= end_; }

    void print() {
        std::sort(latencies_us_.begin(), latencies_us_.end());
        const double seconds = static_cast<double>(s_.measure.count());
        const double expected = static_cast<double>(s_.connections) * 1000.0 / static_cast<double>(s_.interval_ms);
        std::printf("connections=%zu holding=%zu seconds=%.0f keepalives=%llu keepalives_per_s=%.0f "
                    "expected_per_s=%.0f sent=%llu late=%llu p50_us=%.0f p99_us=%.0f max_us=%.0f errors=%llu "
                    "ramp_s=%.2f\n",
                    s_.connections, holding_, seconds, static_cast<unsigned long long>(ok_),
                    static_cast<double>(ok_) / seconds, expected, static_cast<unsigned long long>(sent_),
                    static_cast<unsigned long long>(late_), bench::percentile_us(latencies_us_, 0.5),
                    bench::percentile_us(latencies_us_, 0.99),
                    latencies_us_.empty() ? 0.0 : static_cast<double>(latencies_us_.back()),
                    static_cast<unsigned long long>(errors_), ramp_s_);
        if (errors_ > 0) std::cerr << "bench_scale: keepalive: " << errors_ << " errors, first: " << first_error_ << '\n';
    }
    std::uint64_t errors() const { return errors_; }

  private:
    static constexpr std::uint64_t kAcquire = 0, kKeepalive = 1;
    struct Due {
        Clock::time_point at;
        std::size_t conn;
    };
    std::chrono::milliseconds interval() const { return std::chrono::milliseconds(s_.interval_ms); }
    std::string key(std::size_t conn) const { return prefix_ + "-" + std::to_string(conn); }
    std::string body(std::size_t conn) const {
        return "{\"key\":\"" + key(conn) + "\",\"token\":" + std::to_string(tokens_[conn]) + "}";
    }
    bool measuring(Clock::time_point now) const { return started_ && now < end_; }
    void start_measuring(Clock::time_point now) {
        started_ = true;
        ramp_s_ = since_s(ramp_start_, now);
        end_ = now + s_.measure;
    }
    // Opens connections at ramp_per_s (each sends its acquire at once).
    void open_more(Clock::time_point now) {
        if (opened_ == 0) ramp_start_ = now;
        const auto allowed = static_cast<std::size_t>(since_s(ramp_start_, now) * static_cast<double>(s_.ramp_per_s)) + 1;
        while (opened_ < s_.connections && opened_ < allowed) {
            const std::size_t i = opened_++;
            std::string error;
            if (!pipe_->open(i, error)) {
                note_error(error);
                continue;
            }
            pipe_->post(i, "/v1/acquire",
                       "{\"key\":\"" + key(i) + "\",\"lease_ms\":" + std::to_string(s_.lease_ms) + "}", kAcquire);
        }
        // Every connection opened but some never got their lock: measure anyway.
        if (!started_ && opened_ == s_.connections && since_s(ramp_start_, now) > 30) start_measuring(now);
    }
    void note_error(const std::string& why) {
        if (errors_++ == 0) first_error_ = why;
    }

    Settings s_;
    bench::Pipeline* pipe_ = nullptr;
    std::string prefix_;
    std::vector<std::uint64_t> tokens_;
    std::deque<Due> due_;  // in order of `at`: every entry is re-queued one interval later
    std::size_t opened_ = 0, holding_ = 0;
    std::uint64_t ok_ = 0, sent_ = 0, late_ = 0, errors_ = 0;
    std::vector<std::uint32_t> latencies_us_;
    Clock::time_point ramp_start_, end_, next_progress_ = Clock::now() + 1s;
    bool started_ = false;
    double ramp_s_ = 0;
    std::string first_error_;
};

int run_keepalive(const Flags& f, const std::vector<client::Endpoint>& endpoints) {
    Holders::Settings s{f.number("connections", 1, kMaxConnections), f.number("lease-ms", 1000, 600'000, 3000),
                        f.number("interval-ms", 10, 600'000, 1000), f.number("ramp-per-s", 10, 1'000'000, 5000),
                        std::chrono::seconds(f.number("seconds", 1, 600))};
    const std::uint64_t limit = bench::raise_open_files(s.connections + 64);
    if (limit < s.connections + 16) {
        std::cerr << "bench_scale: RLIMIT_NOFILE is " << limit << ", too low for " << s.connections
                  << " connections (raise the hard limit: ulimit -Hn)\n";
        return 2;
    }
    Holders h(s, "holder-" + std::to_string(::getpid()));
    bench::Pipeline pipe(find_leader(endpoints), s.connections, h);
    h.attach(&pipe);
    pipe.run(Clock::now() + s.measure + 120s);
    h.print();
    return h.errors() == 0 ? 0 : 1;
}

// ---- storm ----

struct Probe {
    std::atomic<bool> stop{false};
    std::vector<bench::Span> cycles;
    std::uint64_t errors = 0;
    std::string first_error;

    void run(const std::vector<client::Endpoint>& endpoints) {
        client::Options o;
        o.endpoints = endpoints;
        o.timeout = 10s;
        o.attempt_timeout = 2s;
        client::Client c(o);
        const std::string key = "probe-" + std::to_string(::getpid());
        while (!stop) {
            const auto start = Clock::now();
            auto a = c.acquire({key, 5s, 0ms, key});
            const bool ok = a && c.release(key, a.value().token);
            if (ok) {
                cycles.push_back({start, Clock::now()});
            } else if (errors++ == 0) {
                first_error = a ? "release failed" : a.message();
            }
            std::this_thread::sleep_for(kProbeGap);
        }
    }
};

struct StormSettings {
    std::uint64_t locks, lease_ms, drift_ppm, kill_pid;
    bool aligned;
    std::chrono::seconds timeout;
    std::string prefix;
};

// Polls until the leader's expiry count is `locks` above its `before`
// value; the time it saw that, or nullopt at `give_up`.
std::optional<Clock::time_point> wait_expired(Members& m, const std::vector<MemberMetrics>& before,
                                              std::uint64_t locks, Clock::time_point give_up,
                                              std::uint64_t& term_after) {
    while (Clock::now() < give_up) {
        const auto now = Clock::now();
        const auto polled = m.poll();
        for (std::size_t i = 0; i < polled.size(); ++i) {
            if (!polled[i].ok) continue;
            term_after = std::max(term_after, polled[i].term);
            if (polled[i].is_leader && polled[i].expiries >= before[i].expiries + locks) return now;
        }
        std::this_thread::sleep_for(kPollEvery);
    }
    return std::nullopt;
}

int run_storm(const StormSettings& s, const std::vector<client::Endpoint>& endpoints) {
    Members m(endpoints);
    const auto leader = m.wait_leader(10s);
    if (!leader) throw std::runtime_error("no leader within 10s");
    const std::vector<MemberMetrics> before = m.last();
    const std::uint64_t term_before = before[*leader].term;
    bench::raise_open_files(64 + 64);
    const auto preload_start = Clock::now();
    const PreloadResult p =
        preload(endpoints[*leader], s.locks, s.lease_ms, s.prefix, 64, 16, s.aligned ? std::max<std::uint64_t>(s.drift_ppm, 1) : 0);
    if (p.errors > 0) std::cerr << "bench_scale: storm preload: " << p.errors << " errors, first: " << p.first_error << '\n';
    const auto margin = std::chrono::milliseconds(s.lease_ms + s.lease_ms * s.drift_ppm / 1'000'000);
    Clock::time_point first_deadline = p.first_grant + margin, last_deadline = p.last_grant + margin;
    if (s.aligned) first_deadline = last_deadline = preload_start + margin;  // every lease was asked to end then
    std::uint64_t term_after = term_before;
    if (s.kill_pid != 0) {
        if (::kill(static_cast<pid_t>(s.kill_pid), SIGKILL) != 0) throw std::runtime_error("kill --kill-pid failed");
        m.skip(*leader);
        const auto next = m.wait_leader(30s, term_before);
        if (!next) throw std::runtime_error("no new leader within 30s of killing the leader");
        last_deadline = Clock::now() + margin;  // first_deadline: a checkpointed lease's earliest
    }
    // The probe is not sent to a killed leader: its client would try it
    // first and count the failed connection as storm latency.
    std::vector<client::Endpoint> live = endpoints;
    if (s.kill_pid != 0) live.erase(live.begin() + static_cast<std::ptrdiff_t>(*leader));
    Probe probe;
    std::thread probe_thread([&] { probe.run(live); });
    const auto done = wait_expired(m, before, p.granted, last_deadline + s.timeout, term_after);
    probe.stop = true;
    probe_thread.join();
    // A leader change just after the last expiry (a member stalled by the
    // storm's aftermath: its snapshot, the log it compacts) counts too.
    for (const auto settle_until = Clock::now() + kTermSettle; Clock::now() < settle_until;) {
        for (const MemberMetrics& polled : m.poll()) {
            if (polled.ok) term_after = std::max(term_after, polled.term);
        }
        std::this_thread::sleep_for(kPollEvery);
    }
    // The cycles that overlap the storm: [first deadline, all expired (or now)].
    const std::vector<std::uint32_t> cycle_us =
        bench::sorted_us_overlapping(probe.cycles, first_deadline, done ? *done : Clock::now());
    char expired_all_s[32] = "timeout", after_last_s[32] = "timeout";
    if (done) {
        std::snprintf(expired_all_s, sizeof expired_all_s, "%.2f", since_s(first_deadline, *done));
        std::snprintf(after_last_s, sizeof after_last_s, "%.2f", since_s(last_deadline, *done));
    }
    std::printf("storm_locks=%llu lease_ms=%llu preload_s=%.2f deadline_spread_s=%.2f expired_all_s=%s "
                "after_last_s=%s probe_cycles=%zu probe_p99_us=%.0f probe_max_us=%.0f probe_errors=%llu "
                "term_before=%llu term_after=%llu\n",
                static_cast<unsigned long long>(p.granted), static_cast<unsigned long long>(s.lease_ms), p.seconds,
                since_s(first_deadline, last_deadline), expired_all_s, after_last_s, cycle_us.size(),
                bench::percentile_us(cycle_us, 0.99), cycle_us.empty() ? 0.0 : static_cast<double>(cycle_us.back()),
                static_cast<unsigned long long>(probe.errors), static_cast<unsigned long long>(term_before),
                static_cast<unsigned long long>(term_after));
    if (!done) std::cerr << "bench_scale: storm: not all expired within " << s.timeout.count() << "s of the last deadline\n";
    if (probe.errors > 0) std::cerr << "bench_scale: storm probe: " << probe.errors << " errors, first: " << probe.first_error << '\n';
    return done ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::string mode = argc > 1 ? argv[1] : "";
        Flags f;
        if (!f.parse(argc, argv)) return usage("flags must be --name value pairs");
        const client::EndpointsParse eps = client::parse_endpoints(f.text("endpoints"));
        if (!eps.error.empty()) return usage(eps.error);
        if (mode == "preload") return run_preload(f, eps.endpoints);
        if (mode == "keepalive") return run_keepalive(f, eps.endpoints);
        if (mode == "storm") {
            return run_storm({f.number("locks", 1, kMaxLocks), f.number("lease-ms", 1000, 86'400'000),
                              f.number("drift-ppm", 0, 500'000, 50'000), f.number("kill-pid", 2, 1u << 30, 0),
                              f.number("aligned", 0, 1, 0) == 1, std::chrono::seconds(f.number("timeout-s", 1, 3600, 120)),
                              f.text("prefix")},
                             eps.endpoints);
        }
        return usage("unknown mode '" + mode + "'");
    } catch (const std::exception& e) {
        return usage(e.what());
    }
}
