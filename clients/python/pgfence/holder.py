"""Holding a lock while work runs: pgfence.lock() and HeldLock.

    with pgfence.lock("report:7", lease="10s") as lease:
        write_with(lease.token)          # and lease.proof when the cluster signs
        if lease.lost: stop

What a HeldLock does, as `fencectl run` (docs/cli.md):

1. acquires the key (`lease`, `wait`, `owner` as Client.acquire); if a third
   of the usable lease has passed since the acquire was sent (a long wait), a
   keepalive confirms the lease before the HeldLock is handed out;
2. keeps the lease alive from a background thread every third of the usable
   lease (send time of the last success + usable / 3), each keepalive request
   to one member given lease / 8 (at least 100ms, at most 3s) so that a
   stopped leader is left in time, retrying after a failure that is not a
   refusal every min(200ms, lease / 20);
3. the deadline is the send time of the last successful acquire or keepalive
   + lease x (1 - rho) (Client's rule; rho = max_clock_drift_ppm / 1e6, 5% by
   default). `lost` turns true when a keepalive is refused (not held, held,
   bad request, not authorized), and at the deadline if no keepalive
   succeeded by then: `lost` compares time.monotonic() with the deadline
   itself, and a watchdog thread waiting on the deadline sets `lost_event`
   and calls `on_lost` then. Once lost, a lease stays lost;
4. on exit from the `with` block (normally or by an exception) the threads
   stop and the lock is released (a failed release is logged on the
   "pgfence" logger, never raised, so the block's own exception is kept).

The deadline is the local promise: stop writing with the token by then. A
write that lands later anyway is what the fence in PostgreSQL refuses.
"""

import logging
import threading
import time

from . import errors
from .client import Client, usable_lease
from .duration import parse_duration_ms

_log = logging.getLogger("pgfence")
_RETRY_PAUSE_S = 0.2
_DEADLINE_PASSED = "no successful keepalive by the lease's deadline"
_RELEASE_TIMEOUT_S = 1.0  # best effort, as fencectl run
# A keepalive refusal is final: the lock is not ours any more.
_REFUSALS = (errors.NotHeldError, errors.HeldError, errors.BadRequestError, errors.NotAuthorizedError)


class HeldLock:
    """A lock held with a background keepalive. Made by Client.hold() or
    pgfence.lock(); a context manager that releases on exit.

    Attributes: key, token, proof ("" unless the cluster signs grants), owner,
    lease_ms, lost_event (a threading.Event set once lost), keepalives (the
    number that succeeded). Properties: deadline and last_sent (monotonic),
    lost, lost_reason.
    """

    def __init__(self, client, acquired, on_lost=None):
        self.key = acquired.key
        self.token = acquired.token
        self.proof = acquired.proof
        self.owner = acquired.owner
        self.lease_ms = acquired.lease_ms
        self.lost_event = threading.Event()
        self.keepalives = 0
        self._client = client
        self._on_lost = on_lost
        self._usable = usable_lease(acquired.lease_ms, client.max_clock_drift_ppm)
        attempt_ms = min(3000, max(100, acquired.lease_ms // 8))
        self._attempt_s = attempt_ms / 1000
        self._keeper_client = client.copy(keepalive_attempt_timeout=f"{attempt_ms}ms")
        self._cond = threading.Condition()
        self._stopped = False
        self._lost_reason = ""
        self._released = False
        self._last_sent = acquired.sent_at
        self._deadline = acquired.deadline
        self._next_keepalive = acquired.sent_at + self._usable / 3
        self._threads = []

    # -- what the holder reads ------------------------------------------------

    @property
    def deadline(self):
        """time.monotonic() by which writing with the token must stop."""
        with self._cond:
            return self._deadline

    @property
    def last_sent(self):
        """Send time (monotonic) of the last successful acquire or keepalive."""
        with self._cond:
            return self._last_sent

    @property
    def lost(self):
        """True once a keepalive was refused or the deadline has passed."""
        with self._cond:
            return bool(self._lost_reason) or time.monotonic() >= self._deadline

    @property
    def lost_reason(self):
        """Why the lease is lost ("" while it is not)."""
        with self._cond:
            if not self._lost_reason and time.monotonic() >= self._deadline:
                return _DEADLINE_PASSED
            return self._lost_reason

    def remaining(self):
        """Seconds left to the deadline (negative once past)."""
        return self.deadline - time.monotonic()

    def check(self):
        """Raises LeaseLostError if the lease is lost; call it before a write."""
        if self.lost:
            raise errors.LeaseLostError(f"lease of {self.key} token {self.token} lost: {self.lost_reason}")

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
            releaser.release(self.key, self.token, deadline=time.monotonic() + _RELEASE_TIMEOUT_S)
        except errors.NotHeldError:
            pass  # expired or released already
        except errors.FenceError as e:
            _log.warning("release of %s token %s failed: %s", self.key, self.token, e)
        finally:
            releaser.close()
            self._keeper_client.close()

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
                _log.exception("on_lost callback of %s failed", self.key)

    def _confirmed(self, sent_at, until):
        """A keepalive sent at `sent_at` succeeded; its deadline is `until`
        (capped at the acquired lease's usable length)."""
        with self._cond:
            if self._lost_reason or time.monotonic() >= self._deadline:
                late = True  # too late: the holder may already have stopped; stay lost
            else:
                late = False
                held = min(max(until - sent_at, 0.0), self._usable)
                self._last_sent = sent_at
                self._deadline = sent_at + held
                self._next_keepalive = sent_at + held / 3
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
        """Sets lost at the deadline unless a keepalive moved it first."""
        with self._cond:
            expired = self._wait_for(lambda: self._deadline)
        if expired:
            self._mark_lost(_DEADLINE_PASSED)

    def _keep(self):
        while True:
            with self._cond:
                if not self._wait_for(lambda: self._next_keepalive):
                    return
                deadline = self._deadline
            if time.monotonic() >= deadline:
                return  # the watchdog marks it lost
            try:
                k = self._keeper_client.keepalive(self.key, self.token, deadline=deadline)
            except _REFUSALS as e:
                self._mark_lost(f"keepalive refused: {e}")
                return
            except errors.FenceError as e:
                _log.warning("keepalive of %s failed (%s); lease deadline in %dms", self.key, e,
                             (deadline - time.monotonic()) * 1000)
                with self._cond:
                    self._next_keepalive = time.monotonic() + min(_RETRY_PAUSE_S, self.lease_ms / 20000)
                continue
            self._confirmed(k.sent_at, k.deadline)


def hold(client, key, lease="10s", wait="30s", owner="", on_lost=None):
    """Acquires `key` with `client` and returns a HeldLock whose lease is kept
    alive until release(). Raises what Client.acquire raises, and
    LeaseLostError when a long wait left no time to confirm the lease."""
    acquired = client.acquire(key, lease=lease, wait=wait, owner=owner)
    held = HeldLock(client, acquired, on_lost)
    if time.monotonic() >= acquired.sent_at + held._usable / 3:
        # A waited acquire answered late: confirm the lease before handing it out.
        try:
            k = held._keeper_client.keepalive(key, acquired.token, deadline=acquired.deadline)
            held._confirmed(k.sent_at, k.deadline)
        except errors.FenceError as e:
            held._mark_lost(f"the lease could not be confirmed after the wait: {e}")
        if held.lost:
            reason = held.lost_reason
            held.release()
            raise errors.LeaseLostError(f"lease of {key} token {acquired.token} lost before use: {reason}")
    held._start()
    return held


class _LockContext:
    def __init__(self, key, lease, wait, owner, client, on_lost, options):
        parse_duration_ms(lease)  # a bad duration is reported at the call, before any request
        parse_duration_ms(wait)
        self._args = (key, lease, wait, owner, on_lost)
        self._client = client
        self._options = options
        self._own_client = None
        self._held = None

    def __enter__(self):
        client = self._client
        if client is None:
            client = self._own_client = Client(**self._options)
        key, lease, wait, owner, on_lost = self._args
        try:
            self._held = hold(client, key, lease, wait, owner, on_lost)
        except BaseException:
            if self._own_client is not None:
                self._own_client.close()
            raise
        return self._held

    def __exit__(self, *exc):
        try:
            self._held.release()
        finally:
            if self._own_client is not None:
                self._own_client.close()
        return False


def lock(key, lease="10s", wait="30s", owner="", *, client=None, on_lost=None, **options):
    """A context manager that holds `key` for the duration of a `with` block:

        with pgfence.lock("report:7", lease="10s", wait="30s") as lease:
            ... lease.token, lease.proof, lease.lost, lease.check() ...

    Entering acquires (queueing up to `wait` behind a holder; "0s" fails at
    once with HeldError) and starts the keepalive; leaving releases, also on
    an exception. `client`: a Client to use; else one is made from `options`
    (Client's keyword arguments, e.g. endpoints=..., ca_file=..., bearer_file=...).
    `on_lost(held_lock)` is called once, from a background thread, when the
    lease is lost. Defaults as fencectl's: lease 10s, wait 30s."""
    return _LockContext(key, lease, wait, owner, client, on_lost, options)
