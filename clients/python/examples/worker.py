#!/usr/bin/python3
"""Example worker: the fencing pattern with the pgfence Python client and psycopg2.

    worker.py --setup                                  # once: pg_fence and the reports table
    worker.py --key report:7 --report-id 7 --body "v2" [--lease 10s] [--wait 30s]

1. takes the lock KEY (pgfence.lock: acquire, then keepalive in the background);
2. pretends to work for --work (the report is being computed);
3. writes the report in one transaction that carries the fencing token and
   the write's sequence number under it (lease.next_seq(): 1, 2, 3, ...):
       SELECT set_config('pg_fence.token', TOKEN, true)     -- SET LOCAL pg_fence.token
       SELECT set_config('pg_fence.seq', SEQ, true)         -- SET LOCAL pg_fence.seq
       [SELECT set_config('pg_fence.proof', PROOF, true)]    -- when the cluster signs grants
       UPDATE reports SET body = BODY WHERE report_id = ID   -- pg_fence's guard checks both
   (a row that does not exist yet is inserted first with fence 0, sequence 0);
4. repeats 2-3 --writes times, then releases the lock.

The reports table is protected in pg_fence's `sequenced` mode (docs/sql.md):
a write is accepted when (token, seq) is after the row's pair, so the
holder's later writes with its token pass, and its own earlier write, if it
landed late, would not overwrite a later one.

It stops at once, with a message on stderr and a distinct exit code, when
PostgreSQL refuses the token (SQLSTATE 55F01: a newer holder wrote; exit 10)
or when the lease is lost before a write (lease.lost, true from the lease's
deadline - margin on; or a long --wait that left no time to confirm the
lease: exit 4, nothing written). --no-lease-check writes even with a lost
lease, to show the database refusing the stale token (as fence-worker's flag
of that name). On a table that verifies proofs (fence_protect(...,
lock_key => ...), docs/sql.md) a proof that does not verify is refused with
55F02: exit 11.

Coordinator endpoints, TLS and the bearer secret as fencectl's: --endpoints
or $FENCE_ENDPOINTS, $FENCE_CACERT_FILE, $FENCE_CERT_FILE, $FENCE_KEY_FILE,
$FENCE_BEARER_FILE. PostgreSQL: --dsn, else libpq's PG* environment.
Run it with Debian's /usr/bin/python3 (python3-psycopg2).

Exit codes (pgfence's scheme, fencectl's codes: pgfence.exitcodes; each
FenceError's exit_code):
  0   done
  1   other error (a protocol error, a full lock table)
  2   usage error (bad flag, duration, endpoint list or credentials file), or
      a request the coordinator refused as invalid (BadRequestError: a
      --lease or --wait out of the cluster's bounds)
  3   the key is held by someone else, or --wait ran out (HeldError)
  4   the lease was lost before a write, nothing written (lease.lost, or
      LeaseLostError when a long wait left no time to confirm the lease)
  5   no coordinator member answered (UnavailableError)
  7   not authorized: the coordinator refused the credentials (401) or the
      key (403) (NotAuthorizedError)
  10  stale token refused by PostgreSQL (55F01): a newer holder wrote
  11  PostgreSQL error other than a stale token (connection, --setup, 55F02)
(6, 8 and 9 of the scheme, not found, unknown member and refused member
change, do not occur here.)
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import psycopg2  # noqa: E402  (after the path: the package lives beside this example)
import psycopg2.errorcodes  # noqa: E402

import pgfence  # noqa: E402
from pgfence.exitcodes import EXIT_DATABASE, EXIT_LEASE_LOST, EXIT_OK, EXIT_STALE, EXIT_USAGE  # noqa: E402

STALE_TOKEN = "55F01"

SETUP_SQL = """
CREATE EXTENSION IF NOT EXISTS pg_fence;
CREATE TABLE IF NOT EXISTS reports (report_id int PRIMARY KEY, body text NOT NULL DEFAULT '',
                                    fence bigint NOT NULL DEFAULT 0);
ALTER TABLE reports ADD COLUMN IF NOT EXISTS fence_seq bigint NOT NULL DEFAULT 0 CHECK (fence_seq >= 0);
SELECT fence_protect('reports', mode => 'sequenced');
"""


def say(text):
    print(f"worker {os.getpid()}: {text}", flush=True)


def fail(code, text):
    print(f"worker {os.getpid()}: {text}", file=sys.stderr, flush=True)
    return code


def exit_code_of(error):
    """The exit code for an exception that ended the worker (see the module's
    docstring); None for one that is not ours to map (a bug: it propagates)."""
    if isinstance(error, psycopg2.Error):
        return EXIT_STALE if error.pgcode == STALE_TOKEN else EXIT_DATABASE
    if isinstance(error, ValueError):  # durations, endpoints, TLS and bearer files
        return EXIT_USAGE
    if isinstance(error, pgfence.FenceError):
        return error.exit_code
    return None


def write_report(conn, lease, report_id, body):
    """One transaction carrying the token and the next sequence number; the
    number it used; psycopg2 errors propagate."""
    seq = lease.next_seq()
    with conn:  # commits, or rolls back on an exception
        with conn.cursor() as cur:
            cur.execute("SELECT set_config('pg_fence.token', %s, true)", (str(lease.token),))
            cur.execute("SELECT set_config('pg_fence.seq', %s, true)", (str(seq),))
            if lease.proof:
                cur.execute("SELECT set_config('pg_fence.proof', %s, true)", (lease.proof,))
            cur.execute("INSERT INTO reports (report_id) VALUES (%s) ON CONFLICT DO NOTHING", (report_id,))
            cur.execute("UPDATE reports SET body = %s WHERE report_id = %s", (body, report_id))
    return seq


def work(args, conn):
    with pgfence.lock(args.key, lease=args.lease, wait=args.wait, owner=args.owner,
                      endpoints=args.endpoints) as lease:
        say(f"acquired {args.key} token {lease.token} (lease {args.lease})")
        for i in range(args.writes):
            time.sleep(pgfence.parse_duration_ms(args.work) / 1000)
            if lease.lost and not args.no_lease_check:
                return fail(EXIT_LEASE_LOST, f"LEASE LOST: {args.key!r} token {lease.token}: "
                                             f"{lease.lost_reason}; stopping without writing")
            try:
                seq = write_report(conn, lease, args.report_id, args.body)
            except psycopg2.Error as e:
                if e.pgcode == STALE_TOKEN:
                    return fail(EXIT_STALE, f"STALE TOKEN: PostgreSQL refused token {lease.token} for report "
                                            f"{args.report_id} (SQLSTATE 55F01): {e.pgerror.strip()}; "
                                            "a newer holder wrote, stopping")
                raise  # main() reports it (exit 11)
            say(f"wrote report {args.report_id} with token {lease.token} seq {seq} ({i + 1}/{args.writes})")
        return EXIT_OK


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="Exit codes" + __doc__.split("Exit codes", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--setup", action="store_true", help="create pg_fence and the reports table, then exit")
    p.add_argument("--key", help="lock key, e.g. report:7")
    p.add_argument("--report-id", type=int, help="the row of reports to write")
    p.add_argument("--body", default="", help="what to write into reports.body")
    p.add_argument("--lease", default="10s", help="lease length (default 10s)")
    p.add_argument("--wait", default="30s", help="queue behind a holder up to this long (default 30s)")
    p.add_argument("--owner", default="", help="owner name (same owner: same token on a retry)")
    p.add_argument("--work", default="0s", help="pretend to work this long before each write (default 0s)")
    p.add_argument("--writes", type=int, default=1, help="writes to make while holding the lock (default 1)")
    p.add_argument("--no-lease-check", action="store_true",
                   help="write even when the lease is lost (shows the database refusing the stale token)")
    p.add_argument("--endpoints", default=None, help="coordinator members (default: $FENCE_ENDPOINTS)")
    p.add_argument("--dsn", default="", help="libpq connection string (default: the PG* environment)")
    args = p.parse_args(argv)
    try:
        conn = psycopg2.connect(args.dsn)
    except psycopg2.Error as e:
        return fail(EXIT_DATABASE, f"cannot connect to PostgreSQL: {str(e).strip()}")
    try:
        if args.setup:
            with conn, conn.cursor() as cur:
                cur.execute(SETUP_SQL)
            say("reports table ready (pg_fence guard installed, mode sequenced)")
            return EXIT_OK
        if not args.key or args.report_id is None or args.writes < 1:
            return fail(EXIT_USAGE, "--key and --report-id are required (and --writes at least 1)")
        return work(args, conn)
    except (ValueError, pgfence.FenceError, psycopg2.Error) as e:
        code = exit_code_of(e)
        if code == EXIT_LEASE_LOST:
            return fail(code, f"LEASE LOST: {e}; stopping without writing")
        if isinstance(e, psycopg2.Error):
            return fail(code, f"PostgreSQL error {e.pgcode}: {(e.pgerror or str(e)).strip()}")
        return fail(code, f"{e.kind}: {e}" if isinstance(e, pgfence.FenceError) else f"usage: {e}")
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
