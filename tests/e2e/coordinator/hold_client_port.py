#!/usr/bin/env python3
"""One client holds every member's client port; a lease holder keeps its lease.

The attacker (a child process, `attack` mode) opens --cap keep-alive
connections to each member from a few loopback addresses (127.0.0.11 up, at
most --per-address from each), sends GET /healthz on every one of them every
second, tries a few more from an address that is full, and reconnects every
connection the member closes. Meanwhile the holder (this process, from
127.0.0.1) acquires a key, then renews it every 400 ms on a new connection
each time, and acquires and releases a second key between renewals; the
leader is killed with SIGKILL and restarted during the hold. Fails unless the
holder keeps its lease (never not_held, no gap between renewals as long as the
lease, the same token held at the end) and, with --expect-shedding, unless
the members counted shed and refused connections and logged
http_connection_shed. Prints renew latency and grants/s during the hold.
Every wait is bounded.
"""
import argparse
import http.client
import json
import os
import queue
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

LEASE_MS = 3000
RENEW_EVERY_S = 0.4
HOLD_S = 12.0
KILL_AT_S = 3.0
RESTART_AT_S = 6.0
PING_PERIOD_S = 1.0
EXTRA_PER_MEMBER = 4  # connections tried from an address that has its limit


def client_port(base, member):
    return base + 100 + member


# ---- the attacker -------------------------------------------------------------

class Conn:
    __slots__ = ("member", "src", "sock", "slot", "retry_at")

    def __init__(self, member, src, slot):
        self.member, self.src, self.slot = member, src, slot
        self.sock, self.retry_at = None, 0.0


PING = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def open_conn(c, base, sel):
    """Connects c from its address and sends one ping; False if refused."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((c.src, 0))
        s.settimeout(1.0)
        s.connect(("127.0.0.1", client_port(base, c.member)))
        s.sendall(PING)
        if not s.recv(4096):  # closed at accept: nothing answered
            s.close()
            return False
    except OSError:
        s.close()
        return False
    s.setblocking(False)
    c.sock = s
    sel.register(s, selectors.EVENT_READ, c)
    return True


def drop(c, sel, now):
    sel.unregister(c.sock)
    c.sock.close()
    c.sock = None
    c.retry_at = now + 0.2


def attack(args):
    sel = selectors.DefaultSelector()
    conns = []
    refused_extra = 0
    slots = 100  # one ping period in 10 ms slots
    for m in (1, 2, 3):
        for i in range(args.cap):
            c = Conn(m, "127.0.0.%d" % (11 + i // args.per_address), i % slots)
            if not open_conn(c, args.base, sel):
                print("attack: member %d refused connection %d while filling" % (m, i), flush=True)
            conns.append(c)
        for _ in range(EXTRA_PER_MEMBER):
            c = Conn(m, "127.0.0.11", 0)
            if open_conn(c, args.base, sel):
                sel.unregister(c.sock)
                c.sock.close()
            else:
                refused_extra += 1
    open_now = sum(1 for c in conns if c.sock is not None)
    print("attack: %d connections open (cap %d x 3 members), %d of %d extra from a full address refused"
          % (open_now, args.cap, refused_extra, 3 * EXTRA_PER_MEMBER), flush=True)
    print("FILLED", flush=True)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    tick = 0
    next_tick = time.monotonic()
    reconnects = pings = 0
    while not stop[0]:
        now = time.monotonic()
        for key, _ in sel.select(timeout=max(0.0, next_tick - now)):
            c = key.data
            try:
                data = c.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                drop(c, sel, now)
        now = time.monotonic()
        if now < next_tick:
            continue
        next_tick += PING_PERIOD_S / slots
        slot = tick % slots
        tick += 1
        for c in conns:
            if c.slot != slot:
                continue
            if c.sock is None:
                if now >= c.retry_at:
                    reconnects += 1
                    if not open_conn(c, args.base, sel):
                        c.retry_at = now + 0.2
                continue
            try:
                c.sock.send(PING)
                pings += 1
            except OSError:
                drop(c, sel, now)
    open_now = sum(1 for c in conns if c.sock is not None)
    print("attack: stopped with %d open; %d pings sent, %d reconnects tried" % (open_now, pings, reconnects),
          flush=True)


# ---- the holder ---------------------------------------------------------------

class Holder:
    def __init__(self, base):
        self.base = base
        self.leader = 1
        self.retries = 0

    def call(self, member, method, path, body=None, timeout=1.0):
        """One request on a new connection: (status, body, location)."""
        conn = http.client.HTTPConnection("127.0.0.1", client_port(self.base, member), timeout=timeout,
                                          source_address=("127.0.0.1", 0))
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            r = conn.getresponse()
            return r.status, r.read().decode(), r.getheader("Location") or ""
        finally:
            conn.close()

    def to_leader(self, path, body, deadline, method="POST"):
        """Asks the leader (following 307, trying members on 503 or a
        connection error) until answered or the deadline: (status, json)."""
        while time.monotonic() < deadline:
            try:
                status, text, location = self.call(self.leader, method, path, body)
            except (OSError, http.client.HTTPException):
                self.retries += 1
                self.leader = self.leader % 3 + 1
                continue
            if status == 307:
                m = re.search(r":(\d+)/", location)
                self.leader = int(m.group(1)) - self.base - 100 if m else self.leader % 3 + 1
                continue
            if status == 503:
                self.retries += 1
                self.leader = self.leader % 3 + 1
                time.sleep(0.02)
                continue
            return status, json.loads(text) if text.startswith("{") else {}
        return None, {}


def cycle(holder, until):
    """Acquires and releases a second key until `until`: the grants made."""
    grants = 0
    while time.monotonic() < until:
        st, g = holder.to_leader("/v1/acquire", {"key": "cycle", "lease_ms": 1000}, until)
        if st == 200:
            grants += 1
            holder.to_leader("/v1/release", {"key": "cycle", "token": g["token"]}, until)
    return grants


def metrics_of(holder, member):
    try:
        status, text, _ = holder.call(member, "GET", "/metrics")
    except (OSError, http.client.HTTPException):
        return {}
    out = {}
    for line in text.splitlines():
        m = re.match(r'(pgfence_http_connections_(?:shed|refused)_total)\{\w+="(\w+)"\} (\d+)', line)
        if m:
            out[m.group(1) + ":" + m.group(2)] = int(m.group(3))
    return out


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["test", "attack"])
    ap.add_argument("--base", type=int, required=True)
    ap.add_argument("--cap", type=int, required=True)
    ap.add_argument("--per-address", type=int, required=True)
    ap.add_argument("--dir", default="")
    ap.add_argument("--cluster", default="")
    ap.add_argument("--expect-shedding", action="store_true")
    args = ap.parse_args()
    if args.mode == "attack":
        attack(args)
        return 0

    def fail(msg):
        print("FAIL: " + msg, flush=True)
        return 1

    holder = Holder(args.base)
    status, g = holder.to_leader("/v1/acquire", {"key": "held", "lease_ms": LEASE_MS, "owner": "holder"},
                                 time.monotonic() + 10)
    if status != 200:
        return fail("first acquire: %s %s" % (status, g))
    token = g["token"]
    last_ok = time.monotonic()
    # The same work without the attacker, for comparison.
    base_start = time.monotonic()
    base_grants = 0
    while time.monotonic() - base_start < 2.0:
        base_grants += cycle(holder, min(last_ok + RENEW_EVERY_S, base_start + 2.0))
        st, _ = holder.to_leader("/v1/keepalive", {"key": "held", "token": token}, last_ok + LEASE_MS / 1000.0)
        if st != 200:
            return fail("keepalive before the attack: %s" % st)
        last_ok = time.monotonic()
    base_s = time.monotonic() - base_start
    print("without the attacker: %.1f grants/s" % (base_grants / base_s), flush=True)
    attacker = subprocess.Popen([sys.executable, __file__, "attack", "--base", str(args.base), "--cap",
                                 str(args.cap), "--per-address", str(args.per_address)],
                                stdout=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in attacker.stdout] + [lines.put("")], daemon=True).start()
    try:
        fill_deadline = time.monotonic() + 60
        while time.monotonic() < fill_deadline:
            # Renew while the attacker fills (the hold's figures start once it has).
            if time.monotonic() - last_ok > RENEW_EVERY_S:
                st, _ = holder.to_leader("/v1/keepalive", {"key": "held", "token": token},
                                         last_ok + LEASE_MS / 1000.0)
                if st != 200:
                    return fail("keepalive while the attacker fills: %s" % st)
                last_ok = time.monotonic()
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if not line:
                return fail("the attacker exited before filling the members")
            print(line, end="", flush=True)
            if line.strip() == "FILLED":
                break
        else:
            return fail("the attacker did not fill the members within 60 s")
        st, _ = holder.to_leader("/v1/keepalive", {"key": "held", "token": token}, time.monotonic() + 1)
        if st == 200:
            last_ok = time.monotonic()

        start = time.monotonic()
        killed = None
        restart = None
        renew_ms, gaps = [], []
        grants = 0
        lost = None
        while time.monotonic() - start < HOLD_S:
            t = time.monotonic() - start
            if killed is None and t >= KILL_AT_S:
                killed = holder.leader
                with open(os.path.join(args.dir, "%d.pid" % killed)) as f:
                    os.kill(int(f.read()), signal.SIGKILL)
                print("killed leader %d at %.1f s" % (killed, t), flush=True)
            if killed and t >= RESTART_AT_S:
                restart = subprocess.Popen([args.cluster, "restart", args.dir, str(killed)],
                                           stdout=subprocess.DEVNULL)
                print("restarting member %d at %.1f s" % (killed, t), flush=True)
                killed = 0
            t0 = time.monotonic()
            st, body = holder.to_leader("/v1/keepalive", {"key": "held", "token": token},
                                        last_ok + LEASE_MS / 1000.0)
            now = time.monotonic()
            if st == 200:
                renew_ms.append((now - t0) * 1000)
                gaps.append(now - last_ok)
                last_ok = now
            elif st == 404:
                lost = "keepalive answered not_held %s after %.1f s of the hold" % (body, now - start)
                break
            else:
                lost = "no keepalive got through for %d ms (the lease) after %.1f s of the hold" % (LEASE_MS, now - start)
                break
            # Grants between renewals: acquire and release a second key.
            next_renew = last_ok + RENEW_EVERY_S
            grants += cycle(holder, next_renew)
            time.sleep(max(0.0, next_renew - time.monotonic()))
        hold_s = time.monotonic() - start
        if restart is not None and restart.wait(timeout=30) != 0:
            return fail("cluster.sh restart of the killed member failed")
    finally:
        attacker.send_signal(signal.SIGTERM)
        try:
            attacker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            attacker.kill()
            attacker.wait()
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if not line:
                break
            print(line, end="", flush=True)

    print("hold of %.1f s: %d renewals, renew latency p50 %.1f ms, p99 %.1f ms, max %.1f ms; "
          "longest gap between renewals %.0f ms (lease %d ms); %d grants (%.1f grants/s); %d retries"
          % (hold_s, len(renew_ms), percentile(renew_ms, 0.5), percentile(renew_ms, 0.99),
             max(renew_ms, default=float("nan")), 1000 * max(gaps, default=0), LEASE_MS, grants,
             grants / hold_s, holder.retries), flush=True)
    if lost:
        return fail("the holder lost its lease: " + lost)
    if max(gaps, default=0) * 1000 >= LEASE_MS * 0.95:
        return fail("a gap between renewals reached the lease (less the clock drift allowance)")
    st, g = holder.to_leader("/v1/locks?key=held", None, time.monotonic() + 5, method="GET")
    if st != 200 or g.get("token") != token:
        return fail("the held key is not held with token %d at the end: %s %s" % (token, st, g))
    totals = {}
    for m in (1, 2, 3):
        for k, v in metrics_of(holder, m).items():
            totals[k] = totals.get(k, 0) + v
    print("members' counters: %s" % json.dumps(totals, sort_keys=True), flush=True)
    if args.expect_shedding:
        shed = totals.get("pgfence_http_connections_shed_total:anonymous", 0)
        lease_shed = totals.get("pgfence_http_connections_shed_total:lease", 0)
        refused = totals.get("pgfence_http_connections_refused_total:per_address", 0)
        if shed == 0 or refused == 0:
            return fail("expected shed anonymous and per-address refused connections, got %s" % totals)
        if lease_shed != 0:
            return fail("%d lease connections were shed while anonymous ones were open" % lease_shed)
        logged = ""
        for m in (1, 2, 3):
            with open(os.path.join(args.dir, "%d.log" % m), errors="replace") as f:
                logged += "".join(l for l in f if "event=http_connection_shed" in l)
        if not re.search(r"class=anonymous.*remote=127\.0\.0\.1[1-9]", logged):
            return fail("no http_connection_shed line naming an anonymous attacker connection in the logs")
        print("log: " + logged.splitlines()[0], flush=True)
    print("PASS: the holder kept token %d through a held client port and a leader kill" % token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
