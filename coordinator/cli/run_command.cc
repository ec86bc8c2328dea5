#include "cli/run_command.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <thread>

#include "cli/child_process.h"
#include "cli/commands.h"
#include "cli/publish.h"
#include "client/exit_codes.h"
#include "cli/seq_file.h"

namespace pgfence::cli {
namespace {

using Clock = client::Clock;
using std::chrono::duration_cast;

constexpr milliseconds kRetryPause{200};      // after a keepalive that failed without a refusal
constexpr milliseconds kReleaseOnLoss{1000};  // release attempt after losing the lease: best effort
constexpr milliseconds kMinMargin{10};
constexpr milliseconds kCampaignPause{200};  // elect: after a campaign refused before its wait ran out

// What we know about the lease, counted from send times only, and the
// schedule that keeps the child inside it: SIGTERM at term_at, SIGKILL at
// kill_by, both strictly before the deadline. The deadline is the client's
// (send + lease x (1 - rho), client.h), which already allows for clock rate
// differences; the margin absorbs the kill's own latency.
struct LeaseClock {
    milliseconds lease{0};
    milliseconds grace{0};        // --grace, capped at a quarter of the lease
    Clock::duration usable{0};    // the acquired lease's deadline - its send time
    Clock::time_point deadline;   // coordinator has certainly not expired the lease before this
    Clock::time_point kill_by;    // deadline - margin: the child is SIGKILLed by then
    Clock::time_point term_at;    // kill_by - grace: SIGTERM when no keepalive succeeded by then
    Clock::time_point last_sent;  // send time of the last successful acquire/keepalive
    Clock::time_point next_keepalive;

    LeaseClock(const client::Lease& acquired, milliseconds grace_in)
        : lease(acquired.lease),
          grace(std::min(grace_in, acquired.lease / 4)),
          usable(acquired.deadline() - acquired.sent_at) {}

    Clock::duration margin() const { return std::max(kMinMargin, lease / 10); }

    // A successful acquire or keepalive sent at `sent_at`; `until` is its
    // deadline(), capped at the acquired lease's length.
    void confirmed(Clock::time_point sent_at, Clock::time_point until) {
        const Clock::duration held = std::clamp(until - sent_at, Clock::duration::zero(), usable);
        last_sent = sent_at;
        deadline = sent_at + held;
        kill_by = deadline - std::min(held, margin());
        term_at = kill_by - std::min<Clock::duration>(held - std::min(held, margin()), grace);
        next_keepalive = sent_at + held / 3;
    }
};

// What run or elect holds: the lock kept alive (`key`), how it is given
// back, what CMD is told besides the token, and the name errors start with.
struct Holding {
    std::string who;  // "fencectl run" or "fencectl elect"
    std::string key;
    std::function<client::Result<client::Released>(client::Client&, std::uint64_t token)> give_back;
    std::vector<std::string> env;
};

long long ms_until(Clock::time_point t) { return duration_cast<milliseconds>(t - Clock::now()).count(); }

void end_quietly(const Holding& h, const SeqFile& seq, SeqEnd how, std::ostream& err) {
    if (std::string why = seq.end(how); !why.empty()) {
        err << h.who << ": warning: cannot mark the sequence file: " << why << '\n';
    }
}

void release_quietly(client::Client& c, const Holding& h, std::uint64_t token, std::ostream& err) {
    auto r = h.give_back(c, token);
    if (!r) err << h.who << ": warning: release of " << h.key << " token " << token
                << " failed: " << r.error().message << '\n';
}

// A waited acquire may answer after sent_at + lease: confirm before starting the child.
bool confirm_before_start(client::Client& c, const Holding& h, std::uint64_t token, LeaseClock& lc,
                          std::ostream& err, int& code) {
    if (Clock::now() < lc.last_sent + lc.lease / 3) return true;
    auto k = c.keepalive(h.key, token, Clock::now() + std::min(lc.lease, c.options().timeout));
    if (k) {
        lc.confirmed(k.value().sent_at, k.value().deadline());
        if (Clock::now() < lc.term_at) return true;
        err << h.who << ": lease of " << h.key << " confirmed too late to start CMD safely\n";
        code = kExitLostLease;
        return false;
    }
    err << h.who << ": lease of " << h.key << " could not be confirmed before starting: "
        << k.error().message << '\n';
    code = exit_code_of(k.error(), "keepalive");
    return false;
}

// Keeps the lease while the child runs. Returns an empty string when the child
// exited, else why the lease counts as lost (then it is time to SIGTERM).
std::string hold(client::Client& c, const Holding& h, std::uint64_t token, LeaseClock& lc, ChildProcess& child,
                 std::ostream& err) {
    for (;;) {
        if (child.wait_until(std::min(lc.next_keepalive, lc.term_at))) return {};
        if (Clock::now() >= lc.term_at) {
            return "no successful keepalive in time; local lease deadline in " + std::to_string(ms_until(lc.deadline)) +
                   "ms";
        }
        auto k = c.keepalive(h.key, token, lc.term_at);
        if (k) {
            lc.confirmed(k.value().sent_at, k.value().deadline());
            continue;
        }
        const auto kind = k.error().kind;
        // A refusal is final: not held any more, or no longer authorized (a
        // revoked token), so the child is stopped now, not at the deadline.
        if (kind == client::ErrorKind::kNotHeld || kind == client::ErrorKind::kHeld ||
            kind == client::ErrorKind::kBadRequest || kind == client::ErrorKind::kNotAuthorized) {
            return "keepalive refused: " + k.error().message;
        }
        err << h.who << ": warning: keepalive failed (" << k.error().message << "); lease deadline in "
            << ms_until(lc.deadline) << "ms\n";
        lc.next_keepalive = Clock::now() + std::min(kRetryPause, lc.lease / 20);
    }
}

// SIGTERM now, SIGKILL by lc.kill_by at the latest (never after the deadline).
void stop_child(ChildProcess& child, const LeaseClock& lc) {
    const auto left = std::max(milliseconds(0), duration_cast<milliseconds>(lc.kill_by - Clock::now()));
    child.terminate(std::min(lc.grace, left));
}

// The path of this fencectl, exported to CMD as FENCECTL so that it can call
// `"$FENCECTL" seq` when fencectl is not on PATH ("" if unknown).
std::string own_path() {
    std::error_code ec;
    const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : p.string();
}

// Starts CMD with the lease's environment and keeps the lease while it runs;
// ends the sequence file's lease and releases at the end. Returns run's exit code.
int hold_while_child_runs(const Args& args, client::Client& c, const Holding& h, const client::Lease& acquired,
                          LeaseClock& lc, const SeqFile& seq, std::ostream& err) {
    const std::string& key = h.key;
    const std::uint64_t token = acquired.token;
    std::string error;
    std::vector<std::string> env{"FENCE_KEY=" + key, "FENCE_TOKEN=" + std::to_string(token)};
    env.insert(env.end(), h.env.begin(), h.env.end());
    if (!seq.path().empty()) env.push_back(std::string(kSeqFileEnv) + "=" + seq.path());
    if (const std::string self = own_path(); !self.empty()) env.push_back("FENCECTL=" + self);
    if (!acquired.proof.empty()) env.push_back("FENCE_PROOF=" + acquired.proof);
    auto child = ChildProcess::spawn(args.child, env, error);
    if (!child) {
        err << h.who << ": cannot start '" << args.child[0] << "': " << error << '\n';
        release_quietly(c, h, token, err);
        return kExitOther;
    }
    const std::string lost = hold(c, h, token, lc, *child, err);
    if (lost.empty()) {
        end_quietly(h, seq, SeqEnd::kEnded, err);  // what CMD left running draws no more numbers
        release_quietly(c, h, token, err);
        return child->exit_code();
    }
    err << h.who << ": lease of " << key << " token " << token << " lost (" << lost
        << "); terminating pid " << child->pid() << '\n';
    end_quietly(h, seq, SeqEnd::kLost, err);
    stop_child(*child, lc);
    client::Options quick = c.options();
    quick.timeout = std::min(quick.timeout, kReleaseOnLoss);
    quick.attempt_timeout = std::min(quick.attempt_timeout, kReleaseOnLoss);
    client::Client releaser(quick);
    release_quietly(releaser, h, token, err);
    return kExitLostLease;
}

// From the grant on: confirm, start CMD with the sequence file, hold, give back.
int hold_granted(const Args& args, client::Client& c, const Holding& h, const client::Lease& acquired,
                 std::ostream& err) {
    const std::uint64_t token = acquired.token;
    LeaseClock lc(acquired, args.grace.value_or(kDefaultGrace));
    lc.confirmed(acquired.sent_at, acquired.deadline());
    // --advance: the token reaches the resources before CMD starts, done by
    // the SIGTERM time (after it, CMD could not start anyway).
    if (const Publication p = publish_first(args, acquired, lc.term_at); p.code != kExitOk) {
        err << h.who << ": " << p.message << "; releasing " << h.key << ", CMD not started\n";
        release_quietly(c, h, token, err);
        return p.code;
    }
    int code = kExitOther;
    if (!confirm_before_start(c, h, token, lc, err, code)) {
        release_quietly(c, h, token, err);
        return code;
    }
    SeqFile seq;  // removed when run returns
    if (std::string why = seq.create(token); !why.empty()) {
        err << h.who << ": warning: no sequence file, so fencectl seq will not work in CMD: " << why
            << " (set TMPDIR to a writable directory)\n";
        seq.remove();
    }
    return hold_while_child_runs(args, c, h, acquired, lc, seq, err);
}

}  // namespace

int run_with_lock(const Args& args, client::Client& c, std::ostream& err) {
    const std::string& key = args.positional[0];
    const client::AcquireRequest req{key, args.lease.value_or(kDefaultLease), args.wait.value_or(kDefaultWait),
                                     args.owner};
    auto acquired = c.acquire(req);
    if (!acquired) {
        err << "fencectl run: " << in_flag_terms(acquired.error(), args) << '\n';
        return exit_code_of(acquired.error(), "acquire");
    }
    const Holding h{"fencectl run", key,
                    [key](client::Client& cl, std::uint64_t token) { return cl.release(key, token); }, {}};
    return hold_granted(args, c, h, acquired.value(), err);
}

int run_elected(const Args& args, client::Client& c, std::ostream& err) {
    const std::string& name = args.positional[0];
    client::CampaignRequest req{name, args.value, args.lease.value_or(kDefaultLease), kElectWaitRound, args.owner};
    // Without --wait: campaign until leader, a round of kElectWaitRound at a
    // time (a round that runs out queues again, at the back).
    const bool forever = !args.wait;
    const Clock::time_point give_up = Clock::now() + args.wait.value_or(milliseconds(0));
    for (;;) {
        if (!forever) {
            req.wait = std::max(milliseconds(0), duration_cast<milliseconds>(give_up - Clock::now()));
        }
        const Clock::time_point asked = Clock::now();
        auto elected = c.campaign(req);
        if (elected) {
            const client::Lease& lease = elected.value();
            const Holding h{"fencectl elect", lease.key,
                            [name](client::Client& cl, std::uint64_t token) { return cl.resign(name, token); },
                            {"FENCE_ELECTION=" + name, "FENCE_VALUE=" + lease.value}};
            return hold_granted(args, c, h, lease, err);
        }
        const bool ran_out = elected.error().kind == client::ErrorKind::kHeld;
        if (!ran_out || (!forever && Clock::now() >= give_up)) {
            err << "fencectl elect: " << in_flag_terms(elected.error(), args) << '\n';
            return exit_code_of(elected.error(), "acquire");
        }
        // Refused before its wait ran out (a full wait queue, say): pause
        // before the next campaign instead of asking again at once.
        if (Clock::now() - asked < req.wait) std::this_thread::sleep_for(kCampaignPause);
    }
}

}  // namespace pgfence::cli
