#include "shell_cluster.h"

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <exception>
#include <future>
#include <optional>
#include <variant>

#include "client/client.h"
#include "log/log.h"
#include "net/frame.h"
#include "net/raft_codec.h"
#include "server/durable_log.h"
#include "server/member.h"
#include "server/options.h"

namespace pgfence::server::test {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using std::chrono::milliseconds;

constexpr std::uint64_t kClusterId = 0x5e11'0dde'0001ull;
constexpr std::size_t kViolationsKept = 20;

const asio::ip::address& loopback() {
    static const asio::ip::address a = asio::ip::make_address("127.0.0.1");
    return a;
}

// ---- the member's disk, recorded ------------------------------------------------

// Counts the call as running for its lifetime; one that starts while another
// runs is an overlap.
class WriteTurn {
  public:
    explicit WriteTurn(DiskRecord& r) : r_(r) {
        if (r_.writing.fetch_add(1) != 0) r_.overlaps.fetch_add(1);
    }
    ~WriteTurn() { r_.writing.fetch_sub(1); }
    WriteTurn(const WriteTurn&) = delete;
    WriteTurn& operator=(const WriteTurn&) = delete;

  private:
    DiskRecord& r_;
};

// MemoryLog with a sleep inside every write, recording into a DiskRecord.
class RecordingLog final : public DurableLog {
  public:
    RecordingLog(std::shared_ptr<DiskRecord> record, Delays delays)
        : record_(std::move(record)), delays_(delays) {}

    const raft::Storage& storage() const override { return inner_.storage(); }

    void persist(const std::optional<raft::HardState>& hard_state,
                 const std::optional<raft::Snapshot>& snapshot,
                 const std::vector<raft::Entry>& entries) override {
        const WriteTurn turn(*record_);
        if (record_->writing_file.load() > 0) record_->persists_beside_file.fetch_add(1);
        const bool after_save = record_->saved_since_persist.exchange(false);
        if (std::this_thread::get_id() == record_->loop_thread.load()) {
            if (!entries.empty()) record_->inline_persists_with_entries.fetch_add(1);
        } else {
            record_->writer_persists.fetch_add(1);
            if (after_save && !record_->seen_leading.load()) record_->writes_behind_save.fetch_add(1);
        }
        std::this_thread::sleep_for(delays_.persist);
        inner_.persist(hard_state, snapshot, entries);
        const std::lock_guard<std::mutex> guard(record_->mutex);
        if (snapshot)
            record_->durable_index = std::max(record_->durable_index, snapshot->meta.index);
        if (!entries.empty())
            record_->durable_index = std::max(record_->durable_index, entries.back().index);
        if (hard_state) {
            record_->durable_term = std::max(record_->durable_term, hard_state->term);
            record_->durable_votes.emplace(hard_state->term, hard_state->vote);
        }
    }

    // The file: beside persists (no WriteTurn), as long as a save.
    bool write_snapshot_file(const raft::Snapshot& snapshot) override {
        record_->writing_file.fetch_add(1);
        std::this_thread::sleep_for(delays_.save);
        const bool wrote = inner_.write_snapshot_file(snapshot);
        record_->writing_file.fetch_sub(1);
        return wrote;
    }
    // The adoption: one log write at a time, as long as a save too (so that
    // a follower's persists queue behind it).
    void adopt_snapshot(const std::shared_ptr<const raft::Snapshot>& snapshot) override {
        const WriteTurn turn(*record_);
        std::this_thread::sleep_for(delays_.save);
        inner_.adopt_snapshot(snapshot);
        record_->saves.fetch_add(1);
        record_->saved_since_persist.store(true);
    }
    void persist_commit(const raft::HardState& hard_state) override { inner_.persist_commit(hard_state); }

  private:
    std::shared_ptr<DiskRecord> record_;
    Delays delays_;
    MemoryLog inner_;
};

bool is_pre_vote(const raft::Message& m) {
    if (const auto* r = std::get_if<raft::VoteRequest>(&m.body)) return r->pre_vote;
    if (const auto* r = std::get_if<raft::VoteResponse>(&m.body)) return r->pre_vote;
    return false;
}

std::string describe(const raft::Message& m) {
    static constexpr std::array<const char*, std::variant_size_v<raft::MessageBody>> kNames = {
        "VoteRequest",     "VoteResponse", "AppendRequest",     "AppendResponse",
        "SnapshotRequest", "Heartbeat",    "HeartbeatResponse", "TimeoutNow",
        "SnapshotAck",     "Removed"};
    return std::string(kNames[m.body.index()]) + " from " + std::to_string(m.from) + " to " +
           std::to_string(m.to);
}

// ---- the proxy --------------------------------------------------------------------

// One proxied peer connection: bytes from the dialing member are split into
// frames and each Raft frame is checked before the bytes are passed on; the
// other direction is copied unchanged. Runs on the proxy's thread.
class Pipe : public std::enable_shared_from_this<Pipe> {
  public:
    Pipe(tcp::socket from, ArrivalCheck& check)
        : from_(std::move(from)), to_(from_.get_executor()), check_(check) {}

    void connect(std::uint16_t port) {
        to_.async_connect(tcp::endpoint(loopback(), port),
                          [self = shared_from_this()](const error_code& ec) {
                              if (ec) return self->close();
                              self->forward_checked();
                              self->forward_back();
                          });
    }

  private:
    void forward_checked() {
        from_.async_read_some(asio::buffer(up_),
                              [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                  if (ec) return self->close();
                                  self->inspect(n);
                                  asio::async_write(self->to_, asio::buffer(self->up_.data(), n),
                                                    [self](const error_code& wec, std::size_t) {
                                                        if (wec) return self->close();
                                                        self->forward_checked();
                                                    });
                              });
    }

    void forward_back() {
        to_.async_read_some(asio::buffer(down_),
                            [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                if (ec) return self->close();
                                asio::async_write(self->from_, asio::buffer(self->down_.data(), n),
                                                  [self](const error_code& wec, std::size_t) {
                                                      if (wec) return self->close();
                                                      self->forward_back();
                                                  });
                            });
    }

    // Appends `n` read bytes and checks every frame now complete.
    void inspect(std::size_t n) {
        if (broken_) return;
        pending_.append(up_.data(), n);
        std::size_t at = 0;
        while (pending_.size() - at >= net::kLengthPrefixBytes) {
            const std::string_view rest = std::string_view(pending_).substr(at);
            auto length = net::decode_frame_length(rest.substr(0, net::kLengthPrefixBytes));
            if (const auto* err = std::get_if<net::FrameError>(&length))
                return fail("a frame length: " + err->message);
            const std::size_t body_bytes = std::get<std::size_t>(length);
            if (rest.size() < net::kLengthPrefixBytes + body_bytes) break;
            check_frame(rest.substr(net::kLengthPrefixBytes, body_bytes));
            at += net::kLengthPrefixBytes + body_bytes;
        }
        pending_.erase(0, at);
    }

    void check_frame(std::string_view body) {
        auto frame = net::decode_frame_body(body);
        if (const auto* err = std::get_if<net::FrameError>(&frame))
            return fail("a frame: " + err->message);
        const net::Frame& f = std::get<net::Frame>(frame);
        if (f.kind != net::FrameKind::kRaft) return;
        auto message = net::decode_message(f.payload, f.cluster_id);
        if (const auto* err = std::get_if<net::CodecError>(&message))
            return fail("a message: " + err->message);
        check_.on_arrival(std::get<raft::Message>(message));
    }

    void fail(const std::string& what) {
        broken_ = true;
        check_.violation("the proxy could not decode " + what);
    }

    void close() {
        error_code ignored;
        from_.close(ignored);
        to_.close(ignored);
    }

    tcp::socket from_;
    tcp::socket to_;
    ArrivalCheck& check_;
    std::array<char, 64 * 1024> up_{};
    std::array<char, 64 * 1024> down_{};
    std::string pending_;  // bytes of frames not yet complete
    bool broken_ = false;  // a frame did not decode: the rest is passed on unchecked
};

// Listening ports that forward to members' peer ports, on a thread of their own.
class Proxy {
  public:
    explicit Proxy(ArrivalCheck& check) : check_(check) {}
    ~Proxy() { stop(); }
    Proxy(const Proxy&) = delete;
    Proxy& operator=(const Proxy&) = delete;

    // A new loopback port whose connections go on to `target_port`. Before start().
    std::uint16_t route_to(std::uint16_t target_port) {
        auto acceptor = std::make_shared<tcp::acceptor>(io_, tcp::endpoint(loopback(), 0));
        accept(acceptor, target_port);
        return acceptor->local_endpoint().port();
    }
    void start() {
        thread_ = std::thread([this] { io_.run(); });
    }
    void stop() {
        io_.stop();
        if (thread_.joinable()) thread_.join();
    }

  private:
    void accept(const std::shared_ptr<tcp::acceptor>& acceptor, std::uint16_t target_port) {
        acceptor->async_accept(
            [this, acceptor, target_port](const error_code& ec, tcp::socket socket) {
                if (ec) return;
                std::make_shared<Pipe>(std::move(socket), check_)->connect(target_port);
                accept(acceptor, target_port);
            });
    }

    ArrivalCheck& check_;
    asio::io_context io_;
    std::thread thread_;
};

// ---- the members --------------------------------------------------------------------

// A loopback port the kernel picked, kept bound (not listening) with
// SO_REUSEADDR so nobody else takes it before the member listens on it.
class PortHold {
  public:
    explicit PortHold(asio::io_context& io) : socket_(io) {
        socket_.open(tcp::v4());
        socket_.set_option(tcp::acceptor::reuse_address(true));
        socket_.bind(tcp::endpoint(loopback(), 0));
    }
    std::uint16_t port() const { return socket_.local_endpoint().port(); }

  private:
    tcp::acceptor socket_;
};

// One member and its loop thread.
struct Node {
    raft::NodeId id = 0;
    std::shared_ptr<DiskRecord> record = std::make_shared<DiskRecord>();
    asio::io_context io;
    std::unique_ptr<Member> member;
    std::thread thread;
    client::Endpoint http;
    std::string loop_error;  // what the loop threw; read after join
};

Options member_options(raft::NodeId id, std::vector<PeerSpec> peers, const client::Endpoint& http) {
    Options o;
    o.id = id;
    o.peers = std::move(peers);
    o.client_addr = http.to_string();
    o.data_dir = "(memory)";
    o.heartbeat_ms = 25;
    o.election_ms = 250;
    o.snapshot_every = 16;
    o.snapshot_keep = 8;
    o.cluster_id = kClusterId;
    return o;
}

// Starts the member on its loop thread (as fence-coordinator does: the thread
// that starts it runs its io_context). Error message or "".
std::string start_member(Node& n) {
    std::promise<std::string> started;
    auto result = started.get_future();
    n.thread = std::thread([&n, started = std::move(started)]() mutable {
        n.record->loop_thread.store(std::this_thread::get_id());
        const std::string err = n.member->start();
        started.set_value(err);
        if (!err.empty()) return;
        try {
            n.io.run();
        } catch (const std::exception& e) {
            n.loop_error = e.what();
        }
    });
    const std::string err = result.get();
    if (!err.empty()) n.thread.join();
    return err;
}

}  // namespace

// ---- ArrivalCheck ----------------------------------------------------------------------

ArrivalCheck::ArrivalCheck(std::map<raft::NodeId, std::shared_ptr<DiskRecord>> records)
    : records_(std::move(records)) {}

void ArrivalCheck::on_arrival(const raft::Message& m) {
    if (std::holds_alternative<raft::AppendRequest>(m.body) ||
        std::holds_alternative<raft::Heartbeat>(m.body)) {
        const std::lock_guard<std::mutex> guard(mutex_);
        led_.insert(m.from);  // only a leader sends them
        if (auto it = records_.find(m.from); it != records_.end()) it->second->seen_leading.store(true);
    }
    if (is_pre_vote(m)) return;
    auto it = records_.find(m.from);
    if (it == records_.end())
        return violation("a message from unknown member " + std::to_string(m.from));
    const DiskRecord& d = *it->second;
    const std::lock_guard<std::mutex> guard(d.mutex);
    messages_checked.fetch_add(1);
    if (m.term > d.durable_term) {
        violation(describe(m) + " in term " + std::to_string(m.term) +
                  " arrived while the sender's durable term was " + std::to_string(d.durable_term));
    }
    if (const auto* r = std::get_if<raft::AppendResponse>(&m.body); r != nullptr && r->success) {
        acks_checked.fetch_add(1);
        if (r->match_index > d.durable_index) {
            violation(describe(m) + " acknowledging index " + std::to_string(r->match_index) +
                      " arrived while the sender's log was durable up to " +
                      std::to_string(d.durable_index));
        }
    }
    if (const auto* r = std::get_if<raft::VoteResponse>(&m.body); r != nullptr && r->granted) {
        votes_checked.fetch_add(1);
        if (d.durable_votes.count({m.term, m.to}) == 0) {
            violation(describe(m) + " granting term " + std::to_string(m.term) +
                      " arrived before the sender wrote that vote");
        }
    }
    if (std::holds_alternative<raft::VoteRequest>(m.body)) {
        vote_requests_checked.fetch_add(1);
        if (d.durable_votes.count({m.term, m.from}) == 0) {
            violation(describe(m) + " for term " + std::to_string(m.term) +
                      " arrived before the candidate wrote its own vote");
        }
    }
}

void ArrivalCheck::violation(std::string what) {
    const std::lock_guard<std::mutex> guard(mutex_);
    if (violations_.size() < kViolationsKept) violations_.push_back(std::move(what));
    ++violation_count_;
}

std::size_t ArrivalCheck::violation_count() const {
    const std::lock_guard<std::mutex> guard(mutex_);
    return violation_count_;
}

std::vector<std::string> ArrivalCheck::violations() const {
    const std::lock_guard<std::mutex> guard(mutex_);
    return violations_;
}

bool ArrivalCheck::led(raft::NodeId id) const {
    const std::lock_guard<std::mutex> guard(mutex_);
    return led_.count(id) != 0;
}

// ---- Cluster -------------------------------------------------------------------------

struct Cluster::Impl {
    asio::io_context holds_io;  // owns the PortHolds' sockets
    std::vector<std::unique_ptr<PortHold>> holds;
    std::array<Node, kMembers> nodes;
    std::unique_ptr<ArrivalCheck> check;
    std::unique_ptr<Proxy> proxy;
    std::string start_error;

    void start(Delays delays, const std::function<void(Options&)>& tweak,
               const std::function<void(Options&)>& after_checks);
};

Cluster::Cluster(Delays delays, std::function<void(Options&)> tweak, std::function<void(Options&)> after_checks) : impl_(std::make_unique<Impl>()) {
    // Errors only: each start and stop logs peer_disconnected warnings (a
    // proxy accepts a member's dial before the member behind it listens, then
    // drops it; the teardown closes every connection).
    log::set_log_level(log::LogLevel::kError);
    std::map<raft::NodeId, std::shared_ptr<DiskRecord>> records;
    for (int i = 0; i < kMembers; ++i) {
        impl_->nodes[i].id = static_cast<raft::NodeId>(i + 1);
        records[impl_->nodes[i].id] = impl_->nodes[i].record;
    }
    impl_->check = std::make_unique<ArrivalCheck>(std::move(records));
    impl_->proxy = std::make_unique<Proxy>(*impl_->check);
    impl_->start(delays, tweak, after_checks);
}

Cluster::~Cluster() {
    stop();
}

void Cluster::Impl::start(Delays delays, const std::function<void(Options&)>& tweak,
                          const std::function<void(Options&)>& after_checks) {
    std::array<std::uint16_t, kMembers> peer_ports{}, proxied{};
    for (int i = 0; i < kMembers; ++i) {
        holds.push_back(std::make_unique<PortHold>(holds_io));
        peer_ports[i] = holds.back()->port();
        holds.push_back(std::make_unique<PortHold>(holds_io));
        nodes[i].http = client::Endpoint{"127.0.0.1", holds.back()->port()};
        proxied[i] = proxy->route_to(peer_ports[i]);
    }
    proxy->start();
    for (int i = 0; i < kMembers; ++i) {
        Node& n = nodes[i];
        std::vector<PeerSpec> peers;
        for (int j = 0; j < kMembers; ++j) {
            peers.push_back(
                PeerSpec{nodes[j].id, "127.0.0.1", i == j ? peer_ports[j] : proxied[j]});
        }
        Options o = member_options(n.id, std::move(peers), n.http);
        if (tweak) tweak(o);
        StartPlan plan;
        if (auto err = validate_options(o); !err.empty() || !(err = plan_start(o, StartInputs{}, plan)).empty()) {
            start_error = err;
            return;
        }
        if (after_checks) after_checks(o);
        // Each member dials the others through the proxy: their addresses
        // differ from member to member, so they stay out of the shared first
        // configuration (as in a cluster bootstrapped without them).
        plan.identity.first_config = raft::Configuration::of_voters(plan.identity.first_config->voters());
        n.member = std::make_unique<Member>(n.io, std::move(o), std::move(plan),
                                            std::make_unique<RecordingLog>(n.record, delays));
        if (auto err = start_member(n); !err.empty()) {
            start_error = "member " + std::to_string(n.id) + ": " + err;
            return;
        }
    }
}

std::string Cluster::start_error() const {
    return impl_->start_error;
}
raft::NodeId Cluster::id(int i) const {
    return impl_->nodes.at(i).id;
}
const DiskRecord& Cluster::record(int i) const {
    return *impl_->nodes.at(i).record;
}
const ArrivalCheck& Cluster::check() const {
    return *impl_->check;
}

std::vector<client::Endpoint> Cluster::endpoints() const {
    std::vector<client::Endpoint> out;
    for (const Node& n : impl_->nodes) out.push_back(n.http);
    return out;
}

void Cluster::stop() {
    for (Node& n : impl_->nodes) n.io.stop();
    for (Node& n : impl_->nodes) {
        if (n.thread.joinable()) n.thread.join();
    }
    for (Node& n : impl_->nodes) n.member.reset();
    impl_->proxy->stop();
}

std::string Cluster::loop_errors() const {
    std::string out;
    for (const Node& n : impl_->nodes) {
        if (!n.loop_error.empty()) out += " member " + std::to_string(n.id) + ": " + n.loop_error;
    }
    return out;
}

// ---- Load ----------------------------------------------------------------------------

Load::Load(const std::vector<client::Endpoint>& endpoints) {
    for (int t = 0; t < kClients; ++t) {
        threads_.emplace_back(
            [this, endpoints, t] { run(endpoints, "shell-order-" + std::to_string(t)); });
    }
}

Load::~Load() {
    stop();
}

void Load::stop() {
    stopping_.store(true);
    for (auto& t : threads_) {
        if (t.joinable()) t.join();
    }
}

void Load::run(const std::vector<client::Endpoint>& endpoints, const std::string& key) {
    client::Options options;
    options.endpoints = endpoints;
    options.timeout = milliseconds(5000);
    client::Client c(options);
    while (!stopping_.load()) {
        auto lease =
            c.acquire(client::AcquireRequest{key, milliseconds(1000), milliseconds(0), ""});
        if (!lease) {
            std::this_thread::sleep_for(milliseconds(5));  // no busy loop while the cluster is busy
            continue;
        }
        acquires_.fetch_add(1);
        if (!c.release(key, lease.value().token)) std::this_thread::sleep_for(milliseconds(5));
    }
}

}  // namespace pgfence::server::test
