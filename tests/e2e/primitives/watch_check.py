#!/usr/bin/env python3
"""Helpers of the watch e2e tests (watch_stream.sh, watch_limits.sh).

  watch_check.py last-rev FILE...       the revision of the last event line in
                                        the FILEs taken as one resumed watch
                                        (merge below); 1 when there is none
  watch_check.py events FILE...         the merged events, one JSON line each
  watch_check.py same A_FILES -- B_FILE  exit 1 (naming the first difference)
                                        unless the merged events of A_FILES
                                        equal those of B_FILE
  watch_check.py grants-match TOKENS FILE  exit 1 unless the granted events of
                                        FILE are exactly the key:token pairs
                                        listed in TOKENS (one a line)
  watch_check.py last-line FILE         the type (and error) of FILE's last line

Each FILE is one connection's stream; consecutive FILEs are one watch resumed
with rev = the last revision seen: the events of that revision the earlier
parts delivered (same type, key and token) are skipped, as the wire says
(WATCH_WIRE: docs/http-api.md "GET /v1/watch"). A partial last line (a stream
cut mid-line by a SIGKILL) is not an event.
"""
import json
import sys


def lines(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            if not raw.endswith("\n"):
                break  # cut mid-line
            out.append(json.loads(raw))
    return out


def merged(paths):
    events = []
    for p in paths:
        part = [e for e in lines(p) if e["type"] in ("granted", "released", "expired")]
        if events:
            last = events[-1]["revision"]
            seen = {(e["type"], e["key"], e["token"]) for e in events if e["revision"] == last}
            part = [e for e in part if not (e["revision"] == last and (e["type"], e["key"], e["token"]) in seen)]
        events.extend(part)
    return events


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "last-rev":
        ev = merged(args)
        print(ev[-1]["revision"] if ev else 1)
        return 0
    if cmd == "events":
        for e in merged(args):
            print(json.dumps(e, sort_keys=True))
        return 0
    if cmd == "same":
        sep = args.index("--")
        a, b = merged(args[:sep]), merged(args[sep + 1:])
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                print(f"event {i} differs: {x} vs {y}", file=sys.stderr)
                return 1
        if len(a) != len(b):
            print(f"{len(a)} events vs {len(b)}", file=sys.stderr)
            return 1
        revs = [e["revision"] for e in a]
        if revs != sorted(revs):
            print("revisions go back", file=sys.stderr)
            return 1
        print(f"{len(a)} events equal")
        return 0
    if cmd == "grants-match":
        with open(args[0], encoding="utf-8") as f:
            want = sorted(l.strip() for l in f if l.strip())
        got = sorted(f'{e["key"]}:{e["token"]}' for e in merged(args[1:]) if e["type"] == "granted")
        if want != got:
            print(f"grants differ: made {len(want)}, streamed {len(got)}; "
                  f"only made: {sorted(set(want) - set(got))[:5]}; only streamed: {sorted(set(got) - set(want))[:5]}",
                  file=sys.stderr)
            return 1
        print(f"{len(got)} grants match")
        return 0
    if cmd == "last-line":
        ls = lines(args[0])
        if not ls:
            print("none")
        else:
            last = ls[-1]
            print(last["type"] + (":" + last["error"] if last["type"] == "error" else ""))
        return 0
    print(f"unknown command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
