#include "cli/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>

extern char** environ;

namespace pgfence::cli {
namespace {

constexpr std::array<int, 4> kRelayed{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr auto kPollSliceMs = 100;  // upper bound on one poll when no pidfd is available
constexpr std::chrono::milliseconds kReapAfterKill{5000};

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
    const int saved = errno;
    const unsigned char byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] const auto n = ::write(g_signal_pipe[1], &byte, 1);
    errno = saved;
}

void install_relay() {
    if (g_signal_pipe[0] >= 0) return;
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (const int sig : kRelayed) ::sigaction(sig, &sa, nullptr);
}

// The environment for the child: ours minus the names in `env`, plus `env`.
std::vector<std::string> child_environment(const std::vector<std::string>& env) {
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e) {
        const std::string entry(*e);
        const std::string name = entry.substr(0, entry.find('='));
        const bool replaced = std::any_of(env.begin(), env.end(),
                                          [&](const std::string& v) { return v.starts_with(name + "="); });
        if (!replaced) out.push_back(entry);
    }
    out.insert(out.end(), env.begin(), env.end());
    return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (std::string& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

// In the forked child: own group (and the terminal's foreground, if we had
// it: both sides set it, as shells do, so the child never reads the terminal
// from the background), default signal handling, exec. Never returns.
// If fencectl itself dies (SIGKILL, OOM), nobody would stop the child at the
// lease deadline: PR_SET_PDEATHSIG kills it with its parent instead.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, bool take_terminal, pid_t parent) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(128 + SIGKILL);  // the parent died before prctl
    if (take_terminal) {
        std::signal(SIGTTOU, SIG_IGN);
        ::tcsetpgrp(STDIN_FILENO, ::getpid());
    }
    for (const int sig : kRelayed) std::signal(sig, SIG_DFL);
    std::signal(SIGTTOU, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv, envp);
    const int err = errno;
    const char* why = std::strerror(err);
    const std::string msg = std::string("fencectl run: cannot run '") + argv[0] + "': " + why + "\n";
    [[maybe_unused]] const auto n = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(err == ENOENT ? 127 : 126);
}

}  // namespace

std::optional<ChildProcess> ChildProcess::spawn(const std::vector<std::string>& argv,
                                                const std::vector<std::string>& env, std::string& error) {
    install_relay();
    std::vector<std::string> args = argv;
    std::vector<std::string> envs = child_environment(env);
    std::vector<char*> c_args = c_strings(args), c_env = c_strings(envs);
    const bool take_terminal = ::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        error = std::string("fork failed: ") + std::strerror(errno);
        return std::nullopt;
    }
    if (pid == 0) exec_child(c_args.data(), c_env.data(), take_terminal, parent);
    ::setpgid(pid, pid);  // also in the parent: no race with signal_group()
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    ChildProcess child(pid, pidfd);
    if (take_terminal) {
        std::signal(SIGTTOU, SIG_IGN);  // we stay able to take the terminal back
        child.took_terminal_ = ::tcsetpgrp(STDIN_FILENO, pid) == 0;
    }
    return child;
}

ChildProcess::ChildProcess(pid_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), pidfd_(other.pidfd_), exited_(other.exited_), exit_code_(other.exit_code_),
      took_terminal_(other.took_terminal_) {
    other.pid_ = -1;
    other.pidfd_ = -1;
    other.took_terminal_ = false;
}

ChildProcess::~ChildProcess() {
    if (pid_ > 0 && !exited_) {
        signal_group(SIGKILL);
        reap(true);
    }
    if (took_terminal_) ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
    if (pidfd_ >= 0) ::close(pidfd_);
}

void ChildProcess::signal_group(int sig) const {
    if (pid_ > 0 && !exited_) ::kill(-pid_, sig);
}

bool ChildProcess::reap(bool block) {
    if (exited_) return true;
    int status = 0;
    pid_t r;
    do {
        r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r != pid_) return false;
    exited_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
}

bool ChildProcess::wait_until(Clock::time_point until) {
    while (!reap(false)) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
        if (left <= 0) return false;
        pollfd fds[2] = {{pidfd_, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
        const int slice = pidfd_ >= 0 ? static_cast<int>(std::min<long long>(left, 60'000))
                                      : static_cast<int>(std::min<long long>(left, kPollSliceMs));
        ::poll(fds, 2, slice);
        unsigned char sig = 0;
        while (g_signal_pipe[0] >= 0 && ::read(g_signal_pipe[0], &sig, 1) == 1) signal_group(sig);
    }
    return true;
}

void ChildProcess::terminate(std::chrono::milliseconds grace) {
    signal_group(SIGTERM);
    const bool exited_in_grace = wait_until(Clock::now() + grace);
    // SIGKILL the group even if the child exited: its own children may linger.
    // The group id cannot have been reused while any member is alive.
    if (pid_ > 0) ::kill(-pid_, SIGKILL);
    if (!exited_in_grace && !wait_until(Clock::now() + kReapAfterKill)) reap(true);
}

}  // namespace pgfence::cli
