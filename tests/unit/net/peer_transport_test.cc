// PeerTransport over real loopback sockets. Incoming: every complete frame in
// one read is handled, frames split across reads and frames larger than one
// read chunk arrive whole and in order, and a bad frame after good ones closes
// the connection. Outgoing: send() from another thread while the event loop
// sends too, with frames larger than the receiver's buffer, delivers every
// frame whole and in each sender's order; a full queue drops the oldest
// frames but never one already partly on the wire (a frame larger than the
// socket buffers is sent in part at once, the rest by the loop); send()
// after stop() drops. set_peers() changes whom it dials at runtime.
#include "net/peer_transport.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "net/frame.h"
#include "net/incoming_slots.h"
#include "net/member_info.h"
#include "net/raft_codec.h"

namespace pgfence::net {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr std::uint64_t kCluster = 9;
constexpr std::uint16_t kPort = 23417;  // tests use 17000-32000 (below the ephemeral range)

// Runs the loop until `done()` or 5 s; false on timeout.
bool run_until(asio::io_context& io, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        io.restart();
        io.run_for(std::chrono::milliseconds(5));
    }
    return true;
}

std::string raft_frame(std::uint64_t cluster, std::size_t entry_bytes, raft::Index index) {
    raft::AppendRequest a;
    a.prev_log_index = index - 1;
    a.prev_log_term = 1;
    a.entries.push_back({1, index, raft::EntryType::kNormal, std::string(entry_bytes, 'e')});
    return encode_frame(cluster, FrameKind::kRaft,
                        encode_message(raft::Message{kCluster, 2, 1, 1, a}));
}

// An AppendRequest from member 1 to 2 carrying one entry of `bytes` bytes at `index`.
raft::Message append_to_2(raft::Index index, std::size_t bytes) {
    raft::AppendRequest a;
    a.prev_log_index = index - 1;
    a.prev_log_term = 1;
    a.entries.push_back({1, index, raft::EntryType::kNormal, std::string(bytes, static_cast<char>('a' + index % 26))});
    return raft::Message{kCluster, 1, 2, 1, a};
}

// The other end of an outgoing connection: a listener (with a small receive
// buffer if asked, so that frames queue behind one another) that reads, on
// its own thread, everything sent to it and decodes it into frames.
class Sink {
  public:
    Sink(std::uint16_t port, bool small_buffer) : acceptor_(io_) {
        const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
        acceptor_.open(ep.protocol());
        acceptor_.set_option(asio::socket_base::reuse_address(true));
        if (small_buffer) acceptor_.set_option(asio::socket_base::receive_buffer_size(4096));  // inherited
        acceptor_.bind(ep);
        acceptor_.listen();
    }
    ~Sink() {
        if (reader_.joinable()) reader_.join();
    }
    // The transport has connected (the kernel completed it): take the connection.
    void accept() {
        socket_ = acceptor_.accept();
        timeval five{5, 0};  // a read that hangs fails the test instead
        ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
    }
    // Starts reading on another thread until `frames` frames arrived whole, or an error.
    void read(std::size_t frames) {
        reader_ = std::thread([this, frames] {
            std::string bytes;
            char chunk[65536];
            while (got_.size() < frames) {
                boost::system::error_code ec;
                const std::size_t n = socket_.read_some(asio::buffer(chunk), ec);
                if (ec) break;
                bytes.append(chunk, n);
                while (bytes.size() >= kLengthPrefixBytes) {
                    auto len = decode_frame_length(std::string_view(bytes).substr(0, kLengthPrefixBytes));
                    if (std::holds_alternative<FrameError>(len)) {
                        corrupt_ = true;
                        done_ = true;
                        return;
                    }
                    const std::size_t body = std::get<std::size_t>(len);
                    if (bytes.size() < kLengthPrefixBytes + body) break;
                    auto f = decode_frame_body(std::string_view(bytes).substr(kLengthPrefixBytes, body));
                    bytes.erase(0, kLengthPrefixBytes + body);
                    if (std::holds_alternative<FrameError>(f)) {
                        corrupt_ = true;
                        done_ = true;
                        return;
                    }
                    got_.push_back(std::get<Frame>(std::move(f)));
                }
            }
            done_ = true;
        });
    }
    bool done() const { return done_; }
    // After done(): the frames, and whether the byte stream stopped decoding.
    const std::vector<Frame>& frames() {
        if (reader_.joinable()) reader_.join();
        return got_;
    }
    bool corrupt() const { return corrupt_; }

  private:
    asio::io_context io_;
    tcp::acceptor acceptor_;
    tcp::socket socket_{io_};
    std::thread reader_;
    std::vector<Frame> got_;
    std::atomic<bool> done_{false};
    bool corrupt_ = false;
};

// Entry index and size of each raft frame (after the MemberInfo handshake).
std::vector<std::pair<raft::Index, std::size_t>> appends_in(const std::vector<Frame>& frames) {
    std::vector<std::pair<raft::Index, std::size_t>> out;
    for (const Frame& f : frames) {
        if (f.kind != FrameKind::kRaft) continue;
        auto m = decode_message(f.payload, kCluster);
        BOOST_REQUIRE(std::holds_alternative<raft::Message>(m));
        const auto& a = std::get<raft::AppendRequest>(std::get<raft::Message>(m).body);
        out.emplace_back(a.entries.at(0).index, a.entries.at(0).data.size());
    }
    return out;
}

TransportOptions dialing_2(std::uint16_t listen_port, std::uint16_t peer_port) {
    TransportOptions o;
    o.self_id = 1;
    o.cluster_id = kCluster;
    o.listen_port = listen_port;
    o.peers.push_back({2, "127.0.0.1", peer_port});
    return o;
}

BOOST_AUTO_TEST_CASE(send_from_another_thread_and_the_loop_delivers_every_frame_whole_in_order) {
    asio::io_context io;
    Sink sink(kPort + 11, true);
    PeerTransport t(io, dialing_2(kPort + 10, kPort + 11), [](raft::Message) {}, [](const MemberInfo&) {});
    BOOST_REQUIRE_EQUAL(t.start(MemberInfo{1, "127.0.0.1:1", 0, 1, 0, 0, 0}), "");
    BOOST_REQUIRE(run_until(io, [&] { return t.connected(2); }));
    sink.accept();

    // Another thread (the member's writer) sends indexes 1..200, every 25th
    // frame larger than the receiver's buffer; the loop's thread sends
    // 10001..10050 meanwhile. Nothing is read until both are done, so frames
    // queue behind one another (and are likely sent in part: the next test
    // makes sure of that case).
    constexpr raft::Index kOther = 200, kLoop = 50;
    auto size_of = [](raft::Index i) -> std::size_t { return i % 25 == 0 ? 300'000 : 100 + i; };
    std::atomic<bool> other_done{false};
    std::jthread other([&] {  // joined on every way out
        for (raft::Index i = 1; i <= kOther; ++i) t.send(append_to_2(i, size_of(i)));
        other_done = true;
    });
    for (raft::Index i = 10001; i <= 10000 + kLoop; ++i) {
        t.send(append_to_2(i, size_of(i)));
        io.restart();
        io.poll();
    }
    BOOST_REQUIRE(run_until(io, [&] { return other_done.load(); }));
    other.join();
    sink.read(1 + kOther + kLoop);
    // frames_sent counts a loop-written frame when its write completes (a
    // handler run after the bytes left): wait for both.
    BOOST_REQUIRE(run_until(io, [&] { return sink.done() && t.stats().frames_sent >= 1 + kOther + kLoop; }));

    const auto& frames = sink.frames();
    BOOST_TEST(!sink.corrupt());
    BOOST_REQUIRE_EQUAL(frames.size(), 1 + kOther + kLoop);
    BOOST_TEST((frames.front().kind == FrameKind::kMemberInfo));  // the handshake comes first
    std::vector<std::pair<raft::Index, std::size_t>> from_other, from_loop, want_other, want_loop;
    for (const auto& a : appends_in(frames)) (a.first > 10000 ? from_loop : from_other).push_back(a);
    for (raft::Index i = 1; i <= kOther; ++i) want_other.emplace_back(i, size_of(i));
    for (raft::Index i = 10001; i <= 10000 + kLoop; ++i) want_loop.emplace_back(i, size_of(i));
    BOOST_TEST((from_other == want_other));
    BOOST_TEST((from_loop == want_loop));
    BOOST_TEST(t.stats().frames_sent == 1 + kOther + kLoop);
    BOOST_TEST(t.stats().dropped_queue_full == 0u);

    // After stop() a send from another thread is dropped and counted.
    t.stop();
    const auto dropped = t.stats().dropped_unconnected;
    std::thread([&] { t.send(append_to_2(1, 10)); }).join();
    BOOST_TEST(t.stats().dropped_unconnected == dropped + 1);
}

BOOST_AUTO_TEST_CASE(a_full_queue_drops_the_oldest_frames_but_never_one_partly_sent) {
    asio::io_context io;
    Sink sink(kPort + 13, false);
    TransportOptions o = dialing_2(kPort + 12, kPort + 13);
    o.max_queue_frames = 3;
    PeerTransport t(io, o, [](raft::Message) {}, [](const MemberInfo&) {});
    BOOST_REQUIRE_EQUAL(t.start(MemberInfo{1, "127.0.0.1:1", 0, 1, 0, 0, 0}), "");
    BOOST_REQUIRE(run_until(io, [&] { return t.stats().frames_sent == 1; }));  // the handshake is out
    sink.accept();

    // The loop does not run. Frame 1 (32 MiB: more than the socket buffers
    // hold, tcp_wmem's maximum is 4 MiB by default) is sent in part at once
    // into the empty buffers, the rest queued; 2..5 queue behind it. The
    // queue holds 3 frames: 2 and 3 are dropped, never the started frame 1.
    constexpr std::size_t kBig = 32u << 20;
    t.send(append_to_2(1, kBig));
    BOOST_REQUIRE_MESSAGE(t.stats().frames_sent == 1u,
                          "frame 1 (32 MiB) was sent whole at once: socket buffers larger than this test assumes (tcp_wmem?)");
    for (raft::Index i = 2; i <= 5; ++i) t.send(append_to_2(i, 50));
    BOOST_TEST(t.stats().dropped_queue_full == 2u);

    sink.read(1 + 3);
    BOOST_REQUIRE(run_until(io, [&] { return sink.done(); }));
    const auto& frames = sink.frames();
    BOOST_TEST(!sink.corrupt());
    const std::vector<std::pair<raft::Index, std::size_t>> want{{1, kBig}, {4, 50}, {5, 50}};
    BOOST_TEST((appends_in(frames) == want));
    t.stop();
}

BOOST_AUTO_TEST_CASE(incoming_frames_in_one_read_split_and_large_arrive_whole_and_in_order) {
    asio::io_context io;
    TransportOptions o;
    o.self_id = 1;
    o.cluster_id = kCluster;
    o.listen_port = kPort;
    o.peers.push_back({2, "127.0.0.1", kPort + 1});  // nobody there: dialing it just fails
    std::vector<raft::Message> got;
    std::vector<MemberInfo> infos;
    PeerTransport t(
        io, o, [&](raft::Message m) { got.push_back(std::move(m)); },
        [&](const MemberInfo& i) { infos.push_back(i); });
    BOOST_REQUIRE_EQUAL(t.start(MemberInfo{1, "127.0.0.1:1", 0, 1, 0, 0, 0}), "");

    asio::io_context client_io;
    tcp::socket peer(client_io);
    peer.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), kPort));
    const std::string hello =
        encode_frame(kCluster, FrameKind::kMemberInfo,
                     encode_member_info(MemberInfo{2, "127.0.0.1:2", 0, 1, 0, 0, 0}));
    // The handshake and two small frames in one write.
    asio::write(peer,
                asio::buffer(hello + raft_frame(kCluster, 10, 1) + raft_frame(kCluster, 20, 2)));
    BOOST_REQUIRE(run_until(io, [&] { return got.size() == 2; }));
    // A frame whose length prefix is split across writes, then one larger
    // than a read chunk (64 KiB).
    const std::string split = raft_frame(kCluster, 30, 3);
    asio::write(peer, asio::buffer(split.substr(0, 2)));
    io.restart();
    io.run_for(std::chrono::milliseconds(20));
    BOOST_TEST(got.size() == 2u);
    asio::write(peer, asio::buffer(split.substr(2) + raft_frame(kCluster, 200'000, 4)));
    BOOST_REQUIRE(run_until(io, [&] { return got.size() == 4; }));

    BOOST_TEST(infos.size() == 1u);
    BOOST_TEST(infos.at(0).id == 2u);
    const std::vector<std::size_t> sizes{10, 20, 30, 200'000};
    for (std::size_t i = 0; i < got.size(); ++i) {
        const auto& a = std::get<raft::AppendRequest>(got[i].body);
        BOOST_TEST(a.entries.at(0).index == i + 1);
        BOOST_TEST(a.entries.at(0).data.size() == sizes[i]);
    }

    // A frame of another cluster after a good one: the good one is handled,
    // then the connection is closed.
    asio::write(peer, asio::buffer(raft_frame(kCluster, 5, 5) + raft_frame(kCluster + 1, 5, 6)));
    BOOST_REQUIRE(run_until(io, [&] { return t.stats().bad_frames == 1; }));
    BOOST_TEST(got.size() == 5u);
    char byte = 0;
    boost::system::error_code ec;
    peer.read_some(asio::buffer(&byte, 1), ec);
    BOOST_TEST((ec == asio::error::eof || ec == asio::error::connection_reset));
    t.stop();
}

// What a dialer that has not named a member yet can make the transport hold:
// its first frame is checked from its header and may announce at most
// kMaxFirstFrameBytes, so a huge announced frame closes the connection
// before any of its body is read (and no room is made for it).
BOOST_AUTO_TEST_CASE(a_huge_first_frame_closes_the_connection_before_its_body_is_read) {
    asio::io_context io;
    TransportOptions o;
    o.self_id = 1;
    o.cluster_id = kCluster;
    o.listen_port = kPort + 20;
    std::vector<raft::Message> got;
    PeerTransport t(io, o, [&](raft::Message m) { got.push_back(std::move(m)); }, [](const MemberInfo&) {});
    BOOST_REQUIRE_EQUAL(t.start(MemberInfo{1, "127.0.0.1:1", 0, 1, 0, 0, 0}), "");
    asio::io_context client_io;
    std::uint64_t bad = 0;
    // 64 MiB announced as this cluster's MemberInfo, as a raft frame, and as
    // another cluster's: only the length prefix and the header are sent.
    for (const auto& [cluster, kind] : {std::pair{kCluster, FrameKind::kMemberInfo}, std::pair{kCluster, FrameKind::kRaft},
                                        std::pair{kCluster + 1, FrameKind::kMemberInfo}}) {
        tcp::socket peer(client_io);
        peer.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), o.listen_port));
        std::string head = encode_frame(cluster, kind, "");
        head[0] = head[1] = head[2] = 0;
        head[3] = 4;  // length 64 MiB (little-endian 0x04000000)
        BOOST_REQUIRE_EQUAL(decode_frame_length(std::string_view(head).substr(0, 4)).index(), 0u);
        asio::write(peer, asio::buffer(head));
        ++bad;
        BOOST_REQUIRE(run_until(io, [&] { return t.stats().bad_frames == bad; }));
        char byte = 0;
        boost::system::error_code ec;
        peer.read_some(asio::buffer(&byte, 1), ec);  // closed: no wait for the 64 MiB
        BOOST_TEST((ec == asio::error::eof || ec == asio::error::connection_reset));
    }
    // Once a MemberInfo named a member, large frames are read as before.
    tcp::socket peer(client_io);
    peer.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), o.listen_port));
    asio::write(peer, asio::buffer(encode_frame(kCluster, FrameKind::kMemberInfo,
                                                encode_member_info(MemberInfo{2, "127.0.0.1:2", 0, 1, 0, 0, 0})) +
                                   raft_frame(kCluster, 1'000'000, 1)));
    BOOST_REQUIRE(run_until(io, [&] { return got.size() == 1; }));
    BOOST_TEST(t.stats().bad_frames == bad);
    t.stop();
}

// Silent connections (never a byte) fill the pending places of their address
// and of the pool; each new one sheds the oldest silent one, and a member's
// connection, which speaks at once, gets through and keeps its place; one
// left pending past the deadline is closed.
BOOST_AUTO_TEST_CASE(silent_connections_are_shed_and_a_member_still_gets_through) {
    asio::io_context io;
    TransportOptions o;
    o.self_id = 1;
    o.cluster_id = kCluster;
    o.listen_port = kPort + 21;
    o.incoming.max_pending = 4;
    o.incoming.max_pending_per_address = 3;
    o.pending_timeout = std::chrono::milliseconds(1000);
    std::vector<raft::Message> got;
    PeerTransport t(io, o, [&](raft::Message m) { got.push_back(std::move(m)); }, [](const MemberInfo&) {});
    BOOST_REQUIRE_EQUAL(t.start(MemberInfo{1, "127.0.0.1:1", 0, 1, 0, 0, 0}), "");
    const tcp::endpoint to(asio::ip::make_address("127.0.0.1"), o.listen_port);
    asio::io_context client_io;
    std::vector<tcp::socket> silent;
    auto open_silent = [&](const char* from) {
        silent.emplace_back(client_io);
        silent.back().open(tcp::v4());
        silent.back().bind(tcp::endpoint(asio::ip::make_address(from), 0));
        silent.back().connect(to);
    };
    for (int i = 0; i < 3; ++i) open_silent("127.0.0.1");
    for (int i = 0; i < 3; ++i) open_silent("127.0.0.2");
    auto shed = [&](ShedReason r) { return t.stats().shed[static_cast<std::size_t>(r)]; };
    BOOST_REQUIRE(run_until(io, [&] { return shed(ShedReason::kPendingFull) + shed(ShedReason::kAddressFull) == 2; }));
    tcp::socket member(client_io);
    member.connect(to);
    asio::write(member, asio::buffer(encode_frame(kCluster, FrameKind::kMemberInfo,
                                                  encode_member_info(MemberInfo{2, "127.0.0.1:2", 0, 1, 0, 0, 0})) +
                                     raft_frame(kCluster, 10, 1)));
    BOOST_REQUIRE(run_until(io, [&] { return got.size() == 1; }));
    for (int i = 0; i < 6; ++i) open_silent(i % 2 ? "127.0.0.1" : "127.0.0.2");  // pending places only
    BOOST_REQUIRE(run_until(io, [&] { return shed(ShedReason::kPendingFull) + shed(ShedReason::kAddressFull) == 8; }));
    // The rest pass the deadline; the member's connection is not pending.
    BOOST_REQUIRE(run_until(io, [&] { return shed(ShedReason::kPendingTimeout) == 4; }));
    asio::write(member, asio::buffer(raft_frame(kCluster, 10, 2)));
    BOOST_REQUIRE(run_until(io, [&] { return got.size() == 2; }));
    BOOST_TEST(t.stats().bad_frames == 0u);
    t.stop();
}

// set_peers: a member added at runtime is dialed and reached; one removed has
// its connection closed and is no longer sent to; one whose address changed
// is redialed at the new one.
BOOST_AUTO_TEST_CASE(set_peers_dials_added_members_and_drops_removed_ones) {
    asio::io_context io;
    auto receiver = [&io](std::uint64_t id, std::uint16_t port, std::vector<raft::Index>& got) {
        TransportOptions o;
        o.self_id = id;
        o.cluster_id = kCluster;
        o.listen_port = port;
        return std::make_unique<PeerTransport>(
            io, o,
            [&got](raft::Message m) { got.push_back(std::get<raft::AppendRequest>(m.body).entries.at(0).index); },
            [](const MemberInfo&) {});
    };
    std::vector<raft::Index> at_2, at_2_moved, ignored;
    auto two = receiver(2, kPort + 30, at_2);
    BOOST_REQUIRE(two->start(MemberInfo{2, "127.0.0.1:1", 0, 0, 0, 0, 0}).empty());
    TransportOptions o;
    o.self_id = 1;
    o.cluster_id = kCluster;
    o.listen_port = kPort + 31;
    PeerTransport one(io, o, [&ignored](raft::Message) {}, [](const MemberInfo&) {});
    BOOST_REQUIRE(one.start(MemberInfo{1, "127.0.0.1:2", 0, 0, 0, 0, 0}).empty());
    one.send(append_to_2(1, 10));  // nobody to reach yet
    BOOST_TEST(one.stats().dropped_unconnected == 1u);

    one.set_peers({PeerAddress{2, "127.0.0.1", static_cast<std::uint16_t>(kPort + 30)}});
    BOOST_REQUIRE(run_until(io, [&] { return one.connected(2); }));
    one.send(append_to_2(2, 10));
    BOOST_REQUIRE(run_until(io, [&] { return at_2.size() == 1; }));
    BOOST_TEST(at_2.front() == 2u);

    one.set_peers({});
    BOOST_TEST(!one.connected(2));
    one.send(append_to_2(3, 10));
    BOOST_TEST(one.stats().dropped_unconnected == 2u);

    // Member 2 moves to another port: dialed there, not at the old one.
    two->stop();
    auto moved = receiver(2, kPort + 32, at_2_moved);
    BOOST_REQUIRE(moved->start(MemberInfo{2, "127.0.0.1:1", 0, 0, 0, 0, 0}).empty());
    one.set_peers({PeerAddress{2, "127.0.0.1", static_cast<std::uint16_t>(kPort + 30)}});
    one.set_peers({PeerAddress{2, "127.0.0.1", static_cast<std::uint16_t>(kPort + 32)}});
    BOOST_REQUIRE(run_until(io, [&] { return one.connected(2); }));
    one.send(append_to_2(4, 10));
    BOOST_REQUIRE(run_until(io, [&] { return at_2_moved.size() == 1; }));
    BOOST_TEST(at_2_moved.front() == 4u);
    BOOST_TEST(at_2.size() == 1u);
    one.stop();
    moved->stop();
}

}  // namespace
}  // namespace pgfence::net
