// HttpServer over a real loopback socket, its responses read back with
// Beast's client-side parser: status, headers and body as sent; keep-alive
// kept for HTTP/1.1 and for HTTP/1.0 that asks for it, the connection closed
// otherwise; a response larger than the socket buffer (the part sent
// asynchronously) arrives whole and the connection goes on after it.
// Requests arriving in pieces or pipelined are read whole and in order;
// requests over the limits are refused with 400; a connection idle (or stuck
// in the middle of a request) past read_timeout is closed. At the cap an idle
// connection gives way; one with a request being handled or an answer being
// written never does, and when every one is busy the newcomer is refused.
#include "net/http_server.h"

#include <openssl/ssl.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/test/unit_test.hpp>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "net/tls.h"
#include "test_certs.h"


namespace pgfence::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::uint16_t kPort = 23431;  // tests use 17000-32000 (below the ephemeral range)
constexpr std::size_t kBigBody = 8u << 20;

// What the handler saw, shared with the test thread.
struct Seen {
    std::mutex mutex;
    std::shared_ptr<HttpExchange> held;  // the last "/hold" request, not answered
    std::vector<std::shared_ptr<HttpExchange>> all_held;  // every "/hold" request, not answered
    bool big_responded = false;          // respond() of a "/bigw" returned
    std::optional<bool> big_written;     // written(ok) of the last "/bigw"
    std::atomic<int> depth{0};           // handler calls in progress (nesting)
    std::atomic<int> max_depth{0};
    std::shared_ptr<HttpStream> stream;  // the last "/stream" request's
    std::atomic<bool> stream_close_told{false};  // its on_close ran
};

// A server on its own loop thread, answering by target.
struct Server {
    asio::io_context io;
    std::shared_ptr<Seen> seen = std::make_shared<Seen>();
    HttpServer server;
    std::thread thread;

    explicit Server(HttpServerOptions o = options())
        : server(io, o, [seen = seen](const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
              const int depth = ++seen->depth;
              if (depth > seen->max_depth) seen->max_depth = depth;
              if (req.target == "/redirect") {
                  ex->respond(HttpResponse{307, "{\"error\":\"not_leader\"}", "application/json",
                                           "http://127.0.0.1:1/v1/lock/acquire"});
              } else if (req.target == "/big") {
                  ex->respond(HttpResponse{200, std::string(kBigBody, 'b'), "text/plain", {}});
              } else if (req.target == "/bigw") {
                  ex->respond(HttpResponse{200, std::string(kBigBody, 'b'), "text/plain", {}},
                              [seen](bool ok) {
                                  std::lock_guard<std::mutex> g(seen->mutex);
                                  seen->big_written = ok;
                              });
                  std::lock_guard<std::mutex> g(seen->mutex);
                  seen->big_responded = true;
              } else if (req.target == "/lease") {
                  ex->raise_class(ConnClass::kLease);
                  ex->respond(HttpResponse{200, "lease", "text/plain", {}});
              } else if (req.target == "/headers") {
                  ex->respond(HttpResponse{200,
                                           "content_type=" + req.content_type +
                                               " origin=" + (req.origin ? "'" + *req.origin + "'" : "none"),
                                           "text/plain", {}});
              } else if (req.target == "/stream") {
                  std::shared_ptr<HttpStream> stream = ex->open_stream(200, "application/x-ndjson");
                  // Weakly: `seen` keeps the stream, which keeps this callback.
                  stream->on_close([weak = std::weak_ptr<Seen>(seen)] {
                      if (auto held = weak.lock()) held->stream_close_told = true;
                  });
                  stream->write("first\n");
                  ex->respond(HttpResponse{500, "ignored", "text/plain", {}});  // answered: nothing happens
                  std::lock_guard<std::mutex> g(seen->mutex);
                  seen->stream = std::move(stream);
              } else if (req.target == "/hold") {
                  std::lock_guard<std::mutex> g(seen->mutex);
                  seen->all_held.push_back(ex);
                  seen->held = std::move(ex);
              } else {
                  ex->respond(HttpResponse{
                      200, req.method + " " + req.target + " " + req.body, "text/plain", {}});
              }
              --seen->depth;
          }) {
        BOOST_REQUIRE_EQUAL(server.start(), "");
        thread = std::thread([this] { io.run(); });
    }
    ~Server() {
        asio::post(io, [this] { server.stop(); });
        io.stop();
        thread.join();
        // `seen` keeps the last stream, whose session keeps the handler that
        // keeps `seen`: let go of the stream, or the three leak together.
        seen->stream.reset();
    }
    static HttpServerOptions options() {
        HttpServerOptions o;
        o.port = kPort;
        return o;
    }
    // Runs `fn` on the server's loop and returns its result.
    template <typename Fn>
    auto on_loop(Fn fn) -> decltype(fn()) {
        std::promise<decltype(fn())> p;
        asio::post(io, [&] { p.set_value(fn()); });
        return p.get_future().get();
    }
    // Polls `cond` (run on the loop) every 10 ms for up to 5 s.
    template <typename Fn>
    bool eventually(Fn cond) {
        for (int i = 0; i < 500; ++i) {
            if (on_loop(cond)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }
    std::shared_ptr<HttpExchange> held() {
        std::lock_guard<std::mutex> g(seen->mutex);
        return seen->held;
    }
    std::shared_ptr<HttpStream> stream() {
        std::lock_guard<std::mutex> g(seen->mutex);
        return seen->stream;
    }
    std::size_t held_count() {
        std::lock_guard<std::mutex> g(seen->mutex);
        return seen->all_held.size();
    }
};

struct Client {
    asio::io_context io;
    tcp::socket socket{io};
    beast::flat_buffer buffer;

    // receive_buffer > 0: a small SO_RCVBUF (set before connecting, so that
    // the window stays small), for a client that is slow to read.
    // from: the loopback address to connect from (127.0.0.0/8 is all local).
    explicit Client(int receive_buffer = 0, const char* from = nullptr) {
        socket.open(tcp::v4());
        if (receive_buffer > 0)
            socket.set_option(asio::socket_base::receive_buffer_size(receive_buffer));
        if (from != nullptr) socket.bind(tcp::endpoint(asio::ip::make_address(from), 0));
        socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), kPort));
        socket.set_option(tcp::no_delay(true));  // small writes go out as written
    }

    void send_raw(const std::string& bytes) { asio::write(socket, asio::buffer(bytes)); }

    // True once every byte sent has been acknowledged by the server's
    // kernel, so it is waiting in the server's socket (within 5 s).
    bool delivered() {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (;;) {
            int unacknowledged = 0;
            if (::ioctl(socket.native_handle(), SIOCOUTQ, &unacknowledged) != 0) return false;
            if (unacknowledged == 0) return true;
            if (std::chrono::steady_clock::now() >= deadline) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }

    http::response<http::string_body> read_response() {
        http::response_parser<http::string_body> parser;
        parser.body_limit(kBigBody + 1);
        http::read(socket, buffer, parser);
        return parser.release();
    }

    http::response<http::string_body> exchange(const std::string& target, unsigned version,
                                               const std::string& connection = {}) {
        http::request<http::string_body> req{http::verb::post, target, version};
        req.set(http::field::host, "127.0.0.1");
        if (!connection.empty()) req.set(http::field::connection, connection);
        req.body() = "body";
        req.prepare_payload();
        http::write(socket, req);
        return read_response();
    }

    // True when the server closes the connection within 5 s (EOF, nothing
    // more sent); false if it sends something or leaves it open.
    bool closed_by_server() {
        if (buffer.size() > 0) return false;
        const timeval limit{5, 0};
        ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        char byte = 0;
        return ::recv(socket.native_handle(), &byte, 1, 0) == 0;
    }
};

BOOST_AUTO_TEST_SUITE(http_server)

// Not in the sanitizer build: the sanitizers' own checks (UBSan's vptr check
// probes memory through a pipe) need descriptors, and report every object
// as invalid while there are none.
#ifndef __SANITIZE_ADDRESS__
BOOST_AUTO_TEST_CASE(a_server_out_of_descriptors_retries_its_accept_calmly_and_serves_once_it_has_some) {
    Server server;
    // The client's socket exists before the limit drops; connecting it needs
    // no descriptor, the server's accept does.
    asio::io_context io;
    tcp::socket socket(io);
    socket.open(tcp::v4());
    rlimit before{};
    BOOST_REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
    const int lowest_free = ::open("/dev/null", O_RDONLY);
    BOOST_REQUIRE(lowest_free >= 0);
    ::close(lowest_free);
    rlimit low = before;
    low.rlim_cur = static_cast<rlim_t>(lowest_free);  // every descriptor below is taken: none to be had
    BOOST_REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), kPort));
    asio::write(socket, asio::buffer(std::string("GET /x HTTP/1.1\r\nHost: h\r\n\r\n")));
    const bool failed = server.eventually([&] { return server.server.accept_failures() >= 2; });
    // Tried again 50 ms after each failure (net/accept_retry.h), not at once
    // in a loop: the next three tries take more than 100 ms. `start` is
    // taken before `first` is read, so before the first of the three.
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t first = server.on_loop([&] { return server.server.accept_failures(); });
    const bool retried = server.eventually([&] { return server.server.accept_failures() >= first + 3; });
    const auto took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
    BOOST_REQUIRE(setrlimit(RLIMIT_NOFILE, &before) == 0);
    BOOST_TEST(failed);
    BOOST_TEST(retried);
    BOOST_TEST(took_ms > 100, took_ms << " ms for three tries");
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);  // answered once descriptors are back
    BOOST_TEST(res.result_int() == 200);
    BOOST_TEST(res.body() == "GET /x ");
}
#endif

BOOST_AUTO_TEST_CASE(keep_alive_responses_carry_status_headers_and_body) {
    Server server;
    Client c;
    auto r = c.exchange("/echo", 11);
    BOOST_TEST(r.result_int() == 200u);
    BOOST_TEST(r.version() == 11u);
    BOOST_TEST(r.reason() == "OK");
    BOOST_TEST(r.body() == "POST /echo body");
    BOOST_TEST(r[http::field::content_type] == "text/plain");
    BOOST_TEST(r[http::field::server] == "fence-coordinator");
    BOOST_TEST(r[http::field::content_length] == "15");
    BOOST_TEST(r.keep_alive());

    r = c.exchange("/redirect", 11);  // same connection
    BOOST_TEST(r.result_int() == 307u);
    BOOST_TEST(r.reason() == "Temporary Redirect");
    BOOST_TEST(r[http::field::location] == "http://127.0.0.1:1/v1/lock/acquire");
    BOOST_TEST(r[http::field::content_type] == "application/json");
    BOOST_TEST(r.body() == "{\"error\":\"not_leader\"}");
    BOOST_TEST(r.keep_alive());
}

// The gate's screen (server/routes.h) decides on these two headers.
BOOST_AUTO_TEST_CASE(the_request_carries_its_content_type_and_origin) {
    Server server;
    Client c;
    c.send_raw("POST /headers HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain;charset=UTF-8\r\n"
               "Origin: http://evil.example\r\nContent-Length: 2\r\n\r\n{}");
    BOOST_TEST(c.read_response().body() == "content_type=text/plain;charset=UTF-8 origin='http://evil.example'");
    c.send_raw("GET /headers HTTP/1.1\r\nHost: h\r\nOrigin: \r\n\r\n");  // present but empty
    BOOST_TEST(c.read_response().body() == "content_type= origin=''");
    c.send_raw("GET /headers HTTP/1.1\r\nHost: h\r\n\r\n");
    BOOST_TEST(c.read_response().body() == "content_type= origin=none");
}

BOOST_AUTO_TEST_CASE(a_response_larger_than_the_socket_buffer_arrives_whole) {
    Server server;
    Client c;
    auto r = c.exchange("/big", 11);
    BOOST_TEST(r.result_int() == 200u);
    BOOST_TEST(r.body().size() == kBigBody);
    BOOST_TEST((r.body().find_first_not_of('b') == std::string::npos));
    BOOST_TEST(r.keep_alive());
    r = c.exchange("/after", 11);  // the connection goes on
    BOOST_TEST(r.body() == "POST /after body");
}

BOOST_AUTO_TEST_CASE(connection_close_and_http_1_0_end_the_connection) {
    Server server;
    {
        Client c;
        auto r = c.exchange("/close", 11, "close");
        BOOST_TEST(r.body() == "POST /close body");
        BOOST_TEST(!r.keep_alive());
        BOOST_TEST(r[http::field::connection] == "close");
        BOOST_TEST(c.closed_by_server());
    }
    {
        Client c;
        auto r = c.exchange("/old", 10);
        BOOST_TEST(r.version() == 10u);
        BOOST_TEST(!r.keep_alive());
        BOOST_TEST(c.closed_by_server());
    }
}

BOOST_AUTO_TEST_CASE(http_1_0_asking_for_keep_alive_keeps_the_connection) {
    Server server;
    Client c;
    auto r = c.exchange("/one", 10, "keep-alive");
    BOOST_TEST(r.version() == 10u);
    BOOST_TEST(r.keep_alive());
    BOOST_TEST(r[http::field::connection] == "keep-alive");
    r = c.exchange("/two", 10, "keep-alive");
    BOOST_TEST(r.body() == "POST /two body");
}

std::string post(const std::string& target, const std::string& body) {
    return "POST " + target +
           " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
           body;
}

// A streamed response: chunked, each write() a chunk as it comes, end()
// the last chunk and the connection's close.
BOOST_AUTO_TEST_CASE(a_stream_sends_each_write_as_a_chunk_and_end_closes_it) {
    Server s;
    Client c;
    c.send_raw("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    BOOST_REQUIRE(s.eventually([&] { return s.seen->stream != nullptr; }));
    std::shared_ptr<HttpStream> stream = s.stream();
    // The first chunk is out before anything else is written.
    std::string got;
    const std::string want_head = "HTTP/1.1 200 OK\r\n";
    while (got.find("first\n\r\n") == std::string::npos) {
        char buf[4096];
        const std::size_t n = c.socket.read_some(asio::buffer(buf));
        got.append(buf, n);
    }
    BOOST_TEST(got.starts_with(want_head));
    BOOST_TEST(got.find("Transfer-Encoding: chunked\r\n") != std::string::npos);
    BOOST_TEST(got.find("Content-Type: application/x-ndjson\r\n") != std::string::npos);
    BOOST_TEST(got.find("\r\n\r\n6\r\nfirst\n\r\n") != std::string::npos);
    s.on_loop([&] {
        stream->write("second line\n");
        stream->end();
        stream->write("after the end\n");  // ignored
        return true;
    });
    for (;;) {
        char buf[4096];
        boost::system::error_code ec;
        const std::size_t n = c.socket.read_some(asio::buffer(buf), ec);
        got.append(buf, n);
        if (ec) break;  // the server closed
    }
    BOOST_TEST(got.ends_with("\r\nc\r\nsecond line\n\r\n0\r\n\r\n"));
    BOOST_TEST(s.on_loop([&] { return stream->closed(); }));
    BOOST_TEST(!s.seen->stream_close_told);  // ended, not closed under it
}

BOOST_AUTO_TEST_CASE(a_client_that_goes_away_closes_its_stream_and_says_so) {
    Server s;
    {
        Client c;
        c.send_raw("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
        BOOST_REQUIRE(s.eventually([&] { return s.seen->stream != nullptr; }));
        BOOST_TEST(!s.on_loop([&] { return s.seen->stream->closed(); }));
    }  // closed
    BOOST_TEST(s.eventually([&] { return s.seen->stream->closed() && s.seen->stream_close_told.load(); }));
    BOOST_TEST(s.on_loop([&] { return s.server.connections(); }) == 0u);
}

// Writes never block: what the socket does not take waits, counted.
BOOST_AUTO_TEST_CASE(a_stream_whose_client_does_not_read_queues_what_it_cannot_write) {
    Server s;
    Client c(2048);
    c.send_raw("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    BOOST_REQUIRE(s.eventually([&] { return s.seen->stream != nullptr; }));
    const std::string line(64u << 10, 'x');
    const std::size_t waiting = s.on_loop([&] {
        for (int i = 0; i < 64; ++i) s.seen->stream->write(line);
        return s.seen->stream->unwritten_bytes();
    });
    BOOST_TEST(waiting > (1u << 20));
    BOOST_TEST(waiting <= 64 * (line.size() + 16));
    BOOST_TEST(!s.on_loop([&] { return s.seen->stream->closed(); }));
}

BOOST_AUTO_TEST_CASE(a_request_sent_in_pieces_is_read_whole) {
    Server server;
    Client c;
    const std::string req = post("/pieces", "0123456789");
    for (std::size_t at = 0; at < req.size(); at += 7) {  // the header and the body split anywhere
        c.send_raw(req.substr(at, 7));
        BOOST_REQUIRE(c.delivered());  // each piece reaches the server before the next is sent
    }
    auto r = c.read_response();
    BOOST_TEST(r.body() == "POST /pieces 0123456789");
}

BOOST_AUTO_TEST_CASE(pipelined_requests_are_answered_in_order) {
    Server server;
    Client c;
    c.send_raw(post("/a", "1") + post("/b", "22") + post("/c", ""));
    BOOST_TEST(c.read_response().body() == "POST /a 1");
    BOOST_TEST(c.read_response().body() == "POST /b 22");
    BOOST_TEST(c.read_response().body() == "POST /c ");
}

// More pipelined requests than the read buffer holds, sent while the
// answers are read: every one answered, in order (the buffer refills), and
// the handler never nested: answers sent at once do not parse the next
// buffered request from inside respond().
BOOST_AUTO_TEST_CASE(a_long_pipeline_is_answered_whole_in_order_without_nesting) {
    Server server;
    Client c;
    constexpr int kRequests = 8000;
    std::string all;
    for (int i = 0; i < kRequests; ++i) all += "GET /" + std::to_string(i) + " HTTP/1.1\r\n\r\n";
    BOOST_REQUIRE_GT(all.size(),
                     Server::options().max_header_bytes + Server::options().max_body_bytes);
    std::thread writer([&] {  // raw send(2): the reads below use the asio socket
        for (std::size_t at = 0; at < all.size();) {
            const ssize_t n =
                ::send(c.socket.native_handle(), all.data() + at, all.size() - at, MSG_NOSIGNAL);
            if (n <= 0) return;
            at += static_cast<std::size_t>(n);
        }
    });
    int in_order = 0;
    for (int i = 0; i < kRequests; ++i) {
        if (c.read_response().body() == "GET /" + std::to_string(i) + " ") ++in_order;
    }
    writer.join();
    BOOST_TEST(in_order == kRequests);
    BOOST_TEST(server.seen->max_depth.load() == 1);
}

BOOST_AUTO_TEST_CASE(requests_over_the_limits_or_malformed_get_400_and_the_connection_ends) {
    HttpServerOptions o = Server::options();
    o.max_body_bytes = 100;
    o.max_header_bytes = 256;
    Server server(o);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {post("/big", std::string(101, 'x')), "request body exceeds 100 bytes"},
        {"POST /h HTTP/1.1\r\nX-Long: " + std::string(400, 'h') + "\r\n\r\n",
         "request header exceeds 256 bytes"},
        {"NOT HTTP AT ALL\r\n\r\n", "malformed HTTP request"},
    };
    for (const auto& [bytes, message] : cases) {
        BOOST_TEST_INFO(message);
        Client c;
        c.send_raw(bytes);
        auto r = c.read_response();
        BOOST_TEST(r.result_int() == 400u);
        BOOST_TEST(r.body().find(message) != std::string::npos);
        BOOST_TEST(!r.keep_alive());
        BOOST_TEST(c.closed_by_server());
    }
    Client ok;  // the server goes on serving
    BOOST_TEST(ok.exchange("/fine", 11).body() == "POST /fine body");
}

BOOST_AUTO_TEST_CASE(idle_and_stalled_connections_are_closed_after_read_timeout) {
    HttpServerOptions o = Server::options();
    o.read_timeout = std::chrono::milliseconds(300);
    Server server(o);
    const auto start = std::chrono::steady_clock::now();  // before either deadline starts
    Client idle;
    BOOST_TEST(idle.exchange("/first", 11).body() == "POST /first body");  // then idle, kept alive
    Client stalled;
    stalled.send_raw("POST /half HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234");
    BOOST_TEST(idle.closed_by_server());  // read blocks until the server closes (or fails)
    BOOST_TEST(stalled.closed_by_server());
    const auto took = std::chrono::steady_clock::now() - start;
    BOOST_TEST(took >= o.read_timeout);  // not before its deadline
    BOOST_TEST(took < std::chrono::seconds(5));
}

BOOST_AUTO_TEST_CASE(a_client_that_stops_reading_a_response_is_cut_off_and_the_write_fails) {
    HttpServerOptions o = Server::options();
    o.read_timeout = std::chrono::milliseconds(300);
    Server server(o);
    Client c(4096);
    c.send_raw("POST /bigw HTTP/1.1\r\nContent-Length: 0\r\n\r\n");  // 8 MiB answer, never read
    const bool done = server.eventually([&] {
        std::lock_guard<std::mutex> g(server.seen->mutex);
        return server.seen->big_written.has_value();
    });
    BOOST_REQUIRE(done);
    std::lock_guard<std::mutex> g(server.seen->mutex);
    BOOST_TEST(*server.seen->big_written == false);
}

// The same under TLS: SSL_write waits for the socket, the sweep closes it,
// and the response is reported unwritten (so a grant is released at once).
BOOST_AUTO_TEST_CASE(a_tls_client_that_stops_reading_a_response_is_cut_off_and_the_write_fails) {
    testing::Certs certs("http-tls");
    const TlsFiles files = certs.member("member", "127.0.0.1");
    TlsContextPtr server_ctx, client_ctx;
    BOOST_TEST_REQUIRE(make_tls_context(files, TlsSide::kServer, server_ctx) == "");
    BOOST_TEST_REQUIRE(make_tls_context({"", "", files.ca_file}, TlsSide::kClient, client_ctx) == "");
    HttpServerOptions o = Server::options();
    o.read_timeout = std::chrono::milliseconds(300);
    Server server(o);
    server.on_loop([&] {
        server.server.set_tls(server_ctx, false);
        return true;
    });
    Client c(4096);
    SSL* ssl = SSL_new(client_ctx->native_handle());
    attach_socket(ssl, c.socket.native_handle());  // the socket is blocking: so is the handshake
    BOOST_TEST_REQUIRE(SSL_connect(ssl) == 1);
    const std::string request = "POST /bigw HTTP/1.1\r\nContent-Length: 0\r\n\r\n";  // 8 MiB answer, never read
    BOOST_TEST_REQUIRE(SSL_write(ssl, request.data(), static_cast<int>(request.size())) > 0);
    const bool done = server.eventually([&] {
        std::lock_guard<std::mutex> g(server.seen->mutex);
        return server.seen->big_written.has_value();
    });
    SSL_free(ssl);
    BOOST_REQUIRE(done);
    std::lock_guard<std::mutex> g(server.seen->mutex);
    BOOST_TEST(*server.seen->big_written == false);
}

BOOST_AUTO_TEST_CASE(a_client_closing_in_the_middle_of_a_request_is_closed_quietly) {
    Server server;
    Client c;
    c.send_raw("POST /half HTTP/1.1\r\nContent-Length: 10\r\n\r\n012");
    c.socket.shutdown(tcp::socket::shutdown_send);
    BOOST_TEST(c.closed_by_server());  // no answer: nothing to answer
    Client ok;
    BOOST_TEST(ok.exchange("/after", 11).body() == "POST /after body");
}

// The phantom-lock check: a pending request's client_gone() turns true once
// the client closes (or half-closes), seen by poll or by the watch; a
// pipelined request behind it is not mistaken for a close, and does not hide
// one.
BOOST_AUTO_TEST_CASE(client_gone_sees_a_close_and_not_a_pipelined_request) {
    Server server;
    for (const bool watch : {false, true}) {
        for (const bool pipelined : {false, true}) {
            for (const bool half_close : {false, true}) {
                BOOST_TEST_INFO("watch_close " << watch << ", pipelined " << pipelined
                                               << ", half-close " << half_close);
                {
                    std::lock_guard<std::mutex> g(server.seen->mutex);
                    server.seen->held.reset();
                }
                Client c;
                c.send_raw("POST /hold HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
                BOOST_REQUIRE(server.eventually([&] { return server.held() != nullptr; }));
                auto ex = server.held();
                if (watch)
                    server.on_loop([&] {
                        ex->watch_close();
                        return true;
                    });
                BOOST_TEST(!server.on_loop([&] { return ex->client_gone(); }));
                if (pipelined) {
                    c.send_raw("GET /next HTTP/1.1\r\n\r\n");  // readable, but not closed
                    BOOST_REQUIRE(c.delivered());  // in the server's socket before the question
                    BOOST_TEST(!server.on_loop([&] { return ex->client_gone(); }));
                }
                if (half_close) {
                    c.socket.shutdown(tcp::socket::shutdown_send);
                } else {
                    c.socket.close();
                }
                BOOST_TEST(server.eventually([&] { return ex->client_gone(); }));
                server.on_loop([&] {
                    ex->respond(HttpResponse{200, "late", "text/plain", {}});
                    return true;
                });
            }
        }
    }
}

// A connection that is not kept alive, answered while a close-watch is armed,
// is closed by the server if the client never closes it.
BOOST_AUTO_TEST_CASE(a_connection_not_kept_alive_is_closed_after_its_answer) {
    Server server;
    Client c;
    c.send_raw("POST /hold HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    BOOST_REQUIRE(server.eventually([&] { return server.held() != nullptr; }));
    auto ex = server.held();
    server.on_loop([&] {
        ex->watch_close();
        ex->respond(HttpResponse{200, "bye", "text/plain", {}});
        return true;
    });
    BOOST_TEST(c.read_response().body() == "bye");
    BOOST_TEST(c.closed_by_server());  // the server's FIN (shutdown of its sending side)
    // ... and then the whole connection, though the client sends nothing more.
    BOOST_TEST(server.eventually([&] { return server.server.connections() == 0; }));
}

// The server's side of net/conn_ranks.h: at the cap the oldest idle
// connection of the lowest class is closed for the newcomer, a connection
// with a request being handled never; an address over its limit is refused.
BOOST_AUTO_TEST_CASE(at_the_cap_the_lowest_ranked_idle_connection_gives_way) {
    HttpServerOptions o = Server::options();
    o.max_connections = 3;
    o.max_connections_per_address = 2;
    Server server(o);
    Client holder(0, "127.0.0.2");
    BOOST_TEST(holder.exchange("/lease", 11).body() == "lease");
    Client busy(0, "127.0.0.3");
    busy.send_raw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    BOOST_REQUIRE(server.eventually([&] { return server.held() != nullptr; }));
    Client pinger(0, "127.0.0.3");
    BOOST_TEST(pinger.exchange("/healthz", 11).result_int() == 200u);
    // A fourth address at the cap: the anonymous pinger, though it was
    // answered last, gives way; the holder and the held request stay.
    Client newcomer(0, "127.0.0.4");
    BOOST_TEST(newcomer.exchange("/x", 11).result_int() == 200u);
    BOOST_TEST(pinger.closed_by_server());
    BOOST_TEST(holder.exchange("/again", 11).result_int() == 200u);  // now the youngest idle lease
    Client second(0, "127.0.0.4");  // sheds the newcomer: the only idle anonymous one
    BOOST_TEST(second.exchange("/x", 11).result_int() == 200u);
    BOOST_TEST(newcomer.closed_by_server());
    Client third(0, "127.0.0.3");  // 127.0.0.3 has the held request open: one more is allowed
    BOOST_TEST(third.exchange("/x", 11).result_int() == 200u);
    BOOST_TEST(second.closed_by_server());
    Client over(0, "127.0.0.3");  // 127.0.0.3 has 2 open: refused at accept
    BOOST_TEST(over.closed_by_server());
    auto counters = server.on_loop([&] { return server.server.connection_counters(); });
    BOOST_TEST(counters.shed[static_cast<std::size_t>(ConnClass::kAnonymous)] == 3u);
    BOOST_TEST(counters.refused_per_address == 1u);
    // Only lease and busy connections: the lease connection idle longest
    // gives way, the held request never.
    third.socket.close();
    BOOST_REQUIRE(server.eventually([&] { return server.server.connections() == 2; }));
    Client holder2(0, "127.0.0.5");
    BOOST_TEST(holder2.exchange("/lease", 11).body() == "lease");
    Client last(0, "127.0.0.6");
    BOOST_TEST(last.exchange("/x", 11).result_int() == 200u);
    BOOST_TEST(holder.closed_by_server());
    counters = server.on_loop([&] { return server.server.connection_counters(); });
    BOOST_TEST(counters.shed[static_cast<std::size_t>(ConnClass::kLease)] == 1u);
    BOOST_TEST(counters.refused_busy == 0u);
    server.held()->respond(HttpResponse{200, "done", "text/plain", {}});
    BOOST_TEST(busy.read_response().body() == "done");
}

// Every connection has a request being handled: nothing may be shed, the
// newcomer is closed at accept and counted as refused_busy.
BOOST_AUTO_TEST_CASE(at_the_cap_with_every_connection_busy_the_newcomer_is_refused) {
    HttpServerOptions o = Server::options();
    o.max_connections = 2;
    Server server(o);
    Client a(0, "127.0.0.2");
    Client b(0, "127.0.0.3");
    a.send_raw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    b.send_raw("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    BOOST_REQUIRE(server.eventually([&] { return server.held_count() == 2; }));
    Client newcomer(0, "127.0.0.4");
    BOOST_TEST(newcomer.closed_by_server());
    const auto counters = server.on_loop([&] { return server.server.connection_counters(); });
    BOOST_TEST(counters.refused_busy == 1u);
    for (std::size_t c = 0; c < kConnClasses; ++c) BOOST_TEST(counters.shed[c] == 0u);
    BOOST_TEST(server.on_loop([&] { return server.server.connections(); }) == 2u);
    std::vector<std::shared_ptr<HttpExchange>> held;
    {
        std::lock_guard<std::mutex> g(server.seen->mutex);
        held = server.seen->all_held;
    }
    server.on_loop([&] {
        for (auto& ex : held) ex->respond(HttpResponse{200, "done", "text/plain", {}});
        return true;
    });
    BOOST_TEST(a.read_response().body() == "done");
    BOOST_TEST(b.read_response().body() == "done");
}

// A connection whose answer is still being written (a client that does not
// read an 8 MiB body) is busy: a newcomer at the cap sheds an idle one, not
// it, and the answer is written whole once the client reads.
BOOST_AUTO_TEST_CASE(at_the_cap_a_connection_whose_answer_is_being_written_is_not_shed) {
    HttpServerOptions o = Server::options();
    o.max_connections = 2;
    Server server(o);
    Client slow(4096, "127.0.0.2");
    slow.send_raw("POST /bigw HTTP/1.1\r\nContent-Length: 0\r\n\r\n");  // not read yet
    BOOST_REQUIRE(server.eventually([&] {
        std::lock_guard<std::mutex> g(server.seen->mutex);
        return server.seen->big_responded;
    }));
    BOOST_REQUIRE(server.on_loop([&] {
        std::lock_guard<std::mutex> g(server.seen->mutex);
        return !server.seen->big_written.has_value();  // still being written
    }));
    Client idle(0, "127.0.0.3");
    BOOST_TEST(idle.exchange("/x", 11).result_int() == 200u);
    Client newcomer(0, "127.0.0.4");  // at the cap: the idle one gives way
    BOOST_TEST(newcomer.exchange("/x", 11).result_int() == 200u);
    BOOST_TEST(idle.closed_by_server());
    const auto counters = server.on_loop([&] { return server.server.connection_counters(); });
    BOOST_TEST(counters.shed[static_cast<std::size_t>(ConnClass::kAnonymous)] == 1u);
    BOOST_TEST(server.on_loop([&] {
        std::lock_guard<std::mutex> g(server.seen->mutex);
        return !server.seen->big_written.has_value();
    }));
    BOOST_TEST(slow.read_response().body().size() == kBigBody);
    BOOST_TEST(server.eventually([&] {
        std::lock_guard<std::mutex> g(server.seen->mutex);
        return server.seen->big_written == std::optional<bool>(true);
    }));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
