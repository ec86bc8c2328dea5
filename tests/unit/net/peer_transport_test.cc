// PeerTransport's incoming side over a real loopback socket: every complete
// frame in one read is handled, frames split across reads and frames larger
// than one read chunk arrive whole and in order, and a bad frame after good
// ones closes the connection.
#include "net/peer_transport.h"

#include <boost/asio.hpp>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <functional>
#include <vector>

#include "net/frame.h"
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

}  // namespace
}  // namespace pgfence::net
