#!/usr/bin/python3
"""Elections from Python against a real 3-member cluster: pgfence.election()
campaigns, publishes its value (election_leader shows it, with the leader's
token), proclaims a new one and resigns on exit (also on an exception), and
the next campaigner, waiting, leads at once with a larger token; a
campaign that finds a leader with wait="0s" is HeldError; proclaim and
resign with a token that does not lead are NotHeldError; election_leader of
an election nobody leads is NotFoundError; observe() yields the leader (or
None) first and then each change, in order."""

import re
import threading
import time
import unittest
import urllib.request

import harness
from harness import pgfence


class ElectionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = harness.Cluster("cluster")
        cls.client = pgfence.Client(cls.cluster.endpoints)

    def waiters(self):
        """The waiting acquires the members count (only the leader has any)."""
        total = 0
        for ep in self.cluster.endpoints.split(","):
            try:
                with urllib.request.urlopen(f"http://{ep}/metrics", timeout=1) as r:
                    text = r.read().decode()
            except OSError:
                continue
            m = re.search(r"^pgfence_waiters (\d+)", text, re.M)
            total += int(m.group(1)) if m else 0
        return total

    def election(self, name, value, **kw):
        return pgfence.election(name, value=value, endpoints=self.cluster.endpoints, **kw)

    def test_lead_proclaim_resign(self):
        with self.election("billing", "http://a:80", lease="10s", wait="0s") as leader:
            self.assertEqual(leader.key, "election/billing")
            now = self.client.election_leader("billing")
            self.assertEqual((now.name, now.value, now.token), ("billing", "http://a:80", leader.token))
            leader.proclaim("http://b:80")
            self.assertEqual(self.client.election_leader("billing").value, "http://b:80")
            self.assertEqual(self.client.election_leader("billing").token, leader.token)
            with self.assertRaises(pgfence.HeldError):
                self.client.campaign("billing", "intruder", lease="2s", wait="0s")
            with self.assertRaises(pgfence.NotHeldError):
                self.client.proclaim("billing", leader.token + 1000, "stale")
            with self.assertRaises(pgfence.NotHeldError):
                self.client.resign("billing", leader.token + 1000)
        with self.assertRaises(pgfence.NotFoundError, msg="no resign on exit"):
            self.client.election_leader("billing")

    def test_resign_hands_over_at_once_to_the_waiting_campaigner(self):
        got = {}

        def second():
            # Its own client: a Client runs one call at a time.
            with self.election("jobs", "second", lease="10s", wait="20s") as leader:
                got["token"] = leader.token
                got["at"] = time.monotonic()

        with self.election("jobs", "first", lease="10s", wait="0s") as first:
            waiter = threading.Thread(target=second)
            waiter.start()
            # The second campaign queues behind the first (the leader counts a waiter).
            harness.wait_until(5, lambda: self.waiters() >= 1, "the second campaign waiting")
            self.assertEqual(self.client.election_leader("jobs").value, "first")
            resigned_at = time.monotonic()
        waiter.join(15)
        self.assertFalse(waiter.is_alive())
        self.assertGreater(got["token"], first.token)
        # At once: long before the first leader's 10s lease could have run out.
        self.assertLess(got["at"] - resigned_at, 3.0)

    def test_resign_on_exception(self):
        with self.assertRaises(KeyError):
            with self.election("crash", "v", lease="10s", wait="0s"):
                raise KeyError("boom")
        with self.assertRaises(pgfence.NotFoundError):
            self.client.election_leader("crash")

    def test_observe_yields_the_leader_then_each_change(self):
        seen = []
        stop = time.monotonic() + 3.0
        watcher = self.client.copy()

        def watch():
            for now in watcher.observe("watched", until=stop):
                seen.append(None if now is None else now.value)

        t = threading.Thread(target=watch)
        t.start()
        harness.wait_until(2, lambda: seen, "observe's first answer")
        with self.election("watched", "one", lease="10s", wait="0s") as leader:
            harness.wait_until(2, lambda: seen[-1] == "one", "observe sees the leader")
            leader.proclaim("two")
            harness.wait_until(2, lambda: seen[-1] == "two", "observe sees the proclaim")
        harness.wait_until(2, lambda: seen[-1] is None, "observe sees the resign")
        t.join(5)
        self.assertEqual(seen, [None, "one", "two", None])


if __name__ == "__main__":
    harness.main()
