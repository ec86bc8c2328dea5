// Synchronous HTTP/1.1 over a non-blocking socket: Beast serializes and
// parses, the socket's bytes go through net::Stream (plaintext or TLS), and
// every wait the stream asks for is a poll() bounded by the call's deadline.
// Per request that is about three system calls (send, poll, recv), against
// eight or so for io_context-driven async operations with timers.
#include "client/http_connection.h"

#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <optional>

#include "net/stream.h"

namespace pgfence::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using net::IoResult;
using net::Step;

namespace {

// Waits until `fd` is ready for `events` or `deadline`; false with ec = timeout.
bool wait_ready(int fd, short events, Clock::time_point deadline, beast::error_code& ec) {
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            ec = beast::error::timeout;
            return false;
        }
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) {
            ec = beast::error_code(errno, beast::system_category());
            return false;
        }
    }
}

// Waits for what a stream call that answered `step` wants; false with ec set
// when it ended for another reason (or the deadline passed).
bool wait_for(const net::Stream& stream, Step step, Clock::time_point deadline, beast::error_code& ec) {
    if (step == Step::kWantRead) return wait_ready(stream.fd(), POLLIN, deadline, ec);
    if (step == Step::kWantWrite) return wait_ready(stream.fd(), POLLOUT, deadline, ec);
    if (step == Step::kClosed) {
        ec = asio::error::eof;  // close_notify, or the peer closed the TCP connection
    } else if (stream.tls()) {
        ec = beast::error_code(static_cast<int>(stream.error_code()), asio::error::get_ssl_category());
    } else {
        ec = beast::error_code(static_cast<int>(stream.error_code()), beast::system_category());
    }
    return false;
}

// A SyncReadStream/SyncWriteStream over the connection's net::Stream whose
// every operation ends by `deadline`.
class DeadlineStream {
public:
    DeadlineStream(net::Stream& stream, Clock::time_point deadline) : stream_(stream), deadline_(deadline) {}

    template <class Buffers>
    std::size_t read_some(const Buffers& buffers, beast::error_code& ec) {
        asio::mutable_buffer b;
        for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
            b = asio::mutable_buffer(*it);
            if (b.size() > 0) break;
        }
        if (b.size() == 0) return 0;
        // Plaintext: poll first, as an answer is never there the moment the
        // request went out. TLS: decrypted bytes may be waiting in OpenSSL,
        // so read before polling.
        if (!stream_.tls() && !wait_ready(stream_.fd(), POLLIN, deadline_, ec)) return 0;
        for (;;) {
            const IoResult r = stream_.read_some(b.data(), b.size());
            if (r.step == Step::kDone) return r.bytes;
            if (!wait_for(stream_, r.step, deadline_, ec)) return 0;
        }
    }

    // One write of the whole sequence (the header and the body together),
    // retried with the same bytes after a wait, as a TLS write requires.
    template <class Buffers>
    std::size_t write_some(const Buffers& buffers, beast::error_code& ec) {
        out_.clear();
        for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
            const asio::const_buffer b(*it);
            out_.append(static_cast<const char*>(b.data()), b.size());
        }
        if (out_.empty()) return 0;
        for (;;) {
            const IoResult r = stream_.write_some(out_.data(), out_.size());
            if (r.step == Step::kDone) return r.bytes;
            if (!wait_for(stream_, r.step, deadline_, ec)) return 0;
        }
    }

    template <class Buffers>
    std::size_t read_some(const Buffers& buffers) {
        beast::error_code ec;
        const std::size_t n = read_some(buffers, ec);
        if (ec) throw beast::system_error(ec);
        return n;
    }

    template <class Buffers>
    std::size_t write_some(const Buffers& buffers) {
        beast::error_code ec;
        const std::size_t n = write_some(buffers, ec);
        if (ec) throw beast::system_error(ec);
        return n;
    }

private:
    net::Stream& stream_;
    Clock::time_point deadline_;
    std::string out_;  // what write_some writes
};

}  // namespace

class HttpConnection::Impl {
public:
    Impl(Endpoint endpoint, std::shared_ptr<const ConnectionSettings> settings)
        : endpoint_(std::move(endpoint)), settings_(std::move(settings)) {}
    ~Impl() { close(); }
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;

    HttpResult roundtrip(const HttpRequest& request, Clock::time_point deadline) {
        HttpResult result;
        if (Clock::now() >= deadline) return fail(result, TransportError::kTimeout, "deadline passed");
        if (streaming_) close();  // an earlier stream's body is still coming: that connection is done
        result.reused = socket_.is_open();
        if (!socket_.is_open() && !connect(result, deadline)) return result;
        const auto req = build(request);
        DeadlineStream stream(stream_, deadline);
        beast::error_code ec;
        result.sent = true;
        result.sent_at = Clock::now();
        http::write(stream, req, ec);
        if (ec) return fail(result, classify(ec), "write to " + endpoint_.to_string() + ": " + ec.message());
        if (request.stream) return read_streamed(stream, request.max_response_bytes, result);
        return read(stream, request.max_response_bytes, result);
    }

    StreamRead read_stream(std::string& out, Clock::time_point deadline, std::string& why) {
        if (!streaming_ || !socket_.is_open()) {
            why = stream_end_.empty() ? "no stream is open" : stream_end_;
            return StreamRead::kError;
        }
        DeadlineStream stream(stream_, deadline);
        for (;;) {
            if (streaming_->is_done()) {
                why = endpoint_.to_string() + " ended the stream";
                close();
                return StreamRead::kEnd;
            }
            beast::error_code ec;
            const std::size_t n = read_body_some(stream, out, ec);
            if (ec == beast::error::timeout) return n > 0 ? StreamRead::kData : StreamRead::kTimeout;
            if (ec) {
                // Bytes that came before the break are handed out first; the
                // next call finds the stream closed.
                const bool eof = ec == asio::error::eof || ec == http::error::partial_message ||
                                 ec == http::error::end_of_stream;
                why = eof ? endpoint_.to_string() + " closed the stream"
                          : "read from " + endpoint_.to_string() + ": " + ec.message();
                close();
                if (n > 0) {
                    stream_end_ = why;  // said by the next call
                    return StreamRead::kData;
                }
                return eof ? StreamRead::kEnd : StreamRead::kError;
            }
            if (n > 0) return StreamRead::kData;
        }
    }

    void close() {
        streaming_.reset();
        stream_.detach();  // no close_notify: the member sees the TCP close either way
        beast::error_code ignored;
        socket_.shutdown(tcp::socket::shutdown_both, ignored);
        socket_.close(ignored);
        buffer_.clear();
    }

    const Endpoint& endpoint() const { return endpoint_; }
    bool is_open() const { return socket_.is_open(); }

private:
    bool connect(HttpResult& result, Clock::time_point deadline) {
        tcp::resolver resolver(ioc_);
        beast::error_code ec;
        const auto addresses = resolver.resolve(endpoint_.host, std::to_string(endpoint_.port), ec);
        if (ec) {
            fail(result, TransportError::kConnect, "resolve " + endpoint_.host + ": " + ec.message());
            return false;
        }
        for (const auto& entry : addresses) {
            if (connect_one(entry.endpoint(), deadline, ec)) {
                if (!endpoint_.tls) {
                    stream_.attach(socket_.native_handle());
                    return true;
                }
                std::string why;
                if (handshake(deadline, why)) return true;
                fail(result, why.empty() ? TransportError::kTimeout : TransportError::kConnect,
                     "TLS with " + endpoint_.to_string() + ": " + (why.empty() ? "handshake timed out" : why));
                return false;
            }
            if (ec == beast::error::timeout) break;
        }
        const auto kind = ec == beast::error::timeout ? TransportError::kTimeout : TransportError::kConnect;
        fail(result, kind, "connect to " + endpoint_.to_string() + ": " + ec.message());
        return false;
    }

    // Non-blocking connect, then poll for writability until the deadline.
    // connect(2) itself, not socket_.connect(): asio's synchronous connect
    // waits for the answer without a timeout whatever the socket's mode, so
    // a member whose packets are dropped would hold the call for the
    // kernel's SYN retries (about two minutes), past any deadline.
    bool connect_one(const tcp::endpoint& to, Clock::time_point deadline, beast::error_code& ec) {
        close();
        socket_.open(to.protocol(), ec);
        if (!ec) socket_.non_blocking(true, ec);
        if (!ec) socket_.set_option(tcp::no_delay(true), ec);
        if (!ec && ::connect(socket_.native_handle(), to.data(), static_cast<socklen_t>(to.size())) != 0) {
            ec = beast::error_code(errno, beast::system_category());
        }
        // (Only EINPROGRESS means the connect goes on: EAGAIN from a TCP
        // connect means it did not start, and is an error as it is.)
        if (ec == asio::error::in_progress) {
            ec = {};
            if (wait_ready(socket_.native_handle(), POLLOUT, deadline, ec)) {
                int error = 0;
                socklen_t len = sizeof error;
                if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
                if (error != 0) ec = beast::error_code(error, beast::system_category());
            }
        }
        if (ec) close();
        return !ec;
    }

    // The TLS handshake on the connected socket; false with `why` ("" for a
    // timeout). The member must prove the endpoint's name or IP.
    bool handshake(Clock::time_point deadline, std::string& why) {
        if (!settings_ || !settings_->tls) {
            why = settings_ && !settings_->tls_error.empty() ? settings_->tls_error : "no TLS settings";
            return false;
        }
        // Sends with MSG_NOSIGNAL, as the plaintext path.
        if (!stream_.attach_tls(socket_.native_handle(), settings_->tls, net::TlsRole::kConnect)) {
            why = "cannot set up TLS: " + stream_.error();
            return false;
        }
        // The member must name the host in its SANs (never only in its subject CN).
        std::string host = endpoint_.host;
        if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        if (!stream_.expect_host(host)) {
            why = "cannot check the member's certificate for '" + host + "'";
            return false;
        }
        beast::error_code ec;
        for (;;) {
            const Step step = stream_.handshake();
            if (step == Step::kDone) return true;
            const long verify = stream_.verify_result();
            if (!wait_for(stream_, step, deadline, ec)) {
                if (ec == beast::error::timeout) {
                    why.clear();
                } else if (verify != X509_V_OK) {
                    why = std::string("the member's certificate was refused: ") + X509_verify_cert_error_string(verify);
                } else {
                    why = ec.message();
                }
                return false;
            }
        }
    }

    HttpResult& read(DeadlineStream& stream, std::size_t max_body, HttpResult& result) {
        http::response_parser<http::string_body> parser;
        parser.body_limit(max_body);
        beast::error_code ec;
        http::read(stream, buffer_, parser, ec);
        if (ec) return fail(result, classify(ec), "read from " + endpoint_.to_string() + ": " + ec.message());
        auto& res = parser.get();
        result.response.status = static_cast<int>(res.result_int());
        result.response.body = std::move(res.body());
        if (auto it = res.find(http::field::location); it != res.end()) {
            result.response.location = std::string(it->value());
        }
        if (!res.keep_alive()) close();
        return result;
    }

    // The header of a streamed answer; a status other than 200 has its body
    // read whole (up to max_body), a 200 leaves it to read_stream().
    HttpResult& read_streamed(DeadlineStream& stream, std::size_t max_body, HttpResult& result) {
        auto& parser = streaming_.emplace();
        stream_end_.clear();
        parser.body_limit(boost::none);  // a stream has no end; read_stream's caller bounds its lines
        beast::error_code ec;
        http::read_header(stream, buffer_, parser, ec);
        if (ec) return fail(result, classify(ec), "read from " + endpoint_.to_string() + ": " + ec.message());
        const auto& res = parser.get();
        result.response.status = static_cast<int>(res.result_int());
        if (auto it = res.find(http::field::location); it != res.end()) {
            result.response.location = std::string(it->value());
        }
        if (result.response.status == 200) return result;
        const bool keep = res.keep_alive();
        while (!parser.is_done()) {
            read_body_some(stream, result.response.body, ec);
            if (ec) return fail(result, classify(ec), "read from " + endpoint_.to_string() + ": " + ec.message());
            if (result.response.body.size() > max_body) {
                return fail(result, TransportError::kProtocol,
                            endpoint_.to_string() + " answered a body larger than " + std::to_string(max_body) + " bytes");
            }
        }
        streaming_.reset();
        if (!keep) close();
        return result;
    }

    // Reads what is there of the streamed body (at least one socket read or
    // buffered bytes) and appends it to `out`: the number of bytes appended.
    std::size_t read_body_some(DeadlineStream& stream, std::string& out, beast::error_code& ec) {
        char buf[16 * 1024];
        auto& parser = *streaming_;
        parser.get().body().data = buf;
        parser.get().body().size = sizeof buf;
        http::read_some(stream, buffer_, parser, ec);
        if (ec == http::error::need_buffer) ec = {};
        const std::size_t n = sizeof buf - parser.get().body().size;
        out.append(buf, n);
        return n;
    }

    http::request<http::string_body> build(const HttpRequest& request) const {
        http::request<http::string_body> req;
        req.method_string(request.method);
        req.target(request.target);
        req.version(11);
        req.set(http::field::host, endpoint_.authority());
        req.set(http::field::user_agent, "pgfence-client");
        if (settings_ && !settings_->authorization.empty()) req.set(http::field::authorization, settings_->authorization);
        req.keep_alive(true);
        if (!request.body.empty()) {
            req.set(http::field::content_type, "application/json");
            req.body() = request.body;
        }
        req.prepare_payload();
        return req;
    }

    static TransportError classify(const beast::error_code& ec) {
        if (ec == beast::error::timeout) return TransportError::kTimeout;
        const beast::error_code eos = http::error::end_of_stream;
        if (ec.category() == eos.category() && ec != eos && ec != http::error::partial_message) {
            return TransportError::kProtocol;
        }
        return TransportError::kIo;
    }

    HttpResult& fail(HttpResult& result, TransportError kind, std::string message) {
        result.error = kind;
        result.message = std::move(message);
        close();
        return result;
    }

    Endpoint endpoint_;
    std::shared_ptr<const ConnectionSettings> settings_;
    asio::io_context ioc_{1};  // only for the resolver and the socket's construction; never run
    tcp::socket socket_{ioc_};
    net::Stream stream_;  // the socket's bytes, while it is open (TLS for https:// endpoints)
    beast::flat_buffer buffer_;
    std::optional<http::response_parser<http::buffer_body>> streaming_;  // a streamed answer being read
    std::string stream_end_;  // why the last stream ended, when its last bytes were handed out first
};

HttpConnection::HttpConnection(Endpoint endpoint, std::shared_ptr<const ConnectionSettings> settings)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(settings))) {}
HttpConnection::~HttpConnection() = default;

HttpResult HttpConnection::roundtrip(const HttpRequest& request, Clock::time_point deadline) {
    return impl_->roundtrip(request, deadline);
}

StreamRead HttpConnection::read_stream(std::string& out, Clock::time_point deadline, std::string& why) {
    return impl_->read_stream(out, deadline, why);
}
void HttpConnection::close() { impl_->close(); }
bool HttpConnection::is_open() const { return impl_->is_open(); }
const Endpoint& HttpConnection::endpoint() const { return impl_->endpoint(); }

}  // namespace pgfence::client
