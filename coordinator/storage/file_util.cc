#include "storage/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

namespace pgfence::storage {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
    throw StorageError(what + " " + path + " failed: " + std::strerror(err));
}

[[noreturn]] void fail_sync(const std::string& what, const std::string& path, int err) {
    throw StorageError(what + " " + path + " failed: " + std::strerror(err) +
                       "; the data may not be on disk and the kernel may have dropped it, "
                       "so this member must stop and restart (do not retry)");
}

}  // namespace

Fd::~Fd() {
    if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = other.release();
    }
    return *this;
}

int Fd::release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
}

std::string join_path(const std::string& dir, const std::string& name) {
    if (!dir.empty() && dir.back() == '/') return dir + name;
    return dir + "/" + name;
}

Fd open_file(const std::string& path, int flags) {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
    if (fd < 0) fail("open", path, errno);
    return Fd(fd);
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
    while (!bytes.empty()) {
        ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("write to", path, errno);
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

void pwrite_all(int fd, std::string_view bytes, std::uint64_t offset, const std::string& path) {
    while (!bytes.empty()) {
        ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("write to", path, errno);
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
        offset += static_cast<std::uint64_t>(n);
    }
}

std::string pread_exact(int fd, std::uint64_t offset, std::size_t n, const std::string& path) {
    std::string out(n, '\0');
    std::size_t done = 0;
    while (done < n) {
        ssize_t got = ::pread(fd, out.data() + done, n - done, static_cast<off_t>(offset + done));
        if (got < 0) {
            if (errno == EINTR) continue;
            fail("read of", path, errno);
        }
        if (got == 0) {
            throw StorageError("read of " + path + " at byte " + std::to_string(offset + done) +
                               ": file ended early (was it truncated while the member ran?)");
        }
        done += static_cast<std::size_t>(got);
    }
    return out;
}

std::uint64_t file_size(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail("fstat of", path, errno);
    return static_cast<std::uint64_t>(st.st_size);
}

std::string read_whole_file(const std::string& path, std::uint64_t max_bytes) {
    Fd fd = open_file(path, O_RDONLY);
    std::uint64_t size = file_size(fd.get(), path);
    if (size > max_bytes) {
        throw StorageError(path + " is " + std::to_string(size) +
                           " bytes, more than the limit of " + std::to_string(max_bytes) +
                           "; refusing to read it (corrupt or foreign file?)");
    }
    return pread_exact(fd.get(), 0, static_cast<std::size_t>(size), path);
}

void truncate_file(int fd, std::uint64_t size, const std::string& path) {
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) fail("ftruncate of", path, errno);
}

void sync_data(int fd, const std::string& path) {
    if (::fdatasync(fd) != 0) fail_sync("fdatasync of", path, errno);
}

void sync_dir(const std::string& dir) {
    Fd fd = open_file(dir, O_RDONLY | O_DIRECTORY);
    if (::fsync(fd.get()) != 0) fail_sync("fsync of directory", dir, errno);
}

void write_file_atomically(const std::string& dir, const std::string& name,
                           std::string_view bytes) {
    const std::string tmp = join_path(dir, name + ".tmp");
    const std::string final_path = join_path(dir, name);
    {
        Fd fd = open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC);
        write_all(fd.get(), bytes, tmp);
        sync_data(fd.get(), tmp);
    }
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) fail("rename to", final_path, errno);
    sync_dir(dir);
}

BreakOnThrow::BreakOnThrow(bool& broken)
    : broken_(broken), exceptions_(std::uncaught_exceptions()) {}

BreakOnThrow::~BreakOnThrow() {
    if (std::uncaught_exceptions() > exceptions_) broken_ = true;
}

bool path_exists(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

void remove_file(const std::string& path) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail("unlink of", path, errno);
}

void make_dir(const std::string& dir) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) fail("mkdir of", dir, errno);
}

std::vector<std::string> list_dir(const std::string& dir) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) fail("opendir of", dir, errno);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace pgfence::storage
