// The fence-worker loop: for each iteration
//   acquire (a lease and a token) -> start the keepalive thread -> publish
//   the token at the --advance resources -> work -> fenced write in
//   PostgreSQL -> stop the keepalive -> release.
// On the sequenced path the fenced write is kSequencedWrites numbered writes,
// then the first of them sent again (a "replay"), which must be refused.
// With --proof every write carries the grant's token proof; with --forge the
// worker is an adversary: it writes nothing honest, it sends the grant's
// proof forged or misdirected (options.h, Forgery), and each must be refused.
// Every step is narrated on stdout (unless --quiet) and logged to --log.
//
// Threading: run() on the main thread; a Keepalive thread per held lease.
// Both write to the EventLog (its write() is thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "client/client.h"
#include "net/token_signer.h"
#include "worker/event_log.h"
#include "worker/keepalive.h"
#include "worker/options.h"
#include "worker/pg_writer.h"

namespace pgfence::worker {

struct Stats {
    long iterations = 0, acquired = 0, accepted = 0, stale = 0;
    long held = 0, unavailable = 0, lease_lost = 0, db_errors = 0, renewals = 0;
    long replays_refused = 0, replays_accepted = 0;
    long bad_proofs = 0;  // our own grant's proof refused (55F02): never expected
    // --forge: forged and misdirected proofs sent, and what PostgreSQL made of them
    long forged_sent = 0, forged_refused = 0, forged_stale = 0, forged_accepted = 0, forged_errors = 0;
};

class Worker {
  public:
    Worker(Options options, client::Options client_options);
    // Runs the loop; returns the process exit code (see ExitCode).
    int run();
    const Stats& stats() const { return stats_; }

  private:
    int prepare();
    int iteration(long i);
    // Outcome of one fenced write with the lease held (`seq`: its sequence
    // number on the sequenced path, else 0); returns an exit code (kExitOk
    // when the loop may go on) and sets `accepted` when PostgreSQL took it.
    int write_with(const client::Lease& lease, Mode path, std::int64_t seq, bool lease_lost, bool& accepted);
    // --advance: publishes the lease's token at every resource before the
    // work (an "advance" event). False, with `code` set, when it failed: then
    // nothing is written.
    bool publish_first(const client::Lease& lease, int& code);
    // Connects again when the connection was lost; false (e logged as an
    // error, `errors` counted) when that failed.
    bool reconnected(Event& e, long& errors);
    // The sequenced path: numbered writes, then the replay of the first.
    int write_sequenced(const client::Lease& lease, const std::function<bool()>& lease_lost);
    int replay(const client::Lease& lease, std::int64_t seq);
    // --forge: every Forgery with the grant `lease` on `path`, each in its
    // own transaction, logged as a "forge" event; returns an exit code.
    int forge(const client::Lease& lease, Mode path);
    int forge_one(const client::Lease& lease, Mode path, Forgery forgery);
    // The proof sent with the lease's writes (--proof), else none.
    std::optional<std::string> proof_of(const client::Lease& lease) const;
    // --work: each piece, renewing before it with --renew between.
    void work(const client::Lease& lease, Keepalive& keepalive);
    void release(const client::Lease& lease);
    int failed(int code);
    Mode pick_path();
    const std::string& pick_key();
    void say(const std::string& line) const;

    Options o_;
    client::Options client_options_;
    client::Client client_;
    PgWriter db_;
    EventLog log_;
    std::mt19937_64 rng_;
    Stats stats_;
    std::shared_ptr<net::TokenSigner> forger_;  // --forge: the untrusted key
};

// Set from a SIGINT/SIGTERM handler: finish the current iteration, then stop.
void request_stop();
bool stop_requested();

}  // namespace pgfence::worker
