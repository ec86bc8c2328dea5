// net::Stream over a socketpair: what each call answers in plaintext and in
// TLS (handshake both ways, certificate checks, close_notify, failures).
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "net/stream.h"
#include "test_certs.h"

namespace pgfence::net {
namespace {

// Two connected non-blocking sockets, closed at the end of the test.
struct Pair {
    int fd[2] = {-1, -1};
    Pair() {
        BOOST_TEST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0);
        for (int f : fd) ::fcntl(f, F_SETFL, ::fcntl(f, F_GETFL) | O_NONBLOCK);
    }
    ~Pair() {
        for (int f : fd) {
            if (f >= 0) ::close(f);
        }
    }
    void close(int i) {
        ::close(fd[i]);
        fd[i] = -1;
    }
};

// Runs both handshakes (on one thread, each called when it last asked to be)
// until neither wants the socket; at most `turns` rounds.
void handshake_both(Stream& a, Stream& b, Step& sa, Step& sb, int turns = 50) {
    sa = Step::kWantRead;
    sb = Step::kWantRead;
    for (int i = 0; i < turns; ++i) {
        if (sa == Step::kWantRead || sa == Step::kWantWrite) sa = a.handshake();
        if (sb == Step::kWantRead || sb == Step::kWantWrite) sb = b.handshake();
        const bool a_waits = sa == Step::kWantRead || sa == Step::kWantWrite;
        const bool b_waits = sb == Step::kWantRead || sb == Step::kWantWrite;
        if (!a_waits && !b_waits) return;
    }
}

std::string read_all(Stream& s) {
    std::string out;
    char buf[256];
    for (;;) {
        const IoResult r = s.read_some(buf, sizeof buf);
        if (r.step != Step::kDone) return out;
        out.append(buf, r.bytes);
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stream)

BOOST_AUTO_TEST_CASE(plaintext_moves_bytes_and_says_what_it_wants) {
    Pair p;
    Stream a;
    Stream b;
    a.attach(p.fd[0]);
    b.attach(p.fd[1]);
    BOOST_TEST(!a.tls());
    BOOST_TEST((a.handshake() == Step::kDone));  // nothing to do in plaintext
    char buf[16];
    BOOST_TEST((b.read_some(buf, sizeof buf).step == Step::kWantRead));
    const IoResult w = a.write_some("hello", 5);
    BOOST_TEST((w.step == Step::kDone));
    BOOST_TEST(w.bytes == 5u);
    BOOST_TEST(read_all(b) == "hello");
    p.close(0);
    BOOST_TEST((b.read_some(buf, sizeof buf).step == Step::kClosed));
    // A write to a closed peer fails (no SIGPIPE), and says why once.
    const IoResult broken = b.write_some("x", 1);
    BOOST_TEST((broken.step == Step::kFailed));
    BOOST_TEST(!b.error().empty());
    BOOST_TEST(b.error_code() != 0u);
    BOOST_TEST((b.read_some(buf, sizeof buf).step == Step::kFailed));  // failed stays failed
    b.detach();
    BOOST_TEST((b.write_some("x", 1).step == Step::kFailed));  // no socket: never a stale descriptor
}

BOOST_AUTO_TEST_CASE(a_full_socket_buffer_asks_for_writability) {
    Pair p;
    Stream a;
    a.attach(p.fd[0]);
    const std::string chunk(64u << 10, 'x');
    IoResult r;
    for (int i = 0; i < 1000; ++i) {
        r = a.write_some(chunk.data(), chunk.size());
        if (r.step != Step::kDone) break;
    }
    BOOST_TEST((r.step == Step::kWantWrite));
}

BOOST_AUTO_TEST_CASE(tls_handshakes_checks_the_certificates_and_moves_bytes) {
    testing::Certs certs("stream-tls");
    TlsContextPtr server_ctx;
    TlsContextPtr client_ctx;
    BOOST_TEST_REQUIRE(make_tls_context(certs.member("1", "127.0.0.1"), TlsSide::kServerVerify, server_ctx) == "");
    BOOST_TEST_REQUIRE(make_tls_context(certs.member("2"), TlsSide::kClient, client_ctx) == "");
    Pair p;
    Stream server;
    Stream client;
    BOOST_TEST_REQUIRE(server.attach_tls(p.fd[0], server_ctx, TlsRole::kAccept));
    BOOST_TEST_REQUIRE(client.attach_tls(p.fd[1], client_ctx, TlsRole::kConnect));
    BOOST_TEST(client.expect_host("127.0.0.1"));
    Step s1;
    Step s2;
    handshake_both(server, client, s1, s2);
    BOOST_TEST_REQUIRE((s1 == Step::kDone));
    BOOST_TEST_REQUIRE((s2 == Step::kDone));
    BOOST_TEST(client.verify_result() == X509_V_OK);
    BOOST_TEST(member_id_of(server.peer_certificate()).value_or(0) == 2u);
    BOOST_TEST(member_id_of(client.peer_certificate()).value_or(0) == 1u);

    const IoResult w = client.write_some("GET / HTTP/1.1\r\n\r\n", 18);
    BOOST_TEST((w.step == Step::kDone));
    BOOST_TEST(w.bytes == 18u);  // all of it: TLS writes are never partial
    BOOST_TEST(read_all(server) == "GET / HTTP/1.1\r\n\r\n");

    server.close_notify();
    char buf[16];
    BOOST_TEST((client.read_some(buf, sizeof buf).step == Step::kClosed));
}

BOOST_AUTO_TEST_CASE(tls_refuses_a_server_that_does_not_name_the_host) {
    testing::Certs certs("stream-tls-host");
    TlsContextPtr server_ctx;
    TlsContextPtr client_ctx;
    BOOST_TEST_REQUIRE(make_tls_context(certs.member("1", "127.0.0.1"), TlsSide::kServer, server_ctx) == "");
    TlsFiles trust;
    trust.ca_file = certs.member("3").ca_file;
    BOOST_TEST_REQUIRE(make_tls_context(trust, TlsSide::kClient, client_ctx) == "");
    Pair p;
    Stream server;
    Stream client;
    BOOST_TEST_REQUIRE(server.attach_tls(p.fd[0], server_ctx, TlsRole::kAccept));
    BOOST_TEST_REQUIRE(client.attach_tls(p.fd[1], client_ctx, TlsRole::kConnect));
    BOOST_TEST(client.expect_host("10.0.0.9"));
    Step s1;
    Step s2;
    handshake_both(server, client, s1, s2);
    BOOST_TEST((s2 == Step::kFailed));
    BOOST_TEST(client.verify_result() != X509_V_OK);
    BOOST_TEST(client.error() != "unknown OpenSSL error");  // OpenSSL's reason, taken once
    BOOST_TEST((s1 == Step::kFailed || s1 == Step::kClosed));  // the client's alert, or its close
}

BOOST_AUTO_TEST_CASE(plaintext_to_a_tls_server_fails_its_handshake) {
    testing::Certs certs("stream-tls-plain");
    TlsContextPtr server_ctx;
    BOOST_TEST_REQUIRE(make_tls_context(certs.member("1"), TlsSide::kServer, server_ctx) == "");
    Pair p;
    Stream server;
    Stream client;
    BOOST_TEST_REQUIRE(server.attach_tls(p.fd[0], server_ctx, TlsRole::kAccept));
    client.attach(p.fd[1]);
    BOOST_TEST((server.handshake() == Step::kWantRead));
    const std::string request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    BOOST_TEST((client.write_some(request.data(), request.size()).step == Step::kDone));
    BOOST_TEST((server.handshake() == Step::kFailed));
    BOOST_TEST(server.error() != "unknown OpenSSL error");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace pgfence::net
