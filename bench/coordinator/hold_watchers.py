#!/usr/bin/env python3
"""Holds N open watches (GET /v1/watch) on a cluster until killed, reading and
discarding what they are sent, so a benchmark can run its load beside them.

    hold_watchers.py --endpoints H:P,H:P,... --count N [--prefix P | --key K]

The watches are spread over the endpoints in turn (each member serves its own).
Prints "ready N" on stdout once every watch has its 200, then reads until
SIGTERM or SIGINT, and exits 0. Exits 1 naming the endpoint when a watch is
refused or one of them is closed by the member (a watcher closed for being
too slow, say): the figures beside it would not be what they claim.
"""
import argparse
import selectors
import signal
import socket
import sys
import time
import urllib.parse


def open_watch(host, port, query, timeout):
    s = socket.create_connection((host, port), timeout=timeout)
    s.sendall(f"GET /v1/watch?{query} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    deadline = time.monotonic() + timeout
    while b"\r\n\r\n" not in head:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{host}:{port}: no answer headers within {timeout} s")
        chunk = s.recv(4096)
        if not chunk:
            raise RuntimeError(f"{host}:{port}: closed before answering")
        head += chunk
    status = head.split(b"\r\n", 1)[0].decode(errors="replace")
    if " 200 " not in status + " ":
        body = head.split(b"\r\n\r\n", 1)[1][:200]
        raise RuntimeError(f"{host}:{port}: watch refused: {status} {body!r}")
    s.setblocking(False)
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoints", required=True, help="comma-separated HOST:PORT of the members")
    ap.add_argument("--count", type=int, required=True, help="how many watches to hold (1..100000)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--prefix", default=None, help="watch this key prefix (default: bench-idle/)")
    group.add_argument("--key", default=None, help="watch this one key")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds to open each watch (default 10)")
    args = ap.parse_args()
    if not 1 <= args.count <= 100000:
        ap.error(f"--count must be 1..100000, got {args.count}")
    if args.key is not None:
        query = "key=" + urllib.parse.quote(args.key, safe="")
    else:
        query = "prefix=" + urllib.parse.quote("bench-idle/" if args.prefix is None else args.prefix, safe="")
    endpoints = []
    for ep in args.endpoints.split(","):
        host, _, port = ep.rpartition(":")
        if not host or not port.isdigit():
            ap.error(f"--endpoints: '{ep}' is not HOST:PORT")
        endpoints.append((host, int(port)))
    sel = selectors.DefaultSelector()
    names = {}
    for i in range(args.count):
        host, port = endpoints[i % len(endpoints)]
        try:
            s = open_watch(host, port, query, args.timeout)
        except (OSError, RuntimeError) as e:
            print(f"hold_watchers.py: watch {i + 1} of {args.count}: {e}", file=sys.stderr)
            return 1
        sel.register(s, selectors.EVENT_READ)
        names[s] = f"{host}:{port}"
    print(f"ready {args.count}", flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        for key, _ in sel.select(timeout=0.5):
            try:
                data = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                print(f"hold_watchers.py: a watch on {names[key.fileobj]} failed: {e}", file=sys.stderr)
                return 1
            if not data:
                print(f"hold_watchers.py: a watch on {names[key.fileobj]} was closed by the member", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
