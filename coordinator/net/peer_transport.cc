#include "net/peer_transport.h"

#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "log/log.h"
#include "net/accept_retry.h"
#include "net/frame.h"
#include "net/raft_codec.h"
#include "net/tls.h"

namespace pgfence::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using log::log_event;
using log::log_value;
using log::LogLevel;

namespace {

// A TLS handshake on the peer port (either side) must finish within this.
constexpr std::chrono::seconds kTlsHandshakeTimeout{5};

// Counters written by the event loop and, for outgoing frames, by any thread
// that calls send(); read by stats().
struct Counters {
    std::atomic<std::uint64_t> frames_sent{0};
    std::atomic<std::uint64_t> frames_received{0};
    std::atomic<std::uint64_t> dropped_queue_full{0};
    std::atomic<std::uint64_t> dropped_unconnected{0};
    std::atomic<std::uint64_t> bad_frames{0};
    std::atomic<std::uint64_t> connects{0};
    std::atomic<std::uint64_t> tls_refused{0};
};

void count(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

struct Shared {
    TransportOptions options;  // not changed after construction
    PeerTransport::MessageHandler on_message;
    PeerTransport::InfoHandler on_info;
    Counters stats;
    PeerTransport::SeedHandler on_seed;
    std::string hello;  // encoded MemberInfo frame (event loop only)
    std::string seed_frame;  // encoded SeedInfo frame, or empty (set by start())
    std::set<std::uint64_t> heard;  // members whose handshake came since start (event loop only)
    // TLS (event loop only; null: plaintext): what incoming connections are
    // accepted with and outgoing ones dialed with, swapped by set_tls().
    TlsContextPtr tls_accept;
    TlsContextPtr tls_dial;
    bool stopped = false;  // event loop only
    std::size_t incoming = 0;  // open incoming connections
    log::Limiter refused_log{20};  // incoming connections refused (event loop only): anyone can cause them
};

// One outgoing connection: dial, handshake, write frames, redial.
//
// mutex_ guards connected_, writing_, queue_, queued_bytes_, front_started_,
// the direct send() and every change of socket_ (connect, close). A thread
// other than the event loop writes only through send_frame(), which sends at
// once only while connected_ and idle (!writing_, queue_ empty); otherwise the
// frame is queued and written by write_some() on the loop. write_some() holds
// the mutex while it starts an async_write and sets writing_; the write's
// continuations and watch_eof's read then run on the loop without the mutex,
// protected by writing_ (no direct send meanwhile) and by running on the loop
// thread, which alone closes or replaces the socket. generation_, inflight_,
// backoff_ and timer_ are the event loop's only.
// Under TLS (ssl_, made after the TCP connect) OpenSSL writes the same
// non-blocking socket (tls.h attach_socket). An SSL object is not
// thread-safe, and here it needs no more: after the handshake every SSL call
// on it (SSL_write, from send_frame on any thread or write_some on the loop)
// is made under mutex_, so the direct send from the writer thread stays.
// tls_unit_ holds bytes an SSL_write took but could not finish
// (SSL_ERROR_WANT_WRITE): OpenSSL needs the same bytes again, so they go
// first and are never dropped; frames are batched into one SSL_write (one
// TLS record up to 16 KiB each) of up to max_frames_per_write frames. The
// handshake runs on the loop before connected_ is set (no other thread calls
// SSL then), and the server's certificate must be bound to the member dialed
// (member_id_of), or the connection fails and redials. Nothing is ever read
// on an outgoing connection (the server sends no tickets), so readability
// means the peer closed or sent an alert.
class Outgoing : public std::enable_shared_from_this<Outgoing> {
public:
    Outgoing(asio::io_context& io, PeerAddress peer, std::shared_ptr<Shared> shared)
        : io_(io), peer_(std::move(peer)), shared_(std::move(shared)), socket_(io), timer_(io),
          backoff_(shared_->options.backoff_min) {}
    ~Outgoing() {
        if (ssl_) SSL_free(ssl_);
    }
    Outgoing(const Outgoing&) = delete;
    Outgoing& operator=(const Outgoing&) = delete;

    void dial();
    // Any thread.
    void send_frame(std::string frame);
    bool connected() const;
    void close();

private:
    void on_connect(const error_code& ec);
    void tls_handshake(std::uint64_t gen);
    void on_secure();
    void write_tls_locked();
    void enqueue_locked(std::string frame);
    void write_some();
    void write_some_locked();
    void watch_eof();
    void fail(const char* what, const error_code& ec);

    asio::io_context& io_;
    PeerAddress peer_;
    std::shared_ptr<Shared> shared_;
    mutable std::mutex mutex_;
    tcp::socket socket_;
    TlsContextPtr tls_context_;  // TLS for this connection (taken at dial; null: plaintext)
    SSL* ssl_ = nullptr;         // set after the TCP connect of a TLS connection (owned)
    std::string tls_unit_;       // bytes an SSL_write must be retried with (see above)
    std::size_t tls_unit_frames_ = 0;
    asio::steady_timer timer_;
    std::chrono::milliseconds backoff_;
    bool connected_ = false;
    bool writing_ = false;
    // The first bytes of queue_.front() are already on the wire (a send()
    // that wrote part of it): it is never dropped, so the stream stays whole.
    bool front_started_ = false;
    std::deque<std::string> queue_;
    std::size_t queued_bytes_ = 0;
    std::vector<std::string> inflight_;  // being written by async_write (loop)
    char eof_byte_ = 0;
    std::uint64_t generation_ = 0;  // event loop only: bumps on each (re)connect; stale callbacks ignore themselves
    bool closed_ = false;  // event loop only: close() was called (no redial)
};

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
    if (ssl_) SSL_free(ssl_);
    ssl_ = nullptr;
    tls_unit_.clear();
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
        on_secure();
        return;
    }
    {
        std::lock_guard<std::mutex> guard(mutex_);
        ssl_ = SSL_new(tls_context_->native_handle());
        if (ssl_) {
            socket_.native_non_blocking(true, ignored);
            attach_socket(ssl_, socket_.native_handle());
        }
    }
    // A peer that takes the connection but never completes TLS is left, and redialed.
    const std::uint64_t gen = generation_;
    timer_.expires_after(kTlsHandshakeTimeout);
    timer_.async_wait([self = shared_from_this(), gen](const error_code& e) {
        if (e || gen != self->generation_ || self->connected()) return;
        count(self->shared_->stats.tls_refused);
        self->fail("tls_handshake", asio::error::make_error_code(asio::error::timed_out));
    });
    tls_handshake(gen);
}

void Outgoing::tls_handshake(std::uint64_t gen) {
    ERR_clear_error();
    const int r = ssl_ ? SSL_connect(ssl_) : -1;
    const int e = ssl_ ? SSL_get_error(ssl_, r) : SSL_ERROR_SSL;
    if (r != 1 && (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)) {
        socket_.async_wait(e == SSL_ERROR_WANT_READ ? tcp::socket::wait_read : tcp::socket::wait_write,
                           [self = shared_from_this(), gen](const error_code& ec) {
                               if (gen != self->generation_) return;
                               if (ec) {
                                   self->fail("tls_handshake", ec);
                               } else {
                                   self->tls_handshake(gen);
                               }
                           });
        return;
    }
    if (r != 1) {
        count(shared_->stats.tls_refused);
        const std::string why = openssl_error();
        log_event(LogLevel::kWarn, "peer_tls_refused", {{"peer", log_value(peer_.id)}, {"reason", why}});
        fail("tls_handshake", asio::error::make_error_code(asio::error::access_denied));
        return;
    }
    const auto id = member_id_of(SSL_get0_peer_certificate(ssl_));
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
        front_started_ = false;
        if (!shared_->seed_frame.empty() && shared_->heard.count(peer_.id) == 0) {
            queue_.push_front(shared_->seed_frame);
            queued_bytes_ += shared_->seed_frame.size();
        }
        queue_.push_front(shared_->hello);
        queued_bytes_ += shared_->hello.size();
        write_some_locked();
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
    if (ssl_) {
        socket_.async_wait(tcp::socket::wait_read, std::move(on_read));  // an alert or the close
    } else {
        socket_.async_read_some(asio::buffer(&eof_byte_, 1), std::move(on_read));
    }
}

void Outgoing::send_frame(std::string frame) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!connected_) {
        count(shared_->stats.dropped_unconnected);
        return;
    }
    if (ssl_) {
        const bool start = !writing_ && queue_.empty() && tls_unit_.empty();
        if (start) {  // idle: this thread writes it now
            tls_unit_ = std::move(frame);
            tls_unit_frames_ = 1;
            write_tls_locked();
        } else {
            enqueue_locked(std::move(frame));
        }
        return;
    }
    if (!writing_ && queue_.empty()) {
        const ssize_t n = ::send(socket_.native_handle(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n == static_cast<ssize_t>(frame.size())) {
            count(shared_->stats.frames_sent);
            return;
        }
        // Partly sent, would block, or failed: the loop writes the rest (and
        // a failed socket fails its write there, which reconnects).
        if (n > 0) {
            frame.erase(0, static_cast<std::size_t>(n));
            front_started_ = true;
        }
    }
    const bool start = !writing_ && queue_.empty();
    enqueue_locked(std::move(frame));
    lock.unlock();
    // On the loop thread this writes at once; from another thread it is posted.
    if (start) asio::dispatch(io_, [self = shared_from_this()] { self->write_some(); });
}

void Outgoing::enqueue_locked(std::string frame) {
    const auto& o = shared_->options;
    while (queue_.size() > (front_started_ ? 1u : 0u) &&
           (queue_.size() >= o.max_queue_frames || queued_bytes_ + frame.size() > o.max_queue_bytes)) {
        // The oldest frame not yet started (a started one must finish first).
        auto oldest = queue_.begin() + (front_started_ ? 1 : 0);
        queued_bytes_ -= oldest->size();
        queue_.erase(oldest);
        count(shared_->stats.dropped_queue_full);
    }
    queued_bytes_ += frame.size();
    queue_.push_back(std::move(frame));
}

void Outgoing::write_some() {
    std::lock_guard<std::mutex> guard(mutex_);
    write_some_locked();
}

void Outgoing::write_some_locked() {
    if (ssl_) {
        write_tls_locked();
        return;
    }
    if (writing_ || !connected_ || queue_.empty()) return;
    inflight_.clear();
    std::vector<asio::const_buffer> buffers;
    while (!queue_.empty() && inflight_.size() < shared_->options.max_frames_per_write) {
        queued_bytes_ -= queue_.front().size();
        inflight_.push_back(std::move(queue_.front()));
        queue_.pop_front();
    }
    front_started_ = false;
    for (const std::string& f : inflight_) buffers.push_back(asio::buffer(f));
    writing_ = true;
    const std::uint64_t gen = generation_;
    auto done = [self = shared_from_this(), gen](const error_code& ec, std::size_t) {
        if (gen != self->generation_) return;
        if (ec) {
            self->fail("write", ec);
            return;
        }
        std::lock_guard<std::mutex> guard(self->mutex_);
        self->writing_ = false;
        count(self->shared_->stats.frames_sent, self->inflight_.size());
        self->write_some_locked();
    };
    asio::async_write(socket_, buffers, std::move(done));
}

// Writes tls_unit_ and then the queue, batched, until done or OpenSSL waits
// for the socket (then the loop waits and comes back). Any thread, mutex_ held.
void Outgoing::write_tls_locked() {
    if (writing_ || !connected_) return;
    for (;;) {
        if (tls_unit_.empty()) {
            if (queue_.empty()) return;
            tls_unit_frames_ = 0;
            while (!queue_.empty() && tls_unit_frames_ < shared_->options.max_frames_per_write) {
                queued_bytes_ -= queue_.front().size();
                tls_unit_ += queue_.front();
                queue_.pop_front();
                ++tls_unit_frames_;
            }
        }
        ERR_clear_error();
        const int n = SSL_write(ssl_, tls_unit_.data(), static_cast<int>(tls_unit_.size()));
        if (n > 0) {  // without partial writes, all of it
            count(shared_->stats.frames_sent, tls_unit_frames_);
            tls_unit_.clear();
            continue;
        }
        const int e = SSL_get_error(ssl_, n);
        writing_ = true;  // until the wait below comes back: no other write starts
        const std::uint64_t gen = generation_;
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
            // The socket is the loop's to wait on: post the wait there (this may be the writer thread).
            asio::post(io_, [self = shared_from_this(), gen, e] {
                if (gen != self->generation_) return;
                self->socket_.async_wait(e == SSL_ERROR_WANT_WRITE ? tcp::socket::wait_write : tcp::socket::wait_read,
                                         [self, gen](const error_code& ec) {
                                             if (gen != self->generation_) return;
                                             if (ec) {
                                                 self->fail("write", ec);
                                                 return;
                                             }
                                             std::lock_guard<std::mutex> guard(self->mutex_);
                                             self->writing_ = false;
                                             self->write_tls_locked();
                                         });
            });
        } else {
            ERR_clear_error();
            asio::post(io_, [self = shared_from_this(), gen] {
                if (gen == self->generation_) self->fail("write", asio::error::make_error_code(asio::error::broken_pipe));
            });
        }
        return;
    }
}

void Outgoing::fail(const char* what, const error_code& ec) {
    bool was_connected = false;
    {
        std::lock_guard<std::mutex> guard(mutex_);
        was_connected = connected_;
        ++generation_;
        connected_ = false;
        writing_ = false;
        front_started_ = false;
        count(shared_->stats.dropped_unconnected, queue_.size());
        queue_.clear();
        queued_bytes_ = 0;
        tls_unit_.clear();
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
    error_code ignored;
    timer_.cancel();
    socket_.close(ignored);
}

// One incoming connection: read frames, hand them to the server.
// Under TLS (OpenSSL on the socket, tls.h attach_socket; only the loop calls
// SSL on it) the handshake comes first, within kTlsHandshakeTimeout: the
// dialer must present a certificate signed by the peer CA and bound to a
// member ID (member_id_of); from then on every frame must come from that ID
// (its MemberInfo, and every raft message's `from`), or the connection is
// dropped.
class Incoming : public std::enable_shared_from_this<Incoming> {
public:
    Incoming(tcp::socket socket, std::shared_ptr<Shared> shared)
        : stream_(std::move(socket)), timer_(stream_.get_executor()), shared_(std::move(shared)) {
        ++shared_->incoming;
        if (shared_->tls_accept) {
            tls_context_ = shared_->tls_accept;
            ssl_ = SSL_new(tls_context_->native_handle());
            if (ssl_) {
                error_code ignored;
                stream_.socket().native_non_blocking(true, ignored);
                attach_socket(ssl_, stream_.socket().native_handle());
            }
        }
    }
    ~Incoming() {
        if (ssl_) SSL_free(ssl_);
        --shared_->incoming;
    }
    Incoming(const Incoming&) = delete;
    Incoming& operator=(const Incoming&) = delete;
    void start();
    void read_more();

private:
    void tls_accept();
    void tls_read();
    void wait_then(int ssl_error, void (Incoming::*then)());
    void close_after(std::chrono::milliseconds limit);

    bool handle_buffered();
    bool handle(const Frame& f);
    void close_quietly();  // not a fault: nothing logged or counted
    void drop(const std::string& why);

    boost::beast::tcp_stream stream_;  // plaintext reads time out through it; TLS ones through timer_
    asio::steady_timer timer_;
    TlsContextPtr tls_context_;
    SSL* ssl_ = nullptr;  // set on a TLS connection (owned); read by SSL_read on the loop
    std::optional<std::uint64_t> cert_id_;  // the member ID the dialer's certificate proves (TLS)
    std::shared_ptr<Shared> shared_;
    // Bytes received and not yet handled: every complete frame in it is
    // handled after each read, so a burst of frames costs one read. It holds
    // at most one frame (<= max frame size) plus kReadChunkBytes.
    boost::beast::flat_buffer buf_;
    // Prefix + body of the incomplete frame at the front of buf_, once its
    // length is read (0 before): set by handle_buffered, read by read_more to
    // size the room.
    std::size_t next_frame_bytes_ = 0;
    std::uint64_t peer_id_ = 0;
};

constexpr std::size_t kReadChunkBytes = 64u << 10;

void Incoming::start() {
    if (!ssl_) {
        if (tls_context_) {  // SSL_new failed
            error_code ignored;
            stream_.socket().close(ignored);
            return;
        }
        read_more();
        return;
    }
    close_after(kTlsHandshakeTimeout);  // short: a connection not yet authenticated holds a slot
    tls_accept();
}

// Closes the connection unless it is read from (or handshaken) within `limit`.
void Incoming::close_after(std::chrono::milliseconds limit) {
    timer_.expires_after(limit);
    timer_.async_wait([weak = weak_from_this()](const error_code& ec) {
        if (ec) return;
        if (auto self = weak.lock()) {
            error_code ignored;
            self->stream_.socket().close(ignored);
        }
    });
}

// Waits until the socket is ready for what SSL_get_error asked (read or
// write), then calls `then`; a closed socket or a stopped transport ends here.
void Incoming::wait_then(int ssl_error, void (Incoming::*then)()) {
    stream_.socket().async_wait(ssl_error == SSL_ERROR_WANT_READ ? tcp::socket::wait_read : tcp::socket::wait_write,
                                [self = shared_from_this(), then](const error_code& ec) {
                                    if (ec || self->shared_->stopped) return;
                                    ((*self).*then)();
                                });
}

void Incoming::tls_accept() {
    ERR_clear_error();
    const int r = SSL_accept(ssl_);
    if (r != 1) {
        const int e = SSL_get_error(ssl_, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            wait_then(e, &Incoming::tls_accept);
            return;
        }
        count(shared_->stats.tls_refused);
        shared_->refused_log.log(LogLevel::kWarn, "peer_tls_refused",
                                 {{"remote", remote_address(stream_.socket().native_handle())}, {"reason", openssl_error()}});
        error_code ignored;
        stream_.socket().close(ignored);
        return;
    }
    cert_id_ = member_id_of(SSL_get0_peer_certificate(ssl_));
    if (!cert_id_) {
        count(shared_->stats.tls_refused);
        drop("peer certificate names no member ID (CN=ID or SAN URI:pgfence:member:ID)");
        return;
    }
    read_more();
}

// SSL_read until OpenSSL wants the socket (handling every whole frame as it
// comes), then waits for it.
void Incoming::tls_read() {
    // A peer that keeps sending must not hold the loop: after this many
    // records the rest is read on a later turn.
    constexpr int kReadsPerTurn = 16;
    for (int reads = 0;; ++reads) {
        if (shared_->stopped) return;
        if (reads == kReadsPerTurn) {
            asio::post(stream_.get_executor(), [self = shared_from_this()] {
                if (self->stream_.socket().is_open()) self->tls_read();
            });
            return;
        }
        const std::size_t want =
            std::max(kReadChunkBytes, next_frame_bytes_ - std::min(buf_.size(), next_frame_bytes_));
        const auto space = buf_.prepare(want);
        ERR_clear_error();
        const int n = SSL_read(ssl_, space.data(), static_cast<int>(std::min<std::size_t>(space.size(), 1u << 30)));
        if (n > 0) {
            buf_.commit(static_cast<std::size_t>(n));
            if (!handle_buffered()) return;
            continue;
        }
        const int e = SSL_get_error(ssl_, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            wait_then(e, &Incoming::read_more);
            return;
        }
        ERR_clear_error();  // closed (close_notify or EOF) or broken: the dialer redials
        error_code ignored;
        stream_.socket().close(ignored);
        return;
    }
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
    if (ssl_) {
        close_after(shared_->options.idle_timeout);
        tls_read();
        return;
    }
    stream_.expires_after(shared_->options.idle_timeout);
    stream_.async_read_some(buf_.prepare(want), [self = shared_from_this()](const error_code& ec, std::size_t n) {
        if (ec || self->shared_->stopped) return;
        self->buf_.commit(n);
        if (self->handle_buffered()) self->read_more();
    });
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
        peer_id_ = std::get<MemberInfo>(info).id;
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
    error_code ignored;
    stream_.socket().close(ignored);
}

void Incoming::drop(const std::string& why) {
    count(shared_->stats.bad_frames);
    shared_->refused_log.log(LogLevel::kWarn, "peer_frame_refused",
                             {{"peer", log_value(cert_id_ ? *cert_id_ : peer_id_)},
                              {"remote", remote_address(stream_.socket().native_handle())},
                              {"reason", why}});
    error_code ignored;
    stream_.socket().close(ignored);
}

}  // namespace

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
            } else if (const std::size_t cap = 4 * self->peer_count() + 16; self->shared->incoming >= cap) {
                // Peers reconnect after failures, so allow a few per peer, but bound it.
                self->shared->refused_log.log(LogLevel::kWarn, "peer_connection_refused",
                                              {{"reason", "incoming cap reached"}, {"cap", log_value(cap)}});
                error_code ignored;
                socket.close(ignored);
            } else {
                std::make_shared<Incoming>(std::move(socket), self->shared)->start();
            }
            self->accept();
        });
    }

    std::size_t peer_count() const {
        std::lock_guard<std::mutex> guard(peers_mutex);
        return peers.size();
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
    auto shared = std::make_shared<Shared>();
    shared->options = std::move(options);
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
    return t;
}

void PeerTransport::set_tls(TlsContextPtr accept, TlsContextPtr dial) {
    impl_->shared->tls_accept = std::move(accept);
    impl_->shared->tls_dial = std::move(dial);
}

}  // namespace pgfence::net
