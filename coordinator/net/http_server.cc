#include "net/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include <openssl/err.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <list>
#include <optional>

#include "log/log.h"
#include "net/accept_retry.h"
#include "net/json_text.h"
#include "net/tls.h"

namespace pgfence::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using log::log_event;
using log::log_value;
using log::LogLevel;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kDrainBytesMax = 1u << 20;  // discarded after a refused body
constexpr std::chrono::milliseconds kDrainTimeout{1000};
constexpr std::size_t kReadChunkBytes = 16u << 10;
// How often deadlines are checked: a timeout fires up to this much late.
constexpr std::chrono::milliseconds kSweepPeriod{250};

class Session;

struct Shared {
    HttpServerOptions options;
    HttpHandler handler;
    TlsContextPtr tls;      // null: plaintext; set before start(), swapped by set_tls()
    bool verify_client = false;
    std::uint64_t tls_handshake_failures = 0;
    log::Limiter refused_log{20};  // the lines of refused handshakes and requests: anyone can cause them
    log::Limiter accept_log{20};   // failed accepts and refused connections: as many as connections come
    std::size_t connections = 0;
    std::uint64_t accept_failures = 0;
    std::list<Session*> sessions;  // every live session, for the deadline sweep
};

// One client connection. Reads one request at a time (waiting for the socket
// to be readable, then reading what is there: one recv per request in the
// common case), hands it to the handler, sends the response, reads the next.
// Reading a request, and sending a response that did not fit the socket
// buffer at once, have a deadline (read_timeout); a request being handled has
// none; a connection not kept alive has kDrainTimeout after its last response
// for the client to close. The server's sweep closes connections past their
// deadline.
// Under TLS (a context was set when the connection was accepted): the
// handshake comes first, under read_timeout; then the same steps, with
// OpenSSL reading and writing the same non-blocking socket: SSL_read when it
// is readable (or while OpenSSL still holds decrypted bytes), SSL_write of
// the whole response at once, and a wait for readiness whenever OpenSSL
// wants one. The gone-client check polls the TCP socket as in plaintext: a
// closed connection is closed whatever it carried.
// Threading: everything runs on the io_context's thread. The handler is only
// ever entered from an asynchronous completion (never from inside respond(),
// even for a pipelined request already buffered), so it is never re-entered.
class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(tcp::socket socket, std::shared_ptr<Shared> shared)
        : socket_(std::move(socket)),
          buffer_(shared->options.max_header_bytes + shared->options.max_body_bytes +
                  kReadChunkBytes),
          shared_(std::move(shared)) {
        ++shared_->connections;
        registered_ = shared_->sessions.insert(shared_->sessions.end(), this);
        if (shared_->tls) {
            tls_context_ = shared_->tls;
            verify_client_ = shared_->verify_client;  // with the context it belongs to
            ssl_ = SSL_new(tls_context_->native_handle());
            beast::error_code ignored;
            socket_.native_non_blocking(true, ignored);
            if (ssl_) attach_socket(ssl_, socket_.native_handle());
        }
    }
    ~Session() {
        if (ssl_) SSL_free(ssl_);
        --shared_->connections;
        shared_->sessions.erase(registered_);
    }

    void start();
    void read_request();
    void respond(HttpResponse response, std::function<void(bool)> written);
    bool client_gone();
    void watch_for_close();
    bool peer_closed();
    void close_if_past_deadline(Clock::time_point now);

  private:
    void wait_readable();
    void on_readable(beast::error_code ec);
    void tls_handshake();
    bool tls_read(bool& eof);
    void tls_write(std::function<void(bool)> done);
    void tls_wait(int ssl_error, std::function<void(bool ready)> then);
    void send_close_notify();
    void parse_buffered(bool eof);
    void dispatch();
    void after_response();
    void refuse(const std::string& message);
    void drain_and_close();
    void close();

    tcp::socket socket_;
    TlsContextPtr tls_context_;  // what ssl_ was made with (kept alive)
    SSL* ssl_ = nullptr;         // set: this connection speaks TLS (owned)
    bool verify_client_ = false;  // tls_context_ requires client certificates
    bool read_wants_write_ = false;  // the last SSL_read waits for the socket to be writable
    std::string client_cn_;      // a verified client certificate's CN
    beast::flat_buffer buffer_;  // bounded: a header and a body at their limits, and one read
    std::optional<http::request_parser<http::string_body>> parser_;
    std::string out_;  // the response being sent
    std::shared_ptr<Shared> shared_;
    std::list<Session*>::iterator registered_;
    Clock::time_point deadline_ = Clock::time_point::max();
    bool keep_alive_ = false;
    unsigned version_ = 11;
    bool pending_ = false;           // a request awaits its response
    bool watching_ = false;          // a close-watch is armed for the pending request
    std::uint64_t request_seq_ = 0;  // which request a close-watch belongs to
    bool gone_ = false;
    std::array<char, 4096> drain_buf_{};
    std::size_t drained_ = 0;
};

class Exchange final : public HttpExchange {
  public:
    explicit Exchange(std::shared_ptr<Session> s) : session_(std::move(s)) {}
    bool client_gone() const override { return session_ && session_->client_gone(); }
    void watch_close() override {
        if (session_) session_->watch_for_close();
    }
    void respond(HttpResponse response, std::function<void(bool)> written) override {
        if (!session_) return;
        auto s = std::move(session_);
        s->respond(std::move(response), std::move(written));
    }

  private:
    std::shared_ptr<Session> session_;
};

void Session::start() {
    if (!tls_context_) {
        read_request();
        return;
    }
    deadline_ = Clock::now() + shared_->options.read_timeout;
    tls_handshake();
}

// Waits until the socket is ready for what SSL_get_error said (read or
// write), then runs then(true); a closed socket (the client's reset, or the
// sweep) closes the session and runs then(false), so a response being
// written is reported unwritten.
void Session::tls_wait(int ssl_error, std::function<void(bool ready)> then) {
    const auto what = ssl_error == SSL_ERROR_WANT_WRITE ? tcp::socket::wait_write : tcp::socket::wait_read;
    socket_.async_wait(what, [self = shared_from_this(), then = std::move(then)](beast::error_code ec) {
        const bool ready = !ec && self->socket_.is_open();
        if (!ready) self->close();
        then(ready);
    });
}

void Session::tls_handshake() {
    ERR_clear_error();
    const int r = ssl_ ? SSL_accept(ssl_) : -1;
    if (r == 1) {
        if (verify_client_) client_cn_ = common_name(SSL_get0_peer_certificate(ssl_));
        read_request();
        return;
    }
    const int e = ssl_ ? SSL_get_error(ssl_, r) : SSL_ERROR_SSL;
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        tls_wait(e, [self = shared_from_this()](bool ready) {
            if (ready) self->tls_handshake();
        });
        return;
    }
    ++shared_->tls_handshake_failures;
    shared_->refused_log.log(LogLevel::kInfo, "tls_handshake_failed",
                             {{"remote", remote_address(socket_.native_handle())}, {"reason", openssl_error()}});
    close();
}

// SSL_read until OpenSSL wants more from the socket; false when the session
// was closed (an error), `eof` when the client closed its side.
bool Session::tls_read(bool& eof) {
    while (buffer_.size() < buffer_.max_size()) {
        const auto space = buffer_.prepare(std::min(kReadChunkBytes, buffer_.max_size() - buffer_.size()));
        ERR_clear_error();
        const int n = SSL_read(ssl_, space.data(), static_cast<int>(space.size()));
        if (n > 0) {
            buffer_.commit(static_cast<std::size_t>(n));
            continue;  // one record per call: read on until OpenSSL wants the socket
        }
        const int e = SSL_get_error(ssl_, n);
        read_wants_write_ = e == SSL_ERROR_WANT_WRITE;  // e.g. answering a key update into a full send buffer
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return true;
        if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
            eof = true;  // close_notify, or the TCP connection closed without one
            return true;
        }
        close();
        return false;
    }
    return true;
}

// SSL_write of all of out_ (retried with the same bytes, as OpenSSL requires,
// whenever the socket is ready again); done(ok) once it is written or failed.
void Session::tls_write(std::function<void(bool)> done) {
    ERR_clear_error();
    const int n = SSL_write(ssl_, out_.data(), static_cast<int>(out_.size()));
    if (n > 0) {  // without partial writes, n > 0 means all of it
        done(true);
        return;
    }
    const int e = SSL_get_error(ssl_, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        deadline_ = Clock::now() + shared_->options.read_timeout;
        tls_wait(e, [self = shared_from_this(), done = std::move(done)](bool ready) mutable {
            if (ready) {
                self->tls_write(std::move(done));
            } else {
                done(false);
            }
        });
        return;
    }
    done(false);
}

// TLS's close_notify, sent at once without waiting for the client's (the
// sweep closes a connection the client does not close).
void Session::send_close_notify() {
    ERR_clear_error();
    if (SSL_shutdown(ssl_) < 0) ERR_clear_error();
}

void Session::read_request() {
    parser_.emplace();
    parser_->body_limit(shared_->options.max_body_bytes);
    parser_->header_limit(static_cast<std::uint32_t>(shared_->options.max_header_bytes));
    parser_->eager(true);
    deadline_ = Clock::now() + shared_->options.read_timeout;
    if (buffer_.size() > 0) {
        // The client sent it before our last response went out. Parsed on
        // the next turn, not here: a response sent at once calls back into
        // read_request(), and a long pipeline must not nest that recursion.
        asio::post(socket_.get_executor(), [self = shared_from_this()] {
            if (self->socket_.is_open()) self->parse_buffered(false);
        });
    } else {
        wait_readable();
    }
}

void Session::wait_readable() {
    if (ssl_ && SSL_has_pending(ssl_) == 1) {  // decrypted or buffered bytes the socket no longer shows
        asio::post(socket_.get_executor(), [self = shared_from_this()] {
            if (self->socket_.is_open()) self->on_readable({});
        });
        return;
    }
    const auto what = read_wants_write_ ? tcp::socket::wait_write : tcp::socket::wait_read;
    socket_.async_wait(what, [self = shared_from_this()](beast::error_code ec) { self->on_readable(ec); });
}

void Session::on_readable(beast::error_code ec) {
    if (ec) {  // closed by the deadline sweep, or by the server stopping
        close();
        return;
    }
    bool eof = false;
    if (ssl_) {
        if (tls_read(eof)) parse_buffered(eof);
        return;
    }
    while (buffer_.size() < buffer_.max_size()) {
        const auto space =
            buffer_.prepare(std::min(kReadChunkBytes, buffer_.max_size() - buffer_.size()));
        const ssize_t n = ::recv(socket_.native_handle(), space.data(), space.size(), MSG_DONTWAIT);
        if (n > 0) {
            buffer_.commit(static_cast<std::size_t>(n));
            if (static_cast<std::size_t>(n) < space.size()) break;  // drained what was there
            continue;
        }
        if (n == 0) {
            eof = true;
            break;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        close();  // reset by the peer, or another socket error
        return;
    }
    parse_buffered(eof);
}

// Feeds what is buffered to the parser: a complete request is dispatched, a
// bad one refused, an incomplete one waits for more.
void Session::parse_buffered(bool eof) {
    beast::error_code ec;
    while (buffer_.size() > 0 && !parser_->is_done()) {
        const std::size_t used = parser_->put(buffer_.data(), ec);
        buffer_.consume(used);
        if (ec || used == 0) break;
    }
    if (ec == http::error::need_more) ec = {};
    if (ec == http::error::body_limit) {
        refuse("request body exceeds " + std::to_string(shared_->options.max_body_bytes) +
               " bytes");
        return;
    }
    if (ec == http::error::header_limit) {
        refuse("request header exceeds " + std::to_string(shared_->options.max_header_bytes) +
               " bytes");
        return;
    }
    if (ec) {
        refuse("malformed HTTP request: " + ec.message());
        return;
    }
    if (parser_->is_done()) {
        dispatch();
        return;
    }
    if (eof) {
        if (parser_->got_some()) {
            log_event(LogLevel::kInfo, "http_closed_mid_request", {});
        }
        close();
        return;
    }
    if (buffer_.size() == buffer_.max_size()) {  // cannot happen within the limits; be safe
        refuse("request exceeds " + std::to_string(buffer_.max_size()) + " bytes");
        return;
    }
    wait_readable();
}

void Session::dispatch() {
    deadline_ = Clock::time_point::max();
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    pending_ = true;
    ++request_seq_;
    HttpRequest out{std::string(req.method_string()), std::string(req.target()),
                    std::move(req.body()), std::string(req[http::field::authorization]), client_cn_};
    watching_ = false;
    shared_->handler(out, std::make_shared<Exchange>(shared_from_this()));
}

void Session::close() {
    deadline_ = Clock::time_point::max();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
}

void Session::close_if_past_deadline(Clock::time_point now) {
    if (now >= deadline_ && socket_.is_open()) close();
}

// The phantom-lock check: has the client closed (or shut down) its sending
// side while its request is pending? poll's POLLRDHUP says so even when a
// pipelined request is still unread in the socket. A client that half-closes
// (shutdown(SHUT_WR)) after sending its request counts as gone, as before:
// nothing tells it apart from one that has gone. Most requests are answered
// within a commit, so the socket is polled only when asked (one system call
// instead of arming the reactor for every request); a long wait arms a watch.
bool Session::peer_closed() {
    if (!socket_.is_open()) return true;
    pollfd p{socket_.native_handle(), POLLRDHUP, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

bool Session::client_gone() {
    if (gone_ || !pending_ || watching_) return gone_;
    gone_ = peer_closed();
    return gone_;
}

void Session::watch_for_close() {
    if (!pending_ || watching_ || gone_) return;
    watching_ = true;
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this(),
                                                seq = request_seq_](beast::error_code ec) {
        // A watch left over from an earlier request on this keep-alive
        // connection must not judge the current one.
        if (!self->pending_ || seq != self->request_seq_) return;
        if (ec || self->peer_closed()) {
            self->gone_ = true;
        } else {
            self->watching_ = false;  // readable with data (a pipelined request): poll from now on
        }
    });
}

void Session::respond(HttpResponse r, std::function<void(bool)> written) {
    pending_ = false;
    if (gone_) {
        if (written) written(false);
        beast::error_code ignored;
        socket_.close(ignored);
        return;
    }
    format_response(out_, version_, r, keep_alive_);
    if (ssl_) {
        tls_write([self = shared_from_this(), written = std::move(written)](bool ok) {
            if (written) written(ok);
            if (ok) {
                self->after_response();
            } else {
                self->close();
            }
        });
        return;
    }
    // A response almost always fits the socket's send buffer: send it now,
    // without a round through the reactor; the rest (if any) asynchronously.
    const ssize_t n =
        ::send(socket_.native_handle(), out_.data(), out_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        if (written) written(false);
        close();
        return;
    }
    const std::size_t sent = n > 0 ? static_cast<std::size_t>(n) : 0;
    if (sent == out_.size()) {
        if (written) written(true);
        after_response();
        return;
    }
    deadline_ = Clock::now() + shared_->options.read_timeout;
    asio::async_write(socket_, asio::buffer(out_.data() + sent, out_.size() - sent),
                      [self = shared_from_this(), written = std::move(written)](
                          beast::error_code ec, std::size_t) {
                          if (written) written(!ec);
                          if (!ec) self->after_response();
                      });
}

// The response is out: read the next request, or end a connection that is
// not kept alive.
void Session::after_response() {
    if (!keep_alive_) {
        // The client closes its side next; if it does not (a close-watch may
        // still hold this session), the sweep closes ours.
        deadline_ = Clock::now() + kDrainTimeout;
        if (ssl_) send_close_notify();
        beast::error_code ignored;
        socket_.shutdown(tcp::socket::shutdown_send, ignored);
        return;
    }
    read_request();
}

// Answers 400 for a request that cannot be read whole, then closes politely.
void Session::refuse(const std::string& message) {
    shared_->refused_log.log(LogLevel::kInfo, "http_refused",
                             {{"remote", remote_address(socket_.native_handle())}, {"reason", message}});
    std::string body = "{\"error\":\"bad_request\",\"message\":";
    append_json_string(body, message);
    body.push_back('}');
    format_response(out_, version_, HttpResponse{400, std::move(body), "application/json", {}},
                    false);
    deadline_ = Clock::now() + shared_->options.read_timeout;
    if (ssl_) {
        tls_write([self = shared_from_this()](bool ok) {
            if (!ok) {
                self->close();
                return;
            }
            self->send_close_notify();
            beast::error_code ignored;
            self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
            self->deadline_ = Clock::now() + kDrainTimeout;
            self->drain_and_close();
        });
        return;
    }
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                          if (ec) {
                              self->close();
                              return;
                          }
                          beast::error_code ignored;
                          self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
                          self->deadline_ = Clock::now() + kDrainTimeout;
                          self->drain_and_close();
                      });
}

// Reads and discards what the client still sends (bounded) so that closing
// does not reset the connection before the client has read our answer.
void Session::drain_and_close() {
    socket_.async_read_some(asio::buffer(drain_buf_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                self->drained_ += n;
                                if (ec || self->drained_ > kDrainBytesMax) {
                                    self->close();
                                    return;
                                }
                                self->drain_and_close();
                            });
}

}  // namespace

void format_response(std::string& out, unsigned version, const HttpResponse& r, bool keep_alive) {
    const auto reason = http::obsolete_reason(http::int_to_status(r.status));
    out.clear();
    out.reserve(160 + r.body.size());
    out.append(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ")
        .append(std::to_string(r.status))
        .append(" ");
    out.append(reason.data(), reason.size())
        .append("\r\nServer: fence-coordinator\r\nContent-Type: ");
    out.append(r.content_type).append("\r\n");
    if (!r.location.empty()) out.append("Location: ").append(r.location).append("\r\n");
    if (r.status == 401) out.append("WWW-Authenticate: Bearer realm=\"pgfence\"\r\n");
    if (version == 10 && keep_alive) out.append("Connection: keep-alive\r\n");
    if (version != 10 && !keep_alive) out.append("Connection: close\r\n");
    out.append("Content-Length: ").append(std::to_string(r.body.size())).append("\r\n\r\n");
    out.append(r.body);
}

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
    Impl(asio::io_context& io, HttpServerOptions options, HttpHandler handler)
        : acceptor(io), sweep_timer(io), retry_timer(io), shared(std::make_shared<Shared>()) {
        shared->options = std::move(options);
        shared->handler = std::move(handler);
    }

    void accept() {
        acceptor.async_accept([self = shared_from_this()](beast::error_code ec,
                                                          tcp::socket socket) {
            if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) return;
            if (ec) {
                ++self->shared->accept_failures;
                self->shared->accept_log.log(LogLevel::kWarn, "http_accept_failed",
                                             {{"error", ec.message()},
                                              {"connections", log_value(self->shared->connections)}});
                if (accept_needs_pause(ec)) {  // accept_retry.h
                    self->retry_timer.expires_after(kAcceptRetry);
                    self->retry_timer.async_wait([self](beast::error_code wait_ec) {
                        if (!wait_ec && self->acceptor.is_open()) self->accept();
                    });
                    return;
                }
            } else if (self->shared->connections >= self->shared->options.max_connections) {
                self->shared->accept_log.log(
                    LogLevel::kWarn, "http_connection_refused",
                    {{"reason", "connection cap reached"},
                     {"max_connections", log_value(self->shared->options.max_connections)}});
                beast::error_code ignored;
                socket.close(ignored);
            } else {
                socket.set_option(tcp::no_delay(true), ec);
                std::make_shared<Session>(std::move(socket), self->shared)->start();
            }
            self->accept();
        });
    }

    // Closes connections past their deadline, every kSweepPeriod.
    void sweep() {
        sweep_timer.expires_after(kSweepPeriod);
        sweep_timer.async_wait([self = shared_from_this()](beast::error_code ec) {
            if (ec || !self->acceptor.is_open()) return;
            const auto now = Clock::now();
            for (Session* s : self->shared->sessions) s->close_if_past_deadline(now);
            self->sweep();
        });
    }

    tcp::acceptor acceptor;
    asio::steady_timer sweep_timer;
    asio::steady_timer retry_timer;  // accept again after a failed accept
    std::shared_ptr<Shared> shared;
};

HttpServer::HttpServer(asio::io_context& io, HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() {
    stop();
}

std::string HttpServer::start() {
    beast::error_code ec;
    const auto address = asio::ip::make_address(impl_->shared->options.host, ec);
    if (ec) return "bad client address host '" + impl_->shared->options.host + "': " + ec.message();
    const tcp::endpoint ep(address, impl_->shared->options.port);
    impl_->acceptor.open(ep.protocol(), ec);
    if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) impl_->acceptor.bind(ep, ec);
    if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        return "cannot listen for HTTP on " + impl_->shared->options.host + ":" +
               std::to_string(impl_->shared->options.port) + ": " + ec.message();
    }
    impl_->accept();
    impl_->sweep();
    return {};
}

void HttpServer::stop() {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->sweep_timer.cancel();
    impl_->retry_timer.cancel();
}

std::uint64_t HttpServer::accept_failures() const { return impl_->shared->accept_failures; }

std::size_t HttpServer::connections() const {
    return impl_->shared->connections;
}

void HttpServer::set_tls(TlsContextPtr context, bool verify_client) {
    impl_->shared->tls = std::move(context);
    impl_->shared->verify_client = verify_client;
}

std::uint64_t HttpServer::tls_handshake_failures() const {
    return impl_->shared->tls_handshake_failures;
}

}  // namespace pgfence::net
