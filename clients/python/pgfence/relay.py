"""fence-relay: delivers pg_fence's outbox (fence_outbox) to HTTP endpoints.

Run as `python3 -m pgfence.relay` or `fence-relay` (the launcher
clients/python/fence-relay.in, installed by make install and the package
fence-relay); `--help` says how. Needs psycopg2 (Debian: python3-psycopg2)
and the standard library.

One round (a batch), in one transaction:

1. claim up to --batch due pending entries (and about --batch-bytes of
   payload), oldest due first:
   SELECT ... FROM fence_outbox WHERE state = 'pending' AND next_attempt_at <= now()
   ... FOR UPDATE OF o SKIP LOCKED, with the fence of each entry's target
   (fence_resources) read by the same statement. Entries another relay has
   claimed are skipped, so several relays share the outbox;
2. an entry whose token is older than its target's fence is not delivered:
   it is marked `superseded` (a newer holder reached the target and owns the
   work). The others are POSTed to their endpoint with the JSON payload and
   the headers Idempotency-Key and Content-Type: application/json, over
   keep-alive connections (one per endpoint host and thread);
3. each answer decides: 2xx -> `delivered`; 408, 429, 5xx, a timeout, a
   connection or TLS error (a certificate that does not verify too), or an
   unexpected exception -> stays `pending`, due again after an exponential
   backoff (--backoff doubled per attempt, at most --max-backoff, +-20%
   jitter; a Retry-After of 1 to 9 ASCII digits is honoured within that
   cap); any other status (3xx, other 4xx) -> `parked` with the status and
   an excerpt of the answer (an operator retries it with fence_outbox_retry); with
   --max-attempts N, an entry still failing after N attempts is parked too;
4. the outcomes are written and the transaction commits.

A relay that dies before 4 (a crash, SIGKILL, a lost connection) leaves its
claimed entries pending: PostgreSQL ends the transaction, and the next round
(of this or another relay) delivers them again, with the same key. So
delivery is at least once; a receiver that applies each Idempotency-Key once
makes the effect happen once. Entries of one round are delivered while its
transaction holds their row locks; --batch-time bounds how long a round may
keep attempting entries (the rest stay pending, untouched).

The fence is checked when the round claims the entry. An entry claimed just
before a newer token reaches its target is still delivered: that window is
the round's length (at most --batch-time plus one --timeout: --timeout bounds
each request as a whole, from the host's DNS lookup and the connect to the
last byte of the answer; a request still going at its deadline is closed and
counts as a failed attempt, retried).

A round holds at most --batch entries and about --batch-bytes of payload
(the claim is fetched in chunks and stops once their payloads reach
--batch-bytes; it always takes at least one entry).
"""

import argparse
import http.client
import io
import ipaddress
import logging
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from .duration import parse_duration_ms

log = logging.getLogger("pgfence.relay")

ERROR_EXCERPT = 512  # bytes of an answer kept in last_error (the column allows 1024)
MAX_ANSWER = 1 << 20  # an answer body read to keep the connection; larger ones close it
USER_AGENT = "fence-relay"

DELIVERED, RETRY, PARKED, SUPERSEDED = "delivered", "pending", "parked", "superseded"


class Outcome:
    __slots__ = ("entry_id", "state", "tried", "status", "error", "delay_ms")

    def __init__(self, entry_id, state, tried, status=None, error=None, delay_ms=0.0):
        self.entry_id = entry_id
        self.state = state
        self.tried = tried
        self.status = status
        self.error = error
        self.delay_ms = delay_ms


def _excerpt(text):
    """At most ERROR_EXCERPT bytes of UTF-8, cut on a character boundary, printable."""
    data = "".join(c if c.isprintable() else " " for c in text).encode("utf-8")[:ERROR_EXCERPT]
    return data.decode("utf-8", "ignore")


def parse_bytes(text):
    """'65536', '512KiB', '64MiB', '1GiB' -> bytes; ValueError naming the text."""
    units = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    digits = text.rstrip("BKMGi")
    unit = text[len(digits):]
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 12) or unit not in units:
        raise ValueError(f"invalid size {text!r}: a number of bytes, or with KiB, MiB or GiB")
    return int(digits) * units[unit]


def retry_after_s(value):
    """A Retry-After header's delay in seconds, or None: only 1 to 9 ASCII
    digits count (an HTTP date or anything else is ignored)."""
    value = (value or "").strip()
    if value.isascii() and value.isdigit() and len(value) <= 9:
        return int(value)
    return None


def backoff_ms(attempts, base_ms, cap_ms, retry_after_s=None):
    """Delay before the next attempt of an entry that has failed `attempts`
    times (1 after the first failure): base * 2^(attempts-1), at most cap,
    +-20% jitter; at least a Retry-After (seconds), still within cap."""
    delay = min(cap_ms, base_ms * (2 ** min(attempts - 1, 40)))
    delay *= random.uniform(0.8, 1.2)
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, 10 ** 9) * 1000.0)
    return min(delay, cap_ms)


class _DeadlineReader(io.RawIOBase):
    """A socket's reads, each with the time left before `deadline` as its
    timeout: an answer trickling in cannot outlast the deadline."""

    def __init__(self, sock, deadline):
        self.sock = sock
        self.deadline = deadline

    def readable(self):
        return True

    def readinto(self, b):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        self.sock.settimeout(left)
        return self.sock.recv_into(b)


class _DeadlineSocket:
    """What HTTPResponse needs of a socket (makefile), reading under a deadline."""

    def __init__(self, sock, deadline):
        self.sock = sock
        self.deadline = deadline

    def makefile(self, mode, *args, **kwargs):
        return io.BufferedReader(_DeadlineReader(self.sock, self.deadline))


def _getaddrinfo(host, port, timeout_s):
    """socket.getaddrinfo within timeout_s: in a daemon thread (a lookup
    that hangs is left behind; it cannot delay the relay or its exit)."""
    done = threading.Event()
    result = {}

    def lookup():
        try:
            result["infos"] = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        except BaseException as e:  # handed to the waiting thread
            result["error"] = e
        done.set()

    threading.Thread(target=lookup, name="fence-relay-dns", daemon=True).start()
    if not done.wait(timeout_s):
        raise socket.timeout(f"DNS lookup of {host} timed out")
    if "error" in result:
        raise result["error"]
    return result["infos"]


def _create_connection(address, timeout, deadline):
    """socket.create_connection with the DNS lookup and every connect within `deadline`."""
    host, port = address
    try:
        ipaddress.ip_address(host)
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)  # a literal: no lookup
    except ValueError:
        infos = _getaddrinfo(host, port, max(0.0, deadline - time.monotonic()))
    error = None
    for family, kind, proto, _name, addr in infos:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(left)
            sock.connect(addr)
            return sock
        except OSError as e:
            sock.close()
            error = e
    raise error or OSError(f"getaddrinfo of {host} returned nothing")


class Sender:
    """POSTs with keep-alive connections: one per (scheme, host, port) and thread."""

    def __init__(self, timeout_s):
        self.timeout_s = timeout_s
        self.local = threading.local()

    def _conns(self):
        conns = getattr(self.local, "conns", None)
        if conns is None:
            conns = self.local.conns = {}
        return conns

    def close(self):
        for conn in self._conns().values():
            conn.close()
        self._conns().clear()

    def post(self, endpoint, key, body):
        """(status, headers, answer text) or raises OSError/HTTPException;
        ValueError for an endpoint that is not http(s)://host[:port]...
        The whole request (DNS lookup, connect, sending, the answer) ends
        within the timeout: socket.timeout, the connection closed, if not."""
        url = urllib.parse.urlsplit(endpoint)
        if url.scheme.lower() not in ("http", "https") or not url.hostname:
            raise ValueError(f"invalid endpoint {endpoint!r}: not http(s)://host[:port][/path]")
        where = (url.scheme.lower(), url.hostname, url.port)  # .port: ValueError if bad
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        deadline = time.monotonic() + self.timeout_s
        conns = self._conns()
        for fresh_try in (False, True):
            conn = conns.get(where)
            reused = conn is not None
            if conn is None:
                cls = http.client.HTTPSConnection if where[0] == "https" else http.client.HTTPConnection
                conn = conns[where] = cls(url.hostname, url.port, timeout=self.timeout_s)
            conn._create_connection = lambda address, _timeout, _source=None: \
                _create_connection(address, _timeout, deadline)
            conn.response_class = lambda sock, **kw: http.client.HTTPResponse(_DeadlineSocket(sock, deadline), **kw)
            try:
                if conn.sock is None:
                    conn.timeout = max(0.001, deadline - time.monotonic())
                    conn.connect()
                conn.sock.settimeout(max(0.001, deadline - time.monotonic()))  # sendall: the whole send
                conn.request("POST", path, body=body, headers={
                    "Content-Type": "application/json",
                    "Idempotency-Key": key,
                    "User-Agent": USER_AGENT,
                })
                resp = conn.getresponse()
                answer = resp.read(MAX_ANSWER + 1)
                if len(answer) > MAX_ANSWER or resp.will_close:
                    conn.close()
                    del conns[where]
                return resp.status, resp.headers, answer.decode("utf-8", "replace")
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                conns.pop(where, None)
                # a kept-alive connection the server had closed: once more on a new one
                if not reused or fresh_try or time.monotonic() >= deadline:
                    raise
            except BaseException:
                conn.close()
                conns.pop(where, None)
                raise
        raise AssertionError("unreachable")


class ConnectError(OSError):
    """The database connection failed; its text never holds the connection string."""


BAD_DSN = "cannot connect: invalid connection string (not shown: it may hold a password)"


def _secrets_of(dsn):
    """The strings a connection error must not show: the DSN and its password."""
    secrets = [dsn] if dsn else []
    try:
        from psycopg2.extensions import parse_dsn
        password = parse_dsn(dsn).get("password") if dsn else None
    except Exception:
        password = None
    for value in (password, os.environ.get("PGPASSWORD")):
        if value:
            secrets.append(value)
            secrets.append(urllib.parse.quote(value, safe=""))
    return sorted(set(secrets), key=len, reverse=True)


def _misplaced_text(dsn):
    """True when libpq parses the DSN but would carry part of a password into
    a host or port it names in its errors: an unencoded "@" in a URI's
    password lands in the host, an unencoded "/" makes the rest the port.
    The rule of fencectl's connect (coordinator/pgconn/connection.cc)."""
    from psycopg2.extensions import parse_dsn
    options = parse_dsn(dsn) if dsn else {}
    for port in options.get("port", "").split(","):
        if port and not port.isdigit():
            return True
    for name in ("host", "hostaddr"):
        for host in options.get(name, "").split(","):
            if host and not host.startswith(("/", "@")) and "@" in host:
                return True
    return False


def connect_database(dsn, **kwargs):
    """psycopg2.connect, raising ConnectError with a text that cannot show
    the connection string or its password (libpq quotes a URI it cannot
    parse, and names the host and port of one it parsed)."""
    import psycopg2  # only the relay needs it, not the rest of the package
    try:
        if _misplaced_text(dsn):
            raise ConnectError(BAD_DSN)
        return psycopg2.connect(dsn, **kwargs)
    except psycopg2.ProgrammingError:
        raise ConnectError(BAD_DSN) from None
    except Exception as e:
        text = " ".join(str(e).split()) or type(e).__name__
        for secret in _secrets_of(dsn):
            text = text.replace(secret, "(not shown)")
        raise ConnectError(f"cannot connect: {text}") from None


class Relay:
    def __init__(self, args):
        self.args = args
        self.stopping = threading.Event()
        self.sender = Sender(args.timeout_ms / 1000.0)
        self.pool = ThreadPoolExecutor(args.concurrency) if args.concurrency > 1 else None
        self.totals = {DELIVERED: 0, "retried": 0, PARKED: 0, SUPERSEDED: 0, "rounds": 0, "db_errors": 0}
        self.conn = None
        self.schema = None
        self.claim_sql = self.update_sql = None
        self.max_payload = 16 << 20
        self.claim_full = False  # the last claim stopped at --batch or --batch-bytes

    # -- database --------------------------------------------------------
    def connect(self):
        self.conn = connect_database(self.args.dsn, application_name="fence-relay")
        with self.conn, self.conn.cursor() as cur:
            # a round's transaction stays open while it delivers: a server's
            # idle_in_transaction_session_timeout must not end it (re-deliveries)
            cur.execute("SET idle_in_transaction_session_timeout = 0")
            cur.execute("SELECT n.nspname FROM pg_catalog.pg_extension e "
                        "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
                        "WHERE e.extname OPERATOR(pg_catalog.=) 'pg_fence'")
            row = cur.fetchone()
            if row is None:
                raise RuntimeError("pg_fence is not installed in this database (CREATE EXTENSION pg_fence)")
            cur.execute("SELECT pg_catalog.to_regclass(pg_catalog.quote_ident(%s) || '.fence_outbox')", (row[0],))
            if cur.fetchone()[0] is None:
                raise RuntimeError("this database's pg_fence has no fence_outbox: "
                                   "ALTER EXTENSION pg_fence UPDATE (1.5 or later)")
        from psycopg2.extensions import quote_ident
        s = quote_ident(row[0], self.conn)
        self.schema = row[0]
        self.max_payload = self._max_payload(s)
        self.claim_sql = (
            f"SELECT o.id, o.target, o.token, o.idempotency_key, o.endpoint, o.payload::text, "
            f"o.attempts, r.fence FROM {s}.fence_outbox AS o "
            f"LEFT JOIN {s}.fence_resources AS r ON r.resource = o.target "
            f"WHERE o.state = 'pending' AND o.next_attempt_at <= now() "
            f"ORDER BY o.next_attempt_at, o.id LIMIT %s FOR UPDATE OF o SKIP LOCKED")
        self.update_sql = (
            f"UPDATE {s}.fence_outbox AS o SET state = u.state, attempts = o.attempts + u.tried, "
            f"last_status = COALESCE(u.status, o.last_status), last_error = u.error, "
            f"next_attempt_at = CASE WHEN u.state = 'pending' "
            f"THEN now() + u.delay_ms * interval '1 millisecond' ELSE o.next_attempt_at END, "
            f"delivered_at = CASE WHEN u.state = 'delivered' THEN now() END, updated_at = now() "
            f"FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::int[], %s::text[], %s::float8[]) "
            f"AS u(id, state, tried, status, error, delay_ms) WHERE o.id = u.id")
        log.info("connected; delivering the outbox %s.fence_outbox", row[0])

    def _max_payload(self, schema):
        """pg_fence.max_outbox_payload in bytes, the largest payload
        fence_enqueue takes (a chunk of the claim holds at most --batch-bytes
        of them); its highest, 16 MB, if this session cannot read it. The
        setting exists once pg_fence's library is loaded: a call of
        fence_outbox_key loads it."""
        import psycopg2
        with self.conn, self.conn.cursor() as cur:
            try:
                cur.execute("SAVEPOINT max_payload")
                cur.execute(f"SELECT {schema}.fence_outbox_key('relay', 0, 'relay')")
            except psycopg2.Error:
                cur.execute("ROLLBACK TO SAVEPOINT max_payload")
            cur.execute("SELECT setting::bigint * 1024 FROM pg_catalog.pg_settings "
                        "WHERE name = 'pg_fence.max_outbox_payload'")
            row = cur.fetchone()
        return row[0] if row else 16 << 20

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    # -- one entry -------------------------------------------------------
    def deliver(self, entry):
        """The outcome of one entry's attempt; never raises: an unexpected
        exception is a failed attempt (retried), so no entry stops the relay."""
        try:
            return self._deliver(entry)
        except Exception as e:
            log.exception("entry %d: unexpected %s while delivering it; retried", entry[0], type(e).__name__)
            why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            a = self.args
            return Outcome(entry[0], RETRY, 1, None, _excerpt(f"{entry[4]}: unexpected {why}"),
                           backoff_ms(entry[6] + 1, a.backoff_ms, a.max_backoff_ms))

    def _deliver(self, entry):
        entry_id, _target, _token, key, endpoint, payload, attempts, _fence = entry
        a = self.args
        try:
            status, headers, answer = self.sender.post(endpoint, key, payload.encode("utf-8"))
        except (OSError, http.client.HTTPException) as e:
            # ssl.SSLError (a certificate that does not verify too) is an
            # OSError: retried, as the endpoint's certificate may be fixed
            why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            return Outcome(entry_id, RETRY, 1, None, _excerpt(f"{endpoint}: {why}"),
                           backoff_ms(attempts + 1, a.backoff_ms, a.max_backoff_ms))
        except ValueError as e:  # a row written without fence_enqueue's checks
            return Outcome(entry_id, PARKED, 1, None, _excerpt(str(e)))
        if 200 <= status < 300:
            return Outcome(entry_id, DELIVERED, 1, status)
        error = _excerpt(f"HTTP {status}: {answer}")
        if status in (408, 429) or status >= 500:
            return Outcome(entry_id, RETRY, 1, status, error,
                           backoff_ms(attempts + 1, a.backoff_ms, a.max_backoff_ms,
                                      retry_after_s(headers.get("Retry-After"))))
        return Outcome(entry_id, PARKED, 1, status, error)

    # -- one round -------------------------------------------------------
    def claim(self):
        """Claims up to --batch due entries, fetched in chunks (a server-side
        cursor: only fetched rows are locked) until their payloads reach
        --batch-bytes; at least one entry."""
        a = self.args
        chunk = max(1, min(a.batch, a.batch_bytes // self.max_payload))
        entries, size = [], 0
        with self.conn.cursor(name="fence_relay_claim") as cur:
            cur.execute(self.claim_sql, (a.batch,))
            while len(entries) < a.batch and size < a.batch_bytes:
                rows = cur.fetchmany(min(chunk, a.batch - len(entries)))
                if not rows:
                    break
                entries += rows
                size += sum(len(r[5] or "") for r in rows)
        self.claim_full = len(entries) == a.batch or size >= a.batch_bytes
        return entries

    def round(self):
        """Claims, delivers and marks one batch; how many entries it claimed."""
        a = self.args
        started = time.monotonic()
        entries = self.claim()
        if not entries:
            self.conn.commit()
            return 0
        with self.conn.cursor() as cur:
            outcomes = []
            deliver = []
            for e in entries:
                token, fence = e[2], e[7]
                if fence is not None and fence > token:
                    outcomes.append(Outcome(e[0], SUPERSEDED, 0, None,
                                            f"token {token} is older than the fence {fence} of target "
                                            f"{_excerpt(e[1])[:300]!r}: a newer holder owns the work"))
                    log.info("entry %d (%s) superseded: token %d < fence %d of its target",
                             e[0], e[3], token, fence)
                else:
                    deliver.append(e)
            deadline = started + a.batch_time_ms / 1000.0

            def one(e):
                if time.monotonic() >= deadline or self.stopping.is_set():
                    return None  # left pending, untouched
                return self.deliver(e)

            results = self.pool.map(one, deliver) if self.pool else map(one, deliver)
            outcomes.extend(o for o in results if o is not None)
            attempts_before = {e[0]: e[6] for e in deliver}
            for o in outcomes:
                if o.state == RETRY and a.max_attempts:
                    attempts = attempts_before[o.entry_id] + 1
                    if attempts >= a.max_attempts:
                        o.state = PARKED
                        o.error = _excerpt(f"after {attempts} attempts: {o.error}")
            if outcomes:
                cur.execute(self.update_sql, (
                    [o.entry_id for o in outcomes], [o.state for o in outcomes],
                    [o.tried for o in outcomes], [o.status for o in outcomes],
                    [o.error for o in outcomes], [o.delay_ms for o in outcomes]))
        self.conn.commit()
        for o in outcomes:
            if o.state == DELIVERED:
                self.totals[DELIVERED] += 1
            elif o.state == RETRY:
                self.totals["retried"] += 1
            elif o.state == PARKED:
                self.totals[PARKED] += 1
                log.warning("entry %d parked: %s", o.entry_id, o.error)
            else:
                self.totals[SUPERSEDED] += 1
        self.totals["rounds"] += 1
        return len(entries)

    # -- the loop --------------------------------------------------------
    def run(self):
        a = self.args
        last_log = time.monotonic()
        logged = dict(self.totals)
        reconnect_delay = 0.1
        while not self.stopping.is_set():
            try:
                if self.conn is None:
                    self.connect()
                    reconnect_delay = 0.1
                claimed = self.round()
            except Exception as e:  # the database (or a bug): log, reconnect, go on
                if type(e).__module__.startswith("psycopg2") or isinstance(e, OSError):
                    self.totals["db_errors"] += 1
                    log.error("database: %s; reconnecting in %.1fs", str(e).strip(), reconnect_delay)
                    self.close()
                    self.stopping.wait(reconnect_delay)
                    reconnect_delay = min(reconnect_delay * 2, 10.0)
                    continue
                raise
            now = time.monotonic()
            if now - last_log >= a.log_every_ms / 1000.0:
                delta = {k: self.totals[k] - logged[k] for k in self.totals}
                log.info("delivered %d, retried %d, parked %d, superseded %d in %.1fs (%.0f/s); totals: %s",
                         delta[DELIVERED], delta["retried"], delta[PARKED], delta[SUPERSEDED], now - last_log,
                         delta[DELIVERED] / (now - last_log),
                         " ".join(f"{k}={v}" for k, v in self.totals.items()))
                last_log, logged = now, dict(self.totals)
            if a.once and claimed == 0:
                break
            if claimed == 0 or not self.claim_full:
                self.stopping.wait(a.idle_ms / 1000.0)
        self.close()
        self.sender.close()
        if self.pool:
            self.pool.shutdown()
        log.info("stopped; totals: %s", " ".join(f"{k}={v}" for k, v in self.totals.items()))

    def metrics_text(self):
        lines = []
        for name, help_text in (
                (DELIVERED, "entries delivered (2xx)"), ("retried", "delivery attempts that failed and will be retried"),
                (PARKED, "entries parked (4xx, or out of attempts)"),
                (SUPERSEDED, "entries not delivered: token older than the target's fence"),
                ("rounds", "rounds that claimed entries"), ("db_errors", "database errors (reconnected)")):
            metric = f"pgfence_relay_{name}_total"
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} counter", f"{metric} {self.totals[name]}"]
        return "\n".join(lines) + "\n"


def serve_metrics(relay, address):
    import http.server

    host, _, port = address.rpartition(":")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = relay.metrics_text().encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


HELP_EPILOG = """\
what it does:
  Claims due pending entries of fence_outbox in rounds (FOR UPDATE SKIP LOCKED,
  so several relays may run at once), skips and marks `superseded` those whose
  token is older than their target's fence (a newer lock holder owns the work),
  POSTs the others' payload to their endpoint with the headers Idempotency-Key
  and Content-Type: application/json, and marks each one:
    2xx                              delivered
    408, 429, 5xx, timeout, refused,
    a TLS error                      pending, retried after a backoff
    other status (3xx, 4xx)          parked with the status and the answer
  An entry leaves `pending` only after a 2xx, a park or a supersede: a relay
  that dies mid-round delivers its entries again next time, with the same key
  (at-least-once; a receiver that deduplicates on the key applies it once).
  Parked entries wait for an operator: SELECT fence_outbox_retry(id).

the database role needs: SELECT, UPDATE on fence_outbox; SELECT on
fence_resources (in the extension's schema).

exit status: 0 after SIGTERM/SIGINT (the round in progress is finished) or
--once; 2 bad arguments; 11 the database is unusable at start (no pg_fence
1.5); connection errors later are logged and retried.

examples:
  fence-relay --dsn 'dbname=app user=relay'
  fence-relay --dsn "$DSN" --batch 200 --concurrency 8 --metrics 127.0.0.1:9187
"""


def parse_args(argv, version=None):
    p = argparse.ArgumentParser(
        prog="fence-relay",
        description="Deliver pg_fence's outbox (fence_outbox) to HTTP endpoints, at least once, "
                    "with an Idempotency-Key per entry.",
        epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dsn", default=os.environ.get("FENCE_RELAY_DSN", ""),
                   help="libpq connection string (default: $FENCE_RELAY_DSN, else libpq's PG* variables)")
    p.add_argument("--batch", type=int, default=100, help="entries claimed per round, 1..10000 (default 100)")
    p.add_argument("--batch-bytes", default="64MiB",
                   help="stop claiming entries in a round once their payloads reach this size "
                        "(default 64MiB; a round takes at least one entry)")
    p.add_argument("--concurrency", type=int, default=4,
                   help="requests in flight per relay, 1..64 (default 4); entries are not delivered in order")
    p.add_argument("--timeout", default="10s",
                   help="bound of each request as a whole: DNS lookup, connect, send, answer (default 10s)")
    p.add_argument("--batch-time", default="30s",
                   help="stop starting deliveries in a round after this long (default 30s)")
    p.add_argument("--idle", default="200ms", help="pause when no entry is due (default 200ms)")
    p.add_argument("--backoff", default="1s", help="delay after the first failed attempt, doubled per attempt (default 1s)")
    p.add_argument("--max-backoff", default="5m", help="longest delay between attempts (default 5m)")
    p.add_argument("--max-attempts", type=int, default=0,
                   help="park an entry after this many failed attempts (default 0: retry without end)")
    p.add_argument("--once", action="store_true", help="exit when no entry is due")
    p.add_argument("--log-every", default="10s", help="interval of the progress line (default 10s)")
    p.add_argument("--metrics", metavar="HOST:PORT", default="",
                   help="serve Prometheus text at http://HOST:PORT/metrics")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--version", action="version",
                   version=f"fence-relay (pgfence) {version or 'from the source tree'}")
    args = p.parse_args(argv)
    try:
        for name in ("timeout", "batch_time", "idle", "backoff", "max_backoff", "log_every"):
            setattr(args, name + "_ms", parse_duration_ms(getattr(args, name)))
        args.batch_bytes = parse_bytes(args.batch_bytes)
    except (ValueError, TypeError) as e:
        p.error(str(e))
    if args.batch_bytes < 1:
        p.error(f"--batch-bytes must be at least 1 byte, not {args.batch_bytes}")
    if not 1 <= args.batch <= 10000:
        p.error(f"--batch must be 1..10000, not {args.batch}")
    if not 1 <= args.concurrency <= 64:
        p.error(f"--concurrency must be 1..64, not {args.concurrency}")
    if args.timeout_ms < 1:
        p.error(f"--timeout must be at least 1ms, not {args.timeout}")
    if args.backoff_ms < 1 or args.max_backoff_ms < args.backoff_ms:
        p.error(f"--backoff ({args.backoff}) must be at least 1ms and at most --max-backoff ({args.max_backoff})")
    if args.max_attempts < 0:
        p.error(f"--max-attempts must be 0 or more, not {args.max_attempts}")
    if args.metrics and not args.metrics.rpartition(":")[2].isdigit():
        p.error(f"--metrics must be HOST:PORT, not {args.metrics!r}")
    return args


def main(argv=None, version=None):
    """Runs the relay; its exit status. version: the installed launcher's."""
    args = parse_args(sys.argv[1:] if argv is None else argv, version)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s fence-relay[%(process)d] %(levelname)s %(message)s")
    relay = Relay(args)

    def stop(signum, _frame):
        log.info("signal %d: finishing the round in progress", signum)
        relay.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        relay.connect()
    except Exception as e:
        log.error("cannot start: %s", str(e).strip())
        return 11
    if args.metrics:
        serve_metrics(relay, args.metrics)
    relay.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
