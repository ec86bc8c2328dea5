#include "preload.h"

#include <grpcpp/alarm.h>

#include <cinttypes>
#include <cstdio>
#include <vector>

namespace pgfence::bench::etcd {
namespace {

constexpr auto kRpcTimeout = std::chrono::seconds(10);

enum class Step { kGrant, kPut };

// One lock in progress. Invariant: exactly one of {an RPC, the retry alarm}
// is pending while busy; none when idle.
struct Slot {
    etcdserverpb::Lease::Stub* lease = nullptr;
    etcdserverpb::KV::Stub* kv = nullptr;
    bool busy = false;
    bool waiting = false;  // the pending event is the retry alarm
    int lock = -1;
    Step step = Step::kGrant;
    int attempts = 0;  // of the current step
    std::int64_t lease_id = 0;
    std::unique_ptr<grpc::ClientContext> ctx;
    AsyncCall<etcdserverpb::LeaseGrantResponse> grant;
    AsyncCall<etcdserverpb::PutResponse> put;
    grpc::Status status;
    grpc::Alarm alarm;
};

class Pipeline {
  public:
    Pipeline(const Preload& p, PreloadResult& r) : p_(p), r_(r) {
        const auto& eps = p.target.endpoints;
        for (int c = 0; c < p.connections; ++c) {
            auto ch = open_channel(p.target, eps[static_cast<std::size_t>(c) % eps.size()],
                                   "preload-" + std::to_string(c));
            leases_.push_back(etcdserverpb::Lease::NewStub(ch));
            kvs_.push_back(etcdserverpb::KV::NewStub(ch));
        }
        slots_ = std::vector<Slot>(static_cast<std::size_t>(p.connections * kInFlightPerConnection));
        for (std::size_t s = 0; s < slots_.size(); ++s) {
            slots_[s].lease = leases_[s % leases_.size()].get();
            slots_[s].kv = kvs_[s % kvs_.size()].get();
        }
    }

    void run() {
        for (Slot& s : slots_) take_next(s);
        void* tag = nullptr;
        bool ok = false;
        while (busy_ > 0 && r_.error.empty() && cq_.Next(&tag, &ok)) on_event(*static_cast<Slot*>(tag));
        drain();
    }

  private:
    void take_next(Slot& s) {
        s.busy = next_ < p_.locks;
        if (!s.busy) return;
        ++busy_;
        s.lock = next_++;
        s.step = Step::kGrant;
        s.attempts = 0;
        issue(s);
    }

    void issue(Slot& s) {
        ++s.attempts;
        s.ctx = context_for(kRpcTimeout);
        if (s.step == Step::kGrant) {
            etcdserverpb::LeaseGrantRequest req;
            req.set_ttl(p_.ttl_s);
            s.grant.reader = s.lease->AsyncLeaseGrant(s.ctx.get(), req, &cq_);
            s.grant.reader->Finish(&s.grant.response, &s.status, &s);
        } else {
            etcdserverpb::PutRequest req;
            req.set_key(held_lock_key(p_.prefix, s.lock, s.lease_id));
            req.set_lease(s.lease_id);
            s.put.reader = s.kv->AsyncPut(s.ctx.get(), req, &cq_);
            s.put.reader->Finish(&s.put.response, &s.status, &s);
        }
    }

    void on_event(Slot& s) {
        if (s.waiting) {
            s.waiting = false;
            issue(s);
            return;
        }
        const bool granted = s.step == Step::kGrant && s.status.ok() && s.grant.response.id() > 0;
        if (!s.status.ok() || (s.step == Step::kGrant && !granted)) {
            retry(s);
            return;
        }
        if (s.step == Step::kGrant) {
            const auto now = Clock::now();
            if (r_.first_ttl_s == 0) {
                r_.first_granted = now;
                r_.first_ttl_s = s.grant.response.ttl();
            }
            r_.last_granted = now;
            s.lease_id = s.grant.response.id();
            s.step = Step::kPut;
            s.attempts = 0;
            issue(s);
            return;
        }
        ++r_.locks;
        if (r_.locks % std::max(1, p_.locks / 10) == 0) {
            std::fprintf(stderr, "preload: %d/%d locks held after %.1f s\n", r_.locks, p_.locks,
                         std::chrono::duration<double>(Clock::now() - start_).count());
        }
        --busy_;
        take_next(s);
    }

    void retry(Slot& s) {
        const std::string what = s.step == Step::kGrant ? "LeaseGrant" : "Put";
        const std::string why = s.status.ok() ? "no lease ID, error '" + s.grant.response.error() + "'"
                                              : describe(s.status);
        if (s.attempts >= kMaxAttempts) {
            r_.error = what + " for lock " + std::to_string(s.lock) + " failed " +
                       std::to_string(s.attempts) + " times, last: " + why;
            return;
        }
        if (r_.retries++ == 0) std::fprintf(stderr, "preload: retrying %s: %s\n", what.c_str(), why.c_str());
        s.waiting = true;
        s.alarm.Set(&cq_, std::chrono::system_clock::now() + kRetryPause, &s);
    }

    // After a failure, cancels what is pending and waits for each event; the
    // queue must be empty before it and the slots go away.
    void drain() {
        for (Slot& s : slots_) {
            if (!s.busy) continue;
            if (s.waiting) s.alarm.Cancel();
            else if (s.ctx) s.ctx->TryCancel();
        }
        void* tag = nullptr;
        bool ok = false;
        // The failed slot's own event was consumed already.
        for (int pending = r_.error.empty() ? 0 : busy_ - 1; pending > 0 && cq_.Next(&tag, &ok);)
            --pending;
        cq_.Shutdown();
        while (cq_.Next(&tag, &ok)) {
        }
    }

    const Preload& p_;
    PreloadResult& r_;
    const Clock::time_point start_ = Clock::now();
    std::vector<std::unique_ptr<etcdserverpb::Lease::Stub>> leases_;
    std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> kvs_;
    std::vector<Slot> slots_;  // never resized after construction: events point into it
    grpc::CompletionQueue cq_;
    int next_ = 0;   // next lock to start
    int busy_ = 0;   // slots with a lock in progress
};

}  // namespace

std::string held_lock_key(const std::string& prefix, int i, std::int64_t lease) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "%" PRIx64, static_cast<std::uint64_t>(lease));
    return prefix + "/" + std::to_string(i) + "/" + hex;
}

PreloadResult run_preload(const Preload& p) {
    PreloadResult r;
    const auto start = Clock::now();
    Pipeline(p, r).run();
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (r.error.empty() && r.locks != p.locks)
        r.error = "only " + std::to_string(r.locks) + " of " + std::to_string(p.locks) + " locks made";
    return r;
}

}  // namespace pgfence::bench::etcd
