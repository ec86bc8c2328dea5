"""Preemption of stale in-flight transactions (pg_fence.preempt), end to end.

Run by preempt.sh, which starts the server (PGHOST, PGPORT) and passes the
signing key (PREEMPT_KEY, PREEMPT_PUB), the signer (PREEMPT_SIGN) and the
server log (PREEMPT_LOG).

Every write path preempts an older transaction paused two ways:
  sleep    it runs pg_sleep(60): its statement is cancelled
  sigstop  its psql client is SIGSTOPped while idle in transaction: its
           session is terminated
  write    its psql client is SIGSTOPped while the backend sends it a 50 MB
           result, so the backend blocks in ClientWrite (a cancel is ignored
           there): its session is terminated (guard and admit paths)
Write paths (token 10 is the older holder, 20 the newer):
  guard    the older UPDATEs row 1, the newer row 2, under one lock key
  fenced   the older UPDATEs row 3, the newer fenced_update()s the same row
  admit    both fence_admit() one resource
  advance  the older UPDATEs row 4, the newer publishes its generation under
           the row's lock key (fence_advance) and then UPDATEs the same row
Checked each time: the newer write completes within NEWER_BOUND seconds
(the pause lasts 60 s, or forever), the older transaction ended without
committing (its write is not there), a LOG line names both tokens, both
backends and the target, and fence_preempt_stats() counted it.
Then what preemption must never do: end a transaction of the same or a
newer token, of another target, or anything when the newer session has
pg_fence.preempt off; and a superuser's transaction is not signalled by an
application role, but its COMMIT is still refused (55F01).
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import psycopg2
import psycopg2.errors

NEWER_BOUND = 5.0      # seconds the newer write may take
WAIT_BOUND = 10.0      # seconds to wait for a condition
HOST = os.environ["PGHOST"]
PORT = os.environ["PGPORT"]
LOG = os.environ["PREEMPT_LOG"]
OLD, NEW = 10, 20


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def ok(msg):
    print("PASS: " + msg)


def connect(user, autocommit=False, **opts):
    conn = psycopg2.connect(host=HOST, port=PORT, user=user, dbname="postgres", **opts)
    conn.autocommit = autocommit
    return conn


ADMIN = connect("postgres", autocommit=True)


def q(sql, args=None):
    with ADMIN.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def wait_for(what, cond, bound=WAIT_BOUND):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    fail("timed out after %.0fs waiting for %s" % (bound, what))


_proofs = {}


def proof(key, token):
    if (key, token) not in _proofs:
        _proofs[(key, token)] = subprocess.check_output(
            [os.environ["PREEMPT_SIGN"], os.environ["PREEMPT_KEY"], "1", str(token), key],
            text=True)
    return _proofs[(key, token)]


def stats():
    row = q("SELECT preempted, cancelled, terminated, denied FROM fence_preempt_stats()")[0]
    return dict(zip(("preempted", "cancelled", "terminated", "denied"), row))


def log_text():
    with open(LOG, encoding="utf-8", errors="replace") as f:
        return f.read()


def setup():
    with open(os.environ["PREEMPT_PUB"], encoding="ascii") as f:
        pub = f.read()
    q("CREATE EXTENSION pg_fence")
    q("SELECT fence_trust_key(%s, 1)", (pub,))
    q("""CREATE TABLE orders (id int PRIMARY KEY, customer int NOT NULL, body text,
                              fence bigint NOT NULL DEFAULT 0)""")
    q("SELECT fence_protect('orders', lock_key => 'customer:{customer}')")
    for role, extra in (("app", "pg_fence.preempt = on"), ("app_off", None),
                        ("sup", "pg_fence.preempt = on")):
        q("CREATE ROLE %s LOGIN %s" % (role, "SUPERUSER" if role == "sup" else ""))
        if extra:
            q("ALTER ROLE %s SET %s" % (role, extra))
        q("GRANT SELECT, INSERT, UPDATE ON fence_resources, orders TO %s" % role)


# --- the older transaction, paused -------------------------------------------

class SleepingVictim:
    """An older transaction (role app) whose pg_sleep(60) runs when preempted."""

    def __init__(self, name, write_sql):
        self.conn = connect("app", application_name=name)
        self.name = name
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            self.pid = cur.fetchone()[0]
            for sql in write_sql:
                cur.execute(sql)
        self.error = None
        self.thread = threading.Thread(target=self._sleep, daemon=True)
        self.thread.start()
        wait_for(name + " to sleep", lambda: q(
            "SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (self.pid,)) == [("PgSleep",)])

    def _sleep(self):
        try:
            with self.conn.cursor() as cur:
                cur.execute("SELECT pg_sleep(60)")
        except psycopg2.Error as e:  # the cancel
            self.error = e

    def check_ended(self):
        self.thread.join(WAIT_BOUND)
        if self.thread.is_alive():
            fail("%s: pg_sleep was not cancelled" % self.name)
        if self.error is None or self.error.pgcode != "57014":
            fail("%s: pg_sleep ended with %r, not a cancel (57014)" % (self.name, self.error))
        # the transaction is aborted: its COMMIT is a ROLLBACK
        with self.conn.cursor() as cur:
            cur.execute("COMMIT")
            if cur.statusmessage != "ROLLBACK":
                fail("%s: COMMIT after the cancel answered %s" % (self.name, cur.statusmessage))
        self.conn.close()
        return "cancelled its statement"


class StoppedVictim:
    """An older transaction whose psql client is SIGSTOPped, idle in transaction."""

    TAIL = ""  # statements after the writes

    def __init__(self, name, write_sql):
        env = dict(os.environ, PGAPPNAME=name, PGUSER="app", PGDATABASE="postgres")
        self.name = name
        self.psql = subprocess.Popen(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=0"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.psql.stdin.write("BEGIN;\n" + "".join(s + ";\n" for s in write_sql) + self.TAIL)
        self.psql.stdin.flush()
        self.stop()

    def activity(self, column):
        return q("SELECT %s FROM pg_stat_activity WHERE application_name = %%s" % column,
                 (self.name,))

    def stop(self):
        wait_for(self.name + " to be idle in transaction",
                 lambda: self.activity("state") == [("idle in transaction",)])
        self.pid = self.activity("pid")[0][0]
        os.kill(self.psql.pid, signal.SIGSTOP)

    def check_ended(self):
        wait_for(self.name + "'s backend to end", lambda: not q(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (self.pid,)))
        os.kill(self.psql.pid, signal.SIGCONT)
        out, _ = self.psql.communicate("COMMIT;\n", timeout=WAIT_BOUND)
        tail = out[-2000:]
        if not any(m in tail for m in ("terminating connection", "server closed the connection",
                                       "connection to server was lost")):
            fail("%s: psql did not learn that its session was terminated: %r" % (self.name, tail))
        return "terminated its session (waiting for its client)"


class WritingVictim(StoppedVictim):
    """An older transaction blocked sending a large result to its SIGSTOPped psql."""

    # the result is produced after the sleep, once psql is stopped: it fills
    # the socket's buffers and the backend blocks writing the rest
    TAIL = "SELECT pg_sleep(1) IS NULL AS slept, repeat('x', 50000000) AS big;\n"

    def stop(self):
        wait_for(self.name + " to sleep before its result",
                 lambda: self.activity("wait_event") == [("PgSleep",)])
        self.pid = self.activity("pid")[0][0]
        os.kill(self.psql.pid, signal.SIGSTOP)
        wait_for(self.name + " to block writing its result",
                 lambda: self.activity("wait_event") == [("ClientWrite",)])


VICTIMS = {"sleep": SleepingVictim, "sigstop": StoppedVictim, "write": WritingVictim}


# --- the write paths ------------------------------------------------------------

def guard_write(row, customer, token, body):
    return ["SET LOCAL pg_fence.proof = '%s'" % proof("customer:%d" % customer, token),
            "UPDATE orders SET body = '%s', fence = %d WHERE id = %d" % (body, token, row)]


def run_newer(statements, user="app"):
    """Run the newer transaction; returns its duration and last result."""
    conn = connect(user)
    start = time.monotonic()
    result = None
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
                result = cur.fetchall() if cur.description else None
        conn.commit()
    finally:
        conn.close()
    return time.monotonic() - start, result


def scenario(path, mode, base):
    """One write path against one paused older transaction; base: distinct rows/keys."""
    customer = base
    rows = (base * 10 + 1, base * 10 + 2)
    for r in rows:
        q("INSERT INTO orders VALUES (%s, %s, 'empty', 0)", (r, customer))
    key = "customer:%d" % customer
    if path == "guard":
        old = guard_write(rows[0], customer, OLD, "old")
        new = guard_write(rows[1], customer, NEW, "new")
        expect = [(rows[0], "empty", 0), (rows[1], "new", NEW)]
    elif path == "fenced":
        old = guard_write(rows[0], customer, OLD, "old")
        new = ["SELECT fenced_update('orders', '{\"id\": %d, \"customer\": %d}', '{\"body\": \"new\"}', "
               "%d, proof => '%s')" % (rows[0], customer, NEW, proof(key, NEW))]
        expect = [(rows[0], "new", NEW), (rows[1], "empty", 0)]
    elif path == "admit":
        key = "job:%s:%d" % (mode, base)
        old = ["SELECT fence_admit('%s', %d)" % (key, OLD)]
        new = ["SELECT fence_admit('%s', %d)" % (key, NEW)]
        expect = None
    else:  # advance: publish the generation under the row's key, then write the row
        old = guard_write(rows[0], customer, OLD, "old")
        new = ["SELECT fence_advance('%s', %d)" % (key, NEW)] + guard_write(rows[0], customer, NEW, "new")
        expect = [(rows[0], "new", NEW), (rows[1], "empty", 0)]

    before = stats()
    name = "victim_%s_%s" % (path, mode)
    victim = VICTIMS[mode](name, old)
    took, result = run_newer(new)
    if took > NEWER_BOUND:
        fail("%s/%s: the newer write took %.1fs (bound %.0fs)" % (path, mode, took, NEWER_BOUND))
    if path == "fenced" and result != [("applied",)]:
        fail("fenced/%s: fenced_update answered %r" % (mode, result))
    what = victim.check_ended()

    if expect is not None:
        got = q("SELECT id, body, fence FROM orders WHERE customer = %s ORDER BY id", (customer,))
        if got != expect:
            fail("%s/%s: rows are %r, expected %r" % (path, mode, got, expect))
    else:
        got = q("SELECT fence FROM fence_resources WHERE resource = %s", (key,))
        if got != [(NEW,)]:
            fail("%s/%s: resource %s holds %r" % (path, mode, key, got))
    after = stats()
    counter = "cancelled" if mode == "sleep" else "terminated"
    if after["preempted"] != before["preempted"] + 1 or after[counter] != before[counter] + 1:
        fail("%s/%s: fence_preempt_stats went from %r to %r" % (path, mode, before, after))
    line = re.compile(r"pg_fence: token %d \(backend \d+\) preempted token %d \(backend %d\) on "
                      r"\"%s\": %s" % (NEW, OLD, victim.pid, re.escape(key), re.escape(what)))
    wait_for("the LOG line of %s/%s" % (path, mode), lambda: line.search(log_text()))
    ok("%s, older transaction %s: the newer write took %.2fs; the older one %s and did not "
       "commit; logged and counted" % (path, mode, took, what))


# --- what preemption never does --------------------------------------------------

def never(label, old_user, old_sql, new_user, new_sql, newer_waits, refused=False):
    """The older transaction stays open and commits; nothing is counted.
    refused: the newer session's write is refused at once (55F01: the older
    transaction holds a newer token)."""
    before = stats()
    old = connect(old_user)
    with old.cursor() as cur:
        cur.execute(old_sql)
    start = time.monotonic()
    conn = connect(new_user, options="-c statement_timeout=1000")
    try:
        with conn.cursor() as cur:
            cur.execute(new_sql)
        conn.commit()
        waited = False
        if refused:
            fail("%s: the write of the older token was admitted" % label)
    except psycopg2.errors.QueryCanceled:
        waited = True
    except psycopg2.Error as e:
        if not refused or e.pgcode != "55F01" or "is in flight for it" not in str(e):
            raise
        waited = False
    conn.close()
    if waited != newer_waits:
        fail("%s: the newer write %s" % (label, "waited" if waited else "did not wait"))
    with old.cursor() as cur:
        cur.execute("COMMIT")
        if cur.statusmessage != "COMMIT":
            fail("%s: the older transaction could not commit: %s" % (label, cur.statusmessage))
    old.close()
    if stats() != before:
        fail("%s: fence_preempt_stats changed from %r to %r" % (label, before, stats()))
    ok("%s: the older transaction committed, nothing preempted (%.2fs)" % (label, time.monotonic() - start))


def denied():
    """A superuser's transaction: app may not signal it; its COMMIT is refused."""
    before = stats()
    old = connect("sup")
    with old.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
        cur.execute("SELECT fence_admit('job:sup', %s)", (OLD,))
    newer = threading.Thread(target=lambda: run_newer(["SELECT fence_admit('job:sup', %d)" % NEW]),
                             daemon=True)
    newer.start()
    wait_for("the newer fence_admit to mark the superuser's transaction",
             lambda: stats()["denied"] == before["denied"] + 1)
    if not q("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)):
        fail("denied: the superuser's backend was ended")
    try:
        old.commit()
        fail("denied: the superuser's preempted transaction committed")
    except psycopg2.Error as e:
        if e.pgcode != "55F01" or "preempted by token %d" % NEW not in str(e):
            fail("denied: COMMIT failed with %s %s" % (e.pgcode, e))
    old.close()
    newer.join(WAIT_BOUND)
    if newer.is_alive():
        fail("denied: the newer fence_admit did not finish once the older transaction ended")
    if q("SELECT fence FROM fence_resources WHERE resource = 'job:sup'") != [(NEW,)]:
        fail("denied: job:sup does not hold token %d" % NEW)
    line = re.compile(r"pg_fence: token %d \(backend \d+\) preempted token %d \(backend %d\) on "
                      r"\"job:sup\": not signalled" % (NEW, OLD, pid))
    wait_for("the LOG line of the denied preemption", lambda: line.search(log_text()))
    ok("a superuser's transaction is not signalled by an application role; its COMMIT is "
       "refused (55F01); logged and counted as denied")


def main():
    setup()
    base = 1
    for mode in ("sleep", "sigstop"):
        for path in ("guard", "fenced", "admit", "advance"):
            scenario(path, mode, base)
            base += 1
    for path in ("guard", "admit"):
        scenario(path, "write", base)
        base += 1
    never("same token", "app", "SELECT fence_admit('job:same', 20)",
          "app", "SELECT fence_admit('job:same', 20)", newer_waits=True)
    never("the older transaction holds a newer token", "app", "SELECT fence_admit('job:newer', 30)",
          "app", "SELECT fence_admit('job:newer', 20)", newer_waits=False, refused=True)
    never("another target", "app", "SELECT fence_admit('job:x', 10)",
          "app", "SELECT fence_admit('job:y', 20)", newer_waits=False)
    never("pg_fence.preempt off in the newer session", "app", "SELECT fence_admit('job:off', 10)",
          "app_off", "SELECT fence_admit('job:off', 20)", newer_waits=True)
    never("pg_fence.preempt off in the older session", "app_off", "SELECT fence_admit('job:off2', 10)",
          "app", "SELECT fence_admit('job:off2', 20)", newer_waits=True)
    denied()
    print("preempt: all scenarios passed")


if __name__ == "__main__":
    main()
