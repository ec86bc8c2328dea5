"""The fenced outbox end to end: fence_enqueue in a real PostgreSQL with
pg_fence, the relay (python3 -m pgfence.relay) as separate processes, a real
deduplicating HTTP receiver (receiver.py) and, for the paused worker, a real
coordinator and a worker process that is SIGSTOPped.

Ports (this suite's range, 14000..14399): receivers 14000..14049 (14005:
nothing ever listens there; 14060..14069: test_relay_unit.py), relay
metrics 14050..14059, PostgreSQL 14100, the coordinator 14201/14301.

Environment: FENCE_COORDINATOR_BIN (required). pg_fence must be installed
in the host's PostgreSQL (make test does it).
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

import harness  # noqa: E402
from harness import PYTHON, ROOT, WORK, wait_until  # noqa: E402
from receiver import Receiver  # noqa: E402

import psycopg2  # noqa: E402

import pgfence  # noqa: E402
import pgfence.outbox  # noqa: E402

PG_PORT = 14100
COORDINATOR_BASE = 14200
harness._free_base = lambda n: COORDINATOR_BASE  # the suite's ports, not harness's random ones

CLIENT_PATH = os.path.join(ROOT, "clients", "python")


def db():
    conn = psycopg2.connect("")
    conn.autocommit = True
    return conn


def query(sql, args=()):
    with db() as conn, conn.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall() if cur.description else []
    conn.close()
    return rows


def enqueue(target, token, op, endpoint, payload):
    conn = db()
    try:
        with conn.cursor() as cur:
            return pgfence.outbox.enqueue(cur, target, token, op, endpoint, payload)
    finally:
        conn.close()


class Relay:
    """python3 -m pgfence.relay as a child process, its log in WORK."""

    count = 0

    def __init__(self, *flags):
        Relay.count += 1
        self.log_path = os.path.join(WORK, f"relay-{Relay.count}.log")
        self.log = open(self.log_path, "w")
        env = dict(os.environ, PYTHONPATH=CLIENT_PATH)
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "pgfence.relay", "--idle", "50ms", "--log-every", "1s", *flags],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        harness._cleanups.append(self.kill)

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self.log.close()

    def text(self):
        with open(self.log_path) as f:
            return f.read()


def run_once(*flags):
    """python3 -m pgfence.relay --once: rounds until none claims an entry; its CompletedProcess."""
    r = subprocess.run([PYTHON, "-m", "pgfence.relay", "--once", *flags], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=CLIENT_PATH), timeout=30)
    assert r.returncode == 0, r.stderr
    return r


def entries(where="true"):
    return query(f"SELECT operation_id, token, state, attempts, last_status, last_error, idempotency_key "
                 f"FROM fence_outbox WHERE {where} ORDER BY id")


def states(where="true"):
    return [r[2] for r in entries(where)]


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(line.split()[1])
    raise AssertionError(f"no metric {name}")


# A worker: holds mail:paid under a lease, enqueues one receipt per line it
# reads on stdin (each in its own transaction, fence_enqueue under its token),
# and says on stdout what happened. The test SIGSTOPs it between two lines.
WORKER = textwrap.dedent("""
    import sys, psycopg2, pgfence, pgfence.outbox
    client = pgfence.Client(sys.argv[1])
    lease = client.acquire("mail:paid", lease="1s", wait="0s")
    print("token", lease.token, flush=True)
    db = psycopg2.connect("")
    for line in sys.stdin:
        op, url = line.split()
        try:
            with db, db.cursor() as cur:
                key = pgfence.outbox.enqueue(cur, "mail:paid", lease.token, op, url, {"op": op})
            print("enqueued", op, key, flush=True)
        except psycopg2.Error as e:
            print("refused", op, e.pgcode, e.pgerror.splitlines()[0], flush=True)
""")


class OutboxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = harness.Postgres("pg", port=PG_PORT)
        harness.psql("CREATE EXTENSION pg_fence")

    def setUp(self):
        query("DELETE FROM fence_outbox")
        self.receivers = []

    def tearDown(self):
        for r in self.receivers:
            r.stop()

    def receiver(self, port):
        r = Receiver(port)
        self.receivers.append(r)
        return r

    def test_a_paused_worker_side_effect_is_never_delivered(self):
        rec = self.receiver(14000)
        cluster = harness.Cluster("cluster-a", n=1)
        worker = subprocess.Popen([PYTHON, "-c", WORKER, cluster.endpoints], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=CLIENT_PATH))
        harness._cleanups.append(lambda: worker.poll() is None and worker.kill())
        old = int(worker.stdout.readline().split()[1])
        # 1. under its lease the worker enqueues a receipt; it commits, nobody delivers it yet
        worker.stdin.write(f"receipt-1 {rec.url()}\n")
        worker.stdin.flush()
        self.assertEqual(worker.stdout.readline().split()[:2], ["enqueued", "receipt-1"])
        # 2. the worker pauses; its lease runs out and a new holder publishes its generation
        worker.send_signal(signal.SIGSTOP)
        client = pgfence.Client(cluster.endpoints)
        self.addCleanup(client.close)
        new = wait_until(10, lambda: self._try_acquire(client, "mail:paid"), "the new holder's grant").token
        self.assertGreater(new, old)
        self.assertEqual(query("SELECT fence_advance('mail:paid', %s)", (new,)), [(True,)])
        new_key = enqueue("mail:paid", new, "receipt-1", rec.url(), {"op": "receipt-1"})
        # 3. the worker resumes: its next side effect is refused at enqueue (55F01)
        worker.send_signal(signal.SIGCONT)
        worker.stdin.write(f"receipt-2 {rec.url()}\n")
        worker.stdin.flush()
        line = worker.stdout.readline().split()
        self.assertEqual(line[:3], ["refused", "receipt-2", "55F01"], line)
        worker.stdin.close()
        worker.wait(10)
        worker.stdout.close()
        # 4. the relay supersedes the receipt the old holder committed, and delivers the new one
        relay = Relay("--metrics", "127.0.0.1:14050")
        wait_until(10, lambda: "pending" not in states(), "no entry pending")
        rows = {(r[0], r[1]): r for r in entries()}
        self.assertEqual(sorted(rows), [("receipt-1", old), ("receipt-1", new)])
        self.assertEqual(rows[("receipt-1", old)][2], "superseded")
        self.assertIn(f"token {old} is older than the fence {new}", rows[("receipt-1", old)][5])
        self.assertEqual(rows[("receipt-1", new)][2], "delivered")
        applied, received = rec.counts()
        self.assertEqual(applied, {new_key: 1})
        self.assertEqual(received, {new_key: 1})
        self.assertEqual(metric(14050, "pgfence_relay_superseded_total"), 1)
        relay.kill(signal.SIGTERM)
        self.assertEqual(relay.proc.returncode, 0)
        self.assertIn("superseded: token", relay.text())

    @staticmethod
    def _try_acquire(client, key):
        try:
            return client.acquire(key, lease="5s", wait="0s")
        except pgfence.HeldError:
            return None

    def test_b_relay_killed_between_delivery_and_marking_redelivers_same_key(self):
        rec = self.receiver(14001)
        key = enqueue("invoice:9", 7, "charge", rec.url(), {"amount": 12})
        rec.hold.set()
        relay = Relay("--concurrency", "1", "--batch", "1")
        # the receiver applied the effect and holds its answer; the relay waits for it
        self.assertTrue(rec.holding.wait(15), "the relay never delivered")
        relay.kill(signal.SIGKILL)
        rec.hold.clear()
        rec.release.set()
        # PostgreSQL ends the dead relay's transaction: the entry is still pending, untried
        wait_until(10, lambda: query("SELECT count(*) FROM pg_stat_activity "
                                     "WHERE application_name = 'fence-relay'") == [(0,)],
                   "the killed relay's session gone")
        self.assertEqual([r[2:4] for r in entries()], [("pending", 0)])
        # a new relay delivers it again, with the same key; the receiver applies it once
        relay2 = Relay()
        wait_until(10, lambda: states() == ["delivered"], "delivered after the restart")
        applied, received = rec.counts()
        self.assertEqual(received, {key: 2})
        self.assertEqual(applied, {key: 1})
        self.assertEqual(json.loads(rec.bodies[key]), {"amount": 12})
        relay2.kill(signal.SIGTERM)

    def test_c_receiver_down_is_retried_with_backoff_and_the_backlog_shows(self):
        url = "http://127.0.0.1:14002/hook"
        keys = [enqueue("report:1", 3, f"notify-{i}", url, {"i": i}) for i in range(3)]
        relay = Relay("--backoff", "200ms", "--max-backoff", "1s", "--metrics", "127.0.0.1:14051")
        wait_until(15, lambda: query("SELECT entries, retried FROM fence_outbox_backlog "
                                     "WHERE state = 'pending'") == [(3, 3)],
                   "3 pending entries, each tried")
        wait_until(15, lambda: min(r[3] for r in entries()) >= 2, "a second attempt of each")
        backlog = query("SELECT state, entries, oldest_age > interval '0', next_attempt_at > now() - interval '1s' "
                        "FROM fence_outbox_backlog WHERE state = 'pending'")
        self.assertEqual(backlog, [("pending", 3, True, True)])
        for row in entries():
            self.assertIn("ConnectionRefusedError", row[5])
            self.assertIsNone(row[4])
        # backoff: attempts grow slowly (200ms, 400ms, 800ms, 1s, ...), not once per idle pause
        self.assertLess(max(r[3] for r in entries()), 10)
        self.assertGreaterEqual(metric(14051, "pgfence_relay_retried_total"), 6)
        rec = self.receiver(14002)
        wait_until(15, lambda: states() == ["delivered"] * 3, "delivered once the receiver is up")
        applied, _ = rec.counts()
        self.assertEqual(applied, {k: 1 for k in keys})
        self.assertEqual(query("SELECT entries FROM fence_outbox_backlog WHERE state = 'pending'"), [(0,)])
        relay.kill(signal.SIGTERM)

    def test_d_4xx_parks_the_entry_with_the_answer(self):
        rec = self.receiver(14003)
        rec.status, rec.answer = 422, b"no such mailbox: nobody@example.org"
        enqueue("mail:3", 1, "bounce", rec.url(), {"to": "nobody@example.org"})
        relay = Relay("--backoff", "100ms")
        wait_until(10, lambda: states() == ["parked"], "parked")
        row = entries()[0]
        self.assertEqual(row[3:5], (1, 422))
        self.assertIn("HTTP 422: no such mailbox: nobody@example.org", row[5])
        # parked entries are not retried: a relay round (--once) leaves it alone
        relay.kill(signal.SIGTERM)
        once = run_once("--backoff", "100ms")
        self.assertIn("rounds=0", once.stderr)
        self.assertEqual(entries()[0][2:4], ("parked", 1))
        self.assertEqual(sum(rec.counts()[1].values()), 1)
        first, relay = relay, Relay("--backoff", "100ms")
        self.assertEqual(query("SELECT entries FROM fence_outbox_backlog WHERE state = 'parked'"), [(1,)])
        # a 503 is retried; an operator's fence_outbox_retry of the parked entry, then a 2xx, delivers it
        rec.status = 503
        self.assertEqual(query("SELECT fence_outbox_retry(id) FROM fence_outbox"), [(True,)])
        wait_until(10, lambda: entries()[0][3] >= 2, "retried after a 503")
        self.assertEqual(entries()[0][2:5], ("pending", entries()[0][3], 503))
        rec.status = 200
        wait_until(10, lambda: states() == ["delivered"], "delivered after the retry")
        self.assertIn("parked: HTTP 422", first.text())
        # a row written without fence_enqueue (no endpoint check): fence_outbox_guard admits a
        # direct INSERT only from a superuser (this test's role; a restore), and the relay
        # still parks its bad endpoint, naming it
        query("INSERT INTO fence_outbox (target, token, operation_id, idempotency_key, endpoint, payload) "
              "VALUES ('mail:3', 1, 'direct', 'k-direct', 'ftp://h/x', '{}')")
        wait_until(10, lambda: states("operation_id = 'direct'") == ["parked"], "the direct row parked")
        self.assertIn("invalid endpoint 'ftp://h/x'", entries("operation_id = 'direct'")[0][5])
        relay.kill(signal.SIGTERM)

    def test_d2_max_attempts_parks_an_entry_that_keeps_failing(self):
        enqueue("mail:4", 1, "never", "http://127.0.0.1:14005/hook", {})  # nothing listens there
        relay = Relay("--backoff", "50ms", "--max-backoff", "100ms", "--max-attempts", "2")
        wait_until(10, lambda: states() == ["parked"], "parked after 2 attempts")
        row = entries()[0]
        self.assertEqual(row[3], 2)
        self.assertTrue(row[5].startswith("after 2 attempts: http://127.0.0.1:14005/hook: ConnectionRefusedError"),
                        row[5])
        relay.kill(signal.SIGTERM)

    def test_d3_batch_bytes_bounds_a_round(self):
        rec = self.receiver(14006)
        keys = [enqueue("big:1", 1, f"big-{i}", rec.url(), {"pad": "x" * 1000}) for i in range(5)]
        # about 1 kB each: a round stops claiming at 1500 bytes, so it takes 2 entries (3 rounds for 5)
        r = run_once("--batch-bytes", "1500")
        self.assertEqual(states(), ["delivered"] * 5)
        self.assertIn("delivered=5 ", r.stderr)
        self.assertIn("rounds=3 ", r.stderr)
        self.assertEqual(rec.counts()[0], {k: 1 for k in keys})
        # one entry larger than --batch-bytes still goes, alone
        big = enqueue("big:1", 1, "huge", rec.url(), {"pad": "y" * 5000})
        r = run_once("--batch-bytes", "100")
        self.assertIn("rounds=1 ", r.stderr)
        self.assertEqual(rec.counts()[0][big], 1)

    def test_e_two_relays_deliver_each_entry_once(self):
        rec = self.receiver(14004)
        rec.delay_s = 0.01  # about 2 s of work for one relay: the other one starts well before it ends
        conn = db()
        with conn.cursor() as cur:
            cur.execute("SELECT fence_enqueue('batch:' || (n %% 10), 1, 'op-' || n, %s, jsonb_build_object('n', n)) "
                        "FROM generate_series(1, 400) AS n", (rec.url(),))
            keys = {r[0] for r in cur.fetchall()}
        conn.close()
        relays = [Relay("--batch", "20", "--concurrency", "2", "--metrics", f"127.0.0.1:{14052 + i}")
                  for i in range(2)]
        wait_until(60, lambda: states("state <> 'delivered'") == [], "all 400 delivered")
        applied, received = rec.counts()
        self.assertEqual(set(received), keys)
        self.assertEqual(set(received.values()), {1}, "an entry was delivered twice")
        self.assertEqual(set(applied.values()), {1})
        delivered = [metric(14052 + i, "pgfence_relay_delivered_total") for i in range(2)]
        self.assertEqual(sum(delivered), 400)
        self.assertGreater(min(delivered), 0, f"one relay delivered everything: {delivered}")
        for r in relays:
            r.kill(signal.SIGTERM)

    def test_f_bad_input_is_refused_naming_the_value(self):
        cases = [
            (("t", 1, "op", "ftp://h/x", {}), "22023", 'invalid endpoint "ftp://h/x": the scheme must be http or https'),
            (("t", 1, "op", "http://", {}), "22023", 'invalid endpoint "http://": no host'),
            (("t", 1, "op", "http://h:99999/", {}), "22023", "the port must be 1 to 65535"),
            (("t", 1, "", "http://h/", {}), "22023", "operation_id must be 1 to 256 bytes long, not 0"),
            (("t", 1, "op", "http://h/", {"x": "y" * 70000}), "54000",
             "larger than pg_fence.max_outbox_payload (65536 bytes)"),
            (("t", -5, "op", "http://h/", {}), "22023", "fencing token must not be negative"),
            (("t", 1, "op", "http://h/", "{not json"), "22P02", "invalid input syntax for type json"),
            ((None, 1, "op", "http://h/", {}), "22004", "target must not be NULL"),
        ]
        for args, code, text in cases:
            with self.subTest(args=str(args)[:60]):
                with self.assertRaises(psycopg2.Error) as cm:
                    enqueue(*args)
                self.assertEqual(cm.exception.pgcode, code, cm.exception.pgerror)
                self.assertIn(text, cm.exception.pgerror)
        self.assertEqual(entries(), [])
        # the key is the same in Python and in PostgreSQL
        for target, token, op in (("mail:7", 41, "welcome"), ("é/ü", 0, "x" * 256), ("a", 2**63 - 1, "b")):
            self.assertEqual(pgfence.outbox.idempotency_key(target, token, op),
                             query("SELECT fence_outbox_key(%s, %s, %s)", (target, token, op))[0][0])
        # the relay refuses bad flags (exit 2) and a database without the outbox (exit 11)
        for flags, code, text in ((["--batch", "0"], 2, "--batch must be 1..10000, not 0"),
                                  (["--timeout", "10"], 2, "invalid duration '10'"),
                                  (["--dsn", "dbname=template1"], 11, "pg_fence is not installed")):
            r = subprocess.run([PYTHON, "-m", "pgfence.relay", *flags], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=CLIENT_PATH), timeout=30)
            self.assertEqual(r.returncode, code, r.stderr)
            self.assertIn(text, r.stderr)


if __name__ == "__main__":
    harness.main()
