// HttpServer over a real loopback socket, its responses read back with
// Beast's client-side parser: status, headers and body as sent; keep-alive
// kept for HTTP/1.1 and for HTTP/1.0 that asks for it, the connection closed
// otherwise; a response larger than the socket buffer (the part sent
// asynchronously) arrives whole and the connection goes on after it.
// Requests arriving in pieces or pipelined are read whole and in order;
// requests over the limits are refused with 400; a connection idle (or stuck
// in the middle of a request) past read_timeout is closed.
#include "net/http_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/test/unit_test.hpp>
#include <thread>
#include <vector>

#include "net/log.h"

namespace pgfence::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::uint16_t kPort = 23431;  // tests use 17000-32000 (below the ephemeral range)
constexpr std::size_t kBigBody = 8u << 20;

// A server on its own loop thread, answering by target.
struct Server {
    asio::io_context io;
    HttpServer server;
    std::thread thread;

    explicit Server(HttpServerOptions o = options())
        : server(io, o, [](const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
              if (req.target == "/redirect") {
                  ex->respond(HttpResponse{307, "{\"error\":\"not_leader\"}", "application/json",
                                           "http://127.0.0.1:1/v1/lock/acquire"});
              } else if (req.target == "/big") {
                  ex->respond(HttpResponse{200, std::string(kBigBody, 'b'), "text/plain", {}});
              } else {
                  ex->respond(HttpResponse{
                      200, req.method + " " + req.target + " " + req.body, "text/plain", {}});
              }
          }) {
        BOOST_REQUIRE_EQUAL(server.start(), "");
        thread = std::thread([this] { io.run(); });
    }
    ~Server() {
        asio::post(io, [this] { server.stop(); });
        io.stop();
        thread.join();
    }
    static HttpServerOptions options() {
        HttpServerOptions o;
        o.port = kPort;
        return o;
    }
};

struct Client {
    asio::io_context io;
    tcp::socket socket{io};
    beast::flat_buffer buffer;

    Client() { socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), kPort)); }

    void send_raw(const std::string& bytes) { asio::write(socket, asio::buffer(bytes)); }

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

BOOST_AUTO_TEST_CASE(a_request_sent_in_pieces_is_read_whole) {
    Server server;
    Client c;
    const std::string req = post("/pieces", "0123456789");
    for (std::size_t at = 0; at < req.size(); at += 7) {  // the header and the body split anywhere
        c.send_raw(req.substr(at, 7));
        std::this_thread::sleep_for(
            std::chrono::milliseconds(2));  // let each piece arrive on its own
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
    Client idle;
    BOOST_TEST(idle.exchange("/first", 11).body() == "POST /first body");  // then idle, kept alive
    Client stalled;
    stalled.send_raw("POST /half HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234");
    const auto start = std::chrono::steady_clock::now();
    BOOST_TEST(idle.closed_by_server());  // read blocks until the server closes (or fails)
    BOOST_TEST(stalled.closed_by_server());
    const auto took = std::chrono::steady_clock::now() - start;
    BOOST_TEST(took >= std::chrono::milliseconds(250));  // not before its deadline
    BOOST_TEST(took < std::chrono::seconds(5));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
