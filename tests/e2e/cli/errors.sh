#!/usr/bin/env bash
# What a newcomer meets before a cluster answers: with no member on the
# endpoints, one line on stderr within a second names the endpoints, where
# they came from (--endpoints or FENCE_ENDPOINTS) and how long fencectl goes on
# trying, then exit 5; an HTTP server that is not a pgfence member on the port
# is "not a pgfence member" (exit 12), in status too, never "no lock"; run
# without "--" says where the command goes. No cluster is started.
source "$(dirname "$0")/lib.sh"
closed=$((FENCE_BASE_PORT + 1))
web=$((FENCE_BASE_PORT + 2))
web_pid=""
pre_cleanup() { [[ -z "$web_pid" ]] || kill "$web_pid" 2>/dev/null || true; }

# notice_seen FILE TEXT: FILE holds TEXT.
notice_seen() { grep -q -- "$2" "$1" 2>/dev/null; }

for from in flag env; do
  start_ns=$(date +%s%N)
  if [[ $from == flag ]]; then
    fencectl --endpoints "127.0.0.1:$closed" --timeout 4s get k >/dev/null 2>"$WORK/$from.err" &
    want="no usable answer yet from 127.0.0.1:$closed (from --endpoints); retrying for up to --timeout 4s"
  else
    FENCE_ENDPOINTS="127.0.0.1:$closed" fencectl --timeout 4s get k >/dev/null 2>"$WORK/$from.err" &
    want="no usable answer yet from 127.0.0.1:$closed (from FENCE_ENDPOINTS); retrying for up to --timeout 4s"
  fi
  pid=$!
  wait_until 3 "the retry notice ($from)" notice_seen "$WORK/$from.err" "$want"
  seen_ms=$((($(date +%s%N) - start_ns) / 1000000))
  ((seen_ms < 1500)) || fail "the retry notice came after ${seen_ms}ms ($from), want within a second"
  code=0
  wait "$pid" || code=$?
  ((code == 5)) || fail "no member ($from): exit $code, want 5 ($(cat "$WORK/$from.err"))"
  [[ $(grep -c "no usable answer yet" "$WORK/$from.err") == 1 ]] || fail "the notice is not once: $(cat "$WORK/$from.err")"
  grep -q "cluster unavailable" "$WORK/$from.err" || fail "no final error ($from): $(cat "$WORK/$from.err")"
done
echo "[$TEST_NAME] retry notice after ${seen_ms}ms"

# An HTTP server that is not a pgfence member.
python3 -m http.server "$web" --bind 127.0.0.1 --directory "$WORK" >"$WORK/web.log" 2>&1 &
web_pid=$!
wait_until 10 "the web server on $web" curl -s -o /dev/null "http://127.0.0.1:$web/"
expect_code 12 fencectl --endpoints "127.0.0.1:$web" status
grep -q "not pgfence" "$WORK/last.out" || fail "status row: $(cat "$WORK/last.out")"
grep -q "no lock" "$WORK/last.err" && fail "status said 'no lock': $(cat "$WORK/last.err")"
expect_code 12 fencectl --endpoints "127.0.0.1:$web,127.0.0.1:$closed" status
grep -q "no usable answer" "$WORK/last.err" && fail "status printed the retry notice: $(cat "$WORK/last.err")"
expect_code 12 fencectl --endpoints "127.0.0.1:$web" acquire report:7 --wait 0s
grep -q "^fencectl acquire: 127.0.0.1:$web is not a pgfence member: it answered HTTP 501" "$WORK/last.err" ||
  fail "acquire against a web server said: $(cat "$WORK/last.err")"
expect_code 12 fencectl --endpoints "127.0.0.1:$web" get report:7
grep -q "is not a pgfence member: it answered HTTP 404" "$WORK/last.err" || fail "get said: $(cat "$WORK/last.err")"

# run with its command but without "--"
expect_code 2 fencectl run report:7 sh -c true
grep -q "run's command goes after '--'" "$WORK/last.err" || fail "run without --: $(cat "$WORK/last.err")"
echo "PASS [$TEST_NAME]"
