// What an acceptor does after a failed accept. Out of descriptors (EMFILE,
// ENFILE) or of kernel memory (ENOBUFS, ENOMEM), the connection stays queued
// and accepting again at once fails again at once: the event loop would spin
// on it, starving every timer (ticks, heartbeats). The acceptor waits
// kAcceptRetry first. Any other failure concerns that one connection (the
// peer reset it before the accept, say): accept the next at once.
#pragma once

#include <cerrno>
#include <chrono>

namespace pgfence::net {

inline constexpr std::chrono::milliseconds kAcceptRetry{50};

// `ec`: the accept's error code (an errno value; Asio's other categories use
// none of these).
template <typename ErrorCode>
bool accept_needs_pause(const ErrorCode& ec) {
    const int e = ec.value();
    return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

}  // namespace pgfence::net
