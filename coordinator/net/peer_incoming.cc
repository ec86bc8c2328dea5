// Incoming peer connections (peer_links.h): the TLS handshake, reading
// frames, and the checks every frame passes before it is handed on.
#include <boost/asio/post.hpp>
#include <algorithm>

#include "net/member_info.h"
#include "net/peer_links.h"
#include "net/raft_codec.h"
#include "net/seed_info.h"
#include "net/tls.h"

namespace pgfence::net::peer {

using log::log_value;
using log::LogLevel;

namespace {

constexpr std::size_t kReadChunkBytes = 64u << 10;

}  // namespace

void Shared::shed(const IncomingSlots::Shed& shed) {
    count(stats.shed[static_cast<std::size_t>(shed.reason)]);
    auto it = incoming.find(shed.conn);
    refused_log.log(LogLevel::kWarn, "peer_connection_shed",
                    {{"remote", it == incoming.end() ? std::string() : it->second->remote()},
                     {"reason", shed_reason_name(shed.reason)}});
    if (it != incoming.end()) it->second->close_shed();
}

Incoming::Incoming(tcp::socket socket, std::shared_ptr<Shared> shared)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), shared_(std::move(shared)),
      conn_(shared_->next_conn++) {
    shared_->incoming.emplace(conn_, this);
    error_code ec;
    const tcp::endpoint from = socket_.remote_endpoint(ec);
    address_ = ec ? std::string("?") : from.address().to_string();
    remote_ = ec ? address_ : address_ + ":" + std::to_string(from.port());
    if (shared_->tls_accept) {
        tls_ = true;
        error_code ignored;
        socket_.native_non_blocking(true, ignored);
        stream_.attach_tls(socket_.native_handle(), shared_->tls_accept, TlsRole::kAccept);
    } else {
        stream_.attach(socket_.native_handle());
    }
}

Incoming::~Incoming() {
    shared_->incoming.erase(conn_);
    shared_->slots.remove(conn_);
}

void Incoming::start() {
    if (auto shed = shared_->slots.admit(conn_, address_)) shared_->shed(*shed);
    // A dialer that already sent something is no silent flood (one ioctl per
    // connection, none per frame).
    error_code ec;
    if (socket_.available(ec) > 0 && !ec) mark_spoke();
    close_after(shared_->options.pending_timeout);  // short: a pending place is for identifying
    if (!tls_) {
        read_more();
        return;
    }
    if (!stream_.tls()) {  // OpenSSL could not make the connection's state
        close_quietly();
        return;
    }
    handshake();
}

// Closes the connection unless it is read from (or identified) within `limit`.
void Incoming::close_after(std::chrono::milliseconds limit) {
    timer_.expires_after(limit);
    timer_.async_wait([weak = weak_from_this()](const error_code& ec) {
        if (ec) return;
        if (auto self = weak.lock()) self->on_deadline();
    });
}

void Incoming::on_deadline() {
    if (!identified_ && socket_.is_open()) {
        shared_->shed(IncomingSlots::Shed{conn_, ShedReason::kPendingTimeout});  // closes it
        return;
    }
    close_quietly();
}

void Incoming::mark_spoke() {
    if (spoke_ || identified_) return;
    spoke_ = true;
    shared_->slots.spoke(conn_);
}

// Leaves the pending pool for a place of `member`'s; false if refused (closed).
bool Incoming::identify(std::uint64_t member) {
    const IncomingSlots::Identified id = shared_->slots.identify(conn_, member, shared_->dialed.count(member) != 0);
    if (!id.admitted) {
        if (id.shed) {
            shared_->shed(*id.shed);  // closes this one
        } else {
            close_quietly();  // shed meanwhile
        }
        return false;
    }
    identified_ = true;
    close_after(shared_->options.idle_timeout);  // the pending deadline no longer applies
    if (id.shed) shared_->shed(*id.shed);
    return true;
}

// Waits until the socket is ready for what the stream wants (kWantRead or
// kWantWrite), then calls `then`; a closed socket or a stopped transport ends here.
void Incoming::wait_then(Step step, void (Incoming::*then)()) {
    socket_.async_wait(step == Step::kWantWrite ? tcp::socket::wait_write : tcp::socket::wait_read,
                       [self = shared_from_this(), then](const error_code& ec) {
                           if (ec || self->shared_->stopped) return;
                           if (!self->identified_) self->mark_spoke();
                           ((*self).*then)();
                       });
}

void Incoming::handshake() {
    const Step step = stream_.handshake();
    if (step == Step::kWantRead || step == Step::kWantWrite) {
        wait_then(step, &Incoming::handshake);
        return;
    }
    if (step != Step::kDone) {
        count(shared_->stats.tls_refused);
        shared_->refused_log.log(LogLevel::kWarn, "peer_tls_refused",
                                 {{"remote", remote_}, {"reason", stream_.error()}});
        close_quietly();
        return;
    }
    cert_id_ = member_id_of(stream_.peer_certificate());
    if (!cert_id_) {
        count(shared_->stats.tls_refused);
        drop("peer certificate names no member ID (CN=ID or SAN URI:pgfence:member:ID)");
        return;
    }
    if (!identify(*cert_id_)) return;
    read_more();
}

void Incoming::read_more() {
    // Room to read into: one chunk, or the rest of a frame whose length is
    // known, whichever is more. Room grown for a large frame is given back
    // once it is handled.
    const std::size_t want =
        std::max(kReadChunkBytes, next_frame_bytes_ - std::min(buf_.size(), next_frame_bytes_));
    if (buf_.capacity() > 4 * kReadChunkBytes && buf_.size() + want <= 2 * kReadChunkBytes) {
        buf_.shrink_to_fit();
    }
    if (identified_) close_after(shared_->options.idle_timeout);  // a pending one keeps its deadline
    read_some();
}

// Reads until the stream wants the socket (handling every whole frame as it
// comes), then waits for it. A plaintext read that comes back short has
// drained the socket: the wait comes next.
void Incoming::read_some() {
    // A peer that keeps sending must not hold the loop: after this many
    // reads the rest is read on a later turn.
    constexpr int kReadsPerTurn = 16;
    for (int reads = 0;; ++reads) {
        if (shared_->stopped) return;
        if (reads == kReadsPerTurn) {
            asio::post(socket_.get_executor(), [self = shared_from_this()] {
                if (!self->socket_.is_open()) return;
                if (self->identified_) self->close_after(self->shared_->options.idle_timeout);  // it is not idle
                self->read_some();
            });
            return;
        }
        const std::size_t want =
            std::max(kReadChunkBytes, next_frame_bytes_ - std::min(buf_.size(), next_frame_bytes_));
        const auto space = buf_.prepare(want);
        const IoResult r = stream_.read_some(space.data(), space.size());
        if (r.step == Step::kDone) {
            buf_.commit(r.bytes);
            if (!handle_buffered()) return;
            if (!tls_ && r.bytes < space.size()) {
                wait_then(Step::kWantRead, &Incoming::read_more);
                return;
            }
            continue;
        }
        if (r.step == Step::kWantRead || r.step == Step::kWantWrite) {
            wait_then(r.step, &Incoming::read_more);
            return;
        }
        close_quietly();  // closed (close_notify or EOF) or broken: the dialer redials
        return;
    }
}

// Handles every complete frame in the buffer; false if the connection was dropped.
bool Incoming::handle_buffered() {
    for (;;) {
        if (shared_->stopped) return false;
        const std::string_view pending(static_cast<const char*>(buf_.data().data()), buf_.size());
        next_frame_bytes_ = 0;
        if (pending.size() < kLengthPrefixBytes) return true;
        auto len = decode_frame_length(pending.substr(0, kLengthPrefixBytes));
        if (auto* err = std::get_if<FrameError>(&len)) {
            drop(err->message);
            return false;
        }
        const std::size_t body_len = std::get<std::size_t>(len);  // checked against the limit
        if (!identified_ && !check_first_frame(pending, body_len)) return false;
        if (pending.size() < kLengthPrefixBytes + body_len) {
            next_frame_bytes_ = kLengthPrefixBytes + body_len;
            return true;
        }
        auto frame = decode_frame_body(pending.substr(kLengthPrefixBytes, body_len));
        buf_.consume(kLengthPrefixBytes + body_len);
        if (auto* err = std::get_if<FrameError>(&frame)) {
            drop(err->message);
            return false;
        }
        if (!handle(std::get<Frame>(frame))) return false;
    }
}

// Before a plaintext connection is identified: its first frame is small and,
// once its header is in, of this cluster (any, handshakes only) and a
// MemberInfo; false if the connection was dropped.
bool Incoming::check_first_frame(std::string_view pending, std::size_t body_len) {
    if (body_len > kMaxFirstFrameBytes) {
        drop("first frame of " + std::to_string(body_len) + " bytes is over " + std::to_string(kMaxFirstFrameBytes) +
             " (a connection's first frame is its MemberInfo)");
        return false;
    }
    if (pending.size() < kLengthPrefixBytes + kFrameHeaderBytes) return true;
    auto header = decode_frame_header(pending.substr(kLengthPrefixBytes, kFrameHeaderBytes));
    if (auto* err = std::get_if<FrameError>(&header)) {
        drop(err->message);
        return false;
    }
    const FrameHeader& h = std::get<FrameHeader>(header);
    if (h.kind != FrameKind::kMemberInfo) {
        drop("first frame is of kind " + std::to_string(static_cast<int>(h.kind)) + ", not a MemberInfo (kind " +
             std::to_string(static_cast<int>(FrameKind::kMemberInfo)) + ")");
        return false;
    }
    if (!shared_->options.handshakes_only && h.cluster_id != shared_->options.cluster_id) {
        drop("frame for cluster " + std::to_string(h.cluster_id) + ", this member is in cluster " +
             std::to_string(shared_->options.cluster_id));
        return false;
    }
    return true;
}

bool Incoming::handle(const Frame& f) {
    if (shared_->options.handshakes_only && f.kind == FrameKind::kSeedInfo) {
        auto info = decode_seed_info(f.payload);
        if (auto* err = std::get_if<std::string>(&info)) {
            drop(*err);
            return false;
        }
        if ((cert_id_ && std::get<SeedInfo>(info).member_id != *cert_id_) ||
            (peer_id_ != 0 && std::get<SeedInfo>(info).member_id != peer_id_)) {
            drop("seed info of member " + std::to_string(std::get<SeedInfo>(info).member_id) +
                 " on the connection of member " + std::to_string(cert_id_ ? *cert_id_ : peer_id_));
            return false;
        }
        if (shared_->on_seed) shared_->on_seed(f.cluster_id, std::get<SeedInfo>(info));
        close_quietly();
        return false;
    }
    if (shared_->options.handshakes_only && f.kind != FrameKind::kMemberInfo) {
        close_quietly();
        return false;
    }
    if (!shared_->options.handshakes_only && f.cluster_id != shared_->options.cluster_id) {
        drop("frame for cluster " + std::to_string(f.cluster_id) + ", this member is in cluster " +
             std::to_string(shared_->options.cluster_id));
        return false;
    }
    count(shared_->stats.frames_received);
    if (f.kind == FrameKind::kMemberInfo) {
        auto info = decode_member_info(f.payload);
        if (auto* err = std::get_if<std::string>(&info)) {
            drop(*err);
            return false;
        }
        if (cert_id_ && std::get<MemberInfo>(info).id != *cert_id_) {
            drop("handshake from member " + std::to_string(std::get<MemberInfo>(info).id) +
                 " over a certificate bound to member " + std::to_string(*cert_id_));
            return false;
        }
        if (peer_id_ != 0 && std::get<MemberInfo>(info).id != peer_id_) {
            drop("handshake from member " + std::to_string(std::get<MemberInfo>(info).id) +
                 " on the connection of member " + std::to_string(peer_id_));
            return false;
        }
        peer_id_ = std::get<MemberInfo>(info).id;
        if (!identified_ && !identify(peer_id_)) return false;
        shared_->on_info(std::get<MemberInfo>(info));
        // Handshakes only: the SeedInfo frame may follow; nothing else is read.
        if (!shared_->options.handshakes_only) shared_->heard.insert(peer_id_);
        return true;
    }
    if (f.kind == FrameKind::kSeedInfo) return true;  // for a member not running yet: not this one
    auto msg = decode_message(f.payload, f.cluster_id);
    if (auto* err = std::get_if<CodecError>(&msg)) {
        drop("bad raft message: " + err->message);
        return false;
    }
    raft::Message& m = std::get<raft::Message>(msg);
    if (m.to != shared_->options.self_id || (peer_id_ != 0 && m.from != peer_id_) || (cert_id_ && m.from != *cert_id_)) {
        drop("message from " + std::to_string(m.from) + " to " + std::to_string(m.to) +
             " on the connection of member " + std::to_string(cert_id_ ? *cert_id_ : peer_id_));
        return false;
    }
    shared_->on_message(std::move(m));
    return true;
}

void Incoming::close_quietly() {
    stream_.detach();  // before the descriptor's number can be reused
    error_code ignored;
    socket_.close(ignored);
}

void Incoming::drop(const std::string& why) {
    count(shared_->stats.bad_frames);
    shared_->refused_log.log(LogLevel::kWarn, "peer_frame_refused",
                             {{"peer", log_value(cert_id_ ? *cert_id_ : peer_id_)},
                              {"remote", remote_},
                              {"reason", why}});
    close_quietly();
}

}  // namespace pgfence::net::peer
