// Outgoing peer connections (peer_links.h): dial, handshake, write frames,
// redial with backoff.
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <algorithm>

#include "net/peer_links.h"
#include "net/tls.h"

namespace pgfence::net::peer {

using log::log_event;
using log::log_value;
using log::LogLevel;

Outgoing::Outgoing(asio::io_context& io, PeerAddress peer, std::shared_ptr<Shared> shared)
    : io_(io), peer_(std::move(peer)), shared_(std::move(shared)), socket_(io), timer_(io),
      backoff_(shared_->options.backoff_min) {}

void Outgoing::dial() {
    if (shared_->stopped || closed_) return;
    error_code ec;
    const auto addr = asio::ip::make_address(peer_.host, ec);
    if (ec) {
        log_event(LogLevel::kError, "peer_bad_address", {{"peer", log_value(peer_.id)}, {"host", peer_.host}});
        return;
    }
    std::lock_guard<std::mutex> guard(mutex_);
    const std::uint64_t gen = ++generation_;
    stream_.detach();
    unit_.clear();
    unit_sent_ = 0;
    socket_ = tcp::socket(io_);
    tls_context_ = shared_->tls_dial;
    socket_.async_connect(tcp::endpoint(addr, peer_.port), [self = shared_from_this(), gen](const error_code& e) {
        if (gen == self->generation_) self->on_connect(e);
    });
}

void Outgoing::on_connect(const error_code& ec) {
    if (ec) {
        fail("connect", ec);
        return;
    }
    error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    if (!tls_context_) {
        {
            std::lock_guard<std::mutex> guard(mutex_);
            stream_.attach(socket_.native_handle());
        }
        on_secure();
        return;
    }
    {
        std::lock_guard<std::mutex> guard(mutex_);
        socket_.native_non_blocking(true, ignored);
        // On failure the stream is failed, and the handshake reports it.
        stream_.attach_tls(socket_.native_handle(), tls_context_, TlsRole::kConnect);
    }
    // A peer that takes the connection but never completes TLS is left, and redialed.
    const std::uint64_t gen = generation_;
    timer_.expires_after(kTlsHandshakeTimeout);
    timer_.async_wait([self = shared_from_this(), gen](const error_code& e) {
        if (e || gen != self->generation_ || self->connected()) return;
        count(self->shared_->stats.tls_refused);
        self->fail("tls_handshake", asio::error::make_error_code(asio::error::timed_out));
    });
    handshake(gen);
}

void Outgoing::handshake(std::uint64_t gen) {
    const Step step = stream_.handshake();
    if (step == Step::kWantRead || step == Step::kWantWrite) {
        socket_.async_wait(step == Step::kWantRead ? tcp::socket::wait_read : tcp::socket::wait_write,
                           [self = shared_from_this(), gen](const error_code& ec) {
                               if (gen != self->generation_) return;
                               if (ec) {
                                   self->fail("tls_handshake", ec);
                               } else {
                                   self->handshake(gen);
                               }
                           });
        return;
    }
    if (step != Step::kDone) {
        count(shared_->stats.tls_refused);
        log_event(LogLevel::kWarn, "peer_tls_refused", {{"peer", log_value(peer_.id)}, {"reason", stream_.error()}});
        fail("tls_handshake", asio::error::make_error_code(asio::error::access_denied));
        return;
    }
    const auto id = member_id_of(stream_.peer_certificate());
    if (id != peer_.id) {
        count(shared_->stats.tls_refused);
        log_event(LogLevel::kWarn, "peer_certificate_refused",
                  {{"peer", log_value(peer_.id)},
                   {"reason", id ? "certificate is bound to member " + std::to_string(*id)
                                 : std::string("certificate names no member ID")}});
        fail("tls_identity", asio::error::make_error_code(asio::error::access_denied));
        return;
    }
    on_secure();
}

// Connected (and, under TLS, the peer proved its ID): the handshake frame
// first, then whatever is queued.
void Outgoing::on_secure() {
    {
        std::lock_guard<std::mutex> guard(mutex_);
        connected_ = true;
        if (!shared_->seed_frame.empty() && shared_->heard.count(peer_.id) == 0) {
            queue_.push_front(shared_->seed_frame);
            queued_bytes_ += shared_->seed_frame.size();
        }
        queue_.push_front(shared_->hello);
        queued_bytes_ += shared_->hello.size();
        write_locked();
    }
    backoff_ = shared_->options.backoff_min;
    count(shared_->stats.connects);
    log_event(LogLevel::kInfo, "peer_connected", {{"peer", log_value(peer_.id)}});
    watch_eof();
}

bool Outgoing::connected() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return connected_;
}

// The peer never writes on this connection: any read completion means it closed.
void Outgoing::watch_eof() {
    const std::uint64_t gen = generation_;
    auto on_read = [self = shared_from_this(), gen](const error_code& ec, std::size_t = 0) {
        if (gen != self->generation_ || !self->connected()) return;
        self->fail("read", ec ? ec : asio::error::make_error_code(asio::error::eof));
    };
    if (tls_context_) {
        socket_.async_wait(tcp::socket::wait_read, std::move(on_read));  // an alert or the close
    } else {
        socket_.async_read_some(asio::buffer(&eof_byte_, 1), std::move(on_read));
    }
}

void Outgoing::send_frame(std::string frame) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!connected_) {
        count(shared_->stats.dropped_unconnected);
        return;
    }
    if (!writing_ && queue_.empty() && unit_.empty()) {  // idle: this thread writes it now
        unit_ = std::move(frame);
        unit_sent_ = 0;
        unit_frames_ = 1;
        write_locked();
        return;
    }
    enqueue_locked(std::move(frame));
}

// Queues `frame`, first dropping the oldest queued frames while the frames
// not yet written (the queue and the unit being written) are at the limits.
// The unit is never dropped: it may be on the wire in part.
void Outgoing::enqueue_locked(std::string frame) {
    const auto& o = shared_->options;
    const std::size_t unit_frames = unit_.empty() ? 0 : unit_frames_;
    const std::size_t unit_bytes = unit_.size() - unit_sent_;
    while (!queue_.empty() && (unit_frames + queue_.size() >= o.max_queue_frames ||
                               unit_bytes + queued_bytes_ + frame.size() > o.max_queue_bytes)) {
        queued_bytes_ -= queue_.front().size();
        queue_.pop_front();
        count(shared_->stats.dropped_queue_full);
    }
    queued_bytes_ += frame.size();
    queue_.push_back(std::move(frame));
}

// Writes unit_ and then the queue, batched, until done or the stream wants
// the socket (then the loop waits and comes back). Any thread, mutex_ held.
void Outgoing::write_locked() {
    if (writing_ || !connected_) return;
    for (;;) {
        if (unit_sent_ == unit_.size()) {
            unit_.clear();
            unit_sent_ = 0;
            if (queue_.empty()) return;
            unit_frames_ = 0;
            while (!queue_.empty() && unit_frames_ < shared_->options.max_frames_per_write) {
                queued_bytes_ -= queue_.front().size();
                if (unit_.empty()) {
                    unit_ = std::move(queue_.front());
                } else {
                    unit_ += queue_.front();
                }
                queue_.pop_front();
                ++unit_frames_;
            }
        }
        const IoResult r = stream_.write_some(unit_.data() + unit_sent_, unit_.size() - unit_sent_);
        if (r.step == Step::kDone) {
            unit_sent_ += r.bytes;
            if (unit_sent_ == unit_.size()) count(shared_->stats.frames_sent, unit_frames_);
            continue;
        }
        writing_ = true;  // until the wait below comes back: no other write starts
        const std::uint64_t gen = generation_;
        if (r.step == Step::kWantRead || r.step == Step::kWantWrite) {
            // The socket is the loop's to wait on: post the wait there (this may be the writer thread).
            asio::post(io_, [self = shared_from_this(), gen, step = r.step] { self->wait_to_write(step, gen); });
        } else {
            // A plaintext write says which socket error; a TLS one, that the connection broke.
            const auto errno_value = static_cast<int>(stream_.error_code());
            const error_code why = stream_.tls() || r.step == Step::kClosed
                                       ? asio::error::make_error_code(asio::error::broken_pipe)
                                       : error_code(errno_value, boost::system::system_category());
            asio::post(io_, [self = shared_from_this(), gen, why] {
                if (gen == self->generation_) self->fail("write", why);
            });
        }
        return;
    }
}

// On the loop: waits until the socket is ready for what the stream wants,
// then writes on.
void Outgoing::wait_to_write(Step step, std::uint64_t gen) {
    if (gen != generation_) return;
    socket_.async_wait(step == Step::kWantWrite ? tcp::socket::wait_write : tcp::socket::wait_read,
                       [self = shared_from_this(), gen](const error_code& ec) {
                           if (gen != self->generation_) return;
                           if (ec) {
                               self->fail("write", ec);
                               return;
                           }
                           std::lock_guard<std::mutex> guard(self->mutex_);
                           self->writing_ = false;
                           self->write_locked();
                       });
}

void Outgoing::fail(const char* what, const error_code& ec) {
    bool was_connected = false;
    {
        std::lock_guard<std::mutex> guard(mutex_);
        was_connected = connected_;
        ++generation_;
        connected_ = false;
        writing_ = false;
        count(shared_->stats.dropped_unconnected, queue_.size());
        queue_.clear();
        queued_bytes_ = 0;
        unit_.clear();
        unit_sent_ = 0;
        stream_.detach();
        error_code ignored;
        socket_.close(ignored);
    }
    if (was_connected) {
        log_event(LogLevel::kWarn, "peer_disconnected",
                  {{"peer", log_value(peer_.id)}, {"op", what}, {"error", ec.message()}});
    } else {
        log_event(LogLevel::kDebug, "peer_connect_failed",
                  {{"peer", log_value(peer_.id)}, {"error", ec.message()}});
    }
    if (shared_->stopped || closed_) return;
    timer_.expires_after(backoff_);
    backoff_ = std::min(backoff_ * 2, shared_->options.backoff_max);
    timer_.async_wait([self = shared_from_this()](const error_code& e) {
        if (!e) self->dial();
    });
}

void Outgoing::close() {
    closed_ = true;
    std::lock_guard<std::mutex> guard(mutex_);
    ++generation_;
    connected_ = false;
    stream_.detach();
    error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
}

}  // namespace pgfence::net::peer
