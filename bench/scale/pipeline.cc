#include "pipeline.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace pgfence::bench {
namespace {

namespace http = boost::beast::http;

constexpr int kMaxEvents = 512;
constexpr int kTickMs = 10;
constexpr auto kTimeoutScan = std::chrono::milliseconds(100);

}  // namespace

void Pipeline::reset(Conn& c) {
    c.fd = -1;
    c.out.clear();
    c.out_sent = 0;
    c.in.clear();
    c.parser.reset();
    c.in_flight.clear();
    c.want_write = false;
}

// The endpoint is resolved once, here: 10000 connections need no 10000 look-ups.
Pipeline::Pipeline(client::Endpoint at, std::size_t connections, PipelineHandler& handler)
    : at_(std::move(at)), conns_(connections), handler_(handler) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (const int rc = ::getaddrinfo(at_.host.c_str(), std::to_string(at_.port).c_str(), &hints, &res); rc != 0)
        throw std::runtime_error("resolve " + at_.host + ": " + ::gai_strerror(rc));
    std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
    addr_len_ = res->ai_addrlen;
    ::freeaddrinfo(res);
    epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
}

Pipeline::~Pipeline() {
    for (Conn& c : conns_) {
        if (c.fd >= 0) ::close(c.fd);
    }
    ::close(epfd_);
}

bool Pipeline::open(std::size_t i, std::string& error) {
    Conn& c = conns_[i];
    const int fd = ::socket(addr_.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr_), addr_len_) != 0) {
        error = "connect to " + at_.to_string() + ": " + std::strerror(errno);
        if (fd >= 0) ::close(fd);
        return false;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    reset(c);
    c.fd = fd;
    watch(i, EPOLL_CTL_ADD);
    return true;
}

void Pipeline::post(std::size_t i, std::string_view path, std::string_view body, std::uint64_t tag) {
    Conn& c = conns_[i];
    if (c.fd < 0) throw std::logic_error("Pipeline::post on a closed connection");
    c.out.append("POST ").append(path).append(" HTTP/1.1\r\nHost: ").append(at_.authority());
    c.out.append("\r\nContent-Type: application/json\r\nContent-Length: ")
        .append(std::to_string(body.size()))
        .append("\r\n\r\n")
        .append(body);
    c.in_flight.push_back({Clock::now(), tag});
    flush(i);
}

bool Pipeline::run(Clock::time_point give_up) {
    epoll_event events[kMaxEvents];
    auto next_scan = Clock::now() + kTimeoutScan;
    handler_.on_tick(Clock::now());
    while (!handler_.done()) {
        const int n = ::epoll_wait(epfd_, events, kMaxEvents, kTickMs);
        if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("epoll_wait: ") + std::strerror(errno));
        for (int k = 0; k < n; ++k) {
            const std::size_t i = events[k].data.u64;
            if (conns_[i].fd >= 0 && (events[k].events & EPOLLOUT) != 0) flush(i);
            if (conns_[i].fd >= 0 && (events[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) on_readable(i);
        }
        const auto now = Clock::now();
        if (now >= give_up) return false;
        if (now >= next_scan) {
            next_scan = now + kTimeoutScan;
            check_timeouts(now);
        }
        handler_.on_tick(now);
    }
    return true;
}

void Pipeline::check_timeouts(Clock::time_point now) {
    for (std::size_t i = 0; i < conns_.size(); ++i) {
        const Conn& c = conns_[i];
        if (c.fd >= 0 && !c.in_flight.empty() && now - c.in_flight.front().at > kPipelineResponseTimeout) {
            fail(i, "no response within " + std::to_string(kPipelineResponseTimeout.count()) + "s");
        }
    }
}

// Registers (EPOLL_CTL_ADD) or updates (MOD) what connection i waits for:
// input always, room to write while `want_write`.
void Pipeline::watch(std::size_t i, int op) {
    epoll_event ev{};
    ev.events = EPOLLIN | (conns_[i].want_write ? EPOLLOUT : 0u);
    ev.data.u64 = i;
    ::epoll_ctl(epfd_, op, conns_[i].fd, &ev);
}

void Pipeline::set_want_write(std::size_t i, bool want) {
    if (conns_[i].want_write == want) return;
    conns_[i].want_write = want;
    watch(i, EPOLL_CTL_MOD);
}

void Pipeline::flush(std::size_t i) {
    Conn& c = conns_[i];
    while (c.out_sent < c.out.size()) {
        const ssize_t n = ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
        if (n > 0) {
            c.out_sent += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_want_write(i, true);
            return;
        } else {
            fail(i, "send to " + at_.to_string() + ": " + std::strerror(errno));
            return;
        }
    }
    c.out.clear();
    c.out_sent = 0;
    set_want_write(i, false);
}

// One recv per readiness: epoll is level-triggered, so bytes left in the
// socket report the connection again in the next wait.
void Pipeline::on_readable(std::size_t i) {
    Conn& c = conns_[i];
    char buf[65536];
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
        c.in.append(buf, static_cast<std::size_t>(n));
        parse(i);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
        const std::string why = n == 0 ? "connection to " + at_.to_string() + " closed"
                                       : "recv from " + at_.to_string() + ": " + std::strerror(errno);
        if (parse(i)) fail(i, why);
    }
}

// Hands every whole response in `in` to the handler, oldest request first;
// false if the connection failed.
bool Pipeline::parse(std::size_t i) {
    Conn& c = conns_[i];
    std::size_t used = 0;
    while (used < c.in.size()) {
        if (c.in_flight.empty()) {
            fail(i, "bytes from " + at_.to_string() + " with no request in flight");
            return false;
        }
        if (!c.parser) {
            c.parser.emplace();
            c.parser->eager(true);
            c.parser->body_limit(kMaxPipelineResponseBytes);
        }
        boost::beast::error_code ec;
        used += c.parser->put(boost::asio::buffer(c.in.data() + used, c.in.size() - used), ec);
        if (ec == http::error::need_more) break;
        if (ec) {
            fail(i, "bad HTTP response from " + at_.to_string() + ": " + ec.message());
            return false;
        }
        if (!c.parser->is_done()) continue;
        const auto& res = c.parser->get();
        const Sent sent = c.in_flight.front();
        c.in_flight.pop_front();
        const auto latency = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent.at);
        const bool keep_alive = res.keep_alive();
        handler_.on_response(i, sent.tag, res.result_int(), res.body(), latency);
        if (c.fd < 0) return false;  // the handler's next request failed the connection
        c.parser.reset();
        if (!keep_alive) {
            fail(i, at_.to_string() + " closed the connection after an answer");
            return false;
        }
    }
    c.in.erase(0, used);
    return true;
}

void Pipeline::fail(std::size_t i, const std::string& why) {
    Conn& c = conns_[i];
    const std::size_t lost = c.in_flight.size();
    ::epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    reset(c);
    handler_.on_error(i, why, lost);
}

}  // namespace pgfence::bench
