#!/usr/bin/python3
"""pgfence.lock() against a real 3-member cluster: tokens grow across
acquisitions; the lock is released when the block ends and when it raises;
the background keepalive keeps a short lease past its length; a waiting
lock() gets the key when its holder leaves; a refused keepalive makes the
lease lost at once; a margin that leaves no usable lease is refused before
any request; and with every member stopped, lease.lost turns true at
deadline - margin, before the deadline (send of the last successful
keepalive + lease x (1 - rho)), checked against time.monotonic().
A lease's sequence numbers (next_seq) start at 1 and grow by one, per lease;
threads calling next_seq at once get each number of 1..N once; after MAX_SEQ
next_seq raises ValueError and hands out nothing more."""

import signal
import sys
import threading
import time
import unittest

import harness
from harness import pgfence


class LockTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = harness.Cluster("cluster")
        cls.client = pgfence.Client(cls.cluster.endpoints)

    def lock(self, key, **kw):
        return pgfence.lock(key, endpoints=self.cluster.endpoints, **kw)

    def test_token_grows_and_release_on_exit(self):
        tokens = []
        for _ in range(2):
            with self.lock("report:7", lease="2s", wait="0s") as lease:
                self.assertEqual(self.client.get("report:7").token, lease.token)
                self.assertFalse(lease.lost)
                tokens.append(lease.token)
            with self.assertRaises(pgfence.NotFoundError, msg="not released on exit"):
                self.client.get("report:7")
        self.assertLess(tokens[0], tokens[1])

    def test_release_on_exception(self):
        with self.assertRaises(KeyError):
            with self.lock("report:8", lease="2s", wait="0s", client=self.client):
                raise KeyError("boom")
        with self.assertRaises(pgfence.NotFoundError, msg="not released after an exception"):
            self.client.get("report:8")

    def test_keepalive_holds_past_the_lease(self):
        with self.lock("keep:k", lease="600ms", wait="0s") as lease:
            acquired_deadline = lease.deadline
            # 600ms lease, margin 60ms, keepalive every (570 - 60) / 3 = 170ms: 4 keepalives take
            # the holder well past the first lease.
            harness.wait_until(3, lambda: lease.keepalives >= 4 or lease.lost, "four keepalives")
            self.assertFalse(lease.lost, lease.lost_reason)
            self.assertGreater(time.monotonic(), acquired_deadline + 0.1)
            self.assertAlmostEqual(lease.margin, 0.06)
            t = lease.times()  # one reading: a keepalive may succeed meanwhile
            self.assertAlmostEqual(t.deadline, t.last_sent + 0.57, delta=1e-6)
            self.assertAlmostEqual(t.lost_at, t.deadline - 0.06, delta=1e-6)
            self.assertEqual(self.client.get("keep:k").token, lease.token)

    def test_margin_is_checked_before_any_request(self):
        for margin in ("950ms", "2s", "-1s"):  # 950ms: all of a 1s lease x (1 - 5%)
            with self.assertRaises(ValueError, msg=margin):
                with self.lock("margin:k", lease="1s", wait="0s", margin=margin):
                    pass
        with self.assertRaises(TypeError):
            self.lock("margin:k", lease="1s", margin=0.5)
        with self.assertRaises(pgfence.NotFoundError, msg="a refused margin acquired the key"):
            self.client.get("margin:k")
        with self.lock("margin:k", lease="1s", wait="0s", margin="300ms") as lease:
            t = lease.times()
            self.assertEqual(lease.margin, 0.3)
            self.assertAlmostEqual(t.lost_at, t.deadline - 0.3, delta=1e-6)

    def test_waiting_lock_gets_the_key(self):
        got = []
        with self.lock("queue:k", lease="2s", wait="0s") as first:
            def second():
                with self.lock("queue:k", lease="2s", wait="5s") as lease:
                    got.append(lease.token)
            t = threading.Thread(target=second)
            t.start()
            harness.wait_until(5, lambda: self.cluster.waiters(self.client) >= 1, "the second lock() queued")
        t.join(6)
        self.assertEqual(len(got), 1, "the waiting lock() did not get the key")
        self.assertGreater(got[0], first.token)

    def test_refused_keepalive_loses_the_lease(self):
        called = []
        with self.lock("refused:k", lease="3s", wait="0s", on_lost=called.append) as lease:
            self.client.release("refused:k", lease.token)  # someone else ends it
            # The next keepalive ((2.85s - 0.3s) / 3 after the last) is refused: lost, long before the deadline.
            self.assertTrue(lease.lost_event.wait(2.0), "lease not lost after a refused keepalive")
            self.assertLess(time.monotonic(), lease.deadline)
            self.assertTrue(lease.lost)
            self.assertIn("keepalive refused", lease.lost_reason)
            with self.assertRaises(pgfence.LeaseLostError):
                lease.check()
        self.assertEqual(called, [lease])

    def test_seq_starts_at_one_and_grows_per_lease(self):
        with self.lock("seq:a", lease="2s", wait="0s") as a, self.lock("seq:b", lease="2s", wait="0s") as b:
            self.assertEqual((a.last_seq, b.last_seq), (0, 0))
            self.assertEqual([a.next_seq() for _ in range(3)], [1, 2, 3])
            self.assertEqual(a.last_seq, 3)
            self.assertEqual((b.next_seq(), b.last_seq), (1, 1), "the second lease does not count from 1")
            self.assertEqual((a.next_seq(), a.last_seq), (4, 4))

    def test_seq_from_many_threads_is_each_number_once(self):
        threads_n, calls_n = 8, 5000
        got = [[] for _ in range(threads_n)]
        start = threading.Barrier(threads_n)
        with self.lock("seq:threads", lease="5s", wait="0s") as lease:
            def take(mine):
                start.wait()
                for _ in range(calls_n):
                    mine.append(lease.next_seq())
            interval = sys.getswitchinterval()
            sys.setswitchinterval(1e-6)  # switch threads often: one between a read and a store shows as a duplicate
            try:
                threads = [threading.Thread(target=take, args=(got[i],)) for i in range(threads_n)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(30)
            finally:
                sys.setswitchinterval(interval)
            self.assertFalse(any(t.is_alive() for t in threads), "next_seq threads still running after 30s")
            numbers = [n for mine in got for n in mine]
            total = threads_n * calls_n
            self.assertEqual(len(numbers), total)
            twice = len(numbers) - len(set(numbers))
            self.assertEqual(twice, 0, f"{twice} of {total} numbers were handed out more than once")
            self.assertEqual(set(numbers), set(range(1, total + 1)))
            for mine in got:  # each thread sees its own numbers grow
                self.assertEqual(mine, sorted(mine))
            self.assertEqual(lease.last_seq, total)

    def test_seq_past_the_bigint_maximum_raises(self):
        self.assertEqual(pgfence.MAX_SEQ, 2**63 - 1)
        with self.lock("seq:max", lease="2s", wait="0s") as lease:
            lease._seq = pgfence.MAX_SEQ - 2  # as if that many had been handed out
            self.assertEqual([lease.next_seq(), lease.next_seq()], [pgfence.MAX_SEQ - 1, pgfence.MAX_SEQ])
            for _ in range(2):  # and stays used up: no wrap to 0 or 1, no number past the maximum
                with self.assertRaisesRegex(ValueError, "9223372036854775807"):
                    lease.next_seq()
            self.assertEqual(lease.last_seq, pgfence.MAX_SEQ)

    def test_zz_lost_before_the_deadline_when_the_cluster_stops(self):  # last: it stops the cluster
        called = []

        def on_lost(held):  # from the watchdog thread, right after it set lost
            called.append((time.monotonic(), held.lost, held))
        # A 2s lease with a 1s margin: lost at last_sent + 0.9s, deadline at last_sent + 1.9s.
        with self.lock("lost:k", lease="2s", wait="0s", margin="1s", on_lost=on_lost) as lease:
            harness.wait_until(3, lambda: lease.keepalives >= 1, "a first keepalive")
            for i in range(1, 4):
                self.cluster.signal(i, signal.SIGSTOP)
            try:
                stopped_at = time.monotonic()
                # Bounded: a keepalive in flight now was sent before stopped_at, so lost_at <
                # stopped_at + 0.9s whatever it answers; none sent later can succeed.
                self.assertTrue(lease.lost_event.wait(3.0), "lost_event not set within 3s of stopping the cluster")
                # Read the times only now, once lost: they are final (a success after lost_at
                # does not count), and one reading gives the three together.
                t = lease.times()
                self.assertAlmostEqual(t.deadline, t.last_sent + 1.9, delta=1e-6)
                self.assertAlmostEqual(t.lost_at, t.deadline - 1.0, delta=1e-6)
                self.assertLess(t.last_sent, stopped_at)
                harness.wait_until(2, lambda: called, "on_lost called")
                fired_at, lost_then, _ = called[0]
                self.assertTrue(lost_then)
                # Not before deadline - margin (keepalives failed, none was refused) ...
                self.assertGreaterEqual(fired_at, t.lost_at)
                # ... and before the deadline: a timer at lost_at (1s of slack for a loaded machine).
                self.assertLess(fired_at, t.deadline, f"lost {fired_at - t.deadline:.3f}s after the deadline")
                self.assertTrue(lease.lost)
                self.assertIn("deadline - margin", lease.lost_reason)
                self.assertEqual(lease.times(), t, "the times moved after the lease was lost")
            finally:
                harness.sigcont_all(self.cluster)
        self.assertEqual([c[2] for c in called], [lease])


if __name__ == "__main__":
    harness.main()
