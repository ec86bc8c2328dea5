# shellcheck shell=bash
# A helper shared by scripts/cluster.sh and the benchmarks' run.sh (sourced;
# defines functions only):
#
#   alive PID   true while PID (a number) is a process one may signal and
#               any of its threads is neither a zombie (Z) nor dead (X). A
#               process whose main thread has exited still holds its files
#               while another thread finishes (one inside a long fsync keeps
#               its data directory's LOCK), and kill -0 succeeds on a
#               zombie: neither tells alone that the process is gone.
alive() {
    [[ $1 =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null || return 1
    local states
    # A thread that ends while this reads makes grep exit 2: its status
    # counts, not grep's.
    states=$(grep -hs '^State:' /proc/"$1"/task/*/status)
    [[ -n $states ]] && grep -qvE '^State:[[:space:]]+[ZX]' <<<"$states"
}
