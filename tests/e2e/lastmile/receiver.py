"""A deduplicating HTTP receiver for the outbox tests and benchmark.

Applies each Idempotency-Key once: the first POST with a key is the effect
(counted in `applied`), later ones are answered 200 as duplicates (counted in
`received` only). HTTP/1.1 with keep-alive. Knobs, settable while it runs:
  status        answer with this status instead of 200 (no effect applied)
  hold          an Event: when set, a request applies its effect and then
                waits for `release` before answering (a relay killed meanwhile
                never hears the answer)
  delay_s       sleep before answering

As a program (bench/outbox/run.sh): python3 receiver.py PORT serves until
killed; GET /count answers {"applied": N, "received": M, "duplicates": D}.
"""

import http.server
import json
import sys
import threading
import time


class Receiver:
    def __init__(self, port, host="127.0.0.1"):
        self.port = port
        self.lock = threading.Lock()
        self.applied = {}      # key -> number of effects (1, or a bug)
        self.received = {}     # key -> POSTs seen
        self.bodies = {}       # key -> first body
        self.status = 200
        self.answer = b""
        self.delay_s = 0.0
        self.hold = threading.Event()
        self.release = threading.Event()
        self.holding = threading.Event()  # a held request applied its effect
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes

            def do_GET(self):
                with receiver.lock:
                    body = json.dumps({"applied": sum(receiver.applied.values()),
                                       "received": sum(receiver.received.values()),
                                       "keys": len(receiver.applied)}).encode()
                self._answer(200, body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                key = self.headers.get("Idempotency-Key", "")
                status = receiver.status
                with receiver.lock:
                    receiver.received[key] = receiver.received.get(key, 0) + 1
                    if 200 <= status < 300 and key and key not in receiver.applied:
                        receiver.applied[key] = 1
                        receiver.bodies[key] = body
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                if receiver.hold.is_set():
                    receiver.holding.set()
                    receiver.release.wait(60)
                self._answer(status, receiver.answer if status >= 300 else b"ok")

            def _answer(self, status, body):
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def counts(self):
        with self.lock:
            return dict(self.applied), dict(self.received)

    def url(self, path="/hook"):
        return f"http://127.0.0.1:{self.port}{path}"


if __name__ == "__main__":
    r = Receiver(int(sys.argv[1]))
    try:
        r.thread.join()
    except KeyboardInterrupt:
        pass
