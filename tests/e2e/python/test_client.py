#!/usr/bin/python3
"""The Python client's calls against a real 3-member cluster on loopback:
acquire / keepalive / get / list / release / status with their answers and
lease deadlines; held, not_held, not_found and bad_request errors, whose
messages name the key, the token and a refused lease or wait as the caller
gave it, and whose exit codes are fencectl's; endpoints
from FENCE_ENDPOINTS; a follower's 307 followed to the leader; a stopped
(SIGSTOPped) leader left for the other members; no member answering ->
UnavailableError."""

import datetime
import http.client
import itertools
import json
import os
import signal
import subprocess
import threading
import time
import unittest

import harness
from harness import pgfence


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = harness.Cluster("cluster")
        os.environ["FENCE_ENDPOINTS"] = cls.cluster.endpoints
        cls.client = pgfence.Client()  # endpoints from FENCE_ENDPOINTS

    def test_calls(self):
        c = self.client
        self.assertEqual([str(e) for e in c.endpoints], self.cluster.endpoints.split(","))
        before = time.monotonic()
        a = c.acquire("api:a", lease="2s", wait="0s", owner="me")
        b = c.acquire("api:b", lease="2s")
        other = c.acquire("other:c", lease="2s")
        self.assertGreaterEqual(a.token, 1)
        self.assertLess(a.token, b.token)
        self.assertEqual((a.key, a.lease_ms, a.owner, a.proof), ("api:a", 2000, "me", ""))
        # The lease counts from the send: sent before the answer, deadline = send + 2s x 0.95.
        self.assertTrue(before <= a.sent_at <= a.received_at <= time.monotonic())
        self.assertAlmostEqual(a.deadline, a.sent_at + 1.9, delta=1e-6)
        self.assertEqual(c.acquire("api:a", lease="2s", owner="me").token, a.token, "same owner, same token")

        k = c.keepalive("api:a", a.token)
        self.assertEqual((k.ttl_ms, k.token), (2000, a.token))
        self.assertGreater(k.sent_at, a.sent_at)
        self.assertAlmostEqual(k.deadline, k.sent_at + 1.9, delta=1e-6)

        info = c.get("api:a")
        self.assertEqual((info.key, info.token, info.owner, info.lease_ms), ("api:a", a.token, "me", 2000))
        self.assertTrue(0 < info.ttl_ms <= 2000)
        self.assertEqual([(i.key, i.token) for i in c.list("api:")], [("api:a", a.token), ("api:b", b.token)])
        self.assertIn(("other:c", other.token), [(i.key, i.token) for i in c.list()])

        fencectl = os.environ.get("FENCECTL_BIN")
        if fencectl:  # the same lock as fencectl sees it
            out = subprocess.run([fencectl, "get", "api:b", "-o", "json"], capture_output=True, text=True,
                                 timeout=20, check=True).stdout
            self.assertEqual(json.loads(out)["token"], b.token)

        status = c.status()
        self.assertIn(status["role"], ("leader", "follower"))
        self.assertEqual(len(status["members"]), 3)
        for lock in (a, b, other):
            c.release(lock.key, lock.token)
        self.assertEqual(c.list("api:"), [])

    def test_errors(self):
        c = self.client
        held = c.acquire("err:x", lease="5s")
        with self.assertRaises(pgfence.HeldError) as e:
            c.acquire("err:x", lease="5s", wait="0s")
        self.assertEqual(e.exception.http_status, 409)
        self.assertIn(f"token {held.token}", str(e.exception))
        start = time.monotonic()
        with self.assertRaises(pgfence.HeldError) as e:
            c.acquire("err:x", lease="5s", wait="300ms")
        self.assertGreaterEqual(time.monotonic() - start, 0.3)
        self.assertIn("wait timed out", str(e.exception))
        with self.assertRaises(pgfence.NotHeldError):
            c.keepalive("err:x", held.token + 1000)
        with self.assertRaises(pgfence.NotHeldError):
            c.release("err:x", held.token + 1000)
        c.release("err:x", held.token)
        with self.assertRaises(pgfence.NotHeldError):
            c.release("err:x", held.token)
        with self.assertRaises(pgfence.NotFoundError):
            c.get("err:x")
        with self.assertRaises(pgfence.BadRequestError) as e:
            c.acquire("err:y", lease="10ms")
        self.assertIn("lease='10ms'", str(e.exception))
        self.assertEqual(e.exception.http_status, 400)
        with self.assertRaises(pgfence.BadRequestError):
            c.acquire("", lease="1s")
        with self.assertRaises(ValueError):
            c.acquire("err:y", lease="1.5s")

    def test_error_messages(self):
        """Each error says what happened to which key and token, like fencectl,
        and carries them (key, token, endpoint) and fencectl's exit code."""
        c = self.client
        held = c.acquire("msg:x", lease="5s")
        endpoints = self.cluster.endpoints.split(",")
        try:
            with self.assertRaises(pgfence.HeldError) as e:
                c.acquire("msg:x", lease="5s", wait="0s")
            self.assertEqual(str(e.exception), f"'msg:x' is held with token {held.token}")
            self.assertEqual((e.exception.key, e.exception.token, e.exception.exit_code), ("msg:x", held.token, 3))
            self.assertIn(e.exception.endpoint, endpoints)
            with self.assertRaises(pgfence.HeldError) as e:
                c.acquire("msg:x", lease="5s", wait="200ms")
            self.assertEqual(str(e.exception), "'msg:x' is still held after a wait of 200ms (wait timed out)")
            stale = held.token + 1000
            with self.assertRaises(pgfence.NotHeldError) as e:
                c.release("msg:x", stale)
            self.assertEqual(str(e.exception), f"'msg:x' is not held with token {stale} (not_held)")
            self.assertEqual((e.exception.key, e.exception.token, e.exception.exit_code), ("msg:x", stale, 6))
            with self.assertRaises(pgfence.NotHeldError) as e:
                c.keepalive("msg:x", stale)
            self.assertEqual(str(e.exception),
                             f"'msg:x' is not held with token {stale} any more: the lease is lost (not_held)")
            self.assertEqual(e.exception.exit_code, 4)
        finally:
            c.release("msg:x", held.token)
        with self.assertRaises(pgfence.NotFoundError) as e:
            c.get("msg:none")
        self.assertEqual(str(e.exception), "no lock on 'msg:none' (not_held)")
        self.assertEqual((e.exception.key, e.exception.exit_code), ("msg:none", 6))
        # A lease or wait out of the cluster's bounds, in the caller's terms (the harness's
        # members run with --min-lease 500 and the default --max-lease and --max-wait, 5m).
        for lease, side in (("1h", "longer"), ("100ms", "shorter")):
            with self.assertRaises(pgfence.BadRequestError) as e:
                c.acquire("msg:y", lease=lease)
            self.assertEqual(str(e.exception),
                             f"acquire 'msg:y': lease='{lease}' is {side} than the cluster allows: it grants "
                             "leases from 500ms to 5m (fence-coordinator --min-lease and --max-lease)")
            self.assertEqual((e.exception.key, e.exception.exit_code), ("msg:y", 2))
        with self.assertRaises(pgfence.BadRequestError) as e:
            c.acquire("msg:y", lease=datetime.timedelta(hours=1))
        self.assertIn("lease=datetime.timedelta(seconds=3600) is longer", str(e.exception))
        with self.assertRaises(pgfence.BadRequestError) as e:
            c.acquire("msg:y", lease="1s", wait="10m")
        self.assertEqual(str(e.exception), "acquire 'msg:y': wait='10m' is longer than the cluster allows: it "
                                           "waits at most 5m (fence-coordinator --max-wait)")
        with self.assertRaises(pgfence.BadRequestError) as e:
            c.acquire("", lease="1s")
        self.assertTrue(str(e.exception).startswith("acquire '': bad request: field 'key' is invalid"),
                        str(e.exception))
        down = pgfence.Client("127.0.0.1:1", timeout="300ms")
        with self.assertRaises(pgfence.UnavailableError) as e:
            down.keepalive("msg:z", 7)
        self.assertTrue(str(e.exception).startswith("keepalive 'msg:z' token 7: cluster unavailable: "),
                        str(e.exception))
        self.assertEqual((e.exception.key, e.exception.token, e.exception.exit_code), ("msg:z", 7, 5))
        down.close()

    def test_a_web_server_is_not_a_pgfence_member(self):
        """An HTTP server whose answers are not JSON objects is reported as
        NotPgfenceError (exit 12) naming it, never as a missing lock."""
        import http.server

        class Page(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                body = b"<!DOCTYPE HTML>\n<html><body>Not Found</body></html>"
                self.send_response(404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            endpoint = f"127.0.0.1:{server.server_address[1]}"
            web = pgfence.Client(endpoint, timeout="2s")
            for call in (lambda: web.get("web:1"), lambda: web.acquire("web:1", lease="5s", wait="0s")):
                with self.assertRaises(pgfence.NotPgfenceError) as e:
                    call()
                self.assertIn(f"{endpoint} is not a pgfence member: it answered HTTP 404 with "
                              f'"<!DOCTYPE HTML> <html>', str(e.exception))
                self.assertEqual((e.exception.key, e.exception.exit_code, e.exception.endpoint),
                                 ("web:1", 12, endpoint))
            web.close()
        finally:
            server.shutdown()
            server.server_close()

    def test_wait_is_granted_on_release(self):
        c = self.client
        first = c.acquire("wait:k", lease="5s")
        waiter = c.copy()  # its own connection: this client's calls would wait behind the acquire
        got = []
        t = threading.Thread(target=lambda: got.append(waiter.acquire("wait:k", lease="5s", wait="5s")))
        t.start()
        harness.wait_until(5, lambda: c.get("wait:k") and self.cluster.waiters(self.client) >= 1, "the acquire is queued")
        c.release("wait:k", first.token)
        t.join(6)
        self.assertEqual(len(got), 1, "the waiting acquire was not granted")
        self.assertGreater(got[0].token, first.token)
        c.release("wait:k", got[0].token)
        waiter.close()

    def leader_term(self):
        """(id, term) of the member that answers as leader, or (0, 0)."""
        for i in range(1, 4):
            try:
                s = self.client.status_of(self.cluster.endpoint(i))
            except pgfence.FenceError:
                continue
            if s.get("role") == "leader":
                return int(s["id"]), int(s["term"])
        return 0, 0

    def redirect_try(self, leader, key):
        """What the follower after `leader` answers, and where a client given only it ends up."""
        follower = leader % 3 + 1
        conn = http.client.HTTPConnection("127.0.0.1", self.cluster.base + 100 + follower, timeout=2)
        try:
            conn.request("GET", "/v1/locks")
            r = conn.getresponse()
            r.read()
        finally:
            conn.close()
        only_follower = pgfence.Client(self.cluster.endpoint(follower))
        try:
            lease = only_follower.acquire(key, lease="2s")
            seen = (r.status, r.getheader("Location"), str(only_follower.leader),
                    only_follower.get(key).token == lease.token)
            only_follower.release(key, lease.token)
            return seen
        finally:
            only_follower.close()

    def test_redirect_from_follower(self):
        # The members elect within --election-ms 150: on a loaded machine the leader may change
        # between finding it and the requests. A try counts only when the same leader, in the same
        # term, answered before and after it; else it is repeated (for 20s at most).
        end = time.monotonic() + 20
        for n in itertools.count():
            before = self.leader_term()
            seen = None
            if before[0]:
                try:
                    seen = self.redirect_try(before[0], f"redirect:{n}")  # a key per try: one left held is no matter
                except pgfence.FenceError as e:
                    seen = e
            after = self.leader_term()
            if before[0] and before == after:
                break
            self.assertLess(time.monotonic(), end, f"no try with one leader throughout within 20s: "
                                                   f"(leader, term) {before} before, {after} after")
        if isinstance(seen, Exception):
            raise seen
        leader = before[0]
        status, location, reached, same_token = seen
        # The follower itself answers 307 with the leader's URL ...
        self.assertEqual(status, 307)
        self.assertEqual(location, f"http://127.0.0.1:{self.cluster.base + 100 + leader}/v1/locks")
        # ... and a client given only the follower gets there.
        self.assertEqual(reached, self.cluster.endpoint(leader))
        self.assertTrue(same_token, "get on the leader did not show the acquired token")

    def test_stopped_member_is_left(self):
        leader = harness.wait_until(5, lambda: self.cluster.leader_id(self.client), "a leader")
        others = [i for i in (1, 2, 3) if i != leader]
        # The stopped member first in the list: every call must get past it.
        c = pgfence.Client([self.cluster.endpoint(i) for i in [leader] + others], timeout="8s")
        self.cluster.signal(leader, signal.SIGSTOP)
        try:
            start = time.monotonic()
            lease = c.acquire("stopped:k", lease="2s")
            c.keepalive("stopped:k", lease.token)
            self.assertEqual(c.get("stopped:k").token, lease.token)
            self.assertEqual([i.key for i in c.list("stopped:")], ["stopped:k"])
            c.release("stopped:k", lease.token)
            self.assertIn(str(c.leader), [self.cluster.endpoint(i) for i in others])
            self.assertLess(time.monotonic() - start, 8)
            # Only the stopped member: nobody answers, the call ends at its timeout.
            alone = pgfence.Client(self.cluster.endpoint(leader), timeout="1s")
            start = time.monotonic()
            with self.assertRaises(pgfence.UnavailableError) as e:
                alone.get("stopped:k")
            self.assertLess(time.monotonic() - start, 1.5)
            self.assertIn("/healthz", str(e.exception))
        finally:
            self.cluster.signal(leader, signal.SIGCONT)
            c.close()


if __name__ == "__main__":
    harness.main()
