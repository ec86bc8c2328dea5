// HttpServer's responses over a real loopback socket, read back with Beast's
// client-side parser: status, headers and body as sent; keep-alive kept for
// HTTP/1.1 and for HTTP/1.0 that asks for it, the connection closed
// otherwise; a response larger than the socket buffer (the part sent
// asynchronously) arrives whole and the connection goes on after it.
#include "net/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/test/unit_test.hpp>
#include <thread>

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

    Server()
        : server(io, options(), [](const HttpRequest& req, std::shared_ptr<HttpExchange> ex) {
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

    http::response<http::string_body> exchange(const std::string& target, unsigned version,
                                               const std::string& connection = {}) {
        http::request<http::string_body> req{http::verb::post, target, version};
        req.set(http::field::host, "127.0.0.1");
        if (!connection.empty()) req.set(http::field::connection, connection);
        req.body() = "body";
        req.prepare_payload();
        http::write(socket, req);
        http::response_parser<http::string_body> parser;
        parser.body_limit(kBigBody + 1);
        http::read(socket, buffer, parser);
        return parser.release();
    }

    // True when the server closed the connection (EOF, nothing more sent).
    bool closed_by_server() {
        char byte = 0;
        beast::error_code ec;
        socket.read_some(asio::buffer(&byte, 1), ec);
        return ec == asio::error::eof;
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

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
