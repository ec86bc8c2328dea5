"""Retries, redirects and deadlines over http.client (internal).

The policy of the C++ client's transport (coordinator/client/transport.h):

- One call = attempts until an answer that is not 307/503 arrives, the
  call's deadline passes, or max_attempts requests were made.
- Within an attempt a 307 is followed to its Location (at most
  max_redirects hops); a redirect from https to plaintext is refused.
- After a connection error, a timeout or a 503 the next endpoint is tried;
  once every endpoint failed in a row the transport sleeps (backoff_initial,
  doubling up to backoff_max, never past the deadline).
- A new connection first gets GET /healthz within the probe timeout (which
  doubles after each round in which every endpoint failed, up to the attempt
  timeout): a member that accepts connections but never answers costs that,
  and never receives the real request.
- The member that gave the last final answer is asked first next time.
- The bearer secret goes only to the endpoints given and to TLS ones.

Deadlines: each socket operation (connect, TLS handshake, send, each read)
is given the time left to the attempt's deadline.
"""

import http.client
import json
import socket
import ssl
import time

from .endpoints import endpoint_of_url

_MAX_CONNECTIONS = 32
_MAX_QUOTED = 200
_MAX_RESPONSE_BYTES = 64 << 20  # a page of 10000 locks with 512-byte keys fits many times


class _Failure(Exception):
    """One request that got no HTTP answer: `timeout`, or an I/O or TLS error."""

    def __init__(self, message, timeout=False, sent_at=None, reused=False):
        super().__init__(message)
        self.message = message
        self.timeout = timeout
        self.sent_at = sent_at
        self.reused = reused


class Response:
    __slots__ = ("status", "body", "location", "sent_at", "stream")

    def __init__(self, status, body, location, sent_at, stream=None):
        self.status = status
        self.body = body
        self.location = location
        self.sent_at = sent_at
        self.stream = stream  # a 200 answer to a streamed request: its Stream (the body is not read)


class StreamEnded(Exception):
    """A stream's body ended: closed, broken, or silent for too long (`why`)."""

    def __init__(self, why):
        super().__init__(why)
        self.why = why


class Stream:
    """The body of a streamed 200 answer (chunked framing removed), read line
    by line on its own connection (taken from the transport: nothing else is
    ever sent on it)."""

    def __init__(self, endpoint, conn, resp):
        self.endpoint = endpoint
        self._conn = conn
        self._resp = resp

    def readline(self, idle_s, max_bytes):
        """The next whole line (bytes, with its newline). StreamEnded when the
        body ends, breaks, or sends nothing for idle_s; a line cut short by the
        end (a torn last line) is dropped. ValueError for a line of more than
        max_bytes."""
        try:
            self._conn.sock.settimeout(idle_s)
            line = self._resp.readline(max_bytes + 1)
        except socket.timeout:
            raise StreamEnded(f"{self.endpoint} sent nothing for {round(idle_s * 1000)}ms") from None
        except (OSError, http.client.HTTPException, AttributeError) as e:
            # http.client reports a body cut in the middle of a chunk as IncompleteRead.
            raise StreamEnded(f"{self.endpoint} closed the stream ({type(e).__name__})") from None
        if not line:
            raise StreamEnded(f"{self.endpoint} closed the stream")
        if len(line) > max_bytes:
            raise ValueError(f"{self.endpoint} sent a watch line longer than {max_bytes} bytes")
        if not line.endswith(b"\n"):
            raise StreamEnded(f"{self.endpoint} closed the stream; its torn last line ({len(line)} bytes) "
                              "was dropped")
        return line

    def close(self):
        self._conn.close()


class CallResult:
    """What perform() got: `response` (a final answer, from `endpoint`) or
    `error` (why none)."""

    def __init__(self):
        self.response = None
        self.endpoint = None  # the member that gave `response`
        self.error = ""
        self.first_sent_at = None  # first send of the call: the conservative start of a lease
        self.attempts = 0

    def note_sent(self, sent_at):
        if sent_at is not None and self.first_sent_at is None:
            self.first_sent_at = sent_at


def _quote(body):
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return text if len(text) <= _MAX_QUOTED else text[:_MAX_QUOTED] + "..."


class _Connection:
    """One keep-alive connection to one member (opened lazily)."""

    def __init__(self, endpoint, ssl_context, authorization):
        self.endpoint = endpoint
        self.ssl_context = ssl_context
        self.authorization = authorization  # "Bearer ..." or None
        self.http = None

    def close(self):
        if self.http is not None:
            self.http.close()
            self.http = None

    def _open(self, seconds):
        host, port = self.endpoint.host, self.endpoint.port
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if self.endpoint.tls:
            conn = http.client.HTTPSConnection(host, port, timeout=seconds, context=self.ssl_context())
        else:
            conn = http.client.HTTPConnection(host, port, timeout=seconds)
        try:
            conn.connect()
        except BaseException:
            conn.close()
            raise
        self.http = conn

    def roundtrip(self, method, path, body, deadline, stream=False):
        """One request and its whole answer by `deadline`, or _Failure. With
        `stream`, a 200 answer's body is left unread: the Response carries a
        Stream that owns the connection from then on."""
        reused = self.http is not None
        sent_at = None
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("the deadline had passed")
            if self.http is None:
                self._open(left)
            headers = {"Content-Type": "application/json"} if body is not None else {}
            if self.authorization:
                headers["Authorization"] = self.authorization
            self.http.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sent_at = time.monotonic()
            self.http.request(method, path, body=body, headers=headers)
            self.http.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            resp = self.http.getresponse()
            if stream and resp.status == 200:
                conn, self.http = self.http, None
                return Response(200, b"", "", sent_at, Stream(self.endpoint, conn, resp))
            length = resp.getheader("Content-Length")
            if length is not None and length.isdigit() and int(length) > _MAX_RESPONSE_BYTES:
                raise http.client.HTTPException(f"answer of {length} bytes (limit {_MAX_RESPONSE_BYTES})")
            data = resp.read()
            if resp.will_close:
                self.close()
            return Response(resp.status, data, resp.getheader("Location", ""), sent_at)
        except socket.timeout:
            self.close()
            raise _Failure(f"{self.endpoint}: timed out", timeout=True, sent_at=sent_at, reused=reused) from None
        except ssl.SSLCertVerificationError as e:
            self.close()
            raise _Failure(f"{self.endpoint}: TLS: certificate refused: {e.verify_message}", sent_at=sent_at) from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            what = str(e) or type(e).__name__
            raise _Failure(f"{self.endpoint}: {what}", sent_at=sent_at, reused=reused) from None


class Transport:
    """Connections to the members and the retry policy. Not thread-safe:
    the Client serializes calls."""

    def __init__(self, opts):
        self.opts = opts
        self.leader = None  # the member that gave the last final answer
        self._next = 0
        self._connections = {}
        self._probe_timeout = opts.probe_timeout_s
        self._probing = False

    def close(self):
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def _connection(self, endpoint):
        conn = self._connections.get(endpoint)
        if conn is None:
            if len(self._connections) >= _MAX_CONNECTIONS:
                self.close()  # bound: redirects to many hosts
            given = endpoint in self.opts.endpoints
            auth = self.opts.authorization if (given or endpoint.tls) else None
            conn = _Connection(endpoint, self.opts.ssl_context, auth)
            self._connections[endpoint] = conn
        return conn

    def _pick(self):
        if self.leader is not None:
            return self.leader
        return self.opts.endpoints[self._next % len(self.opts.endpoints)]

    def _note_failure(self):
        if self.leader is not None:
            self.leader = None
        else:
            self._next = (self._next + 1) % len(self.opts.endpoints)

    def _probe(self, conn, attempt_deadline, have_cause):
        """"" when a new connection answered /healthz in time, else why not."""
        deadline = min(attempt_deadline, time.monotonic() + self._probe_timeout)
        try:
            conn.roundtrip("GET", "/healthz", None, deadline)
            return ""
        except _Failure as f:
            conn.close()
            if f.timeout and deadline == attempt_deadline and have_cause:
                return None  # cut off by the call's own time: the earlier cause says more
            if f.timeout:
                return (f"{conn.endpoint} accepted no request or did not answer /healthz within "
                        f"{round(self._probe_timeout * 1000)}ms (stopped or overloaded?)")
            return f.message

    def _send(self, conn, fresh, request, deadline, out, stream):
        """The request on conn; once more on a new connection when a reused
        keep-alive connection turned out closed by the member."""
        method, path, body = request
        try:
            return conn.roundtrip(method, path, body, deadline, stream)
        except _Failure as f:
            out.note_sent(f.sent_at)
            if f.timeout or not f.reused or fresh:
                raise
        return conn.roundtrip(method, path, body, deadline, stream)

    def _attempt(self, first, make, deadline, follow_redirects, out, why, stream=False):
        """(answered, why): one attempt at `first`, following redirects."""
        target = first
        hop = 0
        while True:
            now = time.monotonic()
            if now >= deadline:
                return False, why
            method, path, body, attempt_s = make()
            attempt_deadline = min(deadline, now + attempt_s)
            conn = self._connection(target)
            fresh = conn.http is None
            if self._probing and fresh:
                cause = self._probe(conn, attempt_deadline, out.attempts > 0)
                if cause != "":
                    out.attempts += 1  # keeps max_attempts a bound on the loop
                    return False, why if cause is None else cause
            try:
                r = self._send(conn, fresh, (method, path, body), attempt_deadline, out, stream)
            except _Failure as f:
                out.attempts += 1
                out.note_sent(f.sent_at)
                cut_off = f.timeout and time.monotonic() >= deadline
                return False, (f.message if not cut_off or out.attempts == 1 else why)
            out.attempts += 1
            out.note_sent(r.sent_at)
            if r.status == 307 and follow_redirects:
                nxt = endpoint_of_url(r.location)
                if nxt is None:
                    return False, f"{target} redirected to an unusable Location {r.location!r}"
                if target.tls and not nxt.tls:
                    return False, (f"{target} redirected from https to plaintext {r.location!r} (refused: "
                                   "credentials and answers would cross the network in the clear)")
                if hop >= self.opts.max_redirects:
                    return False, (f"more than {self.opts.max_redirects} redirects, last to {nxt} "
                                   "(members disagree about the leader)")
                target = nxt
                hop += 1
                continue
            if r.status == 503:
                return False, f"{target} answered 503 {_quote(r.body)}"
            out.response = r
            out.endpoint = target
            if follow_redirects:
                self.leader = target
            return True, why

    def perform(self, make, deadline, stream=False):
        """Attempts across the endpoints until a final answer or the deadline.

        `make()` -> (method, path, body bytes or None, attempt timeout in s),
        called before every attempt (an acquire asks for the wait left).
        `stream`: a 200 answer comes with a Stream (Response.stream).
        """
        out = CallResult()
        why = "the deadline had already passed"
        backoff = self.opts.backoff_initial_s
        failures_in_row = 0
        self._probing = self.opts.probe_timeout_s > 0
        self._probe_timeout = self.opts.probe_timeout_s
        while out.attempts < self.opts.max_attempts and time.monotonic() < deadline:
            answered, why = self._attempt(self._pick(), make, deadline, True, out, why, stream)
            if answered:
                return out
            self._note_failure()
            failures_in_row += 1
            if failures_in_row < len(self.opts.endpoints):
                continue
            failures_in_row = 0
            self._probe_timeout = min(self._probe_timeout * 2,
                                      max(self.opts.probe_timeout_s, self.opts.attempt_timeout_s))
            time.sleep(min(max(deadline - time.monotonic(), 0), backoff))
            backoff = min(backoff * 2, self.opts.backoff_max_s)
        out.error = (f"cluster unavailable: no member gave an answer after {out.attempts} attempt(s); "
                     f"last error: {why}")
        return out

    def avoid(self, endpoint):
        """The next call starts elsewhere than `endpoint` when there is
        elsewhere: it served a stream that broke."""
        if self.leader == endpoint:
            self.leader = None
        if self.opts.endpoints[self._next % len(self.opts.endpoints)] == endpoint:
            self._next = (self._next + 1) % len(self.opts.endpoints)

    def perform_at(self, endpoint, make, deadline):
        """One request to one member: no probe, no redirects, no retries."""
        out = CallResult()
        self._probing = False
        answered, why = False, "the deadline had already passed"
        if time.monotonic() < deadline:
            answered, why = self._attempt(endpoint, make, deadline, False, out, why)
        if not answered:
            out.error = f"{endpoint} did not answer: {why}"
        return out


def dumps(obj):
    """JSON request body bytes."""
    return json.dumps(obj, separators=(",", ":")).encode()
