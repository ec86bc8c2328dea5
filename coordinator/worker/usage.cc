#include "worker/options.h"

namespace pgfence::worker {

std::string usage() {
    return R"(fence-worker: the fencing pattern in one small program.

  acquire KEY from the coordinator (a lease and a fencing token)
  -> keep the lease alive at lease/3 in a background thread
  -> with --advance R: publish the token at resource R first (fence_advance),
     so that every older holder is refused there before any work starts
  -> do the work in PostgreSQL carrying the token, in one transaction:
     read-modify-write a counter and append (key, token, worker, value)
     to an audit table
  -> stop when PostgreSQL refuses the token (SQLSTATE 55F01)
  -> release the lock

Usage:
  fence-worker --setup [--proof --key K[,K...]] [--conninfo STR]
  fence-worker --clock
  fence-worker --key K[,K...] [options]

Options:
  --key K[,K...]       key(s) to lock; with several, one is picked per iteration
  --mode M             how the token reaches PostgreSQL (default guard):
                         guard          UPDATE worker_counters SET n = n + 1, fence = $token
                                        (the fence_guard trigger checks the token)
                         fenced_update  SELECT n ... FOR UPDATE, then
                                        fenced_update('worker_counters', key, {n: n+1}, $token)
                         admit          fence_admit('K', $token), then +1 on both
                                        worker_ledger_a and worker_ledger_b (two plain tables)
                         sequenced      UPDATE worker_sequenced SET n = n + 1, fence = $token,
                                        fence_seq = $seq, for seq 1 and 2 of the lease (a
                                        table in pg_fence's mode 'sequenced'); then seq 1
                                        again, as a delayed duplicate: it must be refused
                         mixed          one of the four, at random per iteration
  --proof              send each grant's token proof with every write: SET LOCAL
                       pg_fence.proof on guard and sequenced, the proof argument of
                       fenced_update and fence_admit. The coordinator must sign grants
                       (--token-signing-key-file): a grant without a proof ends the
                       program (exit 2). With --setup: the tables verify proofs
                       (fence_protect(..., lock_key => '{key}')) and the resources of
                       the --key keys require them (fence_require_proof); PostgreSQL
                       must trust the cluster's key (fence_trust_key)
  --forge F            the adversary, for tests (implies --proof): each iteration
                       acquires a key A (token T, proof P) and, on the --mode path,
                       sends forged and misdirected proofs, each in a transaction of
                       its own: P with its signature changed (corrupt); P on another
                       --key (other_key); P with token T + 2^40 (other_token); a
                       proof of (A, T) signed by the Ed25519 key in file F (PEM, not
                       readable by group or others), which PostgreSQL must not trust
                       (untrusted); no proof (missing). Each must be refused (55F02;
                       fenced_update may answer stale first). --log records them as
                       "forge" events (path PATH:KIND, outcome bad_proof, stale,
                       accepted or error); an accepted one is exit 1
  --lease D            lease length (default 2s; 100ms..1h); D is like 500ms, 2s, 1m
  --wait D             queue behind the current holder up to D (default 0: fail if held)
  --work D[,D...]      pretend to work between acquire and write (default none), in
                       pieces of these lengths (at most 64); --log records each as a
                       "work" line (send_ns its start, ack_ns its end, value the
                       length asked for in ms)
  --renew thread|between
                       who keeps the lease alive during the work: thread (default), a
                       keepalive thread every lease/3; between, the worker itself,
                       one KeepAlive before each piece of --work, as a single-threaded
                       job does: a piece longer than the lease loses the lease
  --iterations N       acquire/write/release cycles (default 1)
  --duration D         stop starting new iterations after D (default: no limit)
  --pause D            sleep D after each iteration (default 0)
  --keep-going         log a failed iteration (held, stale, unavailable, database
                       error) and go on; without it the first failure ends the program
  --no-lease-check     write even when the keepalive says the lease is gone (refused,
                       or no answer before the local deadline): the code that goes on
                       after a failed renewal (tests use it: the database fence must
                       catch such writes, and fencectl explain must name why)
  --advance R          before each iteration's work (and its --work pause), publish
                       the iteration's token at resource R: fence_advance(R, token,
                       proof) over --conninfo, in a transaction of its own (the grant's
                       proof when R is the key and the cluster signs grants).
                       Repeatable (at most 64; one transaction for all). If R already
                       holds a newer fence (exit 10) or the publish fails (exit 11),
                       nothing is written and the lock is released
  --conninfo STR       libpq connection string (default: the PG* environment)
  --endpoints H:P,...  coordinator members (default: $FENCE_ENDPOINTS, else 127.0.0.1:7501-7503);
                       https://H:P for members that serve TLS
  --cacert F, --cert F, --key F, --bearer-file F
                       TLS and credentials, as fencectl's (default: $FENCE_CACERT_FILE,
                       $FENCE_CERT_FILE, $FENCE_KEY_FILE, $FENCE_BEARER_FILE)
  --worker-id W        name written to the audit table and the log (default fence-worker-PID)
  --log FILE           append one CSV line per event:
                         worker,event,key,token,send_ns,ack_ns,path,outcome,value
                       event is acquire|advance|write|replay|forge|release|keepalive|
                       work|stall|deadline; send_ns/ack_ns are CLOCK_MONOTONIC nanoseconds of the
                       request's send and of its answer (acquire: its first send;
                       keepalive: one line per request, ack_ns 0 when nothing answered,
                       value = ttl ms; work: a piece's start and end; stall: a timer
                       of the worker woke at least lease/3 late, send_ns when it
                       should have, ack_ns when it did: the process did not run;
                       deadline: the lease's local deadline passed without a
                       renewal, send_ns the deadline, ack_ns when noticed).
                       fencectl explain --client-log reads this file
  --seed N             random seed for key/path choice (default: from the worker id)
  --max-clock-drift-ppm N
                       rho: the largest clock-rate error of this host and of the
                       coordinator's members, in parts per million (default 50000
                       = 5%; 0..500000). The lease counts as lost at its send time
                       + lease x (1 - rho) unless a keepalive renewed it
  --setup              create the extension and the worker's tables, then exit
  --quiet              no per-iteration narration (the summary is still printed)
  --clock              print CLOCK_MONOTONIC in nanoseconds (the clock of the
                       --log send_ns/ack_ns columns) and exit: a test harness
                       reads it to put its own events on the workers' time line
  --help               this text
  --version            the release version

Schema (created by --setup): worker_counters(key, n, fence) protected by
fence_protect; worker_sequenced(key, n, fence, fence_seq) protected in mode
sequenced; worker_ledger_a/b(key, n), written under fence_admit's resource K;
worker_audit(id, key, fence, token, seq, worker, value, path, committed_at)
where id is taken from a sequence inside the transaction after the fenced
write, so per key and fence it follows commit order (fence is row, resource or
sequenced; seq is set on the sequenced path only; path is forge:KIND for a
forged write that got through). With --setup --proof the two tables verify
token proofs under the lock key = the row's key, and resource K requires them.

Exit codes (the same numbers as fencectl's, docs/cli.md):
  0   all iterations done (with --keep-going: the loop ran to its end)
  1   internal error, or a delayed duplicate of our own sequenced write (or, with
      --forge, a forged proof) was accepted (with --keep-going that is logged and
      counted instead)
  2   usage error, or the coordinator refused the request as invalid (e.g. a --lease
      outside its bounds), or --proof got a grant without a proof
  3   the key is held by someone else, or --wait ran out
  4   the lease was lost before the write; nothing was written
  5   no coordinator member answered (cluster unavailable)
  7   not authorized: the coordinator refused the credentials (401) or the key (403)
  10  stale token refused by PostgreSQL (55F01): a newer holder wrote; or
      --advance found a newer fence already at a resource
  11  PostgreSQL error other than a stale token (connection, schema, timeout, our
      own token proof refused: 55F02), also when publishing for --advance
  12  what answered on an endpoint is not a pgfence member
)";
}

}  // namespace pgfence::worker
