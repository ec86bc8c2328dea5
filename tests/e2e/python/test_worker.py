#!/usr/bin/python3
"""clients/python/examples/worker.py end to end, with a real cluster and a
real PostgreSQL with pg_fence (the timeline of README.md and docs/design.md):

- worker A acquires report:7 and is paused (SIGSTOP) until the coordinator
  no longer holds its lease; worker B acquires (a larger token) and writes;
  A, resumed with --no-lease-check, writes with its stale token: PostgreSQL
  refuses it (55F01), A exits 10, and the row holds B's write and token;
- worker C, paused the same way but checking its lease, finds lease.lost on
  resuming, exits 4 and writes nothing;
- worker D, queued behind a holder for longer than its lease's usable time,
  gets the key too late to use it: LeaseLostError from lock(), exit 4;
- worker F finds its key held (--wait 0s): exit 3, with a message naming
  the key and the holder's token; worker G asks for a lease the cluster
  does not grant: exit 2, naming --lease's value as given;
- the worker's exit codes for each error are pgfence's scheme, fencectl's
  codes (pgfence.exitcodes);
- the reports table is sequenced: a worker's --writes 3 are numbered 1, 2, 3
  by lease.next_seq() and all land; one write per number handed out by a
  lease lands with that number, and a delayed write of the same lease with
  an earlier number is refused (55F01) without changing the row.
The cluster signs its grants (--token-signing-key-file) and PostgreSQL
trusts its public key for its cluster ID (fence_trust_key); the reports
table verifies proofs (fence_protect(..., mode => 'sequenced', lock_key =>
'report:{report_id}')).
The client hands out the acquire answer's proof (lease.proof), the worker
sends it, and B's write passes only because it verifies; a proof for another
key, a corrupted one or none is refused with 55F02 (tests/e2e/proof/pg_proof.sh
checks the extension itself more widely)."""

import os
import re
import signal
import subprocess
import sys
import time
import unittest

import harness
from harness import pgfence
import psycopg2  # noqa: E402  (Debian's python3-psycopg2: harness.PYTHON runs this file)

sys.path.insert(0, os.path.dirname(harness.WORKER))
import worker as example  # noqa: E402  (clients/python/examples/worker.py)

EXIT_USAGE, EXIT_HELD, EXIT_LOST, EXIT_STALE = 2, 3, 4, 10
STALE, BAD_PROOF = "55F01", "55F02"


def sql(query, params=()):
    """One statement with psycopg2 (PG* from harness.Postgres); its rows."""
    conn = psycopg2.connect("")
    try:
        with conn, conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []
    finally:
        conn.close()


def write_row(report_id, token, proof, seq, body=None):
    """The worker's UPDATE of one report with `token`, `seq` and `proof` (""
    sends none) -> the SQLSTATE of its error, or "00000"."""
    conn = psycopg2.connect("")
    try:
        with conn, conn.cursor() as cur:
            cur.execute("SELECT set_config('pg_fence.token', %s, true)", (str(token),))
            cur.execute("SELECT set_config('pg_fence.seq', %s, true)", (str(seq),))
            if proof:
                cur.execute("SELECT set_config('pg_fence.proof', %s, true)", (proof,))
            cur.execute("UPDATE reports SET body = %s WHERE report_id = %s",
                        (body or f"token {token} seq {seq}", report_id))
        return "00000"
    except psycopg2.Error as e:
        return e.pgcode
    finally:
        conn.close()


class WorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = harness.Postgres("pg")
        key = os.path.join(harness.WORK, "signing.key")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], check=True,
                       capture_output=True, timeout=30)
        os.chmod(key, 0o600)
        public_pem = subprocess.run(["openssl", "pkey", "-in", key, "-pubout"], check=True,
                                    capture_output=True, text=True, timeout=30).stdout
        cls.cluster = harness.Cluster("cluster", flags=f"--token-signing-key-file {key}")
        os.environ["FENCE_ENDPOINTS"] = cls.cluster.endpoints
        cls.client = pgfence.Client()
        r = cls.worker("--setup").communicate(timeout=30)
        assert "reports table ready" in r[0], r
        # PostgreSQL trusts the cluster's key, and the reports table verifies proofs for the
        # worker's lock keys (report:<report_id>), as tests/e2e/proof/pg_proof.sh.
        cluster_id = cls.client.status()["cluster_id"]
        kid = sql("SELECT fence_trust_key(%s, %s::numeric)", (public_pem, cluster_id))[0][0]
        assert re.fullmatch(r"[0-9a-f]{16}", kid), kid
        sql("SELECT fence_protect('reports', mode => 'sequenced', lock_key => 'report:{report_id}')")

    @staticmethod
    def worker(*args):
        return subprocess.Popen([harness.PYTHON, harness.WORKER, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def paused_holder(self, *args):
        """Starts a worker, waits (bounded) for its "acquired" line, SIGSTOPs
        it, and waits until the coordinator no longer holds its key."""
        p = self.worker(*args)
        self.addCleanup(lambda: (p.poll() is None) and (p.send_signal(signal.SIGCONT), p.kill()))
        line = p.stdout.readline()  # bounded: the worker's acquire has a 30s wait + 10s timeout at most
        m = re.search(r"acquired (\S+) token (\d+)", line)
        self.assertIsNotNone(m, f"no 'acquired' line: {line!r} {p.stderr.read() if p.poll() is not None else ''}")
        p.send_signal(signal.SIGSTOP)
        key, token = m.group(1), int(m.group(2))

        def expired():
            try:
                return self.client.get(key).token != token
            except pgfence.NotFoundError:
                return True
        harness.wait_until(10, expired, f"{key} token {token} expired on the coordinator")
        return p, token

    def test_stale_worker_is_refused(self):
        a, a_token = self.paused_holder("--key", "report:7", "--report-id", "7", "--body", "worker-A",
                                        "--lease", "1s", "--wait", "0s", "--work", "2s", "--no-lease-check")
        b = self.worker("--key", "report:7", "--report-id", "7", "--body", "worker-B", "--lease", "2s",
                        "--wait", "5s")
        out, err = b.communicate(timeout=30)
        # The table verifies proofs: B's write passes only with a proof that verifies for report:7.
        self.assertEqual(b.returncode, 0, f"worker B: {out} {err}")
        b_token = int(re.search(r"wrote report 7 with token (\d+)", out).group(1))
        self.assertGreater(b_token, a_token)
        a.send_signal(signal.SIGCONT)
        out, err = a.communicate(timeout=30)
        self.assertEqual(a.returncode, EXIT_STALE, f"worker A: {out} {err}")
        self.assertIn("STALE TOKEN", err)
        self.assertIn("55F01", err)
        self.assertEqual(harness.psql("SELECT body || ' ' || fence FROM reports WHERE report_id = 7"),
                         f"worker-B {b_token}")

    def test_proof(self):
        lease = self.client.acquire("report:9", lease="2s")
        self.assertRegex(lease.proof, r"^v1\.[0-9a-f]{16}\.[0-9]+\.[A-Za-z0-9_-]+$")
        self.client.release("report:9", lease.token)
        with pgfence.lock("report:9", lease="2s", wait="0s") as held:
            self.assertRegex(held.proof, r"^v1\.")
            self.assertNotEqual(held.proof, lease.proof)

    def test_wrong_proof_is_refused(self):
        lease = self.client.acquire("report:7", lease="10s", wait="5s")
        other = self.client.acquire("report:9", lease="10s", wait="5s")
        try:
            sig = lease.proof.rsplit(".", 1)[1]
            i = len(sig) // 2  # a middle character: the last one also carries padding bits
            corrupted = lease.proof[:-len(sig)] + sig[:i] + ("A" if sig[i] != "A" else "B") + sig[i + 1:]
            before = sql("SELECT body, fence FROM reports WHERE report_id = 7")
            for what, proof in (("report:9's proof", other.proof), ("a corrupted proof", corrupted),
                                ("no proof", "")):
                self.assertEqual(write_row(7, lease.token, proof, 1), BAD_PROOF, what)
            self.assertEqual(sql("SELECT body, fence FROM reports WHERE report_id = 7"), before, "row 7 changed")
            self.assertEqual(write_row(7, lease.token, lease.proof, 1), "00000", "report:7's own proof")
            self.assertEqual(sql("SELECT fence FROM reports WHERE report_id = 7"), [(lease.token,)])
        finally:
            self.client.release("report:7", lease.token)
            self.client.release("report:9", other.token)

    def test_long_wait_lost_lease_stops_worker(self):
        holder = self.client.acquire("report:6", lease="10s")
        d = self.worker("--key", "report:6", "--report-id", "6", "--body", "worker-D", "--lease", "1s",
                        "--wait", "10s")
        self.addCleanup(lambda: (d.poll() is None) and d.kill())
        harness.wait_until(10, lambda: self.cluster.waiters(self.client) >= 1, "worker D queued")
        # D sent its acquire before it was queued; its lease counts from that send, so it is
        # lost 1s x 0.95 - 100ms = 850ms later. Release only after 1s: D's grant comes too late.
        queued_at = time.monotonic()
        time.sleep(max(0.0, queued_at + 1.0 - time.monotonic()))
        self.client.release("report:6", holder.token)
        out, err = d.communicate(timeout=30)
        self.assertEqual(d.returncode, EXIT_LOST, f"worker D: {out} {err}")
        self.assertIn("LEASE LOST", err)
        self.assertNotIn("acquired", out)
        self.assertEqual(sql("SELECT count(*) FROM reports WHERE report_id = 6"), [(0,)])

    def test_exit_codes_are_fencectls(self):  # pgfence.exitcodes; 10 (55F01) end to end: above
        class Stale(psycopg2.DatabaseError):
            pgcode = STALE

        class BadProof(psycopg2.DatabaseError):
            pgcode = BAD_PROOF
        cases = [(pgfence.HeldError("held", 409), 3), (pgfence.LeaseLostError("lost"), 4),
                 (pgfence.UnavailableError("down"), 5), (pgfence.NotFoundError("none", 404), 6),
                 (pgfence.NotHeldError("not held", 404), 6),
                 (pgfence.NotHeldError("lost", 404, exit_code=4), 4),
                 (pgfence.NotAuthorizedError("no", 403), 7), (pgfence.NotAuthorizedError("who", 401), 7),
                 (pgfence.BadRequestError("bad", 400), 2), (pgfence.TableFullError("full", 507), 1),
                 (pgfence.ProtocolError("?"), 1), (pgfence.FenceError("?"), 1),
                 (ValueError("invalid duration"), 2), (Stale("stale"), 10), (BadProof("proof"), 11),
                 (psycopg2.OperationalError("down"), 11), (KeyError("a bug"), None)]
        for error, code in cases:
            self.assertEqual(example.exit_code_of(error), code, repr(error))
        self.assertEqual((pgfence.exitcodes.EXIT_UNKNOWN_MEMBER, pgfence.exitcodes.EXIT_REFUSED), (8, 9))

    def test_held_and_refused_lease_exit_codes(self):
        holder = self.client.acquire("report:3", lease="10s")
        try:
            f = self.worker("--key", "report:3", "--report-id", "3", "--lease", "2s", "--wait", "0s")
            out, err = f.communicate(timeout=30)
            self.assertEqual(f.returncode, EXIT_HELD, f"worker F: {out} {err}")
            self.assertIn(f"held: 'report:3' is held with token {holder.token}", err)
        finally:
            self.client.release("report:3", holder.token)
        g = self.worker("--key", "report:3", "--report-id", "3", "--lease", "1h", "--wait", "0s")
        out, err = g.communicate(timeout=30)
        self.assertEqual(g.returncode, EXIT_USAGE, f"worker G: {out} {err}")
        self.assertIn("acquire 'report:3': lease='1h' is longer than the cluster allows", err)
        self.assertNotIn("lease_ms", err)

    def test_sequenced_writes(self):
        w = self.worker("--key", "report:5", "--report-id", "5", "--body", "worker-E", "--lease", "2s",
                        "--wait", "5s", "--writes", "3")
        out, err = w.communicate(timeout=30)
        self.assertEqual(w.returncode, 0, f"worker E: {out} {err}")
        seqs = [int(n) for n in re.findall(r"wrote report 5 with token \d+ seq (\d+)", out)]
        self.assertEqual(seqs, [1, 2, 3], out)
        self.assertEqual(harness.psql("SELECT body || ' ' || fence_seq FROM reports WHERE report_id = 5"),
                         "worker-E 3")
        harness.psql("INSERT INTO reports VALUES (4, 'initial', 0, 0) ON CONFLICT DO NOTHING")
        with pgfence.lock("report:4", lease="5s", wait="5s") as lease:
            for _ in range(3):  # one real write per number handed out
                seq = lease.next_seq()
                self.assertEqual(write_row(4, lease.token, lease.proof, seq), "00000", f"seq {seq}")
                self.assertEqual(sql("SELECT fence, fence_seq FROM reports WHERE report_id = 4"),
                                 [(lease.token, seq)])
            self.assertEqual(lease.last_seq, 3)
            # The lease's first write, delayed until after its third: refused, the row keeps the third.
            self.assertEqual(write_row(4, lease.token, lease.proof, 1, body="late"), STALE)
            self.assertEqual(sql("SELECT body, fence, fence_seq FROM reports WHERE report_id = 4"),
                             [(f"token {lease.token} seq 3", lease.token, 3)])

    def test_lost_lease_stops_worker(self):
        harness.psql("INSERT INTO reports VALUES (8, 'initial', 0) ON CONFLICT DO NOTHING")
        c, _ = self.paused_holder("--key", "report:8", "--report-id", "8", "--body", "worker-C",
                                  "--lease", "1s", "--wait", "0s", "--work", "2s")
        c.send_signal(signal.SIGCONT)
        out, err = c.communicate(timeout=30)
        self.assertEqual(c.returncode, EXIT_LOST, f"worker C: {out} {err}")
        self.assertIn("LEASE LOST", err)
        self.assertEqual(harness.psql("SELECT body || ' ' || fence FROM reports WHERE report_id = 8"),
                         "initial 0")


if __name__ == "__main__":
    harness.main()
