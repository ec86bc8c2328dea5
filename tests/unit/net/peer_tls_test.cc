// PeerTransport over mutual TLS on loopback (certificates made here with
// OpenSSL's API, signed by a test CA): messages flow both ways, send() from
// another thread (the writer thread's direct path) delivers every message in
// order, a member whose certificate is bound to ID 2 cannot send a message as
// member 3 (the frame is dropped, counted, never delivered), and a
// certificate of the peer CA bound to no member ID is refused at once.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/frame.h"
#include "net/peer_transport.h"
#include "net/raft_codec.h"
#include "net/tls.h"
#include "test_certs.h"

namespace pgfence::net {
namespace {

namespace asio = boost::asio;
using testing::Certs;

constexpr std::uint64_t kCluster = 9;
constexpr std::uint16_t kPort = 23471;  // tests use 17000-32000 (below the ephemeral range)

bool run_until(asio::io_context& io, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        io.restart();
        io.run_for(std::chrono::milliseconds(5));
    }
    return true;
}

TransportOptions options_of(std::uint64_t self, std::uint16_t listen, std::uint64_t peer, std::uint16_t peer_port) {
    TransportOptions o;
    o.self_id = self;
    o.cluster_id = kCluster;
    o.listen_port = listen;
    o.peers.push_back({peer, "127.0.0.1", peer_port});
    return o;
}

raft::Message heartbeat(std::uint64_t from, std::uint64_t to, raft::Index commit) {
    raft::AppendRequest a;
    a.leader_commit = commit;
    return raft::Message{kCluster, from, to, 1, a};
}

void use_tls(PeerTransport& t, const TlsFiles& files) {
    TlsContextPtr accept, dial;
    BOOST_TEST_REQUIRE(make_tls_context(files, TlsSide::kServerVerify, accept) == "");
    BOOST_TEST_REQUIRE(make_tls_context(files, TlsSide::kClient, dial) == "");
    t.set_tls(accept, dial);
}

// A blocking TLS client of our own, dialing `port` with `ctx`: once its
// handshake completes it sends a heartbeat as each of `froms` on the one
// connection, sets `wrote`, and waits (at most 3 s) for the member to close.
std::thread raw_dialer(TlsContextPtr ctx, std::uint16_t port, std::vector<std::uint64_t> froms, std::atomic<bool>& wrote) {
    return std::thread([ctx = std::move(ctx), port, froms = std::move(froms), &wrote] {
        asio::io_context cio;
        asio::ip::tcp::socket sock(cio);
        sock.connect({asio::ip::make_address("127.0.0.1"), port});
        const timeval limit{3, 0};  // the read below must not outlive a member that never closes
        ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        SSL* ssl = SSL_new(ctx->native_handle());
        attach_socket(ssl, sock.native_handle());
        if (SSL_connect(ssl) == 1) {
            for (std::uint64_t from : froms) {
                const std::string frame = encode_frame(kCluster, FrameKind::kRaft, encode_message(heartbeat(from, 1, 5)));
                SSL_write(ssl, frame.data(), static_cast<int>(frame.size()));
            }
            wrote = true;
            char byte = 0;
            SSL_read(ssl, &byte, 1);  // until the member closes the connection
        }
        SSL_free(ssl);
    });
}

BOOST_AUTO_TEST_SUITE(peer_tls)

BOOST_AUTO_TEST_CASE(messages_cross_mutual_tls_and_a_certificate_cannot_speak_for_another_member) {
    Certs certs;
    asio::io_context io;
    std::mutex mu;
    std::vector<raft::Message> at_1;
    PeerTransport one(io, options_of(1, kPort, 2, kPort + 1), [&](raft::Message m) {
        std::lock_guard lock(mu);
        at_1.push_back(std::move(m));
    }, [](const MemberInfo&) {});
    std::atomic<int> at_2{0};
    PeerTransport two(io, options_of(2, kPort + 1, 1, kPort), [&](raft::Message) { ++at_2; }, [](const MemberInfo&) {});
    use_tls(one, certs.member("1"));
    use_tls(two, certs.member("2"));
    BOOST_TEST_REQUIRE(one.start(MemberInfo{1, "127.0.0.1:1", 0, 0, 0, 0, 0}) == "");
    BOOST_TEST_REQUIRE(two.start(MemberInfo{2, "127.0.0.1:2", 0, 0, 0, 0, 0}) == "");
    BOOST_TEST_REQUIRE(run_until(io, [&] { return one.connected(2) && two.connected(1); }));

    // Both ways, and from another thread while the loop runs: all, in order.
    one.send(heartbeat(1, 2, 1));
    constexpr int kMessages = 300;
    std::thread writer([&] {
        for (int i = 1; i <= kMessages; ++i) two.send(heartbeat(2, 1, static_cast<raft::Index>(i)));
    });
    const bool all = run_until(io, [&] {
        std::lock_guard lock(mu);
        return at_1.size() >= static_cast<std::size_t>(kMessages) && at_2 >= 1;
    });
    writer.join();
    BOOST_TEST_REQUIRE(all);
    {
        std::lock_guard lock(mu);
        for (int i = 0; i < kMessages; ++i) {
            BOOST_TEST(std::get<raft::AppendRequest>(at_1[static_cast<std::size_t>(i)].body).leader_commit ==
                       static_cast<raft::Index>(i + 1));
        }
        at_1.clear();
    }
    BOOST_TEST(one.stats().tls_refused == 0u);

    // Member 2's certificate cannot carry a message from member 3.
    const std::uint64_t bad_before = one.stats().bad_frames;
    two.send(heartbeat(3, 1, 999));
    BOOST_TEST_REQUIRE(run_until(io, [&] { return one.stats().bad_frames > bad_before; }));
    // The connection was dropped with it; member 2 redials and its own messages arrive again.
    BOOST_TEST_REQUIRE(run_until(io, [&] {
        if (two.connected(1)) two.send(heartbeat(2, 1, 1000));
        std::lock_guard lock(mu);
        return !at_1.empty();
    }));
    std::lock_guard lock(mu);
    for (const raft::Message& m : at_1) {
        BOOST_TEST(m.from == 2u);
        BOOST_TEST(std::get<raft::AppendRequest>(m.body).leader_commit != 999u);
    }
}

// Member 1 alone over TLS on `port`, counting the messages it delivers, for
// a raw_dialer to talk to.
struct LoneMember {
    asio::io_context io;
    std::atomic<int> delivered{0};
    PeerTransport transport;

    LoneMember(Certs& certs, std::uint16_t port)
        : transport(io, options_of(1, port, 2, static_cast<std::uint16_t>(port + 1)),
                    [this](raft::Message) { ++delivered; }, [](const MemberInfo&) {}) {
        use_tls(transport, certs.member("1"));
        BOOST_TEST_REQUIRE(transport.start(MemberInfo{1, "127.0.0.1:1", 0, 0, 0, 0, 0}) == "");
    }
    // Lets what is in flight arrive, stops, and waits for the dialer.
    void finish(std::thread& dialer) {
        io.restart();
        io.run_for(std::chrono::milliseconds(100));
        transport.stop();
        io.restart();
        io.run_for(std::chrono::milliseconds(50));
        dialer.join();
    }
};

// A dialer that skips the handshake frame and sends a raft message as member
// 3 over member 2's certificate: only the certificate's ID can refuse it.
BOOST_AUTO_TEST_CASE(a_raft_frame_before_any_handshake_is_judged_by_the_certificate) {
    Certs certs;
    LoneMember one(certs, kPort + 2);
    TlsContextPtr ctx;
    BOOST_TEST_REQUIRE(make_tls_context(certs.member("2"), TlsSide::kClient, ctx) == "");
    std::atomic<bool> wrote{false};
    // As member 3 first, then as itself on the same connection.
    std::thread dialer = raw_dialer(ctx, static_cast<std::uint16_t>(kPort + 2), {3, 2}, wrote);
    const bool dropped = run_until(one.io, [&] { return one.transport.stats().bad_frames >= 1; });
    run_until(one.io, [&] { return wrote.load(); });
    one.finish(dialer);
    BOOST_TEST(wrote.load());
    BOOST_TEST(dropped);
    BOOST_TEST(one.delivered == 0);  // not the forged one, nor anything after it on that connection
}

BOOST_AUTO_TEST_CASE(a_certificate_of_the_peer_ca_bound_to_no_member_id_is_refused) {
    Certs certs;
    LoneMember one(certs, kPort + 4);
    TlsContextPtr ctx;  // signed by the peer CA, but CN=admin names no member
    BOOST_TEST_REQUIRE(make_tls_context(certs.member("admin"), TlsSide::kClient, ctx) == "");
    std::atomic<bool> wrote{false};
    std::thread dialer = raw_dialer(ctx, static_cast<std::uint16_t>(kPort + 4), {2}, wrote);
    const bool refused = run_until(one.io, [&] { return one.transport.stats().tls_refused >= 1; });
    one.finish(dialer);
    BOOST_TEST(refused);
    BOOST_TEST(one.delivered == 0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
