#!/usr/bin/env python3
"""A watch client that does not read (watch_limits.sh): connects with a tiny
receive buffer, sends GET PATH, reads nothing until the file GO exists
(bounded: 60 s), then reads the stream to its end (bounded: 20 s) and prints
its last complete line (the chunk framing removed)."""
import os
import socket
import sys
import time

host, port, path, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
s.connect((host, port))
s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
deadline = time.time() + 60
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.05)
s.settimeout(20)
data = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except socket.timeout:
    pass
body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
# Chunked: size line, data, CRLF.
out = b""
while body:
    line, _, rest = body.partition(b"\r\n")
    size = int(line, 16) if line else 0
    if size == 0:
        break
    out += rest[:size]
    body = rest[size + 2:]
lines = [l for l in out.decode("utf-8", "replace").split("\n") if l]
print(lines[-1] if lines else "")
