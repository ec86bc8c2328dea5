// Helpers for storage tests: a temporary directory under /tmp (removed at the
// end), raw file surgery (truncate, flip a bit) and entry builders.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "raft/types.h"
#include "storage/durable_storage.h"

namespace pgfence::storage::test {

class TempDir {
  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

  private:
    std::string path_;
};

std::string read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);
void truncate_to(const std::string& path, std::uint64_t size);
void flip_bit(const std::string& path, std::uint64_t offset, int bit);
std::uint64_t size_of(const std::string& path);
std::vector<std::string> segment_files(const std::string& dir);  // full paths, by seq

raft::Entry make_entry(raft::Index index, raft::Term term, std::size_t data_bytes = 100);
std::vector<raft::Entry> make_entries(raft::Index first, std::size_t count, raft::Term term,
                                      std::size_t data_bytes = 100);

constexpr std::uint64_t kCluster = 77;
constexpr raft::NodeId kMember = 3;

std::unique_ptr<DurableStorage> open_storage(const std::string& dir, StorageOptions options = {});

// Every stored entry, read back through the Storage interface.
std::vector<raft::Entry> all_entries(const raft::Storage& s);

}  // namespace pgfence::storage::test
