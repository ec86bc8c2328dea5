// The peer transport (peer_transport.h): the accept loop, the set of
// outgoing connections, and the public calls. The connections themselves are
// in peer_outgoing.cc and peer_incoming.cc (peer_links.h).
#include "net/peer_transport.h"

#include <boost/asio/io_context.hpp>
#include <map>
#include <mutex>

#include "log/log.h"
#include "net/accept_retry.h"
#include "net/frame.h"
#include "net/peer_links.h"
#include "net/raft_codec.h"

namespace pgfence::net {

using peer::count;
using peer::Counters;
using peer::error_code;
using peer::Incoming;
using peer::Outgoing;
using peer::Shared;
using peer::tcp;
using log::log_value;
using log::LogLevel;
namespace asio = boost::asio;

struct PeerTransport::Impl : std::enable_shared_from_this<PeerTransport::Impl> {
    Impl(asio::io_context& io_ctx, std::shared_ptr<Shared> s)
        : io(io_ctx), acceptor(io_ctx), retry_timer(io_ctx), shared(std::move(s)) {}

    void accept() {
        acceptor.async_accept([self = shared_from_this()](const error_code& ec, tcp::socket socket) {
            if (ec == asio::error::operation_aborted || self->shared->stopped) return;
            if (ec) {
                self->shared->refused_log.log(LogLevel::kWarn, "peer_accept_failed", {{"error", ec.message()}});
                if (accept_needs_pause(ec)) {  // accept_retry.h
                    self->retry_timer.expires_after(kAcceptRetry);
                    self->retry_timer.async_wait([self](const error_code& wait_ec) {
                        if (!wait_ec && !self->shared->stopped) self->accept();
                    });
                    return;
                }
            } else {
                std::make_shared<Incoming>(std::move(socket), self->shared)->start();
            }
            self->accept();
        });
    }

    std::shared_ptr<Outgoing> find(std::uint64_t id) const {
        std::lock_guard<std::mutex> guard(peers_mutex);
        auto it = peers.find(id);
        return it == peers.end() ? nullptr : it->second;
    }
    // A copy, to call into the connections without holding peers_mutex.
    std::vector<std::shared_ptr<Outgoing>> all() const {
        std::lock_guard<std::mutex> guard(peers_mutex);
        std::vector<std::shared_ptr<Outgoing>> out;
        for (const auto& [id, o] : peers) out.push_back(o);
        return out;
    }

    asio::io_context& io;
    tcp::acceptor acceptor;
    asio::steady_timer retry_timer;  // accept again after a failed accept (accept_retry.h)
    std::shared_ptr<Shared> shared;
    // Changed on the event loop only (start, set_peers), read by send() on
    // any thread: guarded by peers_mutex.
    mutable std::mutex peers_mutex;
    std::map<std::uint64_t, std::shared_ptr<Outgoing>> peers;
    std::map<std::uint64_t, PeerAddress> addresses;  // of `peers` (event loop only)
};

PeerTransport::PeerTransport(asio::io_context& io, TransportOptions options, MessageHandler on_message,
                             InfoHandler on_info) {
    auto shared = std::make_shared<Shared>(options);
    shared->on_message = std::move(on_message);
    shared->on_info = std::move(on_info);
    impl_ = std::make_shared<Impl>(io, std::move(shared));
}

PeerTransport::~PeerTransport() { stop(); }

std::string PeerTransport::start(const MemberInfo& hello) {
    Shared& s = *impl_->shared;
    s.hello = encode_frame(s.options.cluster_id, FrameKind::kMemberInfo, encode_member_info(hello));
    if (!s.options.seed_info.empty()) s.seed_frame = encode_frame(s.options.cluster_id, FrameKind::kSeedInfo, s.options.seed_info);
    error_code ec;
    const auto addr = asio::ip::make_address(s.options.listen_host, ec);
    if (ec) return "bad peer listen host '" + s.options.listen_host + "': " + ec.message();
    const tcp::endpoint ep(addr, s.options.listen_port);
    impl_->acceptor.open(ep.protocol(), ec);
    if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) impl_->acceptor.bind(ep, ec);
    if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        return "cannot listen for peers on " + s.options.listen_host + ":" +
               std::to_string(s.options.listen_port) + ": " + ec.message();
    }
    impl_->accept();
    set_peers(s.options.peers);
    return {};
}

void PeerTransport::set_seed_handler(SeedHandler on_seed) { impl_->shared->on_seed = std::move(on_seed); }

void PeerTransport::set_peers(const std::vector<PeerAddress>& peers) {
    Impl& impl = *impl_;
    std::vector<std::shared_ptr<Outgoing>> closed;
    std::vector<std::shared_ptr<Outgoing>> dialed;
    {
        std::lock_guard<std::mutex> guard(impl.peers_mutex);
        std::map<std::uint64_t, PeerAddress> wanted;
        for (const PeerAddress& p : peers) wanted.emplace(p.id, p);
        for (auto it = impl.peers.begin(); it != impl.peers.end();) {
            auto w = wanted.find(it->first);
            const PeerAddress& had = impl.addresses[it->first];
            if (w != wanted.end() && w->second.host == had.host && w->second.port == had.port) {
                ++it;
                continue;
            }
            closed.push_back(it->second);
            impl.addresses.erase(it->first);
            it = impl.peers.erase(it);
        }
        for (const auto& [id, p] : wanted) {
            if (impl.peers.count(id) != 0) continue;
            auto out = std::make_shared<Outgoing>(impl.io, p, impl.shared);
            impl.peers.emplace(id, out);
            impl.addresses.emplace(id, p);
            dialed.push_back(out);
        }
        impl.shared->dialed.clear();
        for (const auto& [id, out] : impl.peers) impl.shared->dialed.insert(id);
    }
    for (const auto& out : closed) out->close();
    if (impl.shared->stopped) return;
    for (const auto& out : dialed) out->dial();
}

void PeerTransport::stop() {
    if (impl_->shared->stopped) return;
    impl_->shared->stopped = true;
    error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->retry_timer.cancel();
    for (const auto& out : impl_->all()) out->close();
}

void PeerTransport::send(const raft::Message& m) {
    const std::shared_ptr<Outgoing> out = impl_->find(m.to);
    if (!out) {
        count(impl_->shared->stats.dropped_unconnected);
        return;
    }
    out->send_frame(encode_frame(impl_->shared->options.cluster_id, FrameKind::kRaft, encode_message(m)));
}

void PeerTransport::broadcast_info(const MemberInfo& info) {
    Shared& s = *impl_->shared;
    s.hello = encode_frame(s.options.cluster_id, FrameKind::kMemberInfo, encode_member_info(info));
    for (const auto& out : impl_->all()) {
        if (out->connected()) out->send_frame(s.hello);
    }
}

bool PeerTransport::connected(std::uint64_t peer) const {
    const std::shared_ptr<Outgoing> out = impl_->find(peer);
    return out && out->connected();
}

TransportStats PeerTransport::stats() const {
    const Counters& c = impl_->shared->stats;
    auto get = [](const std::atomic<std::uint64_t>& v) { return v.load(std::memory_order_relaxed); };
    TransportStats t;
    t.frames_sent = get(c.frames_sent);
    t.frames_received = get(c.frames_received);
    t.dropped_queue_full = get(c.dropped_queue_full);
    t.dropped_unconnected = get(c.dropped_unconnected);
    t.bad_frames = get(c.bad_frames);
    t.connects = get(c.connects);
    t.tls_refused = get(c.tls_refused);
    for (std::size_t r = 0; r < kShedReasons; ++r) t.shed[r] = get(c.shed[r]);
    return t;
}

void PeerTransport::set_tls(TlsContextPtr accept, TlsContextPtr dial) {
    impl_->shared->tls_accept = std::move(accept);
    impl_->shared->tls_dial = std::move(dial);
}

}  // namespace pgfence::net
