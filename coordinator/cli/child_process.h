// The command `fencectl run` holds the lock for: started in its own process
// group with extra environment variables, watched through a pidfd, signalled
// as a group. Signals sent to fencectl (INT, TERM, HUP, QUIT) are relayed to
// the child's group while a ChildProcess exists.
//
// Threading: single-threaded use only (the relay is process-wide, one at a time).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pgfence::cli {

class ChildProcess {
public:
    using Clock = std::chrono::steady_clock;

    // Starts argv[0] (looked up in PATH) with `env` added to our environment
    // ("NAME=value"; replaces same-named variables). nullopt + error on failure.
    static std::optional<ChildProcess> spawn(const std::vector<std::string>& argv,
                                             const std::vector<std::string>& env, std::string& error);

    ChildProcess(ChildProcess&& other) noexcept;
    ChildProcess& operator=(ChildProcess&&) = delete;
    ChildProcess(const ChildProcess&) = delete;
    ~ChildProcess();  // a child still running is killed (SIGKILL) and reaped

    // Waits until the child exits (true) or `until` passes (false), relaying
    // signals meanwhile.
    bool wait_until(Clock::time_point until);

    // Exit status as a shell reports it: the code, or 128+N for signal N. Valid once exited.
    int exit_code() const { return exit_code_; }
    bool exited() const { return exited_; }

    // SIGTERM to the group; after at most `grace`, SIGKILL to the group; returns once reaped.
    void terminate(std::chrono::milliseconds grace);

    pid_t pid() const { return pid_; }

private:
    ChildProcess(pid_t pid, int pidfd);
    void signal_group(int sig) const;
    bool reap(bool block);

    pid_t pid_ = -1;
    int pidfd_ = -1;
    bool exited_ = false;
    int exit_code_ = 0;
    bool took_terminal_ = false;
};

}  // namespace pgfence::cli
