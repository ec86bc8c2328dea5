// bench_wal: write-ahead log throughput against the disk's raw fdatasync rate,
// and recovery time of a large log.
//
//   bench_wal [--dir DIR] [--seconds S] [--rounds R] [--recovery-entries N]
//   bench_wal --floor-bytes B [--dir DIR] [--seconds S]
//
// DIR (default ./bench-wal-data, created and removed) must be on the disk
// being measured — not tmpfs. For each run it prints:
//   raw      write(100 bytes) + fdatasync in a loop: the physical limit
//   batch-N  DurableStorage::persist() of N entries of 100 bytes (one fdatasync each)
//   recovery DurableStorage::open() of a log of N entries (written in batches of 1000)
// Goals: batch-1 within 1.2x of raw; batch-256 records/s >= 100x batch-1.
//
// With --floor-bytes B, the floor of one commit instead (bench-coordinator
// runs it with its leader's mean bytes per fdatasync, in its data directory):
// one B-byte entry persisted at a time through the WAL (DurableStorage:
// encode, pwrite, fdatasync; S/2 seconds), then a loopback TCP round trip
// of a B-byte message answered with 32 bytes (an append and its ack; one
// thread each side, S/2 seconds). One line:
//   floor bytes=B fdatasync_p50_us= fdatasync_mean_us= rtt_p50_us= rtt_mean_us= floor_p50_us=
// floor_p50_us = fdatasync p50 + rtt p50: a commit needs a follower's
// fdatasync after the append reached it, and its ack back.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "storage/durable_storage.h"
#include "storage/file_util.h"

namespace {

using namespace pgfence;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kRecordBytes = 100;
constexpr std::size_t kRecoveryBatch = 1000;

struct Args {
    std::string dir = "./bench-wal-data";
    double seconds = 10.0;  // total per kind, split over `rounds`
    int rounds = 10;
    std::uint64_t recovery_entries = 1000000;
    std::size_t floor_bytes = 0;  // > 0: the floor mode
};

double since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Appends 100 bytes and fdatasyncs, as fast as it can, for `seconds`.
double raw_fdatasync_per_s(const std::string& dir, double seconds) {
    const std::string path = dir + "/raw";
    storage::Fd fd = storage::open_file(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND);
    const std::string bytes(kRecordBytes, 'r');
    std::uint64_t n = 0;
    const auto start = Clock::now();
    while (since(start) < seconds) {
        storage::write_all(fd.get(), bytes, path);
        storage::sync_data(fd.get(), path);
        ++n;
    }
    return static_cast<double>(n) / since(start);
}

std::vector<raft::Entry> batch_at(raft::Index first, std::size_t n) {
    std::vector<raft::Entry> out;
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back({1, first + i, raft::EntryType::kNormal, std::string(kRecordBytes, 'e')});
    }
    return out;
}

// Returns batches per second of persist() with `batch` entries each.
double persist_batches_per_s(const std::string& dir, std::size_t batch, double seconds) {
    auto s = storage::DurableStorage::open(dir, 1, 1);
    std::uint64_t batches = 0;
    raft::Index next = 1;
    const auto start = Clock::now();
    while (since(start) < seconds) {
        s->persist(nullptr, nullptr, batch_at(next, batch));
        next += batch;
        ++batches;
    }
    return static_cast<double>(batches) / since(start);
}

void recovery(const std::string& dir, std::uint64_t entries) {
    {
        auto s = storage::DurableStorage::open(dir, 1, 1);
        for (raft::Index i = 1; i <= entries; i += kRecoveryBatch) {
            s->persist(nullptr, nullptr, batch_at(i, kRecoveryBatch));
        }
    }
    const auto start = Clock::now();
    auto s = storage::DurableStorage::open(dir, 1, 1);
    const double open_s = since(start);
    const auto read_start = Clock::now();
    const auto last = s->entries(s->last_index(), s->last_index() + 1);
    std::printf(
        "recovery  open of a %llu-entry log (%llu bytes of entry data): %.3f s; "
        "then reading one entry: %.1f us\n",
        static_cast<unsigned long long>(s->last_index()),
        static_cast<unsigned long long>(entries * kRecordBytes), open_s, since(read_start) * 1e6);
    if (last.size() != 1 || last[0].index != entries) std::printf("recovery  WRONG last entry\n");
}

// p50 and mean of `us`, in microseconds.
struct Spread {
    double p50 = 0;
    double mean = 0;
};
Spread spread(std::vector<double> us) {
    if (us.empty()) return {};
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double v : us) sum += v;
    return {us[us.size() / 2], sum / static_cast<double>(us.size())};
}

// One entry of `bytes` bytes persisted at a time through the WAL
// (DurableStorage::persist: one record, one pwrite, one fdatasync), each
// timed: the members' own write path, the fastest this disk was seen to make
// a small write durable (a plain append + fdatasync, `raw` above, is slower
// here: it changes the file's size each time; the WAL writes into
// preallocated, zeroed room, wal.h "Preallocation").
Spread fdatasync_latency(const std::string& dir, std::size_t bytes, double seconds) {
    auto s = storage::DurableStorage::open(dir + "/floor-wal", 1, 1);
    std::vector<raft::Entry> one{{1, 0, raft::EntryType::kNormal, std::string(bytes, 'e')}};
    std::vector<double> us;
    const auto start = Clock::now();
    while (since(start) < seconds) {
        one[0].index = s->last_index() + 1;
        const auto t = Clock::now();
        s->persist(nullptr, nullptr, one);
        us.push_back(since(t) * 1e6);
    }
    return spread(std::move(us));
}

void io_all(int fd, char* p, std::size_t n, bool write) {
    while (n > 0) {
        const ssize_t r = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
        if (r <= 0) {
            std::perror("bench_wal: loopback");
            std::exit(1);
        }
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

// A `bytes` message over loopback TCP, answered with 32 bytes, timed.
Spread loopback_rtt(std::size_t bytes, double seconds) {
    const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 1) != 0 ||
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        std::perror("bench_wal: loopback listen");
        std::exit(1);
    }
    constexpr std::size_t kAck = 32;
    std::thread server([lfd, bytes] {
        const int fd = ::accept(lfd, nullptr, nullptr);
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::string in(bytes, '\0');
        std::string ack(kAck, 'a');
        for (;;) {
            char first = 0;
            if (::recv(fd, &first, 1, 0) <= 0) break;  // the client closed: done
            io_all(fd, in.data() + 1, bytes - 1, false);
            io_all(fd, ack.data(), kAck, true);
        }
        ::close(fd);
    });
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        std::perror("bench_wal: loopback connect");
        std::exit(1);
    }
    std::string out(bytes, 'm');
    std::string ack(kAck, '\0');
    std::vector<double> us;
    const auto start = Clock::now();
    while (since(start) < seconds) {
        const auto t = Clock::now();
        io_all(fd, out.data(), bytes, true);
        io_all(fd, ack.data(), kAck, false);
        us.push_back(since(t) * 1e6);
    }
    ::close(fd);
    server.join();
    ::close(lfd);
    return spread(std::move(us));
}

int floor_mode(const Args& a) {
    const Spread sync = fdatasync_latency(a.dir, a.floor_bytes, a.seconds / 2);
    const Spread rtt = loopback_rtt(a.floor_bytes, a.seconds / 2);
    std::printf(
        "floor bytes=%zu fdatasync_p50_us=%.1f fdatasync_mean_us=%.1f rtt_p50_us=%.1f rtt_mean_us=%.1f "
        "floor_p50_us=%.1f\n",
        a.floor_bytes, sync.p50, sync.mean, rtt.p50, rtt.mean, sync.p50 + rtt.p50);
    return 0;
}

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--dir")
            a.dir = argv[i + 1];
        else if (k == "--seconds")
            a.seconds = std::atof(argv[i + 1]);
        else if (k == "--rounds")
            a.rounds = std::max(1, std::atoi(argv[i + 1]));
        else if (k == "--floor-bytes") {
            char* end = nullptr;
            const unsigned long long n = std::strtoull(argv[i + 1], &end, 10);
            if (n == 0 || end == argv[i + 1] || *end != '\0') {
                std::fprintf(stderr, "bench_wal: --floor-bytes %s: want a byte count >= 1\n", argv[i + 1]);
                std::exit(2);
            }
            a.floor_bytes = n;
        } else if (k == "--recovery-entries")
            a.recovery_entries = std::strtoull(argv[i + 1], nullptr, 10);
        else {
            std::fprintf(stderr, "bench_wal: unknown option %s\n", k.c_str());
            std::exit(2);
        }
    }
    return a;
}

}  // namespace

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    const Args a = parse(argc, argv);
    std::filesystem::remove_all(a.dir);
    std::filesystem::create_directories(a.dir);
    if (a.floor_bytes > 0) {
        const int rc = floor_mode(a);
        std::filesystem::remove_all(a.dir);
        return rc;
    }
    // The disk is shared and noisy: interleave short runs of every kind and
    // report medians, so raw and WAL rates are measured under the same load.
    const std::vector<std::size_t> batches = {1, 16, 256};
    std::vector<double> raw;
    std::vector<std::vector<double>> rates(batches.size());
    const double slice = a.seconds / a.rounds;
    for (int round = 0; round < a.rounds; ++round) {
        raw.push_back(raw_fdatasync_per_s(a.dir, slice));
        for (std::size_t b = 0; b < batches.size(); ++b) {
            const std::string dir =
                a.dir + "/b" + std::to_string(batches[b]) + "-" + std::to_string(round);
            rates[b].push_back(persist_batches_per_s(dir, batches[b], slice));
            std::filesystem::remove_all(dir);
        }
    }
    std::printf("medians of %d interleaved rounds of %.2f s each\n", a.rounds, slice);
    std::printf("raw       write %zu B + fdatasync: %10.0f ops/s\n", kRecordBytes, median(raw));
    std::vector<double> rps(batches.size());
    for (std::size_t b = 0; b < batches.size(); ++b) {
        const double bps = median(rates[b]);
        rps[b] = bps * static_cast<double>(batches[b]);
        std::printf("batch-%-3zu %10.0f batches/s %10.0f records/s %8.2f MB/s (entry data)\n",
                    batches[b], bps, rps[b], rps[b] * kRecordBytes / 1e6);
    }
    std::printf(
        "ratio     raw/batch-1 = %.2f (goal <= 1.2)   batch-256/batch-1 records = %.0fx (goal >= "
        "100)\n",
        median(raw) / rps[0], rps[2] / rps[0]);
    if (a.recovery_entries > 0) recovery(a.dir + "/recovery", a.recovery_entries);
    std::filesystem::remove_all(a.dir);
    return 0;
}
