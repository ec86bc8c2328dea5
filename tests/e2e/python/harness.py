"""Helpers for the Python client's end-to-end tests: a real cluster started
with scripts/cluster.sh on free loopback ports, a throwaway PostgreSQL with
pg_fence (tests/e2e/safety/lib/pg.sh), bounded waits, and a main() that
always stops what it started (and keeps the work directory of a failed run).

Environment: FENCE_COORDINATOR_BIN (required), FENCECTL_BIN (optional).
"""

import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

import pgfence  # noqa: E402

CLUSTER_SH = os.path.join(ROOT, "scripts", "cluster.sh")
PG_SH = os.path.join(ROOT, "tests", "e2e", "safety", "lib", "pg.sh")
WORKER = os.path.join(ROOT, "clients", "python", "examples", "worker.py")
PYTHON = "/usr/bin/python3"  # Debian's: sees python3-psycopg2
FAST_FLAGS = "--heartbeat-ms 20 --election-ms 150 --min-lease 500"

_cleanups = []
WORK = tempfile.mkdtemp(prefix="pgfence-py.")
os.chmod(WORK, 0o711)  # PostgreSQL runs as postgres when we are root: it must reach its directory


def coordinator_bin():
    path = os.environ.get("FENCE_COORDINATOR_BIN", "")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"FENCE_COORDINATOR_BIN={path!r} is not an executable (set it)")
    return path


def wait_until(timeout_s, predicate, what):
    """Polls predicate() every 20ms until it is true; AssertionError naming
    `what` if it never was within timeout_s. Returns its value."""
    end = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise AssertionError(f"{what}: not true within {timeout_s}s")
        time.sleep(0.02)


def _port_free(port):
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) != 0


def _free_base(n):
    for _ in range(40):
        base = 20000 + random.randrange(120) * 100  # below the ephemeral range
        if all(_port_free(base + i) and _port_free(base + 100 + i) for i in range(1, n + 1)):
            return base
    raise RuntimeError("no free port range for the cluster in 40 tries")


class Cluster:
    """N members on 127.0.0.1 (scripts/cluster.sh), stopped at the end of the run."""

    def __init__(self, name, n=3, tls=False, flags="", env=None, base=None):
        """`base`: a fixed FENCE_BASE_PORT (a suite with its own port range);
        None: a free range, tried again on another if a member cannot bind."""
        self.dir = os.path.join(WORK, name)
        self.n = n
        self.tls = tls
        os.makedirs(self.dir)
        _cleanups.append(self.stop)
        bin_dir = os.path.dirname(coordinator_bin())
        for attempt in range(3):
            self.base = base if base is not None else _free_base(n)
            run_env = dict(os.environ, FENCE_BIN_DIR=bin_dir, FENCE_BASE_PORT=str(self.base),
                           FENCE_COORDINATOR_FLAGS=f"{FAST_FLAGS} {flags}", **(env or {}))
            cmd = ["bash", CLUSTER_SH, "start", self.dir, str(n)] + (["--tls"] if tls else [])
            r = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=60)
            line = [x for x in r.stdout.splitlines() if x.startswith("export FENCE_ENDPOINTS=")]
            # cluster.sh returns once there is a leader, even when one member died on bind.
            if r.returncode == 0 and line and self._all_listening():
                self.endpoints = line[-1].split("=", 1)[1]
                return
            sys.stderr.write(f"cluster start attempt {attempt + 1} (base {self.base}) failed: {r.stderr}\n")
            self.stop()
            for entry in os.listdir(self.dir):
                path = os.path.join(self.dir, entry)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
        raise RuntimeError(f"the cluster did not start; logs in {self.dir}")

    def _all_listening(self):
        """Every member's HTTP port accepts connections within 10s, from its own process."""
        def up():
            for i in range(1, self.n + 1):
                try:
                    os.kill(self.pid(i), 0)
                except (OSError, ValueError):
                    return False
                if _port_free(self.base + 100 + i):
                    return False
            return True
        try:
            wait_until(10, up, "every member listening")
            return True
        except AssertionError:
            return False

    def endpoint(self, member_id):
        return ("https://" if self.tls else "") + f"127.0.0.1:{self.base + 100 + member_id}"

    def pid(self, member_id):
        with open(os.path.join(self.dir, f"{member_id}.pid")) as f:
            return int(f.read())

    def signal(self, member_id, sig):
        os.kill(self.pid(member_id), sig)

    def stop(self):
        subprocess.run(["bash", CLUSTER_SH, "stop", self.dir], capture_output=True, timeout=60)

    def leader_id(self, client):
        """The member every answering member names as leader, or 0."""
        for i in range(1, self.n + 1):
            try:
                s = client.status_of(self.endpoint(i))
            except pgfence.FenceError:
                continue
            if s.get("role") == "leader":
                return int(s["id"])
        return 0


    def waiters(self, client):
        """Acquires queued on the leader (its pgfence_waiters gauge), 0 without a leader."""
        leader = self.leader_id(client)
        if not leader:
            return 0
        conn = http.client.HTTPConnection("127.0.0.1", self.base + 100 + leader, timeout=2)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        return sum(int(float(line.split()[1])) for line in text.splitlines() if line.startswith("pgfence_waiters "))


class Postgres:
    """A throwaway PostgreSQL with pg_fence (pg.sh); sets PG* in os.environ."""

    def __init__(self, name, port=None):
        """`port`: a fixed port (a suite with its own port range); None: a free one."""
        self.dir = os.path.join(WORK, name)
        os.makedirs(self.dir)
        _cleanups.append(self.stop)
        fixed = f"pg_free_port() {{ echo {int(port)}; }} && " if port is not None else ""
        script = f'source "{PG_SH}" && {fixed}pg_throwaway_start "{self.dir}" >&2 && env | grep "^PG"'
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start: {r.stderr}")
        for line in r.stdout.splitlines():
            name, _, value = line.partition("=")
            if name in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE"):
                os.environ[name] = value

    def stop(self):
        subprocess.run(["bash", "-c", f'source "{PG_SH}" && pg_throwaway_stop "{self.dir}"'],
                       capture_output=True, timeout=60)


def psql(sql):
    """One statement through psql; its output (unaligned, tuples only)."""
    return subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                          capture_output=True, text=True, check=True, timeout=30).stdout.strip()


def main():
    """Runs the calling module's tests; stops clusters and PostgreSQL always,
    removes the work directory only when every test passed."""
    started = time.monotonic()
    ok = False
    try:
        program = unittest.main(module="__main__", exit=False, verbosity=2)
        ok = program.result.wasSuccessful()
    finally:
        for cleanup in reversed(_cleanups):
            try:
                cleanup()
            except Exception as e:  # keep stopping the rest
                sys.stderr.write(f"cleanup failed: {e}\n")
        if ok:
            shutil.rmtree(WORK, ignore_errors=True)
        else:
            sys.stderr.write(f"kept: {WORK}\n")
    sys.stderr.write(f"took {time.monotonic() - started:.1f}s\n")
    sys.exit(0 if ok else 1)


def sigcont_all(cluster):
    for i in range(1, cluster.n + 1):
        try:
            cluster.signal(i, signal.SIGCONT)
        except (OSError, ValueError):
            pass
