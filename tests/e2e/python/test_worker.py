#!/usr/bin/python3
"""clients/python/examples/worker.py end to end, with a real cluster and a
real PostgreSQL with pg_fence (the seed scenario of DESIGN.md):

- worker A acquires report:7 and is paused (SIGSTOP) until the coordinator
  no longer holds its lease; worker B acquires (a larger token) and writes;
  A, resumed with --no-lease-check, writes with its stale token: PostgreSQL
  refuses it (55F01), A exits 3, and the row holds B's write and token;
- worker C, paused the same way but checking its lease, finds lease.lost on
  resuming, exits 7 and writes nothing.
The cluster signs its grants (--token-signing-key-file): the client hands
out the acquire answer's proof (lease.proof), and the worker sends it."""

import os
import re
import signal
import subprocess
import unittest

import harness
from harness import pgfence

EXIT_STALE, EXIT_LOST = 3, 7


class WorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = harness.Postgres("pg")
        key = os.path.join(harness.WORK, "signing.key")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], check=True,
                       capture_output=True, timeout=30)
        os.chmod(key, 0o600)
        cls.cluster = harness.Cluster("cluster", flags=f"--token-signing-key-file {key}")
        os.environ["FENCE_ENDPOINTS"] = cls.cluster.endpoints
        cls.client = pgfence.Client()
        r = cls.worker("--setup").communicate(timeout=30)
        assert "reports table ready" in r[0], r

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
