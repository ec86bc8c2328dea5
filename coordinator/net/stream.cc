#include "net/stream.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <boost/asio/ssl/context.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pgfence::net {

namespace {

constexpr std::size_t kMaxTlsCallBytes = std::size_t{1} << 30;  // an SSL call takes an int

bool is_ip_literal(const std::string& host) {
    unsigned char buf[16];
    return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Stream::~Stream() { detach(); }

void Stream::attach(int fd) {
    detach();
    fd_ = fd;
}

bool Stream::attach_tls(int fd, const TlsContextPtr& context, TlsRole role) {
    detach();
    fd_ = fd;
    role_ = role;
    ERR_clear_error();
    ssl_ = context ? SSL_new(context->native_handle()) : nullptr;
    if (ssl_ == nullptr) {
        failed_ = true;
        error_code_ = ERR_get_error();
        ERR_clear_error();
        return false;
    }
    context_ = context;
    attach_socket(ssl_, fd);
    return true;
}

void Stream::detach() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    ssl_ = nullptr;
    context_.reset();
    fd_ = -1;
    failed_ = false;
    system_error_ = false;
    error_code_ = 0;
}

bool Stream::expect_host(const std::string& host) {
    if (ssl_ == nullptr) return false;
    SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    if (is_ip_literal(host)) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), host.c_str()) == 1;
    // SSL_set_tlsext_host_name, without the macro's C cast.
    return SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(host.c_str())) ==
               1 &&
           SSL_set1_host(ssl_, host.c_str()) == 1;
}

// What an SSL call that returned `ssl_result` (<= 0) asks for. A failure
// takes its error from the queue once and leaves the queue empty.
Step Stream::fail_tls(int ssl_result) {
    const int e = SSL_get_error(ssl_, ssl_result);
    if (e == SSL_ERROR_WANT_READ) return Step::kWantRead;
    if (e == SSL_ERROR_WANT_WRITE) return Step::kWantWrite;
    error_code_ = ERR_get_error();
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && error_code_ == 0)) return Step::kClosed;
    failed_ = true;
    return Step::kFailed;
}

// A plaintext socket call failed with `err`: the stream is broken.
Step Stream::fail_errno(int err) {
    failed_ = true;
    system_error_ = true;
    error_code_ = static_cast<unsigned long>(err);
    return Step::kFailed;
}

Step Stream::handshake() {
    if (failed_ || fd_ < 0) return Step::kFailed;
    if (ssl_ == nullptr) return Step::kDone;
    ERR_clear_error();
    const int r = role_ == TlsRole::kAccept ? SSL_accept(ssl_) : SSL_connect(ssl_);
    return r == 1 ? Step::kDone : fail_tls(r);
}

IoResult Stream::read_some(void* out, std::size_t size) {
    if (failed_ || fd_ < 0) return {Step::kFailed, 0};
    if (ssl_ != nullptr) {
        ERR_clear_error();
        const int n = SSL_read(ssl_, out, static_cast<int>(std::min(size, kMaxTlsCallBytes)));
        if (n > 0) return {Step::kDone, static_cast<std::size_t>(n)};
        return {fail_tls(n), 0};
    }
    for (;;) {
        const ssize_t n = ::recv(fd_, out, size, MSG_DONTWAIT);
        if (n > 0) return {Step::kDone, static_cast<std::size_t>(n)};
        if (n == 0) return {Step::kClosed, 0};
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return {Step::kWantRead, 0};
        return {fail_errno(errno), 0};
    }
}

IoResult Stream::write_some(const void* data, std::size_t size) {
    if (failed_ || fd_ < 0) return {Step::kFailed, 0};
    if (ssl_ != nullptr) {
        ERR_clear_error();
        const int n = SSL_write(ssl_, data, static_cast<int>(std::min(size, kMaxTlsCallBytes)));
        if (n > 0) return {Step::kDone, static_cast<std::size_t>(n)};  // no partial writes: all of it
        return {fail_tls(n), 0};
    }
    for (;;) {
        const ssize_t n = ::send(fd_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n >= 0) return {Step::kDone, static_cast<std::size_t>(n)};
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return {Step::kWantWrite, 0};
        return {fail_errno(errno), 0};
    }
}

void Stream::close_notify() {
    if (ssl_ == nullptr) return;
    ERR_clear_error();
    if (SSL_shutdown(ssl_) < 0) ERR_clear_error();
}

bool Stream::has_pending() const { return ssl_ != nullptr && SSL_has_pending(ssl_) == 1; }

const x509_st* Stream::peer_certificate() const { return ssl_ != nullptr ? SSL_get0_peer_certificate(ssl_) : nullptr; }

long Stream::verify_result() const { return ssl_ != nullptr ? SSL_get_verify_result(ssl_) : X509_V_OK; }

std::string Stream::error() const {
    if (system_error_) return std::strerror(static_cast<int>(error_code_));
    if (error_code_ == 0) return "unknown OpenSSL error";
    if (const char* reason = ERR_reason_error_string(error_code_)) return reason;
    char buf[256];
    ERR_error_string_n(error_code_, buf, sizeof buf);
    return buf;
}

}  // namespace pgfence::net
