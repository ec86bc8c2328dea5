#include "net/http_server.h"

#include <poll.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <algorithm>
#include <cstdio>
#include <list>
#include <optional>

#include "log/log.h"
#include "net/accept_retry.h"
#include "net/json_text.h"
#include "net/stream.h"
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
// A streamed response drops the bytes it wrote from its queue past this much.
constexpr std::size_t kStreamCompactBytes = 64u << 10;

class Session;

struct Shared {
    HttpServerOptions options;
    HttpHandler handler;
    TlsContextPtr tls;      // null: plaintext; set before start(), swapped by set_tls()
    bool verify_client = false;
    std::uint64_t tls_handshake_failures = 0;
    log::Limiter refused_log{20};  // the lines of refused handshakes and requests: anyone can cause them
    log::Limiter accept_log{20};   // failed accepts and refused connections: as many as connections come
    log::Limiter shed_log{20};     // connections closed for room: as many as connections come
    std::size_t connections = 0;   // counted: admitted and not yet closed (Session::leave)
    std::uint64_t accept_failures = 0;
    std::list<Session*> sessions;  // every live session, for the deadline sweep
    ShedOrder<Session*> order;     // the counted sessions, in shedding order (conn_ranks.h)
    AddressCounts per_address{0};  // the counted sessions by source address
    HttpServer::ConnectionCounters counters;
};

// One client connection. Reads one request at a time (waiting for the socket
// to be readable, then reading what is there: one recv per request in the
// common case), hands it to the handler, sends the response, reads the next.
// Reading a request, and sending a response that did not fit the socket
// buffer at once, have a deadline (read_timeout); a request being handled has
// none; a connection not kept alive has kDrainTimeout after its last response
// for the client to close. The server's sweep closes connections past their
// deadline.
// All bytes go through stream_ (net/stream.h), plaintext or TLS alike: a
// read takes what is there, a response is written at once when the socket
// buffer takes it, and whatever the stream wants (readable, writable) is
// waited for on the loop. Under TLS (a context was set when the connection
// was accepted) the handshake comes first, under read_timeout, and bytes
// OpenSSL already holds are read before waiting. The gone-client check polls
// the TCP socket in either case: a closed connection is closed whatever it
// carried.
// Threading: everything runs on the io_context's thread. The handler is only
// ever entered from an asynchronous completion (never from inside respond(),
// even for a pipelined request already buffered), so it is never re-entered.
class Session : public std::enable_shared_from_this<Session> {
  public:
    // `address` is counted in shared->per_address already.
    Session(tcp::socket socket, std::shared_ptr<Shared> shared, std::string address)
        : socket_(std::move(socket)),
          buffer_(shared->options.max_header_bytes + shared->options.max_body_bytes +
                  kReadChunkBytes),
          shared_(std::move(shared)),
          address_(std::move(address)) {
        ++shared_->connections;
        registered_ = shared_->sessions.insert(shared_->sessions.end(), this);
        slot_ = shared_->order.add(this);
        if (shared_->tls) {
            tls_ = true;
            verify_client_ = shared_->verify_client;  // with the context it belongs to
            beast::error_code ignored;
            socket_.native_non_blocking(true, ignored);
            // On failure the stream is failed, and the handshake reports it.
            stream_.attach_tls(socket_.native_handle(), shared_->tls, TlsRole::kAccept);
        } else {
            stream_.attach(socket_.native_handle());
        }
    }
    ~Session() {
        leave();
        shared_->sessions.erase(registered_);
    }

    void start();
    void read_request();
    void respond(HttpResponse response, std::function<void(bool)> written);
    bool client_gone();
    void watch_for_close();
    bool peer_closed();
    void close_if_past_deadline(Clock::time_point now);
    void raise_class(ConnClass c) {
        if (counted_) shared_->order.raise(slot_, c);
    }
    void shed();

    // ---- a streamed response (HttpStream) ----
    bool open_stream(unsigned status, const std::string& content_type, std::size_t send_buffer_bytes);
    void stream_write(std::string_view bytes);
    std::size_t stream_unwritten() const { return out_.size() - out_sent_; }
    bool stream_closed() const { return stream_closed_; }
    void stream_end();
    void stream_on_close(std::function<void()> fn) { on_stream_close_ = std::move(fn); }
    void stream_on_drained(std::function<void()> fn);

  private:
    void stream_pump();
    void stream_watch_read();
    void post(std::function<void()> fn);
    void leave();
    void wait_for(Step step, std::function<void(bool ready)> then);
    void wait_readable();
    void on_readable(beast::error_code ec);
    void handshake();
    void write_out(std::function<void(bool)> done);
    void parse_buffered(bool eof);
    void dispatch();
    void after_response();
    void refuse(const std::string& message);
    void drain_and_close();
    void close();

    tcp::socket socket_;
    Stream stream_;               // the socket's bytes (TLS when tls_)
    bool tls_ = false;            // accepted with a TLS context
    bool verify_client_ = false;  // that context requires client certificates
    bool read_wants_write_ = false;  // the last read waits for the socket to be writable
    std::string client_cn_;      // a verified client certificate's CN
    beast::flat_buffer buffer_;  // bounded: a header and a body at their limits, and one read
    std::optional<http::request_parser<http::string_body>> parser_;
    std::string out_;  // the response being sent
    std::size_t out_sent_ = 0;  // how much of out_ is written
    std::shared_ptr<Shared> shared_;
    std::list<Session*>::iterator registered_;
    std::string address_;               // the client's IP address, as text
    ShedOrder<Session*>::Slot slot_;    // where it is in shared_->order while counted_
    bool counted_ = true;               // in the connection count, order and per_address (until leave())
    Clock::time_point deadline_ = Clock::time_point::max();
    bool keep_alive_ = false;
    unsigned version_ = 11;
    bool pending_ = false;           // a request awaits its response
    bool watching_ = false;          // a close-watch is armed for the pending request
    std::uint64_t request_seq_ = 0;  // which request a close-watch belongs to
    bool gone_ = false;
    std::array<char, 4096> drain_buf_{};
    std::size_t drained_ = 0;
    // A streamed response: out_ is its queue (written from out_sent_ on).
    bool streaming_ = false;
    bool stream_closed_ = false;   // ended, or closed (on_stream_close_ posted)
    bool stream_ending_ = false;   // end(): close once the queue is written
    bool stream_writing_ = false;  // a write_out of the queue is under way
    std::function<void()> on_stream_close_;
    std::function<void()> on_stream_drained_;
};

// The handler's side of a streamed response (HttpStream).
class StreamImpl final : public HttpStream {
  public:
    explicit StreamImpl(std::shared_ptr<Session> s) : session_(std::move(s)) {}
    ~StreamImpl() override { session_->stream_end(); }
    void write(std::string_view bytes) override { session_->stream_write(bytes); }
    std::size_t unwritten_bytes() const override { return session_->stream_unwritten(); }
    bool closed() const override { return session_->stream_closed(); }
    void end() override { session_->stream_end(); }
    void on_close(std::function<void()> fn) override { session_->stream_on_close(std::move(fn)); }
    void on_drained(std::function<void()> fn) override { session_->stream_on_drained(std::move(fn)); }

  private:
    std::shared_ptr<Session> session_;
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
    void raise_class(ConnClass c) override {
        if (session_) session_->raise_class(c);
    }
    std::shared_ptr<HttpStream> open_stream(unsigned status, std::string content_type,
                                            std::size_t send_buffer_bytes) override {
        if (!session_) return nullptr;
        auto s = std::move(session_);
        if (!s->open_stream(status, content_type, send_buffer_bytes)) return nullptr;
        return std::make_shared<StreamImpl>(std::move(s));
    }

  private:
    std::shared_ptr<Session> session_;
};

void Session::start() {
    if (!tls_) {
        read_request();
        return;
    }
    deadline_ = Clock::now() + shared_->options.read_timeout;
    handshake();
}

// Waits until the socket is ready for what the stream wants (kWantRead or
// kWantWrite), then runs then(true); a closed socket (the client's reset, or
// the sweep) closes the session and runs then(false), so a response being
// written is reported unwritten.
void Session::wait_for(Step step, std::function<void(bool ready)> then) {
    const auto what = step == Step::kWantWrite ? tcp::socket::wait_write : tcp::socket::wait_read;
    socket_.async_wait(what, [self = shared_from_this(), then = std::move(then)](beast::error_code ec) {
        const bool ready = !ec && self->socket_.is_open();
        if (!ready) self->close();
        then(ready);
    });
}

void Session::handshake() {
    const Step step = stream_.handshake();
    if (step == Step::kDone) {
        if (verify_client_) client_cn_ = common_name(stream_.peer_certificate());
        read_request();
        return;
    }
    if (step == Step::kWantRead || step == Step::kWantWrite) {
        wait_for(step, [self = shared_from_this()](bool ready) {
            if (ready) self->handshake();
        });
        return;
    }
    ++shared_->tls_handshake_failures;
    shared_->refused_log.log(LogLevel::kInfo, "tls_handshake_failed",
                             {{"remote", remote_address(socket_.native_handle())}, {"reason", stream_.error()}});
    close();
}

// Writes out_ from out_sent_ on, waiting whenever the stream wants the socket
// (a TLS write is retried with the same bytes, as OpenSSL requires);
// done(ok) once all of it is written, or it could not be.
void Session::write_out(std::function<void(bool)> done) {
    while (out_sent_ < out_.size()) {
        const IoResult r = stream_.write_some(out_.data() + out_sent_, out_.size() - out_sent_);
        if (r.step == Step::kDone) {
            out_sent_ += r.bytes;
            // A stream's queue grows while it is written: what is written
            // goes (never while a TLS write waits to be retried).
            if (streaming_ && out_sent_ >= kStreamCompactBytes) {
                out_.erase(0, out_sent_);
                out_sent_ = 0;
            }
            continue;
        }
        if (r.step != Step::kWantRead && r.step != Step::kWantWrite) {
            done(false);
            return;
        }
        deadline_ = Clock::now() + shared_->options.read_timeout;
        wait_for(r.step, [self = shared_from_this(), done = std::move(done)](bool ready) mutable {
            if (ready) {
                self->write_out(std::move(done));
            } else {
                done(false);
            }
        });
        return;
    }
    done(true);
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
    if (stream_.has_pending()) {  // decrypted or buffered bytes the socket no longer shows
        asio::post(socket_.get_executor(), [self = shared_from_this()] {
            if (self->socket_.is_open()) self->on_readable({});
        });
        return;
    }
    const auto what = read_wants_write_ ? tcp::socket::wait_write : tcp::socket::wait_read;
    socket_.async_wait(what, [self = shared_from_this()](beast::error_code ec) { self->on_readable(ec); });
}

// Reads until the stream wants the socket again (plaintext: until a read
// comes back short, having drained what was there; TLS reads one record per
// call), then parses what came.
void Session::on_readable(beast::error_code ec) {
    if (ec) {  // closed by the deadline sweep, or by the server stopping
        close();
        return;
    }
    bool eof = false;
    while (buffer_.size() < buffer_.max_size()) {
        const auto space = buffer_.prepare(std::min(kReadChunkBytes, buffer_.max_size() - buffer_.size()));
        const IoResult r = stream_.read_some(space.data(), space.size());
        if (r.step == Step::kDone) {
            buffer_.commit(r.bytes);
            if (!tls_ && r.bytes < space.size()) break;
            continue;
        }
        read_wants_write_ = r.step == Step::kWantWrite;  // e.g. answering a key update into a full send buffer
        if (r.step == Step::kFailed) {  // reset by the peer, a TLS alert, another socket error
            close();
            return;
        }
        eof = r.step == Step::kClosed;  // close_notify, or the TCP connection closed
        break;
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
    if (counted_) shared_->order.busy(slot_);
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    pending_ = true;
    ++request_seq_;
    HttpRequest out{std::string(req.method_string()), std::string(req.target()),
                    std::move(req.body()), std::string(req[http::field::authorization]), client_cn_,
                    std::string(req[http::field::content_type]), std::nullopt};
    if (auto origin = req.find(http::field::origin); origin != req.end()) out.origin = std::string(origin->value());
    watching_ = false;
    shared_->handler(out, std::make_shared<Exchange>(shared_from_this()));
}

void Session::close() {
    leave();
    if (streaming_ && !stream_closed_) {
        stream_closed_ = true;
        if (on_stream_close_) post(std::move(on_stream_close_));
    }
    on_stream_drained_ = nullptr;
    deadline_ = Clock::time_point::max();
    stream_.detach();  // before the descriptor's number can be reused
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
}

// Out of the count, the order and its address's count, once: at the first
// close, or at destruction for a session closed another way.
void Session::leave() {
    if (!counted_) return;
    counted_ = false;
    shared_->order.remove(slot_);
    shared_->per_address.remove(address_);
    --shared_->connections;
}

// Closed to make room for a newcomer at the cap (it is idle: ShedOrder).
void Session::shed() {
    ++shared_->counters.shed[static_cast<std::size_t>(slot_.cls)];
    shared_->shed_log.log(LogLevel::kWarn, "http_connection_shed",
                          {{"class", conn_class_name(slot_.cls)},
                           {"remote", address_},
                           {"max_connections", log_value(shared_->options.max_connections)}});
    close();
}

void Session::close_if_past_deadline(Clock::time_point now) {
    if (now >= deadline_ && socket_.is_open()) close();
}

// The phantom-lock check: has the client closed (or shut down) its sending
// side while its request is pending? poll's POLLRDHUP says so even when a
// pipelined request is still unread in the socket. A client that half-closes
// (shutdown(SHUT_WR)) after sending its request counts as gone too:
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
        leave();
        stream_.detach();
        beast::error_code ignored;
        socket_.close(ignored);
        return;
    }
    format_response(out_, version_, r, keep_alive_);
    out_sent_ = 0;
    // A response almost always fits the socket's send buffer: it is written
    // now, without a round through the reactor; the rest (if any) as the
    // socket allows. The connection stays busy (never shed for room) until
    // the last byte is out: shedding it mid-write would report the answer
    // unwritten (a grant handled as a phantom). A client that does not read
    // is ended by the write's deadline (read_timeout) instead.
    write_out([self = shared_from_this(), written = std::move(written)](bool ok) {
        if (ok && self->counted_) self->shared_->order.idle(self->slot_);
        if (written) written(ok);
        if (ok) {
            self->after_response();
        } else {
            self->close();
        }
    });
}

// The response is out: read the next request, or end a connection that is
// not kept alive.
void Session::after_response() {
    if (!keep_alive_) {
        // The client closes its side next; if it does not (a close-watch may
        // still hold this session), the sweep closes ours.
        deadline_ = Clock::now() + kDrainTimeout;
        stream_.close_notify();
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
    out_sent_ = 0;
    deadline_ = Clock::now() + shared_->options.read_timeout;
    write_out([self = shared_from_this()](bool ok) {
        if (!ok) {
            self->close();
            return;
        }
        self->stream_.close_notify();
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


void Session::post(std::function<void()> fn) { asio::post(socket_.get_executor(), std::move(fn)); }

// The status line and headers go at once; the socket is then watched for
// the client's going away (it sends nothing more: what it does send is
// read and dropped).
bool Session::open_stream(unsigned status, const std::string& content_type, std::size_t send_buffer_bytes) {
    pending_ = false;
    if (gone_ || !socket_.is_open()) {
        close();
        return false;
    }
    streaming_ = true;
    if (send_buffer_bytes > 0) {
        beast::error_code ignored;  // a buffer left as it was only delays the watcher_too_slow
        socket_.set_option(asio::socket_base::send_buffer_size(static_cast<int>(
                               std::min<std::size_t>(send_buffer_bytes, 64u << 20))),
                           ignored);
    }
    const auto reason = http::obsolete_reason(http::int_to_status(status));
    out_.clear();
    out_sent_ = 0;
    out_.append(version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ").append(std::to_string(status)).append(" ");
    out_.append(reason.data(), reason.size()).append("\r\nServer: fence-coordinator\r\nContent-Type: ");
    out_.append(content_type).append("\r\nCache-Control: no-store\r\n");
    out_.append(version_ == 10 ? "Connection: close\r\n\r\n" : "Transfer-Encoding: chunked\r\n\r\n");
    stream_pump();
    stream_watch_read();
    return true;
}

void Session::stream_write(std::string_view bytes) {
    if (stream_closed_ || bytes.empty()) return;
    if (version_ == 10) {
        out_.append(bytes);
    } else {
        char size[24];
        const int n = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
        out_.append(size, static_cast<std::size_t>(n)).append(bytes).append("\r\n");
    }
    if (!stream_writing_) stream_pump();
}

void Session::stream_end() {
    if (stream_closed_) return;
    stream_closed_ = true;
    stream_ending_ = true;
    on_stream_close_ = nullptr;
    on_stream_drained_ = nullptr;
    if (version_ != 10) out_.append("0\r\n\r\n");
    if (!stream_writing_) stream_pump();
}

void Session::stream_on_drained(std::function<void()> fn) {
    if (stream_closed_) return;
    if (stream_writing_) {
        on_stream_drained_ = std::move(fn);
    } else {
        post(std::move(fn));
    }
}

// Writes the queue; once all of it is out: the drained callback, or the
// close an end() asked for. Between writes the stream has no deadline.
void Session::stream_pump() {
    stream_writing_ = true;
    write_out([self = shared_from_this()](bool ok) {
        self->stream_writing_ = false;
        if (!ok) {
            self->close();
            return;
        }
        self->out_.clear();
        self->out_sent_ = 0;
        self->deadline_ = Clock::time_point::max();
        if (self->stream_ending_) {
            self->stream_ending_ = false;
            self->deadline_ = Clock::now() + kDrainTimeout;
            self->stream_.close_notify();
            beast::error_code ignored;
            self->socket_.shutdown(tcp::socket::shutdown_send, ignored);
            return;
        }
        if (self->on_stream_drained_) self->post(std::move(self->on_stream_drained_));
        self->on_stream_drained_ = nullptr;
    });
}

void Session::stream_watch_read() {
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
        if (!self->socket_.is_open()) return;  // closed already (and told)
        if (ec || self->peer_closed()) {
            self->close();
            return;
        }
        for (int i = 0; i < 16; ++i) {  // what the client sent after its request: dropped
            const IoResult r = self->stream_.read_some(self->drain_buf_.data(), self->drain_buf_.size());
            if (r.step == Step::kDone) continue;
            if (r.step == Step::kWantRead || r.step == Step::kWantWrite) break;
            self->close();  // closed or failed
            return;
        }
        self->stream_watch_read();
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
        shared->per_address = AddressCounts(shared->options.max_connections_per_address);
    }

    void accept() {
        acceptor.async_accept(peer, [self = shared_from_this()](beast::error_code ec,
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
            } else {
                self->admit(std::move(socket));
            }
            self->accept();
        });
    }

    // A new connection from `peer`: within its address's limit, and within
    // the cap or in the place of the connection that gives way
    // (conn_ranks.h); else closed.
    void admit(tcp::socket socket) {
        Shared& sh = *shared;
        std::string address = peer.address().to_string();
        const char* refused = nullptr;
        if (!sh.per_address.try_add(address)) {
            ++sh.counters.refused_per_address;
            refused = "per-address connection limit reached";
        } else if (sh.connections >= sh.options.max_connections) {
            if (const std::optional<Session*> victim = sh.order.victim()) {
                (*victim)->shed();
            } else {
                sh.per_address.remove(address);
                ++sh.counters.refused_busy;
                refused = "connection cap reached, every connection busy";
            }
        }
        if (refused != nullptr) {
            sh.accept_log.log(LogLevel::kWarn, "http_connection_refused",
                              {{"reason", refused},
                               {"remote", address},
                               {"max_connections", log_value(sh.options.max_connections)},
                               {"max_connections_per_address", log_value(sh.options.max_connections_per_address)}});
            beast::error_code ignored;
            socket.close(ignored);
            return;
        }
        beast::error_code ec;
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(socket), shared, std::move(address))->start();
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
    tcp::endpoint peer;  // the address of the connection being accepted
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

const HttpServer::ConnectionCounters& HttpServer::connection_counters() const {
    return impl_->shared->counters;
}

void HttpServer::set_tls(TlsContextPtr context, bool verify_client) {
    impl_->shared->tls = std::move(context);
    impl_->shared->verify_client = verify_client;
}

std::uint64_t HttpServer::tls_handshake_failures() const {
    return impl_->shared->tls_handshake_failures;
}

}  // namespace pgfence::net
