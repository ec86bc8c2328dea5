#!/usr/bin/env bash
# The PNG timeline of one run of tests/e2e/safety/run.sh, drawn with gnuplot:
# faults as shaded bands (labelled by kind, coloured by class: kill/pause,
# partition, clock, disk), and per key a row with its grants (ticks),
# accepted writes (above the row) and refused stale writes (below it).
# The x axis is seconds since the run's first event (CLOCK_MONOTONIC).
#
# usage: timeline.sh WORK_DIR OUT.png [SEED]
#   WORK_DIR holds events.csv (the workers' history) and faults.csv
#   (kind,target,start_ns,end_ns) as run.sh writes them.
set -euo pipefail
work=${1:?usage: timeline.sh WORK_DIR OUT.png [SEED]}
out=${2:?usage: timeline.sh WORK_DIR OUT.png [SEED]}
seed=${3:-?}
[[ -s "$work/events.csv" ]] || { echo "timeline.sh: $work/events.csv is missing or empty" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "timeline.sh: gnuplot is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$work/faults.csv"

# t0: the first send time of the history; keys get rows 1..K in name order.
t0=$(awk -F, '$5 > 0 && (t == "" || $5 < t) { t = $5 } END { printf "%.0f", t }' "$work/events.csv")
awk -F, '$1 !~ /^forced/ && $3 != "" { print $3 }' "$work/events.csv" | sort -u | grep -v '^nemesis' >"$tmp/keys"
awk -F, -v t0="$t0" -v dir="$tmp" '
  NR == FNR { row[$1] = FNR; nkeys = FNR; next }
  !($3 in row) { next }
  $2 == "acquire" && $8 == "ok"      { printf "%.3f %d\n", ($6 - t0) / 1e9, row[$3] > dir "/grants" }
  $2 == "write" && $8 == "accepted" && $5 > 0 { printf "%.3f %.2f\n", ($6 - t0) / 1e9, row[$3] + 0.25 > dir "/accepted" }
  $2 == "write" && $8 == "stale" && $5 > 0    { printf "%.3f %.2f\n", ($6 - t0) / 1e9, row[$3] - 0.25 > dir "/refused" }
' "$tmp/keys" "$work/events.csv"
for f in grants accepted refused; do [[ -s "$tmp/$f" ]] || echo "-1 -1" >"$tmp/$f"; done
nkeys=$(wc -l <"$tmp/keys")
xmax=$(awk -F, -v t0="$t0" '{ x = ($6 > $5 ? $6 : $5) } x > m { m = x } END { printf "%.0f", (m - t0) / 1e9 + 1 }' "$work/events.csv")

# One band per fault; worker pauses and forced stale writers are too many to
# label: they get a thin band at the bottom.
awk -F, -v t0="$t0" -v top="$((nkeys + 1))" '
  function colour(k) {
    if (k ~ /^(isolate|split|bridge|oneway|leader_clients|worker_cut)$/) return "#3b7dd8"
    if (k ~ /^clock_/) return "#d89a3b"
    if (k ~ /^disk_/) return "#8e44ad"
    return "#7f8c8d"
  }
  $3 ~ /^[0-9.e+]+$/ {
    x0 = ($3 - t0) / 1e9; x1 = ($4 - t0) / 1e9; if (x1 - x0 < 0.2) x1 = x0 + 0.2
    n++
    if ($1 ~ /^(pause_worker|forced_stale)$/) {
      printf "set object %d rect from %.3f,0.05 to %.3f,0.2 fc rgb \"#c0392b\" fs solid 0.5 noborder behind\n", n, x0, x1
    } else {
      printf "set object %d rect from %.3f,0.3 to %.3f,%.2f fc rgb \"%s\" fs solid 0.25 noborder behind\n", n, x0, x1, top - 0.05, colour($1)
      printf "set label %d \"%s\" at %.3f,0.35 rotate by 90 font \",9\" tc rgb \"%s\" noenhanced\n", n, $1, x0 + 0.15, colour($1)
    }
  }' "$work/faults.csv" >"$tmp/bands.gp"

ytics=$(awk '{ printf "%s\"%s\" %d", (NR > 1 ? ", " : ""), $1, NR }' "$tmp/keys")
gnuplot <<GP
set terminal pngcairo size 1800,$((300 + nkeys * 140)) font "DejaVu Sans,10"
set output "$out"
set title noenhanced "pgfence faults run, seed $seed: grants (ticks), accepted writes (green, above), refused stale writes (red, below); bands: grey kill/pause, blue partition, orange clock, purple disk, red worker pause"
set xlabel "seconds since the first request"
set xrange [0:$xmax]
set yrange [0:$((nkeys + 1))]
set ytics ($ytics)
set grid xtics
set key outside bottom center horizontal
load "$tmp/bands.gp"
plot "$tmp/grants" using 1:2 with points pt 2 ps 0.6 lc rgb "#2c3e50" title "grant", \
     "$tmp/accepted" using 1:2 with points pt 7 ps 0.35 lc rgb "#27ae60" title "write accepted", \
     "$tmp/refused" using 1:2 with points pt 5 ps 0.8 lc rgb "#c0392b" title "stale write refused"
GP
[[ -s "$out" ]] || { echo "timeline.sh: gnuplot wrote nothing to $out" >&2; exit 1; }
echo "timeline: $out"
