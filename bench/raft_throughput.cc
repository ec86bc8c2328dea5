// bench_raft_throughput: committed entries per second of the Raft core alone.
//
// Three members in one process, no faults, no disk (MemoryStorage), messages
// delivered in memory. Each loop iteration proposes a batch on the leader,
// runs one Ready cycle per member (persist, queue messages, apply, advance)
// and delivers the messages queued so far, so replication is pipelined as
// with a real network. Measures CPU cost of the core, not I/O.
//
// Usage: bench_raft_throughput [seconds=3] [batch=64] [payload_bytes=64]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "raft/raft.h"

namespace {

using namespace pgfence::raft;

struct Node {
    MemoryStorage storage;
    std::unique_ptr<Raft> raft;
    std::uint64_t applied_normal = 0;
};

void cycle(Node& n, std::deque<Message>& net) {
    if (!n.raft->has_ready()) return;
    Ready rd = n.raft->ready();
    for (Message& m : rd.messages_now) net.push_back(std::move(m));
    if (rd.snapshot) n.storage.apply_snapshot(*rd.snapshot);
    if (!rd.entries.empty()) n.storage.append(rd.entries);
    if (rd.hard_state) n.storage.set_hard_state(*rd.hard_state);
    for (Message& m : rd.messages) net.push_back(std::move(m));
    for (const Entry& e : rd.committed) n.applied_normal += e.type == EntryType::kNormal ? 1 : 0;
    n.raft->advance(rd);
}

long arg(int argc, char** argv, int i, long dflt) {
    return argc > i ? std::strtol(argv[i], nullptr, 10) : dflt;
}

}  // namespace

int main(int argc, char** argv) {
    const double seconds = static_cast<double>(arg(argc, argv, 1, 3));
    const long batch = arg(argc, argv, 2, 64);
    const std::string payload(static_cast<std::size_t>(arg(argc, argv, 3, 64)), 'p');

    std::vector<Node> nodes(3);
    for (NodeId id = 1; id <= 3; ++id) {
        Config c;
        c.id = id;
        c.members = {1, 2, 3};
        c.cluster_id = 7;
        c.random_seed = 42;
        nodes[id - 1].raft = std::make_unique<Raft>(c, nodes[id - 1].storage);
    }
    std::deque<Message> net;
    auto pump = [&] {
        for (Node& n : nodes) cycle(n, net);
        for (std::size_t k = net.size(); k > 0 && !net.empty(); --k) {
            Message m = std::move(net.front());
            net.pop_front();
            nodes[m.to - 1].raft->step(m);
        }
    };
    while (nodes[0].raft->role() != Role::kLeader) {  // elect member 1
        nodes[0].raft->tick();
        pump();
    }
    Raft& leader = *nodes[0].raft;

    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    std::uint64_t iterations = 0;
    std::uint64_t refused = 0;
    double elapsed = 0;
    while (elapsed < seconds) {
        for (long i = 0; i < batch; ++i) {
            if (leader.propose(payload).error != ProposeError::kNone) ++refused;
        }
        pump();
        if (++iterations % 64 == 0) {
            for (Node& n : nodes) n.raft->tick();
            if (leader.role() != Role::kLeader) {
                std::fprintf(stderr, "leader lost leadership: benchmark invalid\n");
                return 1;
            }
            // Keep memory flat: snapshot/compact applied state now and then.
            for (Node& n : nodes) {
                const Status st = n.raft->status();
                if (st.applied > st.snapshot_index + 100000) {
                    n.storage.compact(Snapshot{SnapshotMeta{st.applied, st.term, n.raft->configuration_at(st.applied)}, ""});
                    n.raft->compact(st.applied, "", 1000);
                }
            }
            elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        }
    }
    const std::uint64_t committed = nodes[0].applied_normal;
    std::printf("raft core, 3 members in-process, batch %ld, payload %zu B, %.2f s\n", batch,
                payload.size(), elapsed);
    std::printf(
        "committed entries: %llu  (%.0f entries/s, %.1f MB/s payload)  refused: %llu\n",
        static_cast<unsigned long long>(committed), static_cast<double>(committed) / elapsed,
        static_cast<double>(committed) * static_cast<double>(payload.size()) / elapsed / 1e6,
        static_cast<unsigned long long>(refused));
    return 0;
}
