#!/usr/bin/python3
"""Client.watch of the Python client.

Against scripted fake members (chunked ndjson from a thread, no cluster): a
resume inside a revision and after a torn last line, on another member, with
no gap and no duplicate; progress moving the resume point; 410 compacted ->
CompactedError with oldest_revision.

Against a real 3-member cluster: a watch from revision 1 across a SIGKILL of
the member serving it (and of the leader) sees every event exactly once, the
same events as a fresh watch from revision 1 afterwards, and they match the
acquires and releases made."""

import json
import os
import signal
import socket
import threading
import time
import unittest

import harness
from harness import pgfence


class FakeMember:
    """A member that answers every GET /v1/watch with the next of `scripts`:
    (status, body) for a plain answer, or a list of chunks for a 200 stream
    that then closes without its last chunk (the member died), or holds it
    open until stop() when `hold` is set. GET /healthz: 200."""

    def __init__(self, scripts, hold=False):
        self.scripts = list(scripts)
        self.hold = hold
        self.targets = []
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.endpoint = f"127.0.0.1:{self._sock.getsockname()[1]}"
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def stop(self):
        self._stop.set()
        self._sock.close()

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()

    def _serve(self, conn):
        with conn:
            f = conn.makefile("rb")
            while True:
                line = f.readline()
                if not line:
                    return
                target = line.split()[1].decode()
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                if target == "/healthz":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    continue
                self.targets.append(target)
                script = self.scripts.pop(0) if self.scripts else []
                if isinstance(script, tuple):
                    status, body = script
                    data = body.encode()
                    conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
                    continue
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                for chunk in script:
                    data = chunk.encode()
                    conn.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                if self.hold and not self.scripts:
                    self._stop.wait(60)
                return


def line(kind, rev, key=None, token=None, **extra):
    obj = {"type": kind, "revision": rev}
    if key is not None:
        obj.update(key=key, token=token)
    obj.update(extra)
    return json.dumps(obj) + "\n"


def brief(e):
    return f"{e['type']}@{e['revision']}" + (f":{e['key']}/{e['token']}" if "key" in e else "")


def take(iterator, n):
    out = []
    for e in iterator:
        out.append(brief(e))
        if len(out) == n:
            break
    iterator.close()
    return out


class WatchFakeMemberTest(unittest.TestCase):
    def client(self, *members):
        c = pgfence.Client(",".join(m.endpoint for m in members), timeout="3s", attempt_timeout="1s",
                           backoff_initial="10ms", backoff_max="100ms")
        self.addCleanup(c.close)
        for m in members:
            self.addCleanup(m.stop)
        return c

    def test_resumes_inside_a_revision_on_another_member(self):
        # Revision 7 made two events (one entry expired two keys); a dies between them.
        a = FakeMember([[line("start", 6) + line("granted", 5, "k1", 5) + line("expired", 7, "k1", 5)]])
        b = FakeMember([[line("start", 9) + line("expired", 7, "k1", 5) + line("expired", 7, "k2", 3),
                         line("granted", 8, "k2", 8)]], hold=True)
        resumes = []
        got = take(self.client(a, b).watch(prefix="k", rev=1, on_resume=lambda why, rev: resumes.append(rev)), 4)
        self.assertEqual(got, ["granted@5:k1/5", "expired@7:k1/5", "expired@7:k2/3", "granted@8:k2/8"])
        self.assertEqual(b.targets, ["/v1/watch?prefix=k&rev=7&progress=1"])
        self.assertEqual(resumes, [7])

    def test_a_torn_last_line_is_dropped_and_comes_whole_after_the_resume(self):
        g6 = line("granted", 6, "a", 6)
        a = FakeMember([[line("start", 5) + line("granted", 5, "a", 5) + g6[:25]]])
        b = FakeMember([[line("start", 6) + line("granted", 5, "a", 5) + g6 + line("released", 9, "a", 6)]],
                       hold=True)
        whys = []
        got = take(self.client(a, b).watch(key="a", rev=1, on_resume=lambda why, rev: whys.append(why)), 3)
        self.assertEqual(got, ["granted@5:a/5", "granted@6:a/6", "released@9:a/6"])
        self.assertEqual(b.targets, ["/v1/watch?key=a&rev=5&progress=1"])
        self.assertTrue(whys, "a resume was reported")

    def test_progress_moves_the_resume_point_and_is_seen_only_when_asked(self):
        a = FakeMember([[line("start", 3, member=1) + line("granted", 4, "a", 4) + line("progress", 20)]])
        b = FakeMember([[line("start", 21, member=2) + line("granted", 22, "a", 22)]], hold=True)
        got = take(self.client(a, b).watch(key="a", rev=1, progress=True), 5)
        self.assertEqual(got, ["start@3", "granted@4:a/4", "progress@20", "start@21", "granted@22:a/22"])
        self.assertEqual(b.targets, ["/v1/watch?key=a&rev=21&progress=1"])

    def test_compacted_raises_with_the_oldest_revision(self):
        a = FakeMember([(410, '{"error":"compacted","message":"revision 2 is compacted","oldest_revision":40}')])
        with self.assertRaises(pgfence.CompactedError) as e:
            next(self.client(a).watch(key="a", rev=2))
        self.assertEqual((e.exception.oldest_revision, e.exception.exit_code, e.exception.http_status), (40, 13, 410))

    def test_a_410_moves_on_to_a_member_that_still_keeps_the_revision(self):
        gone = '{"error":"compacted","message":"revision 3 is compacted","oldest_revision":%d}'
        a = FakeMember([(410, gone % 40)])
        b = FakeMember([[line("start", 9) + line("granted", 3, "a", 3)]], hold=True)
        self.assertEqual(take(self.client(a, b).watch(key="a", rev=3), 1), ["granted@3:a/3"])
        a2, c = FakeMember([(410, gone % 40)]), FakeMember([(410, gone % 20)])
        with self.assertRaises(pgfence.CompactedError) as e:
            next(self.client(a2, c).watch(key="a", rev=3))
        self.assertEqual(e.exception.oldest_revision, 20)

    def test_bad_arguments(self):
        c = pgfence.Client("127.0.0.1:1")
        for kwargs in ({}, {"key": "a", "prefix": "b"}, {"key": ""}, {"key": "a", "rev": 0}):
            with self.assertRaises(ValueError):
                c.watch(**kwargs)


@unittest.skipUnless(os.environ.get("FENCE_COORDINATOR_BIN"), "needs FENCE_COORDINATOR_BIN (a real cluster)")
class WatchClusterTest(unittest.TestCase):
    def test_watch_across_a_leader_kill_sees_every_event_once(self):
        cluster = harness.Cluster("watch")
        c = pgfence.Client(cluster.endpoints, timeout="10s")
        made = []  # the events the acquires and releases made, in order

        def cycle(key):
            lease = c.acquire(key, lease="5s")
            made.append(("granted", key, lease.token))
            c.release(key, lease.token)
            made.append(("released", key, lease.token))

        for i in range(5):
            cycle(f"w:{i}")
        # The watch is served by the leader: it is the first endpoint that answers after the cycles.
        leader = cluster.leader_id(c)
        self.assertTrue(leader)
        watcher = pgfence.Client(cluster.endpoint(leader) + "," + cluster.endpoints, timeout="10s")
        seen, resumes = [], []
        done = threading.Event()
        stop = threading.Event()
        errors = []

        def follow():
            try:
                it = watcher.watch(prefix="w:", rev=1, on_resume=lambda why, rev: resumes.append((why, rev)))
                for e in it:
                    seen.append((e["type"], e["key"], e["token"]))
                    if stop.is_set() and len(seen) >= len(made):
                        break
                it.close()
            except Exception as e:  # reported by the main thread
                errors.append(e)
            finally:
                done.set()

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        harness.wait_until(20, lambda: len(seen) >= len(made) or errors, "the watch caught up with the first cycles")
        cluster.signal(leader, signal.SIGKILL)
        harness.wait_until(20, lambda: cluster.leader_id(c) not in (0, leader), "a new leader")
        for i in range(5, 10):
            cycle(f"w:{i}")
        stop.set()
        harness.wait_until(30, lambda: done.is_set() or len(seen) >= len(made), "the watch saw every event")
        self.assertFalse(errors, errors)
        self.assertTrue(resumes, "the watch resumed after the SIGKILL")
        self.assertEqual(seen, made)
        fresh = []
        for e in c.watch(prefix="w:", rev=1):
            fresh.append((e["type"], e["key"], e["token"]))
            if len(fresh) == len(made):
                break
        self.assertEqual(fresh, seen)


if __name__ == "__main__":
    harness.main()
