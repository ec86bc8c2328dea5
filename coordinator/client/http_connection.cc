// Synchronous HTTP/1.1 over a non-blocking Asio socket: Beast serializes and
// parses, and every wait for the socket is a poll() bounded by the call's
// deadline. Per request that is about three system calls (send, poll, recv),
// against eight or so for io_context-driven async operations with timers.
#include "client/http_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
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

// A SyncReadStream/SyncWriteStream over a non-blocking socket whose every
// operation ends by `deadline`.
class DeadlineStream {
public:
    DeadlineStream(tcp::socket& socket, Clock::time_point deadline) : socket_(socket), deadline_(deadline) {}

    template <class Buffers>
    std::size_t read_some(const Buffers& buffers, beast::error_code& ec) {
        // Poll first: an answer is never there the moment the request went out.
        while (wait_ready(socket_.native_handle(), POLLIN, deadline_, ec)) {
            const std::size_t n = socket_.read_some(buffers, ec);
            if (ec != asio::error::would_block && ec != asio::error::try_again) return n;
        }
        return 0;
    }

    template <class Buffers>
    std::size_t write_some(const Buffers& buffers, beast::error_code& ec) {
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
    Clock::time_point deadline_;
};

}  // namespace

class HttpConnection::Impl {
public:
    explicit Impl(Endpoint endpoint) : endpoint_(std::move(endpoint)) {}

    HttpResult roundtrip(const HttpRequest& request, Clock::time_point deadline) {
        HttpResult result;
        if (Clock::now() >= deadline) return fail(result, TransportError::kTimeout, "deadline passed");
        result.reused = socket_.is_open();
        if (!socket_.is_open() && !connect(result, deadline)) return result;
        const auto req = build(request);
        DeadlineStream stream(socket_, deadline);
        beast::error_code ec;
        result.sent = true;
        result.sent_at = Clock::now();
        http::write(stream, req, ec);
        if (ec) return fail(result, classify(ec), "write to " + endpoint_.to_string() + ": " + ec.message());
        return read(stream, result);
    }

    void close() {
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
            if (connect_one(entry.endpoint(), deadline, ec)) return true;
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

    HttpResult& read(DeadlineStream& stream, HttpResult& result) {
        http::response_parser<http::string_body> parser;
        parser.body_limit(kMaxResponseBodyBytes);
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
        req.set(http::field::host, endpoint_.to_string());
        req.set(http::field::user_agent, "pgfence-client");
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
    asio::io_context ioc_{1};  // only for the resolver and the socket's construction; never run
    tcp::socket socket_{ioc_};
    beast::flat_buffer buffer_;
};

HttpConnection::HttpConnection(Endpoint endpoint) : impl_(std::make_unique<Impl>(std::move(endpoint))) {}
HttpConnection::~HttpConnection() = default;

HttpResult HttpConnection::roundtrip(const HttpRequest& request, Clock::time_point deadline) {
    return impl_->roundtrip(request, deadline);
}

void HttpConnection::close() { impl_->close(); }
bool HttpConnection::is_open() const { return impl_->is_open(); }
const Endpoint& HttpConnection::endpoint() const { return impl_->endpoint(); }

}  // namespace pgfence::client
