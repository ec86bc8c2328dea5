// The peer transport's connections (internal to net/: included by the
// peer_*.cc files only): what they share with the transport, the outgoing
// connection that dials a peer and writes frames (peer_outgoing.cc), and the
// incoming one that reads and checks them (peer_incoming.cc). The rules they
// follow are stated in peer_transport.h; the threading of each is stated on
// its class.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "log/log.h"
#include "net/frame.h"
#include "net/incoming_slots.h"
#include "net/peer_transport.h"
#include "net/stream.h"

namespace pgfence::net::peer {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// A TLS handshake this member dials must finish within this (an incoming
// one within TransportOptions::pending_timeout).
constexpr std::chrono::seconds kTlsHandshakeTimeout{5};

// Counters written by the event loop and, for outgoing frames, by any thread
// that calls send(); read by stats().
struct Counters {
    std::atomic<std::uint64_t> frames_sent{0};
    std::atomic<std::uint64_t> frames_received{0};
    std::atomic<std::uint64_t> dropped_queue_full{0};
    std::atomic<std::uint64_t> dropped_unconnected{0};
    std::atomic<std::uint64_t> bad_frames{0};
    std::atomic<std::uint64_t> connects{0};
    std::atomic<std::uint64_t> tls_refused{0};
    std::atomic<std::uint64_t> shed[kShedReasons] = {};  // incoming connections closed to keep the bounds, by ShedReason
};

inline void count(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

class Incoming;

// What the transport and its connections share.
struct Shared {
    TransportOptions options;  // not changed after construction
    PeerTransport::MessageHandler on_message;
    PeerTransport::InfoHandler on_info;
    Counters stats;
    PeerTransport::SeedHandler on_seed;
    std::string hello;  // encoded MemberInfo frame (event loop only)
    std::string seed_frame;  // encoded SeedInfo frame, or empty (set by start())
    std::set<std::uint64_t> heard;  // members whose handshake came since start (event loop only)
    // TLS (event loop only; null: plaintext): what incoming connections are
    // accepted with and outgoing ones dialed with, swapped by set_tls().
    TlsContextPtr tls_accept;
    TlsContextPtr tls_dial;
    bool stopped = false;  // event loop only
    log::Limiter refused_log{20};  // incoming connections refused (event loop only): anyone can cause them
    // Incoming connections (event loop only): their places (incoming_slots.h),
    // each open one by its number, the next number, and the members dialed
    // now (the others are unknown to the slots).
    IncomingSlots slots;
    std::map<IncomingSlots::Conn, Incoming*> incoming;
    IncomingSlots::Conn next_conn = 1;
    std::set<std::uint64_t> dialed;

    explicit Shared(const TransportOptions& o) : options(o), slots(o.incoming) {}
    // Closes incoming connection `shed.conn` (if still open), counted and logged.
    void shed(const IncomingSlots::Shed& shed);
};

// One outgoing connection: dial, handshake, write frames, redial.
//
// Every byte goes through stream_ (net/stream.h), plaintext or TLS alike.
// mutex_ guards connected_, writing_, queue_, queued_bytes_, unit_ and every
// call on stream_ or change of socket_ (connect, close) after the handshake.
// Any thread may write: send_frame() writes at once while connected_ and idle
// (nothing being written, queue_ empty), else queues the frame. A write takes
// up to max_frames_per_write frames from the queue into unit_ and writes it
// until done or the stream wants the socket; then writing_ stays set, the
// wait is posted to the loop, and the loop writes on when the socket is
// ready. unit_ is never dropped: its first bytes may be on the wire, and a
// TLS write must be retried with the same bytes; a plaintext write that took
// part of it goes on from unit_sent_. The handshake runs on the loop before
// connected_ is set (no other thread calls the stream then), and the
// server's certificate must be bound to the member dialed (member_id_of), or
// the connection fails and redials. Nothing is ever read on an outgoing
// connection (the server sends no tickets), so readability means the peer
// closed or sent an alert. generation_, backoff_, timer_ and closed_ are the
// event loop's only.
class Outgoing : public std::enable_shared_from_this<Outgoing> {
public:
    Outgoing(asio::io_context& io, PeerAddress peer, std::shared_ptr<Shared> shared);
    Outgoing(const Outgoing&) = delete;
    Outgoing& operator=(const Outgoing&) = delete;

    void dial();
    // Any thread.
    void send_frame(std::string frame);
    bool connected() const;
    void close();

private:
    void on_connect(const error_code& ec);
    void handshake(std::uint64_t gen);
    void on_secure();
    void enqueue_locked(std::string frame);
    void write_locked();
    void wait_to_write(Step step, std::uint64_t gen);
    void watch_eof();
    void fail(const char* what, const error_code& ec);

    asio::io_context& io_;
    PeerAddress peer_;
    std::shared_ptr<Shared> shared_;
    mutable std::mutex mutex_;
    tcp::socket socket_;
    Stream stream_;               // the socket's bytes (TLS when dialed with a context)
    TlsContextPtr tls_context_;   // TLS for this connection (taken at dial; null: plaintext)
    std::string unit_;            // the frames being written (see above)
    std::size_t unit_sent_ = 0;   // how much of unit_ is on the wire
    std::size_t unit_frames_ = 0;
    asio::steady_timer timer_;
    std::chrono::milliseconds backoff_;
    bool connected_ = false;
    bool writing_ = false;  // a wait for the socket is posted: no other write starts
    std::deque<std::string> queue_;
    std::size_t queued_bytes_ = 0;
    char eof_byte_ = 0;
    std::uint64_t generation_ = 0;  // event loop only: bumps on each (re)connect; stale callbacks ignore themselves
    bool closed_ = false;  // event loop only: close() was called (no redial)
};

// One incoming connection: read frames, hand them to the server.
// Every byte is read through stream_ (net/stream.h), on the event loop only.
// It takes a pending place at start() (Shared::slots, incoming_slots.h) and
// must be identified within options.pending_timeout or is closed. Under TLS
// the handshake comes first: the dialer must present a certificate signed by
// the peer CA and bound to a member ID (member_id_of), which identifies it;
// from then on every frame must come from that ID (its MemberInfo, and every
// raft message's `from`), or the connection is dropped. In plaintext its
// first frame identifies it: at most kMaxFirstFrameBytes, checked (version,
// cluster, kind MemberInfo) as soon as its header is in, before the rest is
// read; only then may frames up to kMaxFrameBytes come. An identified
// connection not read from within idle_timeout is closed.
class Incoming : public std::enable_shared_from_this<Incoming> {
public:
    Incoming(tcp::socket socket, std::shared_ptr<Shared> shared);
    ~Incoming();
    Incoming(const Incoming&) = delete;
    Incoming& operator=(const Incoming&) = delete;
    void start();
    // Closed to keep the bounds (Shared::shed): counted and logged there.
    void close_shed() { close_quietly(); }
    const std::string& remote() const { return remote_; }

private:
    void handshake();
    void read_more();
    void read_some();
    void wait_then(Step step, void (Incoming::*then)());
    void close_after(std::chrono::milliseconds limit);

    void on_deadline();
    void mark_spoke();
    bool identify(std::uint64_t member);
    bool check_first_frame(std::string_view pending, std::size_t body_len);
    bool handle_buffered();
    bool handle(const Frame& f);
    void close_quietly();  // not a fault: nothing logged or counted
    void drop(const std::string& why);

    tcp::socket socket_;
    asio::steady_timer timer_;  // closes a connection that is not read from in time
    Stream stream_;
    bool tls_ = false;  // accepted with a TLS context
    std::optional<std::uint64_t> cert_id_;  // the member ID the dialer's certificate proves (TLS)
    std::shared_ptr<Shared> shared_;
    IncomingSlots::Conn conn_ = 0;  // this connection's number in shared_->slots and shared_->incoming
    std::string address_;           // the dialer's IP address (its pending place is per address)
    std::string remote_;            // ... and port, as logged
    bool identified_ = false;       // out of the pending pool: frames up to kMaxFrameBytes, idle_timeout
    bool spoke_ = false;            // told the slots it sent something (pending only)
    // Bytes received and not yet handled: every complete frame in it is
    // handled after each read, so a burst of frames costs one read. It holds
    // at most one frame (<= max frame size) plus kReadChunkBytes.
    boost::beast::flat_buffer buf_;
    // Prefix + body of the incomplete frame at the front of buf_, once its
    // length is read (0 before): set by handle_buffered, read by read_more to
    // size the room.
    std::size_t next_frame_bytes_ = 0;
    std::uint64_t peer_id_ = 0;
};

}  // namespace pgfence::net::peer
