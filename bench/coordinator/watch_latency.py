#!/usr/bin/env python3
"""Watch latency: the time from an acquire's 200 to the watcher's granted
line for it, on an idle 3-member cluster, for a watch on the leader and one
on a follower (docs/http-api.md "GET /v1/watch"; the goal: p99 <= 5 ms).

  python3 bench/coordinator/watch_latency.py [--samples 200] [--base-port 13050]
                                             [--bin-dir build/coordinator/server]

Starts its own cluster (scripts/cluster.sh, data on disk under a temporary
directory, stopped at the end). One keep-alive connection to the leader
acquires key lat/<side>/<i> (lease 10 s), reads the answer (t0), and the
watch's reader thread stamps the matching granted line as it arrives (t1);
the sample is t1 - t0 (0 when the line came first); then the key is
released. Prints p50 / p99 / max per side, in milliseconds.
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def watch_reader(port, path, stamps, cond):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    f = s.makefile("rb")
    while f.readline() not in (b"\r\n", b""):
        pass  # headers
    while True:
        size_line = f.readline()
        if not size_line:
            return
        size = int(size_line.strip(), 16)
        if size == 0:
            return
        data = f.read(size)
        f.read(2)
        now = time.perf_counter()
        ev = json.loads(data)
        if ev.get("type") == "granted":
            with cond:
                stamps[(ev["key"], ev["token"])] = now
                cond.notify_all()


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def status(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    c.request("GET", "/v1/status")
    return json.loads(c.getresponse().read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--base-port", type=int, default=13050)
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "coordinator", "server"))
    args = ap.parse_args()
    base = args.base_port
    d = tempfile.mkdtemp(prefix="pgfence-watchlat.")
    env = dict(os.environ, FENCE_BASE_PORT=str(base), FENCE_BIN_DIR=args.bin_dir)
    subprocess.run([os.path.join(ROOT, "scripts", "cluster.sh"), "start", d, "3"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    try:
        ports = {i: base + 100 + i for i in (1, 2, 3)}
        leader = None
        deadline = time.time() + 10
        while leader is None and time.time() < deadline:
            for i, p in ports.items():
                try:
                    if status(p).get("role") == "leader":
                        leader = i
                except OSError:
                    pass
            time.sleep(0.05)
        if leader is None:
            sys.exit("no leader")
        follower = leader % 3 + 1
        conn = http.client.HTTPConnection("127.0.0.1", ports[leader], timeout=5)
        for side, member in (("leader", leader), ("follower", follower)):
            stamps, cond = {}, threading.Condition()
            t = threading.Thread(target=watch_reader, args=(ports[member], f"/v1/watch?prefix=lat/{side}/", stamps, cond),
                                 daemon=True)
            t.start()
            time.sleep(0.3)  # the watch is open
            samples = []
            for i in range(args.samples):
                key = f"lat/{side}/{i}"
                conn.request("POST", "/v1/acquire", json.dumps({"key": key, "lease_ms": 10000}),
                             {"Content-Type": "application/json"})
                body = json.loads(conn.getresponse().read())
                t0 = time.perf_counter()
                token = body["token"]
                with cond:
                    if not cond.wait_for(lambda: (key, token) in stamps, timeout=2):
                        sys.exit(f"{side}: no granted line for {key} within 2 s")
                    t1 = stamps[(key, token)]
                samples.append(max(0.0, t1 - t0) * 1000)
                conn.request("POST", "/v1/release", json.dumps({"key": key, "token": token}),
                             {"Content-Type": "application/json"})
                conn.getresponse().read()
                time.sleep(0.005)  # idle between samples
            print(f"watch on the {side:8s}: {len(samples)} samples, p50 {percentile(samples, 50):.3f} ms, "
                  f"p99 {percentile(samples, 99):.3f} ms, max {max(samples):.3f} ms")
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "cluster.sh"), "stop", d], env=env, stdout=subprocess.DEVNULL)
        subprocess.run(["rm", "-rf", d])


if __name__ == "__main__":
    main()
