#include "etcd.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace pgfence::bench::etcd {

std::string load_ca(const std::string& cacert_path, Target& t) {
    std::ifstream in(cacert_path);
    if (!in) return "cannot read --cacert " + cacert_path;
    std::stringstream all;
    all << in.rdbuf();
    t.ca_pem = all.str();
    if (t.ca_pem.find("BEGIN CERTIFICATE") == std::string::npos)
        return "--cacert " + cacert_path + " holds no PEM certificate";
    return {};
}

std::shared_ptr<grpc::Channel> open_channel(const Target& t, const client::Endpoint& at,
                                            const std::string& domain) {
    grpc::ChannelArguments args;
    args.SetString(GRPC_ARG_CHANNEL_POOL_DOMAIN, domain);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // Failures are counted and retried by the callers' own loops; gRPC's
    // transparent-retry machinery would only add CPU to every call.
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    std::shared_ptr<grpc::ChannelCredentials> creds;
    if (at.tls) {
        grpc::SslCredentialsOptions o;
        o.pem_root_certs = t.ca_pem;
        creds = grpc::SslCredentials(o);
    } else {
        creds = grpc::InsecureChannelCredentials();
    }
    return grpc::CreateCustomChannel(at.authority(), creds, args);
}

std::string describe(const grpc::Status& s) {
    return "gRPC code " + std::to_string(static_cast<int>(s.error_code())) + ": " +
           s.error_message();
}

std::unique_ptr<grpc::ClientContext> context_for(std::chrono::milliseconds timeout) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    return ctx;
}

std::int64_t grant_lease(etcdserverpb::Lease::Stub& lease, std::int64_t ttl_s, std::string& error) {
    etcdserverpb::LeaseGrantRequest req;
    req.set_ttl(ttl_s);
    etcdserverpb::LeaseGrantResponse resp;
    const auto ctx = context_for(kSetupTimeout);
    const grpc::Status s = lease.LeaseGrant(ctx.get(), req, &resp);
    if (!s.ok()) {
        error = "LeaseGrant: " + describe(s);
        return 0;
    }
    if (resp.id() <= 0 || !resp.error().empty()) {
        error = "LeaseGrant: no lease (ID " + std::to_string(resp.id()) + ", error '" +
                resp.error() + "')";
        return 0;
    }
    return resp.id();
}

std::string revoke_leases(etcdserverpb::Lease::Stub& lease, const std::vector<std::int64_t>& ids) {
    for (const std::int64_t id : ids) {
        etcdserverpb::LeaseRevokeRequest req;
        req.set_id(id);
        etcdserverpb::LeaseRevokeResponse resp;
        const auto ctx = context_for(kSetupTimeout);
        if (const grpc::Status s = lease.LeaseRevoke(ctx.get(), req, &resp); !s.ok())
            return "LeaseRevoke " + std::to_string(id) + ": " + describe(s);
    }
    return {};
}

std::uint64_t raft_term(const Target& t, std::string& error) {
    std::uint64_t term = 0;
    for (const client::Endpoint& at : t.endpoints) {
        auto stub = etcdserverpb::Maintenance::NewStub(open_channel(t, at, "status"));
        etcdserverpb::StatusRequest req;
        etcdserverpb::StatusResponse resp;
        const auto ctx = context_for(kSetupTimeout);
        if (const grpc::Status s = stub->Status(ctx.get(), req, &resp); !s.ok()) {
            error = "Status from " + at.to_string() + ": " + describe(s);
            continue;
        }
        term = std::max<std::uint64_t>(term, resp.raftterm());
    }
    if (term > 0) error.clear();
    return term;
}

LeaseKeeper::LeaseKeeper(std::shared_ptr<grpc::Channel> channel, std::vector<std::int64_t> ids,
                         std::int64_t ttl_s)
    : stub_(etcdserverpb::Lease::NewStub(std::move(channel))),
      ids_(std::move(ids)),
      period_(std::chrono::milliseconds(ttl_s * 1000 / 3)),
      thread_([this] { run(); }) {}

LeaseKeeper::~LeaseKeeper() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
        if (stream_ctx_ != nullptr) stream_ctx_->TryCancel();
    }
    wake_.notify_all();
    thread_.join();
}

std::string LeaseKeeper::error() const {
    std::lock_guard lock(mu_);
    return error_;
}

void LeaseKeeper::fail(const std::string& why) {
    std::lock_guard lock(mu_);
    if (error_.empty() && !stop_) error_ = why;
}

void LeaseKeeper::run() {
    std::unique_lock lock(mu_);
    for (auto next = Clock::now() + period_;; next += period_) {
        if (wake_.wait_until(lock, next, [this] { return stop_; })) return;
        lock.unlock();
        keep_all();
        lock.lock();
    }
}

bool LeaseKeeper::keep_all() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + period_);
    {
        std::lock_guard lock(mu_);
        if (stop_) return true;
        stream_ctx_ = &ctx;
    }
    auto stream = stub_->LeaseKeepAlive(&ctx);
    bool ok = true;
    for (const std::int64_t id : ids_) {
        etcdserverpb::LeaseKeepAliveRequest req;
        req.set_id(id);
        etcdserverpb::LeaseKeepAliveResponse resp;
        if (!stream->Write(req) || !stream->Read(&resp)) {
            fail("LeaseKeepAlive stream broke at lease " + std::to_string(id));
            ok = false;
            break;
        }
        if (resp.ttl() <= 0) {
            fail("lease " + std::to_string(id) + " expired (LeaseKeepAlive answered TTL 0)");
            ok = false;
            break;
        }
    }
    stream->WritesDone();
    if (const grpc::Status s = stream->Finish(); ok && !s.ok()) {
        fail("LeaseKeepAlive: " + describe(s));
        ok = false;
    }
    std::lock_guard lock(mu_);
    stream_ctx_ = nullptr;
    return ok;
}

}  // namespace pgfence::bench::etcd
