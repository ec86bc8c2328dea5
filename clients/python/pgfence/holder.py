"""Holding a lock while work runs: pgfence.lock() and HeldLock.

    with pgfence.lock("report:7", lease="10s") as lease:
        if lease.lost: stop              # true from deadline - margin on
        write_with(lease.token)          # and lease.proof when the cluster signs
        write_with(lease.token, lease.next_seq())   # a sequenced table: 1, 2, 3, ...

What a HeldLock does, as `fencectl run` (docs/cli.md):

1. acquires the key (`lease`, `wait`, `owner` as Client.acquire); if the
   first keepalive was due by the time a long wait ended, a keepalive
   confirms the lease before the HeldLock is handed out (LeaseLostError if
   it fails, or if the answer came after deadline - margin);
2. keeps the lease alive from a background thread every third of the time
   the lease is usable before it counts as lost (send time of the last
   success + (usable - margin) / 3, usable = lease x (1 - rho)), each
   keepalive request to one member given lease / 8 (at least 100ms, at most 3s) so that a
   stopped leader is left in time, retrying after a failure that is not a
   refusal every min(200ms, lease / 20);
3. the deadline is the send time of the last successful acquire or keepalive
   + lease x (1 - rho) (Client's rule; rho = max_clock_drift_ppm / 1e6, 5% by
   default). `lost` turns true when a keepalive is refused (not held, held,
   bad request, not authorized), and at `lost_at` = deadline - margin if no
   keepalive succeeded by then (margin: lease / 10, at least 10ms, as
   `fencectl run`'s; the `margin` argument of lock()/hold() changes it):
   `lost` compares time.monotonic() with lost_at itself, and a watchdog
   thread waiting on lost_at sets `lost_event` and calls `on_lost` then. So
   the holder learns of the loss while the deadline is still `margin` away,
   time to stop a write in progress. Once lost, a lease stays lost;
4. on exit from the `with` block (normally or by an exception) the threads
   stop and the lock is released (a failed release is logged on the
   "pgfence" logger, never raised, so the block's own exception is kept).

The deadline is the hard bound, the local promise: stop writing with the
token by then (`lost` turns true `margin` earlier). A write that lands later
anyway is what the fence in PostgreSQL refuses.

Sequence numbers, for pg_fence's `sequenced` mode (docs/sql.md, "Mode
sequenced"): PostgreSQL accepts a write when (token, seq) is after the stored
pair, so a holder's own delayed write cannot overwrite a newer one, and the
server never numbers writes itself. next_seq() hands out 1, 2, 3, ... (0 is
the stored floor), each number once, from any thread; last_seq is the last
one handed out (0 before the first). Numbers order the writes as they are
handed out, not as they commit: a write that lands after one with a larger
number is refused (55F01 naming the holder's own token) and is to be dropped.
The counter belongs to the HeldLock, not to the token: an owner that gets its
token back in another HeldLock (a new process that re-acquires with the same
`owner`) must go on above the last sequence it used under that token, which
this counter does not know. After MAX_SEQ (PostgreSQL's bigint maximum)
next_seq() raises ValueError, never wraps: only a newer token is accepted then.
"""

import collections
import logging
import threading
import time

from . import errors
from .advance import publish_generation, resources_of
from .client import Client, usable_lease
from .duration import parse_duration_ms

_log = logging.getLogger("pgfence")
_RETRY_PAUSE_S = 0.2
_DEADLINE_PASSED = "no successful keepalive by the lease's deadline - margin"
_RELEASE_TIMEOUT_S = 1.0  # best effort, as fencectl run
# A keepalive refusal is final: the lock is not ours any more.
_REFUSALS = (errors.NotHeldError, errors.HeldError, errors.BadRequestError, errors.NotAuthorizedError)
_MIN_MARGIN_MS = 10  # as fencectl run's kMinMargin
MAX_SEQ = 9223372036854775807  # PostgreSQL's bigint maximum: the largest pg_fence.seq


class LeaseTimes(collections.namedtuple("LeaseTimes", "last_sent lost_at deadline")):
    """One consistent reading of a HeldLock's times (time.monotonic()):
    last_sent (send time of the last successful acquire or keepalive),
    lost_at (deadline - margin: `lost` is true from then on) and deadline."""

    __slots__ = ()


def default_margin_ms(lease_ms):
    """fencectl run's margin: lease / 10, at least 10ms."""
    return max(_MIN_MARGIN_MS, lease_ms // 10)


def _margin_ms(margin, lease_ms):
    """The margin in ms: `margin` (a duration) if given, else the default."""
    return default_margin_ms(lease_ms) if margin is None else parse_duration_ms(margin)


def check_margin(margin, lease, max_clock_drift_ppm):
    """ValueError unless `margin` (a duration, or None for the default) is
    shorter than the usable lease (lease x (1 - rho)): else the lease would be
    lost as soon as it is granted. Called before the acquire."""
    lease_ms = parse_duration_ms(lease)
    ms = _margin_ms(margin, lease_ms)
    usable_ms = usable_lease(lease_ms, max_clock_drift_ppm) * 1000
    if ms >= usable_ms:
        raise ValueError(f"margin of {ms}ms must be shorter than the usable lease ({usable_ms:.0f}ms = "
                         f"{lease_ms}ms x (1 - rho)): the lease would be lost at once")


class HeldLock:
    """A lock held with a background keepalive. Made by Client.hold() or
    pgfence.lock(); a context manager that releases on exit.

    Attributes: key, token, proof ("" unless the cluster signs grants), owner,
    lease_ms, margin (seconds), lost_event (a threading.Event set once lost),
    keepalives (the number that succeeded). Properties (monotonic times):
    deadline, lost_at (deadline - margin), last_sent; lost, lost_reason.
    times() reads the three times at once (they move with each keepalive).
    next_seq() numbers the writes made with the token (1, 2, 3, ...) and
    last_seq is the last number handed out (see the module's docstring).

    Threading: next_seq() and the properties may be called from any thread.
    """

    def __init__(self, client, acquired, on_lost=None, margin=None):
        """`margin`: a duration ("500ms", a timedelta), or None for lease /
        10 (at least 10ms); hold() checks it is shorter than the usable lease."""
        self.key = acquired.key
        self.token = acquired.token
        self.name = acquired.name  # an election's (pgfence.election()), else ""
        self.value = acquired.value
        self.proof = acquired.proof
        self.owner = acquired.owner
        self.lease_ms = acquired.lease_ms
        self.lost_event = threading.Event()
        self.keepalives = 0
        self._client = client
        self._on_lost = on_lost
        self._usable = usable_lease(acquired.lease_ms, client.max_clock_drift_ppm)
        self.margin = _margin_ms(margin, acquired.lease_ms) / 1000
        attempt_ms = min(3000, max(100, acquired.lease_ms // 8))
        self._attempt_s = attempt_ms / 1000
        self._keeper_client = client.copy(keepalive_attempt_timeout=f"{attempt_ms}ms")
        self._cond = threading.Condition()
        self._stopped = False
        self._lost_reason = ""
        self._released = False
        self._last_sent = acquired.sent_at
        self._deadline = acquired.deadline
        self._lost_at = self._deadline - min(self._usable, self.margin)
        self._next_keepalive = acquired.sent_at + (self._usable - min(self._usable, self.margin)) / 3
        self._threads = []
        self._seq_mutex = threading.Lock()
        self._seq = 0  # the last sequence number handed out; 0 <= _seq <= MAX_SEQ

    # -- what the holder reads ------------------------------------------------

    @property
    def deadline(self):
        """time.monotonic() by which writing with the token must stop: the hard bound."""
        with self._cond:
            return self._deadline

    @property
    def lost_at(self):
        """time.monotonic() from which `lost` is true: deadline - margin."""
        with self._cond:
            return self._lost_at

    def times(self):
        """LeaseTimes(last_sent, lost_at, deadline), read together: a
        keepalive succeeding in between cannot mix two leases' times."""
        with self._cond:
            return LeaseTimes(self._last_sent, self._lost_at, self._deadline)

    @property
    def last_sent(self):
        """Send time (monotonic) of the last successful acquire or keepalive."""
        with self._cond:
            return self._last_sent

    @property
    def lost(self):
        """True once a keepalive was refused or lost_at (deadline - margin) has come."""
        with self._cond:
            return bool(self._lost_reason) or time.monotonic() >= self._lost_at

    @property
    def lost_reason(self):
        """Why the lease is lost ("" while it is not)."""
        with self._cond:
            if not self._lost_reason and time.monotonic() >= self._lost_at:
                return _DEADLINE_PASSED
            return self._lost_reason

    def remaining(self):
        """Seconds left until `lost` turns true, at lost_at (negative once past)."""
        return self.lost_at - time.monotonic()

    def check(self):
        """Raises LeaseLostError if the lease is lost; call it before a write."""
        if self.lost:
            raise errors.LeaseLostError(f"lease of {self.key!r} token {self.token} lost: {self.lost_reason}",
                                        key=self.key, token=self.token)

    def next_seq(self):
        """The next sequence number for a write with this token: 1 first, then
        each call one more, never the same number twice (also across threads).
        ValueError once MAX_SEQ has been handed out: the token is used up."""
        with self._seq_mutex:
            if self._seq >= MAX_SEQ:
                raise ValueError(f"no sequence number left for {self.key!r} token {self.token}: "
                                 f"{MAX_SEQ} (PostgreSQL's bigint maximum, the largest pg_fence.seq) "
                                 "was handed out already; release and acquire the lock again for "
                                 "a newer token")
            self._seq += 1
            return self._seq

    @property
    def last_seq(self):
        """The last number next_seq() returned; 0 before the first call."""
        with self._seq_mutex:
            return self._seq

    # -- lifecycle ------------------------------------------------------------

    def _start(self):
        for target, name in ((self._keep, "keepalive"), (self._watch, "deadline")):
            t = threading.Thread(target=target, name=f"pgfence-{name}:{self.key}", daemon=True)
            t.start()
            self._threads.append(t)

    def release(self):
        """Stops the keepalive and releases the lock (once; later calls do
        nothing). Errors are logged, not raised: a lost lease has nothing to
        release, and the cluster expires what it cannot be told."""
        with self._cond:
            if self._released:
                return
            self._released = True
            self._stopped = True
            self._cond.notify_all()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=self._attempt_s + 1.0)  # a keepalive in flight ends by then, or soon after
        # Its own connection: the keeper's may still be busy with that keepalive.
        releaser = self._client.copy()
        try:
            if self.name:
                releaser.resign(self.name, self.token, deadline=time.monotonic() + _RELEASE_TIMEOUT_S)
            else:
                releaser.release(self.key, self.token, deadline=time.monotonic() + _RELEASE_TIMEOUT_S)
        except errors.NotHeldError:
            pass  # expired or released already
        except errors.FenceError as e:
            _log.warning("release of %r token %s failed: %s", self.key, self.token, e)
        finally:
            releaser.close()
            self._keeper_client.close()

    def proclaim(self, value):
        """An election's leader publishes `value` instead (Client.proclaim);
        NotHeldError once it leads no more."""
        if not self.name:
            raise ValueError(f"{self.key!r} is a lock, not an election: it publishes no value")
        self._client.proclaim(self.name, self.token, value)
        self.value = value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    # -- the threads ----------------------------------------------------------

    def _mark_lost(self, reason):
        with self._cond:
            if self._lost_reason or self._stopped:
                return  # lost already, or released by its holder
            self._lost_reason = reason
            self._cond.notify_all()
        self.lost_event.set()
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:  # a callback's failure must not stop the keeper
                _log.exception("on_lost callback of %r token %s failed", self.key, self.token)

    def _confirmed(self, sent_at, until):
        """A keepalive sent at `sent_at` succeeded; its deadline is `until`
        (capped at the acquired lease's usable length)."""
        with self._cond:
            if self._lost_reason or time.monotonic() >= self._lost_at:
                late = True  # too late: the holder may already have stopped; stay lost
            else:
                late = False
                held = min(max(until - sent_at, 0.0), self._usable)
                self._last_sent = sent_at
                self._deadline = sent_at + held
                self._lost_at = self._deadline - min(held, self.margin)
                self._next_keepalive = sent_at + (held - min(held, self.margin)) / 3
                self.keepalives += 1
                self._cond.notify_all()
        if late:
            self._mark_lost(_DEADLINE_PASSED)

    def _wait_for(self, when):
        """Holding self._cond: waits until the time when() names has come
        (True), or the lock is released or lost (False)."""
        while not self._stopped and not self._lost_reason:
            left = when() - time.monotonic()
            if left <= 0:
                return True
            self._cond.wait(left)
        return False

    def _watch(self):
        """Sets lost at lost_at unless a keepalive moved it first."""
        with self._cond:
            expired = self._wait_for(lambda: self._lost_at)
        if expired:
            self._mark_lost(_DEADLINE_PASSED)

    def _keep(self):
        while True:
            with self._cond:
                if not self._wait_for(lambda: self._next_keepalive):
                    return
                deadline = self._lost_at  # a success later than this would not count
            if time.monotonic() >= deadline:
                return  # the watchdog marks it lost
            try:
                k = self._keeper_client.keepalive(self.key, self.token, deadline=deadline)
            except _REFUSALS as e:
                self._mark_lost(f"keepalive refused: {e}")
                return
            except errors.FenceError as e:
                _log.warning("%s; the lease is lost in %dms unless a keepalive succeeds", e,
                             (deadline - time.monotonic()) * 1000)
                with self._cond:
                    self._next_keepalive = time.monotonic() + min(_RETRY_PAUSE_S, self.lease_ms / 20000)
                continue
            self._confirmed(k.sent_at, k.deadline)


def hold(client, key, lease="10s", wait="30s", owner="", on_lost=None, *, margin=None):
    """Acquires `key` with `client` and returns a HeldLock whose lease is kept
    alive until release(). `margin`: how long before the deadline `lost`
    turns true (a duration; None: lease / 10, at least 10ms); ValueError,
    before any request, unless it is shorter than lease x (1 - rho). Raises
    what Client.acquire raises, and LeaseLostError when a long wait left no
    time to confirm the lease (the answer came after deadline - margin, or
    the confirming keepalive failed)."""
    check_margin(margin, lease, client.max_clock_drift_ppm)
    return _hold(client, client.acquire(key, lease=lease, wait=wait, owner=owner), on_lost, margin)


def _hold(client, acquired, on_lost, margin):
    """The HeldLock of a grant (an acquire's or a campaign's), confirmed and kept alive."""
    key = acquired.key
    held = HeldLock(client, acquired, on_lost, margin)
    if time.monotonic() >= held._next_keepalive:
        # A waited acquire answered late: confirm the lease before handing it out.
        lost_at = held.lost_at
        try:
            if time.monotonic() >= lost_at:
                raise errors.LeaseLostError("the wait ended after the lease's deadline - margin", key=key,
                                            token=acquired.token)
            k = held._keeper_client.keepalive(key, acquired.token, deadline=lost_at)
            held._confirmed(k.sent_at, k.deadline)
        except errors.FenceError as e:
            held._mark_lost(f"the lease could not be confirmed after the wait: {e}")
        if held.lost:
            reason = held.lost_reason
            held.release()
            raise errors.LeaseLostError(f"lease of {key!r} token {acquired.token} lost before use: {reason}",
                                        key=key, token=acquired.token)
    held._start()
    return held


def campaign(client, name, value="", lease="10s", wait="30s", owner="", on_lost=None, *, margin=None):
    """hold() for an election: campaigns in `name` with `client` (queueing up
    to `wait` behind the leader) and returns a HeldLock that leads, with
    `name` and `value` set, whose lease is kept alive until release(), which
    resigns (the next campaigner leads at once)."""
    check_margin(margin, lease, client.max_clock_drift_ppm)
    return _hold(client, client.campaign(name, value, lease=lease, wait=wait, owner=owner), on_lost, margin)


class _LockContext:
    def __init__(self, key, lease, wait, owner, client, on_lost, margin, options, value=None, advance=None,
                 db=None, advance_timeout=None):
        parse_duration_ms(lease)  # a bad duration is reported at the call, before any request
        parse_duration_ms(wait)
        if margin is not None:
            parse_duration_ms(margin)  # hold() checks it against the lease
        if advance_timeout is not None:
            parse_duration_ms(advance_timeout)
        if (advance is None) != (db is None):
            raise ValueError("advance= and db= go together: the resources to publish the token at, and the "
                             "DB-API connection to publish it over")
        self._advance = None if advance is None else resources_of(advance)
        self._db = db
        self._advance_timeout = advance_timeout
        self._args = (key, lease, wait, owner, on_lost, margin)
        self._value = value  # an election's value; None: a lock
        self._client = client
        self._options = options
        self._own_client = None
        self._held = None

    def __enter__(self):
        client = self._client
        if client is None:
            client = self._own_client = Client(**self._options)
        key, lease, wait, owner, on_lost, margin = self._args
        try:
            if self._value is None:
                self._held = hold(client, key, lease, wait, owner, on_lost, margin=margin)
            else:
                self._held = campaign(client, key, self._value, lease, wait, owner, on_lost, margin=margin)
            if self._advance is not None:
                self._publish()
        except BaseException:
            if self._own_client is not None:
                self._own_client.close()
            raise
        return self._held

    def _publish(self):
        """advance=: the token reaches the resources before the block starts
        (the keepalive already runs); on failure the lock is released and the
        PublishError raised."""
        held = self._held
        timeout = self._advance_timeout
        try:
            if timeout is None:  # the lease's usable time: until lost_at (deadline - margin)
                left_ms = int((held.lost_at - time.monotonic()) * 1000)
                if left_ms <= 0:  # as fencectl: exit 4, nothing published
                    raise errors.LeaseLostError(
                        f"no time left in the lease of {held.key!r} (token {held.token}) to publish it")
                timeout = f"{left_ms}ms"
            publish_generation(self._db, self._advance, held.token, {held.key: held.proof} if held.proof else None,
                               timeout=timeout)
        except BaseException:
            try:
                held.release()
            except Exception:  # the publish's error is the one to report; the lease runs out anyway
                pass
            raise

    def __exit__(self, *exc):
        try:
            self._held.release()
        finally:
            if self._own_client is not None:
                self._own_client.close()
        return False


def lock(key, lease="10s", wait="30s", owner="", *, client=None, on_lost=None, margin=None, advance=None, db=None,
         advance_timeout=None, **options):
    """A context manager that holds `key` for the duration of a `with` block:

        with pgfence.lock("report:7", lease="10s", wait="30s") as lease:
            ... lease.token, lease.proof, lease.lost, lease.check() ...

    Entering acquires (queueing up to `wait` behind a holder; "0s" fails at
    once with HeldError) and starts the keepalive; leaving releases, also on
    an exception. `client`: a Client to use; else one is made from `options`
    (Client's keyword arguments, e.g. endpoints=..., ca_file=..., bearer_file=...).
    `on_lost(held_lock)` is called once, from a background thread, when the
    lease is lost. `margin`: `lease.lost` turns true that long before the
    deadline (a duration; default lease / 10, at least 10ms, as `fencectl
    run`); it must be shorter than lease x (1 - rho) (ValueError on entering,
    before any request). Defaults as fencectl's: lease 10s, wait 30s.

    `advance` (a resource name, or a list of them) with `db` (a DB-API
    connection the caller made, not inside a transaction): before the block
    starts, the token is published at those resources with fence_advance
    in a committed transaction of its own (pgfence.advance; the lease's proof
    goes to a resource named like `key`), so every older token is refused
    there from then on. If that fails the lock is released and
    StalePublishError (a newer fence is there, exit code 10) or PublishError
    (a database error, 11) is raised; ValueError, before any request, for a
    bad resource name or one of the two without the other. `advance_timeout`
    (a duration; default: the lease's usable time, until `lost_at`) bounds
    the publish with lock_timeout and statement_timeout: an older holder's
    open transaction on a resource's row makes it a PublishError, not a wait."""
    return _LockContext(key, lease, wait, owner, client, on_lost, margin, options, advance=advance, db=db,
                        advance_timeout=advance_timeout)


def election(name, value="", lease="10s", wait="30s", owner="", *, client=None, on_lost=None, margin=None,
             **options):
    """A context manager that leads election `name` for a `with` block:

        with pgfence.election("billing", value="http://10.0.0.5:8080") as leader:
            ... leader.token (the fencing epoch of its writes), leader.lost,
            leader.check(), leader.proclaim("http://10.0.0.6:8080") ...

    Entering campaigns (queueing, first come first served, up to `wait`
    behind the leader: HeldError when it runs out) and keeps the lease alive
    as lock() does; leaving resigns, also on an exception, and the next
    campaigner leads at once. The other arguments are lock()'s."""
    return _LockContext(name, lease, wait, owner, client, on_lost, margin, options, value=value)
