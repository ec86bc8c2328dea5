#include "fake_server.h"

#include <sys/socket.h>

#include <cstdio>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace pgfence::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr int kMaxConnections = 64;

class FakeServer::Impl {
public:
    Impl(Handler handler, std::atomic<int>& connections)
        : handler_(std::move(handler)), connections_(connections) {
        acceptor_.open(tcp::v4());
        acceptor_.set_option(tcp::acceptor::reuse_address(true));
        acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
        acceptor_.listen();
        accept_thread_ = std::thread([this] { accept_loop(); });
    }

    ~Impl() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
            for (const auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
        }
        wake_.notify_all();
        ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
        accept_thread_.join();
        for (auto& t : threads_) t.join();
    }

    std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

    std::vector<FakeRequest> requests() const {
        std::lock_guard lock(mutex_);
        return requests_;
    }

private:
    void accept_loop() {
        for (int n = 1; n <= kMaxConnections; ++n) {
            auto socket = std::make_shared<tcp::socket>(ioc_);
            beast::error_code ec;
            acceptor_.accept(*socket, ec);
            std::lock_guard lock(mutex_);
            if (ec || stopping_) return;
            connections_.fetch_add(1);
            sockets_.push_back(socket);
            threads_.emplace_back([this, socket, n] { serve(*socket, n); });
        }
    }

    // Sleeps `delay` unless the server stops first.
    void pause(std::chrono::milliseconds delay) {
        std::unique_lock lock(mutex_);
        wake_.wait_for(lock, delay, [this] { return stopping_; });
    }

    void serve(tcp::socket& socket, int connection) {
        beast::flat_buffer buffer;
        for (;;) {
            http::request<http::string_body> req;
            beast::error_code ec;
            http::read(socket, buffer, req, ec);
            if (ec) break;
            if (req.target() == "/healthz") {
                // The client's liveness probe on a new connection: a live member
                // answers at once, whatever the test scripts for real requests.
                probes_.fetch_add(1);
                if (!answer(socket, req, reply(200, "ok"))) break;
                continue;
            }
            FakeRequest seen{std::string(req.method_string()), std::string(req.target()), req.body(),
                             Clock::now(), connection, std::string(req[boost::beast::http::field::authorization])};
            {
                std::lock_guard lock(mutex_);
                requests_.push_back(seen);
            }
            const FakeReply reply = handler_(seen);
            pause(reply.delay);
            if (reply.hang_up) break;
            if (reply.stream) {
                if (write_stream(socket, reply) && reply.hold) pause(std::chrono::hours(1));
                break;
            }
            if (!answer(socket, req, reply) || reply.close_after) break;
        }
        beast::error_code ignored;
        socket.shutdown(tcp::socket::shutdown_both, ignored);  // the fd stays open: sockets_ owns it
    }

    // Writes a streamed `reply` (see FakeReply::stream); false when the client went away.
    bool write_stream(tcp::socket& socket, const FakeReply& reply) {
        beast::error_code ec;
        const std::string head =
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n";
        asio::write(socket, asio::buffer(head), ec);
        for (std::size_t i = 0; !ec && i < reply.chunks.size(); ++i) {
            if (i > 0) pause(reply.gap);
            const std::string& data = reply.chunks[i];
            if (data.empty()) continue;  // an empty chunk would end the body
            char size[32];
            std::snprintf(size, sizeof size, "%zx\r\n", data.size());
            asio::write(socket, asio::buffer(std::string(size) + data + "\r\n"), ec);
        }
        if (!ec && reply.finish) asio::write(socket, asio::buffer(std::string("0\r\n\r\n")), ec);
        return !ec;
    }

    // Writes `reply`; false when the connection is to be closed.
    static bool answer(tcp::socket& socket, const http::request<http::string_body>& req, const FakeReply& reply) {
        http::response<http::string_body> res{static_cast<http::status>(reply.status), 11};
        res.set(http::field::content_type, "application/json");
        if (!reply.location.empty()) res.set(http::field::location, reply.location);
        res.body() = reply.body;
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        beast::error_code ec;
        http::write(socket, res, ec);
        return !ec && req.keep_alive();
    }

public:
    std::atomic<int> probes_{0};

private:
    Handler handler_;
    std::atomic<int>& connections_;
    asio::io_context ioc_;
    tcp::acceptor acceptor_{ioc_};
    std::thread accept_thread_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::vector<std::shared_ptr<tcp::socket>> sockets_;  // kept open until the threads are joined
    std::vector<std::thread> threads_;
    std::vector<FakeRequest> requests_;
};

FakeServer::FakeServer(Handler handler)
    : impl_(std::make_unique<Impl>(std::move(handler), connections_)), port_(impl_->port()) {}

FakeServer::~FakeServer() = default;

std::vector<FakeRequest> FakeServer::requests() const { return impl_->requests(); }
int FakeServer::probes() const { return impl_->probes_.load(); }

}  // namespace pgfence::test
