// PeerTransport over mutual TLS on loopback (certificates made here with
// OpenSSL's API, signed by a test CA): messages flow both ways, send() from
// another thread (the writer thread's direct path) delivers every message in
// order, and a member whose certificate is bound to ID 2 cannot send a
// message as member 3: the frame is dropped (counted), never delivered.
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

namespace pgfence::net {
namespace {

namespace asio = boost::asio;

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

// A directory of PEM files: a CA, and leaves it signed (CN = the ID).
class Certs {
  public:
    Certs() : dir_("/tmp/pgfence-peer-tls-" + std::to_string(::getpid())) {
        std::filesystem::create_directories(dir_);
        ca_key_ = EVP_EC_gen("P-256");
        ca_ = X509_new();
        fill(ca_, "test peer CA", ca_key_, nullptr, ca_key_, true);
        write_cert(ca_, dir_ + "/ca.pem");
    }
    ~Certs() {
        X509_free(ca_);
        EVP_PKEY_free(ca_key_);
        std::filesystem::remove_all(dir_);
    }
    Certs(const Certs&) = delete;
    Certs& operator=(const Certs&) = delete;

    // Writes member-ID.pem and member-ID-key.pem; returns their files.
    TlsFiles member(const std::string& id) {
        EVP_PKEY* key = EVP_EC_gen("P-256");
        X509* cert = X509_new();
        fill(cert, id, key, ca_, ca_key_, false);
        const std::string base = dir_ + "/member-" + id;
        write_cert(cert, base + ".pem");
        FILE* f = std::fopen((base + "-key.pem").c_str(), "w");
        PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
        std::fclose(f);
        ::chmod((base + "-key.pem").c_str(), 0600);
        X509_free(cert);
        EVP_PKEY_free(key);
        return {base + ".pem", base + "-key.pem", dir_ + "/ca.pem"};
    }

  private:
    static void fill(X509* c, const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool ca) {
        static long serial = 1;
        X509_set_version(c, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
        X509_gmtime_adj(X509_getm_notBefore(c), -60);
        X509_gmtime_adj(X509_getm_notAfter(c), 3600);
        X509_set_pubkey(c, key);
        X509_NAME* name = X509_get_subject_name(c);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
        X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name);
        X509V3_CTX v3;
        X509V3_set_ctx(&v3, issuer ? issuer : c, c, nullptr, nullptr, 0);
        for (const char* ext : ca ? std::vector<const char*>{"critical,CA:TRUE", "critical,keyCertSign,cRLSign"}
                                  : std::vector<const char*>{"critical,CA:FALSE", "critical,digitalSignature"}) {
            const int nid = std::string(ext).find("CA:") != std::string::npos ? NID_basic_constraints : NID_key_usage;
            X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &v3, nid, ext);
            X509_add_ext(c, e, -1);
            X509_EXTENSION_free(e);
        }
        X509_sign(c, issuer_key, EVP_sha256());
    }
    static void write_cert(X509* c, const std::string& path) {
        FILE* f = std::fopen(path.c_str(), "w");
        PEM_write_X509(f, c);
        std::fclose(f);
    }

    std::string dir_;
    EVP_PKEY* ca_key_ = nullptr;
    X509* ca_ = nullptr;
};

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

// A dialer that skips the handshake frame and sends a raft message as member
// 3 over member 2's certificate: only the certificate's ID can refuse it.
BOOST_AUTO_TEST_CASE(a_raft_frame_before_any_handshake_is_judged_by_the_certificate) {
    Certs certs;
    asio::io_context io;
    std::atomic<int> delivered{0};
    PeerTransport one(io, options_of(1, kPort + 2, 2, kPort + 3), [&](raft::Message) { ++delivered; },
                      [](const MemberInfo&) {});
    use_tls(one, certs.member("1"));
    BOOST_TEST_REQUIRE(one.start(MemberInfo{1, "127.0.0.1:1", 0, 0, 0, 0, 0}) == "");
    const TlsFiles two = certs.member("2");
    TlsContextPtr ctx;
    BOOST_TEST_REQUIRE(make_tls_context(two, TlsSide::kClient, ctx) == "");
    std::atomic<bool> wrote{false};
    std::thread dialer([&] {  // a blocking TLS client of our own
        asio::io_context cio;
        asio::ip::tcp::socket sock(cio);
        sock.connect({asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(kPort + 2)});
        const timeval limit{3, 0};  // the read below must not outlive a member that never closes
        ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        SSL* ssl = SSL_new(ctx->native_handle());
        attach_socket(ssl, sock.native_handle());
        if (SSL_connect(ssl) == 1) {
            for (std::uint64_t from : {3u, 2u}) {  // as member 3 first, then as itself on the same connection
                const std::string frame = encode_frame(kCluster, FrameKind::kRaft, encode_message(heartbeat(from, 1, 5)));
                SSL_write(ssl, frame.data(), static_cast<int>(frame.size()));
            }
            wrote = true;
            char byte = 0;
            SSL_read(ssl, &byte, 1);  // until the member closes the connection
        }
        SSL_free(ssl);
    });
    const bool dropped = run_until(io, [&] { return one.stats().bad_frames >= 1; });
    run_until(io, [&] { return wrote.load(); });
    io.restart();
    io.run_for(std::chrono::milliseconds(100));
    one.stop();
    io.restart();
    io.run_for(std::chrono::milliseconds(50));
    dialer.join();
    BOOST_TEST(wrote.load());
    BOOST_TEST(dropped);
    BOOST_TEST(delivered == 0);  // not the forged one, nor anything after it on that connection
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace pgfence::net
