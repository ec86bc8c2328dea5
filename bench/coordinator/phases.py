#!/usr/bin/env python3
"""The leader's commit path over a load: per-phase mean and p50 per commit.

    phases.py ROLE BEFORE AFTER [ROLE BEFORE AFTER ...]

Each triplet is one member's GET /metrics scraped before and after one load
(bench/coordinator/run.sh), ROLE `leader` or `follower` (what it was during
the load). The deltas of pgfence_commit_phase_seconds (server/commit_phases.h)
are summed over the triplets (a triplet with an empty scrape is skipped):
the leader's phases from the leaders', the followers' (f_*) from the
followers'; p50 is interpolated within its histogram bucket. The f_* rows
are per append, with their own counts. Also the batch size: entries and WAL
bytes per fdatasync (pgfence_persist_*_total, the leaders'), and the
coverage: commits timed vs those plus pgfence_commit_phase_unobserved_total.
Prints a table, then one line
`summary commits=N total_p50_us= total_mean_us= entries_per_sync= bytes_per_sync= coverage=`.
"""
import re
import sys

ORDER = ["queue", "to_writer", "write", "fdatasync", "to_loop", "early", "follower_rtt",
         "f_wait", "f_fdatasync", "f_local", "f_socket", "replicate", "to_apply", "to_answer", "total"]
FOLLOWER = {"f_wait", "f_fdatasync", "f_local", "f_socket"}
WHAT = {
    "queue": "request read -> batch taken (proposed)",
    "to_writer": "  batch taken -> writer thread begins",
    "write": "  encode + write() of the WAL record (with segment rotation/preallocation)",
    "fdatasync": "  the leader's fdatasync",
    "to_loop": "  fdatasync done -> the loop hears of it (check_append, hard state)",
    "early": "  append handed to the transport -> its batch taken (0 unless --early-appends on)",
    "follower_rtt": "  append handed to the transport -> quorum's ack read",
    "f_wait": "    (follower, per append) append read -> its write begins",
    "f_fdatasync": "    (follower) its fdatasync",
    "f_local": "    (follower) append read -> ack handed to the transport",
    "f_socket": "    (follower, upper bound) its previous write's end -> append read",
    "replicate": "batch taken -> committed (the longer path above)",
    "to_apply": "committed -> applied (answer produced)",
    "to_answer": "applied -> answer handed to the connection",
    "total": "request read -> answer handed to the connection",
}
LINE = re.compile(r'^(pgfence_commit_phase_seconds_(bucket|sum|count))\{phase="([a-z_]+)"(?:,le="([^"]+)")?\} (\S+)$')
COUNTER = re.compile(r'^pgfence_(?:persist_(batches|entries|bytes)|commit_phase_(unobserved))_total (\S+)$')


def read(path):
    buckets, sums, counts, totals = {}, {}, {}, {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line.strip())
            if m:
                _, kind, phase, le, v = m.groups()
                if kind == "bucket":
                    buckets[(phase, le)] = float(v)
                elif kind == "sum":
                    sums[phase] = float(v)
                else:
                    counts[phase] = float(v)
                continue
            m = COUNTER.match(line.strip())
            if m:
                totals[m.group(1) or m.group(2)] = float(m.group(3))
    return buckets, sums, counts, totals


def p50(cum):  # cum: [(le, cumulative count)] ascending, +Inf last
    n = cum[-1][1]
    if n <= 0:
        return float("nan")
    half = n / 2
    prev_le, prev_c = 0.0, 0.0
    for le, c in cum:
        if c >= half:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (half - prev_c) / max(c - prev_c, 1e-12)
        prev_le, prev_c = le, c
    return prev_le


def main(argv):
    if len(argv) < 3 or len(argv) % 3 or any(r not in ("leader", "follower") for r in argv[0::3]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    bucket_d, sum_d, count_d, total_d = {}, {}, {}, {}
    for role, before, after in zip(argv[0::3], argv[1::3], argv[2::3]):
        b, a = read(before), read(after)
        if not a[2] or not b[2]:  # an empty (failed) scrape: its delta would be everything since start
            continue
        mine = (lambda phase: (phase in FOLLOWER) == (role == "follower"))
        for d, i in ((bucket_d, 0), (sum_d, 1), (count_d, 2)):
            for k, v in a[i].items():
                if mine(k[0] if isinstance(k, tuple) else k):
                    d[k] = d.get(k, 0.0) + v - b[i].get(k, 0.0)
        if role == "leader":
            for k, v in a[3].items():
                total_d[k] = total_d.get(k, 0.0) + v - b[3].get(k, 0.0)
    commits = count_d.get("total", 0)
    print(f"{'phase':<13} {'mean us':>9} {'p50 us':>9}  (per commit, {commits:.0f} commits; f_* per append)")
    res = {}
    for phase in ORDER:
        n = count_d.get(phase, 0)
        mean = sum_d.get(phase, 0) / n * 1e6 if n > 0 else float("nan")
        cum = sorted(((float(le), c) for (p, le), c in bucket_d.items() if p == phase), key=lambda x: x[0])
        med = p50(cum) * 1e6 if cum else float("nan")
        res[phase] = (mean, med)
        own = f" ({n:.0f} appends)" if phase in FOLLOWER else ""
        print(f"{phase:<13} {mean:9.1f} {med:9.1f}  {WHAT[phase]}{own}")
    batches = total_d.get("batches", 0)
    eps = total_d.get("entries", 0) / batches if batches > 0 else float("nan")
    bps = total_d.get("bytes", 0) / batches if batches > 0 else float("nan")
    print(f"batch: {eps:.1f} entries and {bps:.0f} WAL bytes per fdatasync ({batches:.0f} fdatasyncs with entries)")
    unobserved = total_d.get("unobserved", 0)
    coverage = commits / (commits + unobserved) if commits + unobserved > 0 else float("nan")
    print(f"coverage: {commits:.0f} commits timed of {commits + unobserved:.0f} answered from a batch "
          f"({coverage * 100:.1f}%; the rest: unobserved, see server/commit_phases.h)")
    print(f"summary commits={commits:.0f} total_p50_us={res['total'][1]:.1f} total_mean_us={res['total'][0]:.1f} "
          f"entries_per_sync={eps:.1f} bytes_per_sync={bps:.0f} coverage={coverage:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
