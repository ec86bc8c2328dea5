// bench_wal: write-ahead log throughput against the disk's raw fdatasync rate,
// and recovery time of a large log.
//
//   bench_wal [--dir DIR] [--seconds S] [--rounds R] [--recovery-entries N]
//
// DIR (default ./bench-wal-data, created and removed) must be on the disk
// being measured — not tmpfs. For each run it prints:
//   raw      write(100 bytes) + fdatasync in a loop: the physical limit
//   batch-N  DurableStorage::persist() of N entries of 100 bytes (one fdatasync each)
//   recovery DurableStorage::open() of a log of N entries (written in batches of 1000)
// Goals: batch-1 within 1.2x of raw; batch-256 records/s >= 100x batch-1.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
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
        else if (k == "--recovery-entries")
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
