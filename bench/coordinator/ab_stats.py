#!/usr/bin/env python3
"""Summary of bench/coordinator/ab.sh's runs (a TSV file: block, round, A|B,
cycles/s, ...): the medians of A and B, the median, mean and geometric mean
of the per-round B/A ratios with a 95% bootstrap interval of their median,
and each block's median ratio (A started first in odd blocks)."""
import math
import random
import statistics
import sys


def main(path):
    runs = {}
    for line in open(path):
        fields = line.rstrip("\n").split("\t")
        if len(fields) < 4:
            continue
        runs.setdefault((int(fields[0]), int(fields[1])), {})[fields[2]] = float(fields[3])
    rounds = [k for k in sorted(runs) if len(runs[k]) == 2]
    if not rounds:
        sys.exit("ab_stats.py: no round with both A and B in " + path)
    a = [runs[k]["A"] for k in rounds]
    b = [runs[k]["B"] for k in rounds]
    ratios = [runs[k]["B"] / runs[k]["A"] for k in rounds]
    print("rounds: %d" % len(rounds))
    print("median cycles/s: A %.0f  B %.0f  (B/A %.4f)" % (statistics.median(a), statistics.median(b),
                                                           statistics.median(b) / statistics.median(a)))
    logs = [math.log(r) for r in ratios]
    print("per-round B/A: median %.4f  mean %.4f  geometric mean %.4f" % (
        statistics.median(ratios), statistics.mean(ratios), math.exp(statistics.mean(logs))))
    rng = random.Random(1)
    boot = sorted(statistics.median(rng.choices(logs, k=len(logs))) for _ in range(5000))
    print("95%% bootstrap interval of the median B/A: %.3f..%.3f" % (math.exp(boot[125]), math.exp(boot[-126])))
    for block in sorted({k[0] for k in rounds}):
        r = [runs[k]["B"] / runs[k]["A"] for k in rounds if k[0] == block]
        print("  block %d (%s started first): median B/A %.4f over %d rounds" % (
            block, "A" if block % 2 else "B", statistics.median(r), len(r)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: ab_stats.py RUNS.tsv")
    main(sys.argv[1])
