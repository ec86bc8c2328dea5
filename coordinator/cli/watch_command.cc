#include "cli/watch_command.h"

#include <signal.h>
#include <unistd.h>

#include "client/exit_codes.h"

namespace pgfence::cli {
namespace {

// SIGINT and SIGTERM end the watch: every line printed so far is complete
// and flushed, so there is nothing to clean up.
extern "C" void exit_quietly(int) { ::_exit(kExitOk); }

sigset_t stop_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    return set;
}

void install_stop_handlers() {
    struct sigaction sa {};
    sa.sa_handler = exit_quietly;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

// One line, written and flushed with the stop signals held back, so that an
// interrupt never cuts a line in two.
bool print_line(std::ostream& out, const std::string& line) {
    const sigset_t set = stop_signals();
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &set, &old);
    out << line << '\n';
    out.flush();
    const bool ok = static_cast<bool>(out);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return ok;
}

}  // namespace

int run_watch_command(const Args& args, client::Client& client, std::ostream& out, std::ostream& err) {
    client::WatchRequest req = args.prefix_given ? client::WatchRequest::of_prefix(args.prefix, args.rev.value_or(0))
                                                 : client::WatchRequest::of_key(args.positional.at(0), args.rev.value_or(0));
    req.progress = args.progress;
    req.on_resume = [&err](const std::string& why, std::uint64_t rev) {
        err << "fencectl watch: " << why << "; resuming from revision " << rev << " on another member" << std::endl;
    };
    install_stop_handlers();
    bool out_failed = false;
    const auto r = client.watch(req, [&](const client::WatchEvent& e) {
        if (print_line(out, e.line)) return client::WatchAction::kContinue;
        out_failed = true;
        return client::WatchAction::kStop;
    });
    if (out_failed) {
        err << "fencectl watch: cannot write to stdout\n";
        return kExitOther;
    }
    if (r) return kExitOk;
    const client::Error& e = r.error();
    err << "fencectl watch: ";
    if (e.kind == client::ErrorKind::kCompacted) {
        err << "revision " << args.rev.value_or(0) << " (or the revision the watch resumed from) is older than the "
            << "history the members keep: the oldest revision still kept is " << e.oldest_revision
            << " (watch again with --rev " << e.oldest_revision << ", or without --rev from now; "
            << e.message << ")\n";
    } else {
        err << e.message << '\n';
    }
    return client::exit_code_of(e.kind);
}

}  // namespace pgfence::cli
