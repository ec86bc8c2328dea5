"""GET /v1/watch: lines and the resume rule (internal; Client.watch is the API).

The rule is the C++ client's (coordinator/client/watch_stream.h):

- after an event of revision R the next stream asks for rev=R, and the
  events of revision R already delivered (same type, key and token) are
  skipped when they come again: no gap, no duplicate, also when a stream
  broke between two events of one revision (one entry, several events);
- after a progress line A (every event up to A was sent) at or above the
  last event: rev=A+1, nothing to skip, so a quiet watch does not fall
  behind the history a member keeps;
- before either: the watch's own rev, or for a watch "from now" the first
  stream's start revision + 1.
Events of a revision below the resume point are skipped; a revision going
down within one stream is a protocol error.
"""

import json

EVENT_TYPES = ("granted", "released", "expired", "proclaimed")
META_TYPES = ("start", "progress", "leader")  # "leader": an observe's state line
MAX_LINE_BYTES = 64 << 10  # a key is at most 512 bytes; an owner and a value a few KiB
DEFAULT_IDLE_TIMEOUT = "30s"  # three times the 10 s a member lets a progress stream go silent


class BadLine(ValueError):
    """A line that is not a line of the watch wire."""


def parse_line(raw):
    """A stream line (bytes) -> its dict, or None for a type this client does
    not know (a newer member may send more). BadLine when it is not a line of
    the wire. An "error" line comes back as a dict too."""
    try:
        obj = json.loads(raw)
    except ValueError as e:
        raise BadLine(f"not JSON ({e})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise BadLine("not a JSON object with a string 'type'")
    kind = obj["type"]
    if kind == "error":
        return obj
    if kind not in EVENT_TYPES and kind not in META_TYPES:
        return None
    rev = obj.get("revision")
    if isinstance(rev, bool) or not isinstance(rev, int) or rev < 0:
        raise BadLine(f"{kind!r} without a numeric 'revision'")
    if kind in EVENT_TYPES:
        if rev == 0:
            raise BadLine(f"{kind!r} of revision 0")
        if not isinstance(obj.get("key"), str):
            raise BadLine(f"{kind!r} without a string 'key'")
        token = obj.get("token")
        if isinstance(token, bool) or not isinstance(token, int) or token < 0:
            raise BadLine(f"{kind!r} without a numeric 'token'")
    return obj


class Cursor:
    """Where a watch is, and which lines of a new stream are new."""

    DELIVER, SKIP, OUT_OF_ORDER = "deliver", "skip", "out_of_order"

    def __init__(self, from_revision):
        self.resume = from_revision or 0  # rev of the next stream (0: from now, not started yet)
        self.last_event = 0               # revision of the last event delivered
        self._at_last = set()             # (type, key, token) delivered at last_event
        self._stream_revision = 0

    def open(self):
        """A new stream begins."""
        self._stream_revision = 0

    def accept(self, event):
        kind, rev = event["type"], event["revision"]
        if kind == "start":
            if self.resume == 0:
                self.resume = rev + 1
            return self.DELIVER
        if kind == "leader":
            return self.DELIVER
        if kind == "progress":
            if rev >= self.last_event and rev + 1 > self.resume:
                self.resume = rev + 1
                self._at_last.clear()
            return self.DELIVER
        if rev < self._stream_revision:
            return self.OUT_OF_ORDER
        self._stream_revision = rev
        if rev < self.resume:
            return self.SKIP
        seen = (kind, event["key"], event["token"])
        if rev == self.last_event and seen in self._at_last:
            return self.SKIP
        if rev != self.last_event:
            self.last_event = rev
            self._at_last = set()
        self._at_last.add(seen)
        self.resume = rev
        return self.DELIVER
