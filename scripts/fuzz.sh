#!/usr/bin/env bash
# scripts/fuzz.sh SECONDS — build every libFuzzer target (named *_fuzz) with
# clang + ASan + UBSan in build-fuzz/ and run each for SECONDS.
# Exits 0 if no target crashed, 1 if any did (its log tail and the crashing
# input's path are printed), 2 on a usage or build problem.
#
# Warnings are errors (it runs in make test).
# Environment: CXX_FUZZ (default the clang scripts/install-deps.sh installs:
# clang++-14 on Debian 12, clang++-19 on 13), FUZZ_BUILD_DIR (default
# <repo>/build-fuzz), FUZZ_MODULES (PGFENCE_MODULES for the build, default
# "codec;raft;lock;storage;auth"), FUZZ_JOBS (default 2).
# Corpora persist in build-fuzz/corpus/<target>; tests/fuzz/corpus/<target>,
# if present, is used as extra read-only seeds. Crashes land in
# build-fuzz/artifacts/<target>/; replay one with: <target binary> <file>.
set -euo pipefail

readonly kMaxLenBytes=4096
readonly kInputTimeoutS=10

usage() {
    echo "usage: $0 SECONDS   (run each *_fuzz target for SECONDS, e.g. $0 60)" >&2
    exit 2
}

[[ $# -eq 1 ]] || usage
[[ $1 =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS must be a positive integer, got '$1'" >&2; usage; }
seconds=$1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
modules=${FUZZ_MODULES:-codec;raft;lock;storage;auth}
jobs=${FUZZ_JOBS:-2}
if [[ -n ${CXX_FUZZ:-} ]]; then
    cxx=$CXX_FUZZ
else
    clang_major=$(bash "$root/scripts/install-deps.sh" --print | sed -n 's/^clang=//p') || exit 2
    cxx=clang++-$clang_major
fi

command -v "$cxx" >/dev/null || { echo "fuzz.sh: compiler '$cxx' not found (scripts/install-deps.sh installs it)" >&2; exit 2; }

mkdir -p "$build"
cmake -S "$root" -B "$build" \
    -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link" \
    -DPGFENCE_FUZZ=ON -DPGFENCE_SANITIZE=ON -DPGFENCE_WERROR=ON \
    -DPGFENCE_MODULES="$modules" >"$build/configure.log" 2>&1 \
    || { cat "$build/configure.log" >&2; echo "fuzz.sh: cmake configure failed" >&2; exit 2; }

list=$build/fuzz_targets.txt
if [[ ! -f $list ]]; then
    echo "fuzz.sh: $list missing: tests/fuzz is not part of the build (tests/CMakeLists.txt needs add_subdirectory(fuzz))" >&2
    exit 2
fi
mapfile -t names < <(awk '$1 ~ /_fuzz$/ {print $1}' "$list")
if [[ ${#names[@]} -eq 0 ]]; then
    echo "fuzz.sh: no *_fuzz targets in $list (modules: $modules)" >&2
    exit 2
fi

cmake --build "$build" -j"$jobs" --target "${names[@]}" || { echo "fuzz.sh: build failed" >&2; exit 2; }

failed=()
for name in "${names[@]}"; do
    exe=$(awk -v n="$name" '$1 == n {print $2}' "$list")
    corpus=$build/corpus/$name
    artifacts=$build/artifacts/$name
    log=$build/$name.log
    mkdir -p "$corpus" "$artifacts"
    dirs=("$corpus")
    [[ -d $root/tests/fuzz/corpus/$name ]] && dirs+=("$root/tests/fuzz/corpus/$name")
    echo "== $name: ${seconds}s (log: $log)"
    if "$exe" -max_len=$kMaxLenBytes -max_total_time="$seconds" -timeout=$kInputTimeoutS \
            -print_final_stats=1 -artifact_prefix="$artifacts/" "${dirs[@]}" >"$log" 2>&1; then
        grep -E '^stat::number_of_executed_units|^Done ' "$log" || true
    else
        rc=$?
        failed+=("$name")
        echo "!! $name exited with status $rc; last lines of $log:" >&2
        tail -n 40 "$log" >&2
        ls -1 "$artifacts" >&2 || true
    fi
done

echo "fuzz: $((${#names[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz.sh: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: all ${#names[@]} target(s) ran ${seconds}s without a crash"
