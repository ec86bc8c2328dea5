#!/usr/bin/env bash
# scripts/cluster.sh as the doc examples see it (tests/docs/run.sh puts it
# there): the repository's scripts/cluster.sh, with the same arguments,
# except that
#   - a DIR under /tmp/ is put under $DOCTEST_TMP instead (the run's own
#     directory), so that an example never touches a cluster of yours;
#   - start picks free ports (FENCE_BASE_PORT, unless the example set it) and
#     tries another range, up to 3 times, when a member could not bind.
# Its output is scripts/cluster.sh's own (the `export FENCE_ENDPOINTS=...`
# line the README's `eval` runs).
set -uo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
root=$(cd "$here/../.." && pwd)
real=$root/scripts/cluster.sh
# shellcheck source=../e2e/safety/lib/common.sh
source "$root/tests/e2e/safety/lib/common.sh"   # e2e_free_base_port

args=("$@")
dir_at=0
for ((i = 1; i < ${#args[@]}; i++)); do
  [[ ${args[i]} == -* ]] && continue
  dir_at=$i
  break
done
if ((dir_at > 0)) && [[ -n ${DOCTEST_TMP:-} && ${args[dir_at]} == /tmp/* ]]; then
  args[dir_at]=$DOCTEST_TMP/${args[dir_at]#/tmp/}
fi
if [[ ${args[0]:-} != start || -n ${FENCE_BASE_PORT:-} ]]; then
  bash "$real" "${args[@]}"
  exit $?
fi
for attempt in 1 2 3; do
  FENCE_BASE_PORT=$(e2e_free_base_port 9) || exit 1
  if out=$(FENCE_BASE_PORT=$FENCE_BASE_PORT bash "$real" "${args[@]}"); then
    echo "$out"
    exit 0
  fi
  echo "doctest cluster.sh: start on base port $FENCE_BASE_PORT failed (attempt $attempt)" >&2
  bash "$real" stop "${args[dir_at]}" >/dev/null 2>&1
  if [[ -n ${DOCTEST_TMP:-} && ${args[dir_at]} == "$DOCTEST_TMP"/* ]]; then rm -rf "${args[dir_at]:?}"; fi
done
exit 1
