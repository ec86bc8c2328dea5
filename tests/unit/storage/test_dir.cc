#include "test_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "storage/file_util.h"
#include "storage/wal.h"

namespace pgfence::storage::test {

TempDir::TempDir() {
    std::string tmpl = "/tmp/pgfence-storage-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl + "/data";  // a not-yet-existing subdirectory: open() creates it
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(path_).parent_path(), ec);
}

std::string read_bytes(const std::string& path) {
    return read_whole_file(path, 1ull << 32);
}

void write_bytes(const std::string& path, const std::string& bytes) {
    Fd fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
    write_all(fd.get(), bytes, path);
}

void truncate_to(const std::string& path, std::uint64_t size) {
    std::filesystem::resize_file(path, size);
}

void flip_bit(const std::string& path, std::uint64_t offset, int bit) {
    std::string bytes = read_bytes(path);
    bytes.at(offset) = static_cast<char>(bytes.at(offset) ^ (1 << bit));
    write_bytes(path, bytes);
}

std::uint64_t size_of(const std::string& path) {
    return std::filesystem::file_size(path);
}

std::vector<std::string> segment_files(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        std::uint64_t seq = 0;
        if (parse_segment_file_name(e.path().filename().string(), seq))
            out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

raft::Entry make_entry(raft::Index index, raft::Term term, std::size_t data_bytes) {
    std::string data(data_bytes, '\0');
    for (std::size_t i = 0; i < data_bytes; ++i) {
        data[i] = static_cast<char>('a' + (index * 7 + i) % 26);
    }
    return {term, index, raft::EntryType::kNormal, data};
}

std::vector<raft::Entry> make_entries(raft::Index first, std::size_t count, raft::Term term,
                                      std::size_t data_bytes) {
    std::vector<raft::Entry> out;
    for (std::size_t i = 0; i < count; ++i) out.push_back(make_entry(first + i, term, data_bytes));
    return out;
}

std::unique_ptr<DurableStorage> open_storage(const std::string& dir, StorageOptions options) {
    return DurableStorage::open(dir, kCluster, kMember, options);
}

std::vector<raft::Entry> all_entries(const raft::Storage& s) {
    return s.entries(s.first_index(), s.last_index() + 1);
}

}  // namespace pgfence::storage::test
