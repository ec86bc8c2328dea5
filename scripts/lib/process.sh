# shellcheck shell=bash
# A helper shared by scripts/cluster.sh and the benchmarks' run.sh (sourced;
# defines functions only):
#
#   alive PID   true while any thread of PID is neither a zombie (Z) nor
#               dead (X). A process whose main thread has exited still
#               holds its files while another thread finishes (one inside a
#               long fsync keeps its data directory's LOCK), and kill -0
#               succeeds on a zombie: neither tells that the process is gone.
alive() {
    local states
    states=$(ps -L -o stat= -p "$1" 2>/dev/null) || return 1
    grep -qv '^ *[ZX]' <<<"$states"
}
