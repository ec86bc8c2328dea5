#!/usr/bin/python3
"""pgfence.lock() against a real 3-member cluster: tokens grow across
acquisitions; the lock is released when the block ends and when it raises;
the background keepalive keeps a short lease past its length; a waiting
lock() gets the key when its holder leaves; a refused keepalive makes the
lease lost at once; and with every member stopped, lease.lost turns true at
the deadline (send of the last successful keepalive + lease x (1 - rho)),
checked against time.monotonic()."""

import signal
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
            # 600ms lease, keepalive every 190ms: 4 keepalives take the holder well past the first lease.
            harness.wait_until(3, lambda: lease.keepalives >= 4 or lease.lost, "four keepalives")
            self.assertFalse(lease.lost, lease.lost_reason)
            self.assertGreater(time.monotonic(), acquired_deadline + 0.1)
            self.assertAlmostEqual(lease.deadline, lease.last_sent + 0.57, delta=1e-6)
            self.assertEqual(self.client.get("keep:k").token, lease.token)

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
            # The next keepalive (a third of 2.85s after the last) is refused: lost, long before the deadline.
            self.assertTrue(lease.lost_event.wait(2.0), "lease not lost after a refused keepalive")
            self.assertLess(time.monotonic(), lease.deadline)
            self.assertTrue(lease.lost)
            self.assertIn("keepalive refused", lease.lost_reason)
            with self.assertRaises(pgfence.LeaseLostError):
                lease.check()
        self.assertEqual(called, [lease])

    def test_zz_lost_by_the_deadline_when_the_cluster_stops(self):  # last: it stops the cluster
        called = []
        with self.lock("lost:k", lease="1s", wait="0s", on_lost=called.append) as lease:
            harness.wait_until(3, lambda: lease.keepalives >= 1, "a first keepalive")
            for i in range(1, 4):
                self.cluster.signal(i, signal.SIGSTOP)
            try:
                stopped_at = time.monotonic()
                # From here no keepalive can succeed: the deadline is fixed by the last success.
                deadline = lease.deadline
                self.assertAlmostEqual(deadline, lease.last_sent + 0.95, delta=1e-6)
                self.assertLessEqual(deadline, stopped_at + 0.95)
                fired = lease.lost_event.wait(deadline - time.monotonic() + 1.0)
                fired_at = time.monotonic()
                self.assertTrue(fired, "lost_event not set within 1s after the deadline")
                self.assertTrue(lease.lost)
                # Not before the deadline (keepalives failed, none was refused) ...
                self.assertGreaterEqual(fired_at, deadline)
                # ... and at it: a timer, not the next failed keepalive (lease/8 = 125ms per attempt).
                self.assertLess(fired_at - deadline, 0.25, f"lost {fired_at - deadline:.3f}s after the deadline")
                self.assertIn("deadline", lease.lost_reason)
                self.assertEqual(lease.deadline, deadline, "the deadline moved while every member was stopped")
            finally:
                harness.sigcont_all(self.cluster)
        self.assertEqual(called, [lease])


if __name__ == "__main__":
    harness.main()
