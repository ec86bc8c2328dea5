// Thin POSIX file helpers for the storage module. Every failure throws
// StorageError with the path, the operation and errno's text.
//
// Durability rules used throughout coordinator/storage/:
//  - data is durable after fdatasync() of its file returns;
//  - a created, renamed or removed name is durable after fsync() of the
//    directory returns;
//  - a failed fsync/fdatasync is never retried: the kernel may already have
//    dropped the dirty pages, so the caller must stop and restart the member.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace pgfence::storage {

// Any storage failure: I/O errors, corruption, refused directories. The message
// names the file (and byte offset where there is one) and says what to do.
class StorageError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Owns one file descriptor.
class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd();
    Fd(Fd&& other) noexcept : fd_(other.release()) {}
    Fd& operator=(Fd&& other) noexcept;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    int get() const { return fd_; }
    int release();

  private:
    int fd_ = -1;
};

std::string join_path(const std::string& dir, const std::string& name);

// open(2) that throws. `flags` as for open(2); files are created 0600.
Fd open_file(const std::string& path, int flags);

// Appends/writes all of `bytes` at the current offset (retries short writes).
void write_all(int fd, std::string_view bytes, const std::string& path);

// Writes all of `bytes` at `offset` (pwrite; retries short writes).
void pwrite_all(int fd, std::string_view bytes, std::uint64_t offset, const std::string& path);

// Reads exactly n bytes at offset; throws if the file is shorter.
std::string pread_exact(int fd, std::uint64_t offset, std::size_t n, const std::string& path);

// Reads a whole file, refusing files larger than max_bytes.
std::string read_whole_file(const std::string& path, std::uint64_t max_bytes);

std::uint64_t file_size(int fd, const std::string& path);
void truncate_file(int fd, std::uint64_t size, const std::string& path);
void sync_data(int fd, const std::string& path);  // fdatasync
void sync_dir(const std::string& dir);            // fsync of the directory itself

// Writes `bytes` to dir/name.tmp, fdatasyncs it, renames it over dir/name and
// fsyncs dir: after return the new content is durable, and a crash at any
// point leaves either the old file or the new one (plus maybe a stale .tmp).
void write_file_atomically(const std::string& dir, const std::string& name, std::string_view bytes);

// Sets `broken` if the scope is left by an exception: guards a write path
// whose failure may leave memory and files disagreeing (see Wal, DurableStorage).
class BreakOnThrow {
  public:
    explicit BreakOnThrow(bool& broken);
    ~BreakOnThrow();
    BreakOnThrow(const BreakOnThrow&) = delete;
    BreakOnThrow& operator=(const BreakOnThrow&) = delete;

  private:
    bool& broken_;
    int exceptions_;
};

bool path_exists(const std::string& path);
void remove_file(const std::string& path);
void make_dir(const std::string& dir);                      // creates dir (one level) if missing
std::vector<std::string> list_dir(const std::string& dir);  // names, sorted, no . or ..

}  // namespace pgfence::storage
