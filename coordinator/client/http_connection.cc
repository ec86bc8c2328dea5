// Synchronous HTTP/1.1 over a non-blocking Asio socket: Beast serializes and
// parses, and every wait for the socket is a poll() bounded by the call's
// deadline. Per request that is about three system calls (send, poll, recv),
// against eight or so for io_context-driven async operations with timers.
// Over TLS, OpenSSL reads and writes the same non-blocking socket
// (SSL_read/SSL_write), waiting by poll() whenever it wants to read or write.
#include "client/http_connection.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>

namespace pgfence::client {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

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

// Waits for what an SSL call that returned `r` wants; false with ec set when
// it failed for another reason (or the deadline passed).
bool wait_for_ssl(SSL* ssl, int fd, int r, Clock::time_point deadline, beast::error_code& ec) {
    const int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ) return wait_ready(fd, POLLIN, deadline, ec);
    if (e == SSL_ERROR_WANT_WRITE) return wait_ready(fd, POLLOUT, deadline, ec);
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
        ec = asio::error::eof;  // close_notify, or the peer closed the TCP connection
    } else {
        ec = beast::error_code(static_cast<int>(ERR_get_error()), asio::error::get_ssl_category());
    }
    ERR_clear_error();
    return false;
}

// The first non-empty buffer of a sequence (an SSL call takes one).
template <class Buffer, class Buffers>
Buffer first_buffer(const Buffers& buffers) {
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
        Buffer b(*it);
        if (b.size() > 0) return b;
    }
    return Buffer();
}

// A SyncReadStream/SyncWriteStream over a non-blocking socket (and, for TLS,
// the SSL object on it) whose every operation ends by `deadline`.
class DeadlineStream {
public:
    DeadlineStream(tcp::socket& socket, SSL* ssl, Clock::time_point deadline)
        : socket_(socket), ssl_(ssl), deadline_(deadline) {}

    template <class Buffers>
    std::size_t read_some(const Buffers& buffers, beast::error_code& ec) {
        if (ssl_) {
            const auto b = first_buffer<asio::mutable_buffer>(buffers);
            if (b.size() == 0) return 0;
            for (;;) {  // decrypted bytes may be waiting in OpenSSL: read before polling
                const int n = SSL_read(ssl_, b.data(), static_cast<int>(std::min<std::size_t>(b.size(), 1 << 30)));
                if (n > 0) return static_cast<std::size_t>(n);
                if (!wait_for_ssl(ssl_, socket_.native_handle(), n, deadline_, ec)) return 0;
            }
        }
        // Poll first: an answer is never there the moment the request went out.
        while (wait_ready(socket_.native_handle(), POLLIN, deadline_, ec)) {
            const std::size_t n = socket_.read_some(buffers, ec);
            if (ec != asio::error::would_block && ec != asio::error::try_again) return n;
        }
        return 0;
    }

    template <class Buffers>
    std::size_t write_some(const Buffers& buffers, beast::error_code& ec) {
        if (ssl_) {
            const auto b = first_buffer<asio::const_buffer>(buffers);
            if (b.size() == 0) return 0;
            for (;;) {  // retried with the same buffer, as SSL_write requires
                const int n = SSL_write(ssl_, b.data(), static_cast<int>(std::min<std::size_t>(b.size(), 1 << 30)));
                if (n > 0) return static_cast<std::size_t>(n);
                if (!wait_for_ssl(ssl_, socket_.native_handle(), n, deadline_, ec)) return 0;
            }
        }
        for (;;) {
            const std::size_t n = socket_.write_some(buffers, ec);
            if (ec != asio::error::would_block && ec != asio::error::try_again) return n;
            if (!wait_ready(socket_.native_handle(), POLLOUT, deadline_, ec)) return 0;
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
    tcp::socket& socket_;
    SSL* ssl_;
    Clock::time_point deadline_;
};

bool is_ip_literal(const std::string& host) {
    unsigned char buf[16];
    return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

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
        result.reused = socket_.is_open();
        if (!socket_.is_open() && !connect(result, deadline)) return result;
        const auto req = build(request);
        DeadlineStream stream(socket_, ssl_, deadline);
        beast::error_code ec;
        result.sent = true;
        result.sent_at = Clock::now();
        http::write(stream, req, ec);
        if (ec) return fail(result, classify(ec), "write to " + endpoint_.to_string() + ": " + ec.message());
        return read(stream, request.max_response_bytes, result);
    }

    void close() {
        if (ssl_) {
            SSL_free(ssl_);  // no close_notify: the member sees the TCP close either way
            ssl_ = nullptr;
        }
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
                if (!endpoint_.tls) return true;
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
    bool connect_one(const tcp::endpoint& to, Clock::time_point deadline, beast::error_code& ec) {
        close();
        socket_.open(to.protocol(), ec);
        if (!ec) socket_.non_blocking(true, ec);
        if (!ec) socket_.set_option(tcp::no_delay(true), ec);
        if (!ec) socket_.connect(to, ec);
        if (ec == asio::error::in_progress || ec == asio::error::would_block) {
            ec = {};
            if (wait_ready(socket_.native_handle(), POLLOUT, deadline, ec)) {
                int error = 0;
                socklen_t len = sizeof error;
                ::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_ERROR, &error, &len);
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
        ssl_ = SSL_new(settings_->tls->native_handle());
        if (!ssl_) {
            why = "cannot set up TLS: " + net::openssl_error();
            return false;
        }
        net::attach_socket(ssl_, socket_.native_handle());  // sends with MSG_NOSIGNAL, as the plaintext path
        // The member must name the host in its SANs (never only in its subject CN).
        std::string host = endpoint_.host;
        if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
        bool checked = false;
        if (is_ip_literal(host)) {
            checked = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), host.c_str()) == 1;
        } else {
            // SSL_set_tlsext_host_name, without the macro's C cast.
            checked = SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                               const_cast<char*>(host.c_str())) == 1 &&
                      SSL_set1_host(ssl_, host.c_str()) == 1;
        }
        if (!checked) {
            why = "cannot check the member's certificate for '" + host + "'";
            return false;
        }
        beast::error_code ec;
        for (;;) {
            const int r = SSL_connect(ssl_);
            if (r == 1) return true;
            const long verify = SSL_get_verify_result(ssl_);
            if (!wait_for_ssl(ssl_, socket_.native_handle(), r, deadline, ec)) {
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
    SSL* ssl_ = nullptr;  // set while a TLS connection is open
    asio::io_context ioc_{1};  // only for the resolver and the socket's construction; never run
    tcp::socket socket_{ioc_};
    beast::flat_buffer buffer_;
};

HttpConnection::HttpConnection(Endpoint endpoint, std::shared_ptr<const ConnectionSettings> settings)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(settings))) {}
HttpConnection::~HttpConnection() = default;

HttpResult HttpConnection::roundtrip(const HttpRequest& request, Clock::time_point deadline) {
    return impl_->roundtrip(request, deadline);
}

void HttpConnection::close() { impl_->close(); }
bool HttpConnection::is_open() const { return impl_->is_open(); }
const Endpoint& HttpConnection::endpoint() const { return impl_->endpoint(); }

}  // namespace pgfence::client
