"""The relay (pgfence.relay) without PostgreSQL: what an endpoint's answer or
a connection string can do to it. Real HTTP servers on this suite's ports
(14060..14069); nothing listens on 14061.

Run by ctest as lastmile_relay_unit (label unit): python3 test_relay_unit.py.
"""

import io
import logging
import os
import socket
import ssl
import sys
import threading
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "clients", "python"))

from pgfence import relay  # noqa: E402

TRICKLE_PORT = 14060


def args(*flags):
    return relay.parse_args(["--backoff", "100ms", "--max-backoff", "1s", *flags])


def entry(endpoint="http://127.0.0.1:14061/hook", attempts=0):
    # (id, target, token, key, endpoint, payload, attempts, fence)
    return (1, "t", 1, "k-1", endpoint, "{}", attempts, None)


class FakeSender:
    def __init__(self, answer=None, error=None):
        self.answer, self.error = answer, error

    def post(self, endpoint, key, body):
        if self.error is not None:
            raise self.error
        return self.answer


class Trickler:
    """An HTTP server that answers one byte every `pause_s` (at most `total` bytes)."""

    def __init__(self, port, pause_s=0.1, total=400):
        self.stop = threading.Event()
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", port))
        self.server.listen()
        self.pause_s, self.total = pause_s, total
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.server.accept()
        with conn:
            conn.recv(65536)
            answer = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * self.total
            for i in range(len(answer)):
                if self.stop.wait(self.pause_s):
                    return
                try:
                    conn.sendall(answer[i:i + 1])
                except OSError:
                    return

    def close(self):
        self.stop.set()
        self.server.close()
        self.thread.join(10)


class RelayUnitTest(unittest.TestCase):
    def outcome(self, sender, *flags, endpoint="http://127.0.0.1:14061/hook"):
        r = relay.Relay(args(*flags))
        r.sender = sender
        return r.deliver(entry(endpoint))

    def test_retry_after_any_value_never_stops_the_relay(self):
        for value in ("\u00b2", "\u0663", "9" * 5000, "9" * 4000, "1e9", "-5", " 7 ", "Wed, 21 Oct 2015 07:28:00 GMT"):
            with self.subTest(value=value[:20]):
                o = self.outcome(FakeSender((503, {"Retry-After": value}, "busy")))
                self.assertEqual((o.state, o.status), (relay.RETRY, 503))
                self.assertLessEqual(o.delay_ms, 1000.0)
        self.assertEqual(relay.retry_after_s(" 7 "), 7)
        self.assertEqual(relay.retry_after_s("999999999"), 999999999)
        self.assertIsNone(relay.retry_after_s("1" * 10))
        self.assertIsNone(relay.retry_after_s("\u0663"))
        o = self.outcome(FakeSender((429, {"Retry-After": "999999999"}, "")))
        self.assertEqual(o.delay_ms, 1000.0)  # honoured within --max-backoff

    def test_an_unexpected_exception_is_a_retried_attempt(self):
        with self.assertLogs("pgfence.relay", logging.ERROR) as logs:
            o = self.outcome(FakeSender(error=RuntimeError("boom")))
        self.assertEqual(o.state, relay.RETRY)
        self.assertIn("unexpected RuntimeError: boom", o.error)
        self.assertGreater(o.delay_ms, 0)
        self.assertIn("RuntimeError", "\n".join(logs.output))

    def test_a_certificate_that_does_not_verify_is_retried(self):
        e = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
        o = self.outcome(FakeSender(error=e), endpoint="https://127.0.0.1:14061/hook")
        self.assertEqual(o.state, relay.RETRY)
        self.assertIn("SSLCertVerificationError", o.error)
        # an endpoint that is not http(s) is still parked
        o = self.outcome(relay.Sender(1.0), endpoint="ftp://h/x")
        self.assertEqual(o.state, relay.PARKED)

    def test_a_trickling_answer_ends_at_the_request_deadline(self):
        server = Trickler(TRICKLE_PORT)
        self.addCleanup(server.close)
        sender = relay.Sender(0.5)  # each byte comes well within the timeout, the answer never completes
        started = time.monotonic()
        with self.assertRaises(socket.timeout):
            sender.post(f"http://127.0.0.1:{TRICKLE_PORT}/hook", "k", b"{}")
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 1.5, f"the request took {elapsed:.1f}s with a 0.5s timeout")
        self.assertGreaterEqual(elapsed, 0.45)
        self.assertEqual(sender._conns(), {})  # closed

    def test_a_dns_lookup_that_hangs_ends_at_the_request_deadline(self):
        release = threading.Event()
        self.addCleanup(release.set)
        real = socket.getaddrinfo

        def hanging(host, *rest, **kwargs):
            if host == "hangs.example":
                release.wait(30)
            return real("127.0.0.1", *rest, **kwargs)

        sender = relay.Sender(0.5)
        started = time.monotonic()
        with mock.patch.object(socket, "getaddrinfo", hanging):
            with self.assertRaisesRegex(socket.timeout, "DNS lookup of hangs.example timed out"):
                sender.post("http://hangs.example:14061/hook", "k", b"{}")
        self.assertLess(time.monotonic() - started, 1.5)

    def test_connection_errors_never_show_the_password(self):
        for dsn, text in (
                ("postgresql://relay:s3cr%3Ft@db.example:5432/app?bad_param=1", "invalid connection string (not shown"),
                ("postgresql://relay:s3cr3t@[db/app", "invalid connection string (not shown"),
                ("host=db password=s3cr3t junk", "invalid connection string (not shown"),
                # parsed by libpq, but part of the password would be the host or the port it names
                ("postgresql://relay:pw@s3cr3t@127.0.0.1:14061/app", "invalid connection string (not shown"),
                ("postgresql://relay:s3cr3t/pw@127.0.0.1/app", "invalid connection string (not shown"),
                ("host=127.0.0.1 port=14061 user=relay password=s3cr3t connect_timeout=5", "Connection refused")):
            with self.subTest(dsn=dsn):
                out = io.StringIO()
                handler = logging.StreamHandler(out)
                logging.getLogger().addHandler(handler)
                try:
                    code = relay.main(["--dsn", dsn])
                finally:
                    logging.getLogger().removeHandler(handler)
                self.assertEqual(code, 11)
                self.assertIn(text, out.getvalue())
                self.assertNotIn("s3cr", out.getvalue())

    def test_a_connection_error_naming_the_password_is_scrubbed(self):
        import psycopg2
        said = psycopg2.OperationalError("server said: password s3cr3t! (s3cr3t%21 encoded) rejected")
        with mock.patch.object(psycopg2, "connect", side_effect=said):
            with self.assertRaises(relay.ConnectError) as caught:
                relay.connect_database("host=127.0.0.1 port=14061 password=s3cr3t!")
        self.assertIn("rejected", str(caught.exception))
        self.assertNotIn("s3cr3t", str(caught.exception))

    def test_batch_bytes(self):
        self.assertEqual(args().batch_bytes, 64 << 20)
        self.assertEqual(args("--batch-bytes", "512KiB").batch_bytes, 512 << 10)
        self.assertEqual(args("--batch-bytes", "1000").batch_bytes, 1000)
        for bad in ("0", "1TB", "-1", "x"):
            with self.subTest(bad=bad), self.assertRaises(SystemExit):
                with open(os.devnull, "w") as devnull:
                    saved, sys.stderr = sys.stderr, devnull
                    try:
                        args("--batch-bytes", bad)
                    finally:
                        sys.stderr = saved


if __name__ == "__main__":
    unittest.main(verbosity=2)
