// Peer transport: raft messages between members over TCP (Boost.Asio, kept
// out of this header), in the frames of frame.h.
//
// Each member dials one outgoing connection to every peer and only writes on
// it; it only reads on the connections peers dial to it. The first frame on an
// outgoing connection is this member's MemberInfo (the handshake: id and HTTP
// client address); later MemberInfo frames refresh what /v1/status shows.
//
// The members dialed are those of start()'s options, then of each
// set_peers() (the configuration in force changed).
// Outgoing: reconnect with exponential backoff (backoff_min doubling to
// backoff_max, reset after a successful connect). A frame for a connected
// peer whose connection is idle (nothing queued, no write in progress) is
// written at once with one non-blocking send(); what does not fit the socket
// buffer, and every frame sent while the connection is busy, goes to the
// peer's bounded queue (frames and bytes, counting those being written),
// written by the event loop. When the queue is full the oldest frame is
// dropped and counted (Raft tolerates loss), never one whose first bytes are
// already on the wire. While a peer is
// unreachable its messages are dropped and counted instead of queued.
// The seed of a cluster also sends a SeedInfo frame after the handshake to
// every member it has not heard a handshake from since start (seed_info.h);
// a running member ignores one.
// Incoming: frames of another cluster, another version, over kMaxFrameBytes or
// that fail to decode close the connection (logged, counted); idle incoming
// connections are closed after idle_timeout. A connection not yet identified
// (TLS handshake in progress; plaintext before its first frame, a MemberInfo
// of this cluster of at most kMaxFirstFrameBytes, named a member) waits in a
// bounded pending pool (per source address too) for at most pending_timeout;
// a full pool sheds its oldest silent connection to admit a new one; an
// identified one has a place of its member's, which no pending one takes
// (incoming_slots.h has the rules). So at most incoming.max_pending +
// incoming.max_per_member x peers + incoming.max_unknown incoming
// connections are open; each one shed is counted (stats().shed) and logged
// (rate-limited).
//
// TLS (set_tls): always mutual. A dialed peer must present a certificate
// signed by the peer CA and bound to the ID dialed (tls.h member_id_of); a
// dialer must present one bound to some member ID, and every frame it sends
// must come from that ID (its handshake's id, each raft message's `from`):
// otherwise the connection is closed, logged and counted (tls_refused,
// bad_frames). So one member's certificate cannot speak for another.
//
// Threading: the io_context runs on one thread (the event loop); callbacks run
// there. send() may also be called from any other thread (the member's writer
// thread sends a Ready's messages - those that wait for durability - the
// moment a write it ran is durable): each peer's connection state, queue and
// socket writes are guarded by that peer's mutex, so frames from different
// threads never interleave on the wire, and the frames of one peer leave in
// the order their send() calls took that mutex. Every other method is for the
// event loop's thread only. send() from another thread is safe once start()
// has returned, during and after stop() (afterwards the message is dropped),
// but not after the destructor has started. Plaintext or TLS, every byte
// goes through one non-blocking stream per connection (net/stream.h; no Asio
// SSL stream); an outgoing one, not thread-safe, is only ever called under
// that peer's mutex after the handshake, so send() from the writer thread
// writes at once in either case. Incoming connections are read on the event
// loop alone.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/incoming_slots.h"
#include "net/member_info.h"
#include "net/seed_info.h"
#include "net/tls.h"
#include "raft/types.h"

namespace boost::asio {
class io_context;
}

namespace pgfence::net {

struct PeerAddress {
    std::uint64_t id = 0;
    std::string host;
    std::uint16_t port = 0;
};

struct TransportOptions {
    std::uint64_t self_id = 0;
    std::uint64_t cluster_id = 0;
    std::string listen_host = "127.0.0.1";
    std::uint16_t listen_port = 0;
    std::vector<PeerAddress> peers;  // everyone but self, at start (set_peers changes it)
    std::size_t max_queue_frames = 4096;
    std::size_t max_queue_bytes = 64u << 20;
    std::size_t max_frames_per_write = 64;
    std::chrono::milliseconds backoff_min{20};
    std::chrono::milliseconds backoff_max{1000};
    std::chrono::milliseconds idle_timeout{30000};
    IncomingLimits incoming;                            // pending and identified places (incoming_slots.h)
    std::chrono::milliseconds pending_timeout{1000};   // an incoming connection is identified within this
    // Sent after the handshake to each member not heard from since start()
    // (seed_info.h), when this member is the seed of its cluster; empty: never.
    std::string seed_info;  // encoded SeedInfo payload
    // A member that does not know its cluster yet (server/ask_seed.h): only
    // handshakes and SeedInfo frames, of any cluster, are read (to on_info
    // and the seed handler); any other frame closes the connection unread.
    bool handshakes_only = false;
};

struct TransportStats {
    std::uint64_t frames_sent = 0;
    std::uint64_t frames_received = 0;
    std::uint64_t dropped_queue_full = 0;
    std::uint64_t dropped_unconnected = 0;
    std::uint64_t bad_frames = 0;
    std::uint64_t connects = 0;
    std::uint64_t tls_refused = 0;  // TLS handshakes failed or certificates not bound to the right member
    std::uint64_t shed[kShedReasons] = {};  // incoming connections closed to keep the bounds, by ShedReason
};

class PeerTransport {
public:
    using MessageHandler = std::function<void(raft::Message)>;
    using InfoHandler = std::function<void(const MemberInfo&)>;
    // A SeedInfo frame and the cluster ID it came with (handshakes_only).
    using SeedHandler = std::function<void(std::uint64_t cluster_id, const SeedInfo&)>;

    PeerTransport(boost::asio::io_context& io, TransportOptions options, MessageHandler on_message,
                  InfoHandler on_info);
    ~PeerTransport();
    PeerTransport(const PeerTransport&) = delete;
    PeerTransport& operator=(const PeerTransport&) = delete;

    // Listens and starts dialing peers; returns an error message or "".
    std::string start(const MemberInfo& hello);
    void stop();

    // Sends `m` to m.to: at once if its connection is idle, else queued
    // (dropped and counted if unknown or unreachable). Thread-safe (above).
    void send(const raft::Message& m);
    // Sends `info` to every connected peer and uses it as the next handshake.
    void broadcast_info(const MemberInfo& info);

    // The members to dial from now on (everyone but self; ids unique): a
    // member not listed before is dialed, one no longer listed has its
    // connection closed and its queued frames dropped, one whose address
    // changed is redialed there. Incoming connections are not affected (a
    // member that is not dialed may still be heard). Event loop only; send()
    // from other threads meanwhile reaches the old or the new list.
    void set_peers(const std::vector<PeerAddress>& peers);

    // TLS from now on (null, null: plaintext): `accept` (TlsSide::kServerVerify
    // with the peer CA) for incoming connections, `dial` (TlsSide::kClient with
    // this member's certificate) for outgoing ones. Before start(), or later
    // to swap in reloaded files: new connections use them, open ones keep theirs.
    // Event loop only.
    void set_tls(TlsContextPtr accept, TlsContextPtr dial);

    // Where SeedInfo frames go (handshakes_only; before start()).
    void set_seed_handler(SeedHandler on_seed);

    bool connected(std::uint64_t peer) const;
    TransportStats stats() const;

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

}  // namespace pgfence::net
