#include "load.h"

#include <memory>
#include <vector>

#include "etcd/etcdserver/api/v3lock/v3lockpb/v3lock.grpc.pb.h"

namespace pgfence::bench::etcd {
namespace {

constexpr auto kTick = std::chrono::milliseconds(10);  // pauses are checked this often
// Latency samples reserved up front, over all connections (a vector grows past it).
constexpr std::size_t kReservedSamples = std::size_t{1} << 22;

enum class Phase { kLock, kUnlock };

// One connection. Invariant: at most one RPC in flight (in_flight), and
// `paused` only when none is.
struct Conn {
    std::string name;
    std::int64_t lease = 0;
    std::size_t endpoint = 0;  // index into the target's endpoints
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v3lockpb::Lock::Stub> stub;

    Phase phase = Phase::kLock;
    bool in_flight = false;
    bool paused = false;
    Clock::time_point resume;   // when paused: start over then
    Clock::time_point started;  // this Lock's call
    std::unique_ptr<grpc::ClientContext> ctx;
    AsyncCall<v3lockpb::LockResponse> lock;
    AsyncCall<v3lockpb::UnlockResponse> unlock;
    grpc::Status status;
    std::string key;  // the held lock's key, from Lock's answer

    std::vector<std::uint32_t> latencies_us;
    std::uint64_t cycles = 0, errors = 0;
    std::string first_error;
};

class Loop {
  public:
    Loop(const LockLoad& load, std::vector<Conn>& conns) : load_(load), conns_(conns) {}

    // When the clock started (after the warm-up, if any), and this process's CPU then.
    Clock::time_point measured_from() const { return measured_from_; }
    double cpu_at_start() const { return cpu_at_start_; }

    // The warm-up, then `load_.duration` or until *stop; then cancels and
    // drains what is in flight. Returns when the timed part ended.
    Clock::time_point run() {
        const auto began = Clock::now();
        warming_ = load_.warmup_limit > Clock::duration::zero();
        const auto warm_until = began + load_.warmup_limit;
        if (!warming_) start_clock(began);
        for (std::size_t i = 0; i < conns_.size(); ++i) start_lock(i);
        Clock::time_point ended;
        for (;;) {
            const auto now = Clock::now();
            const bool stopped = load_.stop != nullptr && load_.stop->load();
            if (warming_ && (warmed_ == conns_.size() || now >= warm_until || stopped)) start_clock(now);
            const auto end = warming_ ? warm_until : end_;
            if (stopped || (!warming_ && now >= end)) {
                ended = now;
                break;
            }
            void* tag = nullptr;
            bool ok = false;
            const auto wait = std::min<Clock::duration>(end - now, kTick);  // gRPC's clock is the system's
            const auto status = cq_.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + wait);
            if (status == grpc::CompletionQueue::GOT_EVENT) on_done(index_of(tag));
            resume_paused();
        }
        drain();
        return ended;
    }

  private:
    // The clock starts: what the warm-up did is forgotten but its errors.
    void start_clock(Clock::time_point now) {
        warming_ = false;
        measured_from_ = now;
        cpu_at_start_ = cpu_seconds();
        end_ = now + load_.duration;
        for (Conn& c : conns_) {
            c.cycles = 0;
            c.latencies_us.clear();
        }
    }

    static void* tag_of(std::size_t i) { return reinterpret_cast<void*>(i + 1); }
    static std::size_t index_of(void* tag) { return reinterpret_cast<std::uintptr_t>(tag) - 1; }

    void start_lock(std::size_t i) {
        Conn& c = conns_[i];
        v3lockpb::LockRequest req;
        req.set_name(c.name);
        req.set_lease(c.lease);
        c.phase = Phase::kLock;
        c.ctx = context_for(kRpcTimeout);
        c.started = Clock::now();
        c.lock.reader = c.stub->AsyncLock(c.ctx.get(), req, &cq_);
        c.lock.reader->Finish(&c.lock.response, &c.status, tag_of(i));
        c.in_flight = true;
    }

    void start_unlock(std::size_t i) {
        Conn& c = conns_[i];
        v3lockpb::UnlockRequest req;
        req.set_key(c.key);
        c.phase = Phase::kUnlock;
        c.ctx = context_for(kRpcTimeout);
        c.unlock.reader = c.stub->AsyncUnlock(c.ctx.get(), req, &cq_);
        c.unlock.reader->Finish(&c.unlock.response, &c.status, tag_of(i));
        c.in_flight = true;
    }

    void on_done(std::size_t i) {
        Conn& c = conns_[i];
        c.in_flight = false;
        if (!c.status.ok()) {
            fail(i, (c.phase == Phase::kLock ? "Lock at " : "Unlock at ") +
                        load_.target.endpoints[c.endpoint].to_string() + ": " + describe(c.status));
            return;
        }
        if (c.phase == Phase::kLock) {
            if (c.lock.response.key().empty()) {
                fail(i, "Lock answered without a key");
                return;
            }
            if (c.latencies_us.size() < kMaxSamplesPerConnection) {
                c.latencies_us.push_back(static_cast<std::uint32_t>(
                    std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c.started)
                        .count()));
            }
            c.key = c.lock.response.key();
            start_unlock(i);
            return;
        }
        if (warming_ && c.cycles == 0) ++warmed_;
        ++c.cycles;
        start_lock(i);
    }

    // Counts the error; the connection moves to the next endpoint and pauses.
    void fail(std::size_t i, const std::string& why) {
        Conn& c = conns_[i];
        if (c.errors++ == 0) c.first_error = why;
        const auto& eps = load_.target.endpoints;
        c.endpoint = (c.endpoint + 1) % eps.size();
        c.channel = open_channel(load_.target, eps[c.endpoint], "load-" + std::to_string(i));
        c.stub = v3lockpb::Lock::NewStub(c.channel);
        c.paused = true;
        c.resume = Clock::now() + kPauseAfterError;
    }

    void resume_paused() {
        const auto now = Clock::now();
        for (std::size_t i = 0; i < conns_.size(); ++i) {
            if (conns_[i].paused && now >= conns_[i].resume) {
                conns_[i].paused = false;
                start_lock(i);
            }
        }
    }

    // Cancels every RPC in flight and waits for each one's completion (the
    // queue must be empty before it and the calls' buffers go away).
    void drain() {
        std::size_t pending = 0;
        for (Conn& c : conns_) {
            if (!c.in_flight) continue;
            c.ctx->TryCancel();
            ++pending;
        }
        void* tag = nullptr;
        bool ok = false;
        while (pending > 0 && cq_.Next(&tag, &ok)) --pending;
        cq_.Shutdown();
        while (cq_.Next(&tag, &ok)) {
        }
    }

    const LockLoad& load_;
    std::vector<Conn>& conns_;
    grpc::CompletionQueue cq_;
    bool warming_ = false;
    std::size_t warmed_ = 0;  // connections with a cycle done during the warm-up
    Clock::time_point measured_from_;
    double cpu_at_start_ = 0;
    Clock::time_point end_;
};

// Channels, stubs and leases, before the clock; "" or the first failure.
std::string set_up(const LockLoad& load, std::vector<Conn>& conns) {
    const auto& eps = load.target.endpoints;
    for (std::size_t i = 0; i < conns.size(); ++i) {
        Conn& c = conns[i];
        c.name = load.name_prefix + "/" + std::to_string(i);
        c.endpoint = i % eps.size();
        c.channel = open_channel(load.target, eps[c.endpoint], "load-" + std::to_string(i));
        c.stub = v3lockpb::Lock::NewStub(c.channel);
        auto lease = etcdserverpb::Lease::NewStub(c.channel);
        std::string error;
        c.lease = grant_lease(*lease, kLeaseTtlS, error);
        if (c.lease == 0) return "connection " + std::to_string(i) + " at " +
                                 eps[c.endpoint].to_string() + ": " + error;
        c.latencies_us.reserve(kReservedSamples / conns.size());
    }
    return {};
}

}  // namespace

LoadResult run_lock_load(const LockLoad& load) {
    LoadResult r;
    std::vector<Conn> conns(static_cast<std::size_t>(load.connections));
    std::vector<std::int64_t> leases;
    const std::string setup_error = set_up(load, conns);
    for (const Conn& c : conns) {
        if (c.lease != 0) leases.push_back(c.lease);
    }
    if (!setup_error.empty()) {
        r.errors = 1;
        r.first_error = "setup: " + setup_error;
    } else {
        auto keeper_channel = open_channel(load.target, load.target.endpoints[0], "keeper");
        LeaseKeeper keeper(keeper_channel, leases, kLeaseTtlS);
        const auto began = Clock::now();
        Loop loop(load, conns);
        const auto ended = loop.run();
        r.cpu_s = cpu_seconds() - loop.cpu_at_start();
        r.warmup_s = std::chrono::duration<double>(loop.measured_from() - began).count();
        r.seconds = std::chrono::duration<double>(ended - loop.measured_from()).count();
        if (std::string why = keeper.error(); !why.empty()) {
            ++r.errors;
            r.first_error = why;
        }
    }
    std::vector<std::uint32_t> all;
    for (Conn& c : conns) {
        r.cycles += c.cycles;
        r.errors += c.errors;
        if (r.first_error.empty()) r.first_error = c.first_error;
        all.insert(all.end(), c.latencies_us.begin(), c.latencies_us.end());
    }
    if (!leases.empty()) {
        auto lease = etcdserverpb::Lease::NewStub(conns[0].channel);
        if (std::string why = revoke_leases(*lease, leases); !why.empty() && r.first_error.empty())
            r.first_error = "cleanup: " + why;  // not counted: after the timed part
    }
    r.cycles_per_s = r.seconds > 0 ? static_cast<double>(r.cycles) / r.seconds : 0;
    if (r.seconds <= 0 && r.errors == 0) {  // stopped during the warm-up: no point was measured
        r.errors = 1;
        r.first_error = "stopped during the warm-up: nothing was measured";
    }
    set_percentiles(all, r);
    return r;
}

}  // namespace pgfence::bench::etcd
