#include "load.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>

namespace pgfence::bench {
namespace {

namespace http = boost::beast::http;

constexpr int kMaxEvents = 256;
constexpr int kTickMs = 10;  // timeouts and pauses are checked this often
// Latency samples reserved up front, over all connections (a vector grows past it).
constexpr std::size_t kReservedSamples = std::size_t{1} << 22;

// Blocking connect (loopback answers at once), then non-blocking with
// TCP_NODELAY. -1 with `error` set on failure.
int connect_to(const client::Endpoint& ep, std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(ep.port);
    if (const int rc = ::getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
        error = "resolve " + ep.host + ": " + ::gai_strerror(rc);
        return -1;
    }
    int fd = -1;
    for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            error = "connect to " + ep.to_string() + ": " + std::strerror(errno);
            ::close(fd);
            fd = -1;
        }
    }
    ::freeaddrinfo(res);
    if (fd < 0) return -1;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    return fd;
}

// The TLS handshake on connected socket `fd`, blocking (poll) up to
// kResponseTimeout; the member must prove `ep`'s IP or name. null with `error`.
SSL* tls_handshake(SSL_CTX* ctx, int fd, const client::Endpoint& ep, std::string& error) {
    SSL* ssl = SSL_new(ctx);
    net::attach_socket(ssl, fd);
    unsigned char ip[16];
    if (::inet_pton(AF_INET, ep.host.c_str(), ip) == 1 || ::inet_pton(AF_INET6, ep.host.c_str(), ip) == 1) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ep.host.c_str());
    } else {
        SSL_set1_host(ssl, ep.host.c_str());
    }
    const auto give_up = Clock::now() + kResponseTimeout;
    for (;;) {
        const int r = SSL_connect(ssl);
        if (r == 1) return ssl;
        const int e = SSL_get_error(ssl, r);
        if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || Clock::now() >= give_up) {
            const long verify = SSL_get_verify_result(ssl);
            error = "TLS with " + ep.to_string() + ": " +
                    (verify != X509_V_OK ? X509_verify_cert_error_string(verify) : "handshake failed");
            ERR_clear_error();
            SSL_free(ssl);
            return nullptr;
        }
        pollfd p{fd, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
        ::poll(&p, 1, 100);
    }
}

enum class Phase { kAcquire, kRelease };

struct Conn {
    std::unique_ptr<Script> script;
    client::Endpoint at;
    int fd = -1;
    SSL* ssl = nullptr;  // set on an open https:// connection
    Phase phase = Phase::kAcquire;
    Request request;
    std::string out;  // bytes of the current request not yet sent
    std::size_t out_sent = 0;
    std::string in;  // received, not yet parsed
    std::optional<http::response_parser<http::string_body>> parser;
    Clock::time_point started;   // when this acquire was first sent (latency)
    Clock::time_point deadline;  // for the current response
    Clock::time_point resume;    // paused after an error until then
    bool paused = false;
    bool want_write = false;
    int redirects = 0;

    std::vector<std::uint32_t> latencies_us;
    std::uint64_t cycles = 0, errors = 0, redirects_total = 0;
    std::string first_error;
};

class Loop {
  public:
    Loop(std::vector<Conn>& conns, Clock::duration duration, Clock::duration warmup_limit, SSL_CTX* tls)
        : conns_(conns), duration_(duration), warmup_limit_(warmup_limit), tls_(tls) {
        epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (epfd_ < 0)
            throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
    }
    ~Loop() {
        for (Conn& c : conns_) close_conn(c);
        ::close(epfd_);
    }

    // When the clock started (after the warm-up, if any), and this process's CPU then.
    Clock::time_point measured_from() const { return measured_from_; }
    double cpu_at_start() const { return cpu_at_start_; }

    void run() {
        const auto began = Clock::now();
        warming_ = warmup_limit_ > Clock::duration::zero();
        warm_until_ = began + warmup_limit_;
        if (!warming_) start_clock(began);
        for (std::size_t i = 0; i < conns_.size(); ++i) begin_acquire(i);
        epoll_event events[kMaxEvents];
        auto next_tick = Clock::now();
        for (;;) {
            const int n = ::epoll_wait(epfd_, events, kMaxEvents, kTickMs);
            if (n < 0 && errno != EINTR)
                throw std::runtime_error(std::string("epoll_wait: ") + std::strerror(errno));
            for (int k = 0; k < n; ++k) {
                const std::size_t i = events[k].data.u64;
                Conn& c = conns_[i];
                if (c.fd < 0) continue;
                if ((events[k].events & EPOLLOUT) != 0) flush(i);
                if (c.fd >= 0 && (events[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0)
                    on_readable(i);
            }
            const auto now = Clock::now();
            if (warming_ && (warmed_ == conns_.size() || now >= warm_until_)) start_clock(now);
            if (!warming_ && now >= end_) return;
            if (now >= next_tick) {
                next_tick = now + std::chrono::milliseconds(kTickMs);
                for (std::size_t i = 0; i < conns_.size(); ++i) {
                    Conn& c = conns_[i];
                    if (c.paused && now >= c.resume) {
                        c.paused = false;
                        begin_acquire(i);
                    } else if (!c.paused && c.fd >= 0 && now >= c.deadline) {
                        fail(i, "no response within " + std::to_string(kResponseTimeout.count()) +
                                    "s");
                    }
                }
            }
        }
    }

  private:
    // The clock starts: what the warm-up did is forgotten but its errors.
    void start_clock(Clock::time_point now) {
        warming_ = false;
        measured_from_ = now;
        cpu_at_start_ = cpu_seconds();
        end_ = now + duration_;
        for (Conn& c : conns_) {
            c.cycles = 0;
            c.redirects_total = 0;
            c.latencies_us.clear();
        }
    }

    void begin_acquire(std::size_t i) {
        Conn& c = conns_[i];
        c.phase = Phase::kAcquire;
        c.redirects = 0;
        c.request = c.script->acquire();
        c.started = Clock::now();
        send_request(i);
    }

    void begin_release(std::size_t i) {
        Conn& c = conns_[i];
        c.phase = Phase::kRelease;
        c.redirects = 0;
        c.request = c.script->release();
        send_request(i);
    }

    void send_request(std::size_t i) {
        Conn& c = conns_[i];
        if (c.fd < 0 && !open_conn(i)) return;
        c.out = "POST " + c.request.path + " HTTP/1.1\r\nHost: " + c.at.authority() +
                "\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(c.request.body.size()) + "\r\n\r\n" + c.request.body;
        c.out_sent = 0;
        c.parser.emplace();
        c.parser->body_limit(kMaxResponseBytes);
        c.deadline = Clock::now() + kResponseTimeout;
        flush(i);
    }

    bool open_conn(std::size_t i) {
        Conn& c = conns_[i];
        std::string error;
        c.fd = connect_to(c.at, error);
        if (c.fd < 0) {
            fail(i, error);
            return false;
        }
        if (c.at.tls) {
            c.ssl = tls_ ? tls_handshake(tls_, c.fd, c.at, error) : nullptr;
            if (!c.ssl) {
                ::close(c.fd);
                c.fd = -1;
                fail(i, tls_ ? error : "https:// endpoint " + c.at.to_string() + " without --cacert");
                return false;
            }
        }
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = i;
        ::epoll_ctl(epfd_, EPOLL_CTL_ADD, c.fd, &ev);
        c.want_write = false;
        c.in.clear();
        return true;
    }

    void close_conn(Conn& c) {
        if (c.fd < 0) return;
        if (c.ssl) {
            SSL_free(c.ssl);
            c.ssl = nullptr;
        }
        ::epoll_ctl(epfd_, EPOLL_CTL_DEL, c.fd, nullptr);
        ::close(c.fd);
        c.fd = -1;
    }

    void set_want_write(std::size_t i, bool want) {
        Conn& c = conns_[i];
        if (c.want_write == want) return;
        c.want_write = want;
        epoll_event ev{};
        ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
        ev.data.u64 = i;
        ::epoll_ctl(epfd_, EPOLL_CTL_MOD, c.fd, &ev);
    }

    void flush(std::size_t i) {
        Conn& c = conns_[i];
        while (c.out_sent < c.out.size()) {
            if (c.ssl) {
                const int n = SSL_write(c.ssl, c.out.data() + c.out_sent, static_cast<int>(c.out.size() - c.out_sent));
                if (n > 0) {
                    c.out_sent += static_cast<std::size_t>(n);
                    continue;
                }
                const int e = SSL_get_error(c.ssl, n);
                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                    set_want_write(i, true);
                    return;
                }
                ERR_clear_error();
                fail(i, "TLS write to " + c.at.to_string() + " failed");
                return;
            }
            const ssize_t n =
                ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
            if (n > 0) {
                c.out_sent += static_cast<std::size_t>(n);
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                set_want_write(i, true);
                return;
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else {
                fail(i, "send to " + c.at.to_string() + ": " + std::strerror(errno));
                return;
            }
        }
        set_want_write(i, false);
    }

    void on_readable(std::size_t i) {
        Conn& c = conns_[i];
        char buf[16384];
        for (;;) {
            if (c.ssl) {  // read until OpenSSL holds nothing more (decrypted bytes wait inside it)
                const int n = SSL_read(c.ssl, buf, sizeof buf);
                if (n > 0) {
                    c.in.append(buf, static_cast<std::size_t>(n));
                    continue;
                }
                const int e = SSL_get_error(c.ssl, n);
                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) break;
                ERR_clear_error();
                const std::string why = "TLS connection to " + c.at.to_string() + " closed";
                close_conn(c);
                if (parse(i) && c.parser) fail(i, why);
                return;
            }
            const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
            if (n > 0) {
                c.in.append(buf, static_cast<std::size_t>(n));
                if (static_cast<std::size_t>(n) < sizeof buf) break;
                continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            // Closed or failed: a whole response may still be in `in` (a
            // server that closes after answering); the next request reconnects.
            const std::string why =
                n == 0 ? "connection to " + c.at.to_string() + " closed"
                       : "recv from " + c.at.to_string() + ": " + std::strerror(errno);
            close_conn(c);
            if (parse(i) && c.parser) fail(i, why);  // no (whole) response: an error
            return;
        }
        parse(i);
    }

    // Feeds `in` to the parser; on a whole response handles it. False if the
    // connection failed here (already counted).
    bool parse(std::size_t i) {
        Conn& c = conns_[i];
        if (!c.parser) {
            if (c.in.empty()) return true;
            fail(i, "unexpected bytes from " + c.at.to_string() + " with no request outstanding");
            return false;
        }
        std::size_t used = 0;
        while (used < c.in.size() && !c.parser->is_done()) {
            boost::beast::error_code ec;
            const std::size_t n =
                c.parser->put(boost::asio::buffer(c.in.data() + used, c.in.size() - used), ec);
            used += n;
            if (ec == http::error::need_more) break;
            if (ec) {
                fail(i, "bad HTTP response from " + c.at.to_string() + ": " + ec.message());
                return false;
            }
        }
        c.in.erase(0, used);
        if (c.parser->is_done()) on_response(i);
        return true;
    }

    void on_response(std::size_t i) {
        Conn& c = conns_[i];
        const auto& res = c.parser->get();
        const unsigned status = res.result_int();
        const bool keep_alive = res.keep_alive();
        if (status == 307) {
            const auto url = res[http::field::location];
            const auto to = client::endpoint_of_url(std::string_view(url.data(), url.size()));
            if (!to || ++c.redirects > kMaxRedirects) {
                fail(i, "bad or too many redirects from " + c.at.to_string());
                return;
            }
            ++c.redirects_total;
            close_conn(c);
            c.at = *to;
            send_request(i);
            return;
        }
        const std::string body = res.body();
        c.parser.reset();
        if (!keep_alive) close_conn(c);
        if (status != 200) {
            fail(i, c.request.path + ": HTTP " + std::to_string(status) + " " + body);
            return;
        }
        if (c.phase == Phase::kAcquire) {
            if (auto why = c.script->acquired(body); !why.empty()) {
                fail(i, why);
                return;
            }
            if (c.latencies_us.size() < kMaxSamplesPerConnection) {
                c.latencies_us.push_back(static_cast<std::uint32_t>(
                    std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c.started)
                        .count()));
            }
            begin_release(i);
            return;
        }
        if (auto why = c.script->released(body); !why.empty()) {
            fail(i, why);
            return;
        }
        if (warming_ && c.cycles == 0) ++warmed_;
        ++c.cycles;
        begin_acquire(i);
    }

    // Counts an error, drops the connection, starts over after a pause.
    void fail(std::size_t i, const std::string& why) {
        Conn& c = conns_[i];
        if (c.errors++ == 0) c.first_error = why;
        close_conn(c);
        c.parser.reset();
        c.in.clear();
        c.at = c.script->endpoint();
        c.paused = true;
        c.resume = Clock::now() + kPauseAfterError;
    }

    std::vector<Conn>& conns_;
    const Clock::duration duration_;
    const Clock::duration warmup_limit_;
    bool warming_ = false;
    std::size_t warmed_ = 0;  // connections with a cycle done during the warm-up
    Clock::time_point warm_until_;
    Clock::time_point measured_from_;
    double cpu_at_start_ = 0;
    Clock::time_point end_;
    SSL_CTX* tls_;
    int epfd_ = -1;
};

}  // namespace

LoadResult run_load(const ScriptFactory& factory, int connections,
                    std::chrono::milliseconds duration, net::TlsContextPtr tls,
                    std::chrono::milliseconds warmup_limit) {
    std::vector<Conn> conns(static_cast<std::size_t>(connections));
    for (int i = 0; i < connections; ++i) {
        Conn& c = conns[static_cast<std::size_t>(i)];
        c.script = factory(i);  // setup (e.g. etcd lease) untimed
        c.at = c.script->endpoint();
        c.latencies_us.reserve(kReservedSamples / static_cast<std::size_t>(connections));
    }
    const auto began = Clock::now();
    LoadResult r;
    {
        Loop loop(conns, duration, warmup_limit, tls ? tls->native_handle() : nullptr);
        loop.run();
        const auto ended = Clock::now();  // before the connections are closed
        r.cpu_s = cpu_seconds() - loop.cpu_at_start();
        r.warmup_s = std::chrono::duration<double>(loop.measured_from() - began).count();
        r.seconds = std::chrono::duration<double>(ended - loop.measured_from()).count();
    }
    std::vector<std::uint32_t> all;
    for (Conn& c : conns) {
        r.cycles += c.cycles;
        r.errors += c.errors;
        r.redirects += c.redirects_total;
        if (r.first_error.empty()) r.first_error = c.first_error;
        all.insert(all.end(), c.latencies_us.begin(), c.latencies_us.end());
    }
    r.cycles_per_s = static_cast<double>(r.cycles) / r.seconds;
    set_percentiles(all, r);
    return r;
}

}  // namespace pgfence::bench
