"""The coordinator's HTTP API (docs/http-api.md) as typed, synchronous calls.

The same contract as the C++ client (coordinator/client/client.h):

- Endpoints come from the `endpoints` argument, else $FENCE_ENDPOINTS, else
  the default of a local scripts/cluster.sh cluster (pgfence.endpoints).
- A follower's 307 is followed to the leader (at most max_redirects hops),
  and the leader is asked first on the next call.
- Connection errors, timeouts and 503 are retried across the endpoints with
  exponential backoff, within the call's deadline (`timeout`; an acquire adds
  its wait) and at most max_attempts requests (pgfence._transport).
- Lease time is counted from when a request was SENT (time.monotonic()),
  never from when the answer arrived, and shortened by rho =
  max_clock_drift_ppm / 1e6 (default 5%): Lease.deadline is send time +
  lease x (1 - rho). While every clock runs within rho of real time, at most
  `lease` of real time has passed at that instant, and the leader does not
  expire the lease before send + lease in real time (it waits lease x
  (1 + rho) on its own clock; docs/guarantees.md, "Clocks: what is assumed").
  Stop writing with the token by then; beyond it only the fence protects.
- Errors are the exceptions of pgfence.errors. Their messages name the key,
  the token and the member that answered where they are known, and a lease
  or wait the cluster refuses as the caller gave it (lease='1h'), not as
  the HTTP field that carried it.

TLS and credentials, as fencectl takes them: ca_file, cert_file, key_file and
bearer_file default to $FENCE_CACERT_FILE, $FENCE_CERT_FILE, $FENCE_KEY_FILE
and $FENCE_BEARER_FILE. A bearer file holds the secret on its first line
(surrounding blanks dropped; at most 4 KiB). The files are read when the
Client is made, so a bad one is a ValueError naming it then.

Threading: a Client may be shared by threads; its calls are serialized (one
at a time, each on the Client's keep-alive connections). A thread that must
not wait behind another's long call (a waiting acquire) uses copy().
"""

import dataclasses
import json
import os
import re
import ssl
import threading
import time
import urllib.parse

from . import errors, exitcodes
from . import watch as _watch
from ._transport import StreamEnded, Transport, dumps
from .duration import format_duration_ms, parse_duration_ms
from .endpoints import Endpoint, endpoints_from, parse_endpoint

DEFAULT_MAX_CLOCK_DRIFT_PPM = 50_000  # 5%, fence-coordinator's default --max-clock-drift-ppm
MAX_CLOCK_DRIFT_PPM_LIMIT = 500_000   # the largest fencectl accepts
LIST_PAGE_SIZE = 1000                 # list(): locks asked for per page
MAX_LISTED_LOCKS = 10_000_000
MAX_BEARER_FILE_BYTES = 4096

CA_FILE_ENV = "FENCE_CACERT_FILE"
CERT_FILE_ENV = "FENCE_CERT_FILE"
KEY_FILE_ENV = "FENCE_KEY_FILE"  # FENCE_KEY is the lock key `fencectl run` exports
BEARER_FILE_ENV = "FENCE_BEARER_FILE"


# An election NAME is the lock on this prefix + NAME (coordinator/member/api.h election_key()).
ELECTION_PREFIX = "election/"


def usable_lease(lease_ms, max_clock_drift_ppm):
    """lease x (1 - rho) in seconds: how long after its send a lease may be used.
    The one place the client applies rho; rho >= 100% leaves nothing."""
    if lease_ms <= 0 or max_clock_drift_ppm >= 1_000_000:
        return 0.0
    return lease_ms * (1_000_000 - max_clock_drift_ppm) / 1e9  # ms x ppm-complement = ns


@dataclasses.dataclass
class Lease:
    """A granted lock. `sent_at` is the monotonic send time of the call's FIRST
    request (an earlier attempt whose answer was lost may have made the grant)."""

    key: str
    token: int
    lease_ms: int
    owner: str
    proof: str  # the grant's token proof when the cluster signs grants, else ""
    sent_at: float
    received_at: float
    max_clock_drift_ppm: int
    name: str = ""  # a campaign's election ("" for a lock); `key` is then "election/" + name
    value: str = ""  # a campaign's: what the leader publishes
    # A set acquired with keys=[...]: its keys in the order asked (`key` is the
    # first), and with signed grants a proof per key; (key,) and {} otherwise.
    keys: tuple = ()
    proofs: dict = dataclasses.field(default_factory=dict)

    @property
    def deadline(self):
        """Stop using the lease by then (time.monotonic()): sent_at + lease x (1 - rho)."""
        return self.sent_at + usable_lease(self.lease_ms, self.max_clock_drift_ppm)


def _key_body(key, token):
    """The body of a release or keepalive: one key, or a set's keys (a list or tuple)."""
    if isinstance(key, (list, tuple)):
        return {"keys": list(key), "token": token} if len(key) > 1 else {"key": key[0], "token": token}
    return {"key": key, "token": token}


def _name(key):
    return ",".join(key) if isinstance(key, (list, tuple)) else key


@dataclasses.dataclass
class KeepaliveResult:
    """A renewed lease; `sent_at` is the send time of the request that succeeded."""

    key: str
    token: int
    ttl_ms: int  # as the leader answered: the full lease, restarted
    sent_at: float
    max_clock_drift_ppm: int

    @property
    def deadline(self):
        """Stop using the lease by then: sent_at + ttl x (1 - rho)."""
        return self.sent_at + usable_lease(self.ttl_ms, self.max_clock_drift_ppm)


@dataclasses.dataclass
class LockInfo:
    """A held lock as the leader lists it (ttl: to the lease's nominal end)."""

    key: str
    token: int
    owner: str
    lease_ms: int
    ttl_ms: int


@dataclasses.dataclass
class Leader:
    """An election's leader (GET /v1/election/leader): its value, and its
    token, the fencing epoch of its writes (ttl: to the lease's nominal end)."""

    name: str
    key: str
    value: str
    token: int
    owner: str
    lease_ms: int
    ttl_ms: int


def _read_bearer(path):
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BEARER_FILE_BYTES + 1)
    except OSError as e:
        raise ValueError(f"bearer file {path!r}: {e.strerror}") from None
    if len(data) > MAX_BEARER_FILE_BYTES:
        raise ValueError(f"bearer file {path!r} is larger than {MAX_BEARER_FILE_BYTES} bytes")
    secret = data.split(b"\n", 1)[0].decode("utf-8", "replace").strip(" \t\r")
    if not secret:
        raise ValueError(f"bearer file {path!r} is empty")
    return secret


def _tls_context(ca_file, cert_file, key_file):
    ctx = ssl.create_default_context(cafile=ca_file or None)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def _drift_ppm(value):
    """max_clock_drift_ppm as an int within [0, MAX_CLOCK_DRIFT_PPM_LIMIT]: an
    int or a str of digits ("50000"); anything else is a ValueError."""
    why = f"max_clock_drift_ppm is {value!r}, must be an integer within [0, {MAX_CLOCK_DRIFT_PPM_LIMIT}]"
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(why)  # a float or None: no silent truncation
    try:
        ppm = int(value)
    except ValueError:
        raise ValueError(why) from None
    if not 0 <= ppm <= MAX_CLOCK_DRIFT_PPM_LIMIT:
        raise ValueError(why)
    return ppm


class _Options:
    """Validated settings shared by a Client's transport (times in seconds)."""

    def __init__(self, endpoints, timeout, attempt_timeout, keepalive_attempt_timeout, probe_timeout,
                 backoff_initial, backoff_max, max_redirects, max_attempts, max_clock_drift_ppm,
                 ca_file, cert_file, key_file, bearer_file, bearer):
        self.endpoints = endpoints_from(endpoints)
        self.timeout_s = parse_duration_ms(timeout) / 1000
        self.attempt_timeout_s = parse_duration_ms(attempt_timeout) / 1000
        ka = keepalive_attempt_timeout
        self.keepalive_attempt_timeout_s = parse_duration_ms(ka) / 1000 if ka else self.attempt_timeout_s
        self.probe_timeout_s = parse_duration_ms(probe_timeout) / 1000
        self.backoff_initial_s = parse_duration_ms(backoff_initial) / 1000
        self.backoff_max_s = parse_duration_ms(backoff_max) / 1000
        self.max_redirects = int(max_redirects)
        self.max_attempts = int(max_attempts)
        self.max_clock_drift_ppm = _drift_ppm(max_clock_drift_ppm)
        self.ca_file = ca_file if ca_file is not None else os.environ.get(CA_FILE_ENV, "")
        self.cert_file = cert_file if cert_file is not None else os.environ.get(CERT_FILE_ENV, "")
        self.key_file = key_file if key_file is not None else os.environ.get(KEY_FILE_ENV, "")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("a client certificate needs its key and a key its certificate (cert_file and "
                             f"key_file, or {CERT_FILE_ENV} and {KEY_FILE_ENV})")
        self._ssl = None
        if self.ca_file or self.cert_file:
            # Loaded now, so a wrong path is reported here, naming the file.
            try:
                self._ssl = _tls_context(self.ca_file, self.cert_file, self.key_file)
            except (OSError, ssl.SSLError) as e:
                files = ", ".join(f for f in (self.ca_file, self.cert_file, self.key_file) if f)
                raise ValueError(f"TLS: cannot load {files}: {e}") from None
        if bearer is None:
            path = bearer_file if bearer_file is not None else os.environ.get(BEARER_FILE_ENV, "")
            bearer = _read_bearer(path) if path else ""
        self.authorization = f"Bearer {bearer}" if bearer else None
        self.args = dict(endpoints=[str(e) for e in self.endpoints], timeout=timeout,
                         attempt_timeout=attempt_timeout, keepalive_attempt_timeout=keepalive_attempt_timeout,
                         probe_timeout=probe_timeout, backoff_initial=backoff_initial, backoff_max=backoff_max,
                         max_redirects=max_redirects, max_attempts=max_attempts,
                         max_clock_drift_ppm=self.max_clock_drift_ppm, ca_file=self.ca_file,
                         cert_file=self.cert_file, key_file=self.key_file, bearer=bearer)

    def ssl_context(self):
        if self._ssl is None:
            self._ssl = _tls_context("", "", "")  # the system's CAs
        return self._ssl


class _Call:
    """What a call is about, for its errors: the operation, the key, the
    caller's token and the lease and wait as the caller gave them."""

    def __init__(self, op, key=None, token=None, lease=None, wait=None, about=""):
        self.op = op
        # "acquire 'report:7'", "keepalive 'report:7' token 18", "list (prefix 'job:')", ...
        self.subject = " ".join(part for part in (op, None if key is None else repr(key),
                                                  None if token is None else f"token {token}", about) if part)
        self.key = key
        self.token = token
        self.lease = lease
        self.wait = wait

    def error(self, cls, message, status=0, endpoint=None, token=None, **extra):
        return cls(message, status, key=self.key, token=self.token if token is None else token,
                   endpoint=None if endpoint is None else str(endpoint), **extra)


def _bad_answer(call, endpoint, what):
    """ProtocolError: the answer of `endpoint` to `call` <what>."""
    return call.error(errors.ProtocolError, f"{call.subject}: the answer of {endpoint} {what}", endpoint=endpoint)


def _not_pgfence(call, endpoint, status, body):
    """NotPgfenceError: every answer of a member's API is a JSON object, so
    `body` came from something else on the port (a web server, a proxy)."""
    shown = body[:80].decode("utf-8", "replace").replace("\n", " ").replace("\r", " ")
    what = "an empty body" if not body else f'"{shown}{"..." if len(body) > 80 else ""}"'
    return call.error(errors.NotPgfenceError, f"{call.subject}: {endpoint} is not a pgfence member: it answered "
                                              f"HTTP {status} with {what} (check the endpoints or FENCE_ENDPOINTS)",
                      status, endpoint)


def _object(body, call, endpoint, status=200):
    try:
        value = json.loads(body)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise _not_pgfence(call, endpoint, status, body)
    return value


def _uint(obj, name, call, endpoint):
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad_answer(call, endpoint, f"has no numeric {name!r}: {obj!r:.200}")
    return value


def _text(obj, name):
    value = obj.get(name)
    return "" if value is None else str(value)


# The server's messages read here: a 400 for a lease or wait out of bounds
# (coordinator/net/api_request.cc) and a 409 naming the holder's token
# (coordinator/member/core_leases.cc). Any other is passed on as it is.
_LEASE_BOUNDS = re.compile(r"field 'lease_ms' is (\d+), must be within \[(\d+), (\d+)\]")
_WAIT_BOUND = re.compile(r"field 'wait_ms' is (\d+), must be at most (\d+)")
_HELD_WITH = re.compile(r"key is held with token (\d+)")


def _bad_request(call, detail):
    """The 400's message: a lease or wait out of bounds in the caller's terms
    (the argument as given, the bounds as durations), else the server's."""
    m = _LEASE_BOUNDS.fullmatch(detail)
    if m and call.lease is not None:
        asked, low, high = (int(g) for g in m.groups())
        return (f"{call.subject}: lease={call.lease!r} is {'shorter' if asked < low else 'longer'} than the "
                f"cluster allows: it grants leases from {format_duration_ms(low)} to "
                f"{format_duration_ms(high)} (fence-coordinator --min-lease and --max-lease)")
    m = _WAIT_BOUND.fullmatch(detail)
    if m and call.wait is not None:
        return (f"{call.subject}: wait={call.wait!r} is longer than the cluster allows: it waits at most "
                f"{format_duration_ms(int(m.group(2)))} (fence-coordinator --max-wait)")
    return f"{call.subject}: bad request: {detail}"


def _held(call, detail, endpoint):
    """HeldError for a 409 on acquire, naming the key (and the holder's token)."""
    m = _HELD_WITH.fullmatch(detail)
    if m:
        holder = int(m.group(1))
        return call.error(errors.HeldError, f"{call.key!r} is held with token {holder}", 409, endpoint,
                          token=holder)
    if detail == "wait timed out" and call.wait is not None:
        waited = format_duration_ms(parse_duration_ms(call.wait))
        return call.error(errors.HeldError, f"{call.key!r} is still held after a wait of {waited} "
                                            f"(wait timed out)", 409, endpoint)
    return call.error(errors.HeldError, f"{call.key!r} was not granted: {detail or 'held'}", 409, endpoint)


def _raise_for(result, call, not_found):
    """Raises the error for a final answer other than 200. `not_found`: the
    class for 404 (NotFoundError for get, NotHeldError for release/keepalive)."""
    response, endpoint = result.response, result.endpoint
    obj = _object(response.body, call, endpoint, response.status)
    code = _text(obj, "error")
    if not code:  # every error of a member's API names its `error`
        raise _not_pgfence(call, endpoint, response.status, response.body)
    detail = _text(obj, "message") or code
    status = response.status
    if status == 400:
        raise call.error(errors.BadRequestError, _bad_request(call, detail), status, endpoint)
    if status == 404 and not_found is errors.NotHeldError:
        lost = call.op == "keepalive"
        message = (f"{call.key!r} is not held with token {call.token}"
                   f"{' any more: the lease is lost' if lost else ''} ({detail or 'not held'})")
        raise call.error(errors.NotHeldError, message, status, endpoint,
                         exit_code=exitcodes.EXIT_LEASE_LOST if lost else None)
    if status == 404 and call.key is not None:
        raise call.error(not_found, f"no lock on {call.key!r} ({detail or 'not found'})", status, endpoint)
    if status == 404:
        raise call.error(not_found, f"{call.subject}: {endpoint} answered 404: {detail or 'not found'}",
                         status, endpoint)
    if status == 409:
        raise _held(call, detail, endpoint)
    if status == 401:
        raise call.error(errors.NotAuthorizedError, f"{call.subject}: not authenticated by {endpoint}: {detail}",
                         status, endpoint)
    if status == 403:
        raise call.error(errors.NotAuthorizedError, f"{call.subject}: not authorized by {endpoint}: {detail}",
                         status, endpoint)
    if status == 410 and code == "compacted":
        oldest = obj.get("oldest_revision")
        oldest = oldest if isinstance(oldest, int) and not isinstance(oldest, bool) else 0
        raise call.error(errors.CompactedError, f"{call.subject}: compacted: {detail} (the oldest revision still "
                                                f"kept is {oldest})", status, endpoint, oldest_revision=oldest)
    if status == 507:
        raise call.error(errors.TableFullError, f"{call.subject}: lock table full: {detail}", status, endpoint)
    raise call.error(errors.ProtocolError, f"{call.subject}: unexpected HTTP status {status} from {endpoint}: "
                                           f"{detail}", status, endpoint)


def _lock_info(obj, call, endpoint):
    return LockInfo(key=_text(obj, "key"), token=_uint(obj, "token", call, endpoint), owner=_text(obj, "owner"),
                    lease_ms=obj.get("lease_ms", 0), ttl_ms=obj.get("ttl_ms", 0))


class Client:
    """A connection to a pgfence cluster. Durations are str ("10s", "500ms")
    or datetime.timedelta (pgfence.duration); see the module's docstring."""

    def __init__(self, endpoints=None, *, timeout="10s", attempt_timeout="3s", keepalive_attempt_timeout=None,
                 probe_timeout="300ms", backoff_initial="20ms", backoff_max="500ms", max_redirects=4,
                 max_attempts=64, max_clock_drift_ppm=DEFAULT_MAX_CLOCK_DRIFT_PPM, ca_file=None,
                 cert_file=None, key_file=None, bearer_file=None, bearer=None):
        """endpoints: "h:p,https://h:p" or a list (None: $FENCE_ENDPOINTS).
        timeout: a whole call (an acquire adds its wait). attempt_timeout: one
        request to one member (an acquire adds its wait); keepalive_attempt_timeout
        the same for keepalives (None: attempt_timeout). probe_timeout: the
        GET /healthz on a new connection ("0s": no probe). bearer: the secret
        itself, instead of bearer_file. None for a TLS file or the bearer file
        means: from its environment variable; "" means none."""
        self._opts = _Options(endpoints, timeout, attempt_timeout, keepalive_attempt_timeout, probe_timeout,
                              backoff_initial, backoff_max, max_redirects, max_attempts, max_clock_drift_ppm,
                              ca_file, cert_file, key_file, bearer_file, bearer)
        self._transport = Transport(self._opts)
        self._mutex = threading.Lock()

    @property
    def endpoints(self):
        return list(self._opts.endpoints)

    @property
    def max_clock_drift_ppm(self):
        return self._opts.max_clock_drift_ppm

    @property
    def leader(self):
        """The member that gave the last final answer (an Endpoint), or None."""
        return self._transport.leader

    def copy(self, **overrides):
        """A new Client with the same settings (and its own connections)."""
        return Client(**{**self._opts.args, **overrides})

    def close(self):
        with self._mutex:
            self._transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _perform(self, make, seconds, call, deadline=None):
        end = time.monotonic() + seconds
        if deadline is not None:
            end = min(end, deadline)
        with self._mutex:
            result = self._transport.perform(make, end)
        if result.response is None:
            raise call.error(errors.UnavailableError, f"{call.subject}: {result.error}")
        return result

    def _post(self, path, body, attempt_s, call, deadline=None):
        data = dumps(body)
        return self._perform(lambda: ("POST", path, data, attempt_s), self._opts.timeout_s, call, deadline)

    def _get(self, target, call):
        return self._perform(lambda: ("GET", target, None, self._opts.attempt_timeout_s), self._opts.timeout_s,
                             call)

    def acquire(self, key=None, lease="10s", wait="0s", owner="", keys=None):
        """Takes the lock on `key` -> Lease. With `wait` > 0 a held key is
        queued for (FIFO) up to that long; a retry asks only for the wait left.
        Raises HeldError (held, or the wait ran out), BadRequestError,
        NotAuthorizedError, TableFullError, UnavailableError, ProtocolError.
        With an `owner`, a retry that finds the key held by that owner gets its
        token back. `keys` (2..64 distinct keys, instead of `key`): the set is
        acquired all or nothing under one lease and one token; release and
        keep it alive whole with release(lease.keys, ...)."""
        if (key is None) == (keys is None):
            raise ValueError("acquire: give one of key= and keys=")
        keys = tuple(keys) if keys is not None else None
        fields = {"key": key} if keys is None else {"keys": list(keys)}
        call = _Call("acquire", key if keys is None else ",".join(keys), lease=lease, wait=wait)
        return self._grant("/v1/acquire", fields, call, lease, wait, owner, keys)

    def _grant(self, path, fields, call, lease, wait, owner, keys=None):
        lease_ms = parse_duration_ms(lease)
        wait_s = parse_duration_ms(wait) / 1000
        wait_end = time.monotonic() + wait_s

        def make():
            left_ms = max(0, int((wait_end - time.monotonic()) * 1000))
            body = dict(fields, lease_ms=lease_ms, wait_ms=left_ms)
            if owner:
                body["owner"] = owner
            return "POST", path, dumps(body), self._opts.attempt_timeout_s + left_ms / 1000

        result = self._perform(make, self._opts.timeout_s + wait_s, call)
        r = result.response
        if r.status != 200:
            _raise_for(result, call, errors.NotFoundError)
        obj = _object(r.body, call, result.endpoint)
        granted_ms = obj.get("lease_ms", lease_ms)
        names = keys if keys is not None else (_text(obj, "key") or call.key,)
        proofs = obj.get("proofs") if isinstance(obj.get("proofs"), dict) else {}
        return Lease(key=names[0], token=_uint(obj, "token", call, result.endpoint),
                     lease_ms=granted_ms if isinstance(granted_ms, int) else lease_ms,
                     owner=_text(obj, "owner"), proof=_text(obj, "proof") or proofs.get(names[0], ""),
                     sent_at=result.first_sent_at, received_at=time.monotonic(),
                     max_clock_drift_ppm=self._opts.max_clock_drift_ppm, name=_text(obj, "name"),
                     value=_text(obj, "value"), keys=names, proofs=dict(proofs))

    # -- elections (docs/http-api.md "Elections": election NAME is the lock on
    # the key "election/" + NAME, whose permissions it has) ---------------------

    def campaign(self, name, value="", lease="10s", wait="0s", owner=""):
        """Campaigns in election `name` -> Lease (name, value, key
        "election/" + name, token: the fencing epoch of the leader's writes).
        With `wait` > 0 the campaign queues (FIFO) behind the leader for up to
        that long. Keep the lease alive with keepalive(lease.key, lease.token),
        or use pgfence.election(), which does. Raises what acquire() raises
        (HeldError: the wait ran out)."""
        return self._grant("/v1/election/campaign", {"name": name, "value": value},
                           _Call("campaign", ELECTION_PREFIX + name, lease=lease, wait=wait), lease, wait, owner)

    def proclaim(self, name, token, value):
        """The leader of `name` holding `token` publishes `value` instead;
        NotHeldError when the election is not led with that token."""
        call = _Call("proclaim", ELECTION_PREFIX + name, token)
        result = self._post("/v1/election/proclaim", {"name": name, "token": token, "value": value},
                            self._opts.attempt_timeout_s, call)
        if result.response.status != 200:
            _raise_for(result, call, errors.NotHeldError)
        _object(result.response.body, call, result.endpoint)

    def resign(self, name, token, deadline=None):
        """The leader of `name` holding `token` steps down: the first waiting
        campaigner leads at once. NotHeldError when the election is not led
        with that token. `deadline` (time.monotonic()) cuts the call short."""
        call = _Call("resign", ELECTION_PREFIX + name, token)
        result = self._post("/v1/election/resign", {"name": name, "token": token}, self._opts.attempt_timeout_s,
                            call, deadline)
        if result.response.status != 200:
            _raise_for(result, call, errors.NotHeldError)
        if _object(result.response.body, call, result.endpoint).get("resigned") is not True:
            raise _not_pgfence(call, result.endpoint, 200, result.response.body)

    def election_leader(self, name):
        """The leader of election `name` -> Leader; NotFoundError when it has none."""
        call = _Call("leader", ELECTION_PREFIX + name)
        result = self._get("/v1/election/leader?name=" + urllib.parse.quote(name, safe=""), call)
        if result.response.status != 200:
            _raise_for(result, call, errors.NotFoundError)
        obj = _object(result.response.body, call, result.endpoint)
        return Leader(name=_text(obj, "name"), key=_text(obj, "key"), value=_text(obj, "value"),
                      token=_uint(obj, "token", call, result.endpoint), owner=_text(obj, "owner"),
                      lease_ms=obj.get("lease_ms", 0), ttl_ms=obj.get("ttl_ms", 0))

    def observe(self, name, until=None, idle_timeout=_watch.DEFAULT_IDLE_TIMEOUT):
        """Follows election `name`: yields its Leader (or None when nobody
        leads) as it is now, then at each change of leader or value, in log
        order, each once (GET /v1/election/observe, then the watch of its key
        `election/NAME` from there: any member serves it, and a break resumes
        at another without a gap, as watch() does; Leader.lease_ms and
        .ttl_ms are 0: a watch tells changes, not deadlines). Ends at `until`
        (time.monotonic()), or never when None. Raises what watch() raises."""
        key = ELECTION_PREFIX + name
        idle_s = parse_duration_ms(idle_timeout) / 1000
        if idle_s <= 0:
            raise ValueError("observe: idle_timeout must be > 0")
        leader = None
        for event in self._watch(key, None, None, False, idle_s, None, observe=name, until=until):
            kind = event["type"]
            if kind == "leader":
                now = None if event["token"] == 0 else self._leader_of(name, key, event)
            elif kind == "granted":
                now = self._leader_of(name, key, event)
            elif kind == "proclaimed" and leader is not None and leader.token == event["token"]:
                now = dataclasses.replace(leader, value=event.get("value", ""))
            elif kind in ("released", "expired") and leader is not None and leader.token == event["token"] \
                    and event.get("existed", True):
                now = None
            else:
                continue
            if kind == "leader" or now != leader:
                leader = now
                yield now

    @staticmethod
    def _leader_of(name, key, event):
        return Leader(name=name, key=key, value=event.get("value", ""), token=event["token"],
                      owner=event.get("owner", ""), lease_ms=0, ttl_ms=0)

    def release(self, key, token, deadline=None):
        """Releases `key` if it is held with `token`; NotHeldError otherwise.
        `key` may be a set's keys (a list or tuple, Lease.keys): released
        whole. `deadline` (time.monotonic()) cuts the call short."""
        call = _Call("release", _name(key), token)
        result = self._post("/v1/release", _key_body(key, token), self._opts.attempt_timeout_s, call,
                            deadline)
        if result.response.status != 200:
            _raise_for(result, call, errors.NotHeldError)
        if _object(result.response.body, call, result.endpoint).get("released") is not True:
            raise _not_pgfence(call, result.endpoint, 200, result.response.body)

    def keepalive(self, key, token, deadline=None):
        """Resets the lease of `key` held with `token` -> KeepaliveResult;
        NotHeldError once it is not held with that token (the lease is lost:
        stop). `deadline` (time.monotonic()) cuts the call short."""
        call = _Call("keepalive", _name(key), token)
        result = self._post("/v1/keepalive", _key_body(key, token),
                            self._opts.keepalive_attempt_timeout_s, call, deadline)
        r = result.response
        if r.status != 200:
            _raise_for(result, call, errors.NotHeldError)
        obj = _object(r.body, call, result.endpoint)
        return KeepaliveResult(key=key, token=token, ttl_ms=_uint(obj, "ttl_ms", call, result.endpoint),
                               sent_at=r.sent_at, max_clock_drift_ppm=self._opts.max_clock_drift_ppm)

    def get(self, key):
        """The lock on `key` -> LockInfo; NotFoundError when nobody holds it."""
        call = _Call("get", key)
        result = self._get("/v1/locks?key=" + urllib.parse.quote(key, safe=""), call)
        if result.response.status != 200:
            _raise_for(result, call, errors.NotFoundError)
        return _lock_info(_object(result.response.body, call, result.endpoint), call, result.endpoint)

    def list(self, prefix=""):
        """Every held lock whose key starts with `prefix`, sorted by key, asked
        for page by page: not one snapshot (a lock changed meanwhile may show or
        not). Under --auth-file only the keys the caller may read."""
        out, after = [], ""
        call = _Call("list", about=f"(prefix {prefix!r})" if prefix else "")
        while True:
            query = urllib.parse.urlencode({"prefix": prefix, "after": after, "limit": LIST_PAGE_SIZE})
            result = self._get("/v1/locks?" + query, call)
            if result.response.status != 200:
                _raise_for(result, call, errors.NotFoundError)
            src = result.endpoint
            obj = _object(result.response.body, call, src)
            locks = obj.get("locks")
            if not isinstance(locks, list):
                raise _bad_answer(call, src, "has no 'locks' array")
            for item in locks:
                if not isinstance(item, dict):
                    raise _bad_answer(call, src, "has a non-object in 'locks'")
                info = _lock_info(item, call, src)
                if info.key.startswith(prefix):
                    out.append(info)
            nxt = obj.get("next")
            if nxt is None:
                return out
            if not isinstance(nxt, str) or not nxt or nxt <= after:
                raise _bad_answer(call, src, f"has a 'next' that is not a key after {after!r}")
            if len(out) > MAX_LISTED_LOCKS:
                raise _bad_answer(call, src, f"makes the list longer than {MAX_LISTED_LOCKS} locks")
            after = nxt

    def status_of(self, endpoint):
        """GET /v1/status of one member (an Endpoint or "h:p"), as a dict: no
        redirects, no retries elsewhere."""
        if not isinstance(endpoint, Endpoint):
            endpoint = parse_endpoint(endpoint)
        seconds = min(self._opts.timeout_s, self._opts.attempt_timeout_s)
        call = _Call("status", about=f"of {endpoint}")
        with self._mutex:
            result = self._transport.perform_at(
                endpoint, lambda: ("GET", "/v1/status", None, self._opts.attempt_timeout_s),
                time.monotonic() + seconds)
        if result.response is None:
            raise call.error(errors.UnavailableError, result.error, endpoint=endpoint)
        if result.response.status != 200:
            _raise_for(result, call, errors.NotFoundError)
        return _object(result.response.body, call, endpoint)

    def status(self):
        """/v1/status of the first member that answers (any role), as a dict."""
        last = errors.UnavailableError("no endpoints")
        for endpoint in self._opts.endpoints:
            try:
                return self.status_of(endpoint)
            except errors.FenceError as e:
                last = e
        raise last

    def watch(self, key=None, prefix=None, rev=None, progress=False, idle_timeout=_watch.DEFAULT_IDLE_TIMEOUT,
              on_resume=None):
        """Lock events of `key` (or of every key starting with `prefix`; ""
        is every key the caller may read) -> an iterator of dicts, in log
        order, each exactly once, for as long as it is iterated:

            {"type": "granted", "revision": R, "key": K, "token": T, "owner": O, "lease_ms": L}
              (and "value": V when the lock publishes one: an election's leader)
            {"type": "released", "revision": R, "key": K, "token": T}
            {"type": "expired", "revision": R, "key": K, "token": T, "existed": bool}
            {"type": "proclaimed", "revision": R, "key": K, "token": T, "value": V}

        and with `progress`, {"type": "start", "revision": A, "member": ID}
        each time a member starts serving, and {"type": "progress",
        "revision": A} (every event up to A was sent). `rev` >= 1: every
        event from that revision (the Raft log index of the entry that made
        it); None: the events after the first member's applied index.

        Any member serves the stream. When it dies, closes the stream, or
        sends nothing for idle_timeout, the watch goes on at another member
        from the last revision delivered, skipping what it already delivered
        (pgfence.watch has the rule); on_resume(why, rev) hears each time.
        Raises CompactedError (.oldest_revision: the lowest any keeps) when
        every endpoint answers that the revision is older than the history it
        keeps (a member keeps what it applied since it started), UnavailableError when no member
        served a stream within `timeout` after the last one ended,
        NotAuthorizedError, BadRequestError, ProtocolError. The stream has
        its own connection: the Client may make other calls meanwhile.
        Closing the iterator (break, close()) closes the stream."""
        if (key is None) == (prefix is None):
            raise ValueError("watch needs exactly one of key and prefix")
        if key is not None and not key:
            raise ValueError('watch: key is empty (prefix="" watches every key)')
        if rev is not None and (isinstance(rev, bool) or not isinstance(rev, int) or rev < 1):
            raise ValueError(f"watch: rev is {rev!r}, must be an integer >= 1")
        idle_s = parse_duration_ms(idle_timeout) / 1000
        if idle_s <= 0:
            raise ValueError("watch: idle_timeout must be > 0")
        return self._watch(key, prefix, rev, progress, idle_s, on_resume)

    def _watch(self, key, prefix, rev, progress, idle_s, on_resume, observe=None, until=None):
        # observe: an election's name; its first stream is GET
        # /v1/election/observe (the "leader" state line, then the key's
        # events), a resumed one the key's watch. until: time.monotonic()
        # at which the iterator ends (None: never).
        call = _Call("watch" if observe is None else "observe", key,
                     about="" if prefix is None else f"(prefix {prefix!r})")
        cursor = _watch.Cursor(rev)
        last_line_at = time.monotonic()
        backoff = self._opts.backoff_initial_s
        compacted, compacted_at = None, set()  # the 410 with the lowest oldest revision, and who answered it
        while True:
            query = {"key": key} if prefix is None else {"prefix": prefix}
            if cursor.resume:
                query["rev"] = cursor.resume
            query["progress"] = 1  # progress lines move the resume point and show the stream is alive
            path = "/v1/watch?" + urllib.parse.urlencode(query)
            if observe is not None and not cursor.resume:
                path = "/v1/election/observe?" + urllib.parse.urlencode({"name": observe})
            deadline = max(time.monotonic(), last_line_at + self._opts.timeout_s)
            with self._mutex:
                result = self._transport.perform(lambda: ("GET", path, None, self._opts.attempt_timeout_s),
                                                 deadline, stream=True)
            if result.response is None:
                raise call.error(errors.UnavailableError, f"{call.subject}: {result.error}")
            if result.response.status != 200:
                try:
                    _raise_for(result, call, errors.NotFoundError)
                except errors.CompactedError as e:
                    # A member keeps the events it applied since it started: one
                    # that has not restarted since may still have them.
                    if compacted is None or e.oldest_revision < compacted.oldest_revision:
                        compacted = e
                    if result.endpoint in compacted_at or len(compacted_at) + 1 >= len(self._opts.endpoints):
                        raise compacted from None
                    compacted_at.add(result.endpoint)
                    with self._mutex:
                        self._transport.avoid(result.endpoint)
                    continue
            compacted, compacted_at = None, set()
            stream = result.response.stream
            any_line = False
            cursor.open()
            try:
                while True:
                    wait_s = idle_s
                    if until is not None:
                        wait_s = min(idle_s, until - time.monotonic())
                        if wait_s <= 0:
                            return
                    try:
                        raw = stream.readline(wait_s, _watch.MAX_LINE_BYTES)
                    except ValueError as e:
                        raise call.error(errors.ProtocolError, f"{call.subject}: {e}", endpoint=stream.endpoint)
                    if not raw.strip():
                        continue
                    last_line_at = time.monotonic()
                    any_line = True
                    try:
                        event = _watch.parse_line(raw)
                    except _watch.BadLine as e:
                        raise _bad_answer(call, stream.endpoint, f"has a line that is not a watch line ({e}): "
                                                                 f"{raw[:200]!r}") from None
                    if event is None:
                        continue
                    if event["type"] == "error":
                        raise StreamEnded(f"{stream.endpoint} closed the stream: {event.get('error', 'error')}"
                                          + (f" ({event['message']})" if event.get("message") else ""))
                    verdict = cursor.accept(event)
                    if verdict == cursor.OUT_OF_ORDER:
                        raise _bad_answer(call, stream.endpoint, f"sent revision {event['revision']} after a "
                                                                 f"higher one in the same stream")
                    if verdict == cursor.SKIP or (event["type"] in _watch.META_TYPES and not progress and
                                                  not (observe is not None and event["type"] == "leader")):
                        continue
                    yield event
            except StreamEnded as end:
                why = end.why
            finally:
                stream.close()
            if until is not None and time.monotonic() >= until:
                return
            with self._mutex:
                self._transport.avoid(result.endpoint)
            if on_resume is not None:
                on_resume(why, cursor.resume)
            if any_line:
                last_line_at = time.monotonic()  # the other members have `timeout` from here to take over
                backoff = self._opts.backoff_initial_s
                continue
            time.sleep(backoff)  # a member that ends streams at once: do not spin on it
            backoff = min(backoff * 2, self._opts.backoff_max_s)
