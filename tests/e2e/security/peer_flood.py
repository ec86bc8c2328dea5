#!/usr/bin/env python3
"""Holds connections to peer ports open: *silent* ones that never send a byte
(so a TLS handshake never starts, and a plaintext one never names a member),
and *speaking* ones that send a few bytes once connected (the start of a TLS
ClientHello, or of a frame header) and then stall. Opens each one again as
soon as it is closed: at once when the other side closed it, after 20 ms
when the port refused it (so the flood is there as soon as a restarted
member listens).

  peer_flood.py --ports P1,P2 --sources 127.0.0.1,127.0.0.2 --per 20 \
                [--speak-sources 127.0.0.2 --speak-per 8 --speak-hex 160301] \
                --seconds 120 --status FILE

--per silent connections for every (port, --sources address) pair, and
--speak-per speaking ones, each sending the bytes --speak-hex, for every
(port, --speak-sources address) pair. Once a second the status FILE is
rewritten with "open=N connects=N closed_by_peer=N refused=N spoke=N"
(spoke: speaking connections that sent their bytes). Exits by itself after
--seconds.
"""
import argparse
import errno
import os
import selectors
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ports", required=True)
    ap.add_argument("--sources", required=True)
    ap.add_argument("--per", type=int, required=True)
    ap.add_argument("--speak-sources", default="")
    ap.add_argument("--speak-per", type=int, default=0)
    ap.add_argument("--speak-hex", default="")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--status", required=True)
    a = ap.parse_args()
    ports = [int(p) for p in a.ports.split(",")]
    sources = a.sources.split(",")
    speak_sources = [x for x in a.speak_sources.split(",") if x]
    speak_bytes = bytes.fromhex(a.speak_hex)
    if speak_sources and a.speak_per > 0 and not speak_bytes:
        ap.error(f"--speak-hex must name at least one byte, got '{a.speak_hex}'")
    sel = selectors.DefaultSelector()
    counts = {"open": 0, "connects": 0, "closed_by_peer": 0, "refused": 0, "spoke": 0}
    retry = []  # (when, port, source, speaks)

    def open_one(port, source, speaks=False):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((source, 0))
            rc = s.connect_ex(("127.0.0.1", port))
        except OSError:
            s.close()
            retry.append((time.monotonic() + 0.02, port, source, speaks))
            return
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            counts["refused"] += 1
            retry.append((time.monotonic() + 0.02, port, source, speaks))
            return
        sel.register(s, selectors.EVENT_WRITE, ("connecting", port, source, speaks))

    for port in ports:
        for source in sources:
            for _ in range(a.per):
                open_one(port, source)
        for source in speak_sources:
            for _ in range(a.speak_per):
                open_one(port, source, True)

    end = time.monotonic() + a.seconds
    next_status = 0.0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if now >= next_status:
            tmp = a.status + ".tmp"
            with open(tmp, "w") as f:
                f.write(" ".join(f"{k}={v}" for k, v in counts.items()) + "\n")
            os.replace(tmp, a.status)
            next_status = now + 1.0
        due = [r for r in retry if r[0] <= now]
        retry[:] = [r for r in retry if r[0] > now]
        for _, port, source, speaks in due:
            open_one(port, source, speaks)
        for key, _ in sel.select(timeout=0.02):
            s = key.fileobj
            state, port, source, speaks = key.data
            if state == "connecting":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                sel.unregister(s)
                if err != 0:
                    s.close()
                    counts["refused"] += 1
                    retry.append((time.monotonic() + 0.02, port, source, speaks))
                    continue
                counts["connects"] += 1
                counts["open"] += 1
                if speaks:
                    try:
                        s.send(speak_bytes)  # a few bytes fit the empty send buffer
                        counts["spoke"] += 1
                    except OSError:
                        pass  # closed already: the read below sees it
                sel.register(s, selectors.EVENT_READ, ("open", port, source, speaks))
                continue
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                continue  # never answered: whatever the server says is ignored
            sel.unregister(s)
            s.close()
            counts["open"] -= 1
            counts["closed_by_peer"] += 1
            open_one(port, source, speaks)


if __name__ == "__main__":
    main()
