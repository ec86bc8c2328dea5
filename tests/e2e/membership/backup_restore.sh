#!/usr/bin/env bash
# Back up, keep granting, destroy the cluster, restore into a new one: the
# backup holds what was granted before it; every token of the new cluster is
# above every token the old one issued, those granted after the backup too;
# the new cluster has a new ID and refuses a member of the old one.
# (docs/operations.md, "Backup and restore", as written.)
source "$(dirname "$0")/lib.sh"
cluster_start 3
wait_leader 10 >/dev/null || fail "no leader"
held=$(fctl acquire held:1 --lease 60s) || fail "acquire held:1"
start_acquirer
wait_until 10 "the client gets tokens" more_tokens_than 5
fctl snapshot save "$DIR/backup.bak" >/dev/null || fail "snapshot save"
status=$(fctl snapshot status "$DIR/backup.bak" -o json) || fail "snapshot status"
old_cluster=$(json_field "$status" cluster_id)
backup_last=$(json_field "$status" last_token)
((backup_last >= held)) || fail "the backup's last token $backup_last is below held:1's $held"
[[ "$old_cluster" == "$(json_field "$(status_of 1)" cluster_id)" ]] || fail "the backup names cluster $old_cluster"
# Grants after the backup: in databases already, not in the backup.
before=$(tokens_so_far)
wait_until 10 "the client gets tokens after the backup" more_tokens_than "$((before + 10))"
stop_acquirer 15
((LAST_TOKEN > backup_last)) || fail "no grant after the backup (last $LAST_TOKEN, backup $backup_last)"
# A damaged backup is refused before anything is written.
cp "$DIR/backup.bak" "$DIR/damaged.bak"
printf 'x' | dd of="$DIR/damaged.bak" bs=1 seek=40 conv=notrunc status=none
if fctl snapshot status "$DIR/damaged.bak" >/dev/null 2>&1; then fail "status accepted a damaged backup"; fi
# Destroy the cluster; keep a copy of an old member's directory.
"$CLUSTER" stop "$DIR"
cp -a "$DIR/3" "$DIR/old-3"
rm -rf "${DIR:?}/1" "${DIR:?}/2" "${DIR:?}/3"
if "$FENCE_BIN_DIR/fence-coordinator" --id 1 --peers "1=127.0.0.1:$((BASE + 1))" --client-addr "127.0.0.1:$(client_port 1)" \
    --data-dir "$DIR/x" --restore "$DIR/damaged.bak" >"$DIR/damaged.out" 2>&1; then
    fail "a damaged backup was restored"
fi
grep -q "CRC mismatch" "$DIR/damaged.out" || fail "damaged restore: $(cat "$DIR/damaged.out")"
[[ ! -e "$DIR/x/identity" ]] || fail "a refused restore left a data directory"
# So is a restore into a directory that is not empty, before it writes anything.
mkdir -p "$DIR/y" && echo keep >"$DIR/y/file"
if "$FENCE_BIN_DIR/fence-coordinator" --id 1 --peers "1=127.0.0.1:$((BASE + 1))" --client-addr "127.0.0.1:$(client_port 1)" \
    --data-dir "$DIR/y/" --restore "$DIR/backup.bak" >"$DIR/nonempty.out" 2>&1; then
    fail "a backup was restored into a directory that is not empty"
fi
grep -q "is not an empty directory" "$DIR/nonempty.out" || fail "non-empty restore: $(cat "$DIR/nonempty.out")"
[[ ! -e "$DIR/y.restoring" && -e "$DIR/y/file" ]] || fail "a refused restore wrote $DIR/y.restoring or touched $DIR/y"
# What a restore interrupted by a crash leaves (its building directory) is
# started over, not used.
mkdir -p "$DIR/1.restoring" && echo "half written" >"$DIR/1.restoring/identity"
# Restore: every member from the same file, same --peers (cluster.sh passes them).
cluster_start 3 "--restore $DIR/backup.bak"
[[ ! -e "$DIR/1.restoring" ]] || fail "the building directory of member 1 was left behind"
L=$(wait_leader 10) || fail "no leader in the restored cluster"
new_cluster=$(json_field "$(status_of "$L")" cluster_id)
[[ "$new_cluster" != "$old_cluster" ]] || fail "the restored cluster kept the old ID $old_cluster"
[[ "$(fctl get held:1 -o json)" == *"\"token\":$held"* ]] || fail "held:1 is not in the restored cluster"
t=$(fctl acquire after:restore --lease 5s) || fail "acquire in the restored cluster"
((t > LAST_TOKEN)) || fail "token $t is not above $LAST_TOKEN, the old cluster's last"
# A restart keeps the restored state (--restore is not used again).
"$CLUSTER" restart "$DIR" 2
back() { [[ "$(json_field "$(status_of 2)" cluster_id)" == "$new_cluster" ]]; }
wait_until 15 "member 2 restarts in the restored cluster" back
grep -q 'event=flag_not_used.*--restore' "$DIR/2.log" || fail "member 2 did not say --restore was not used"
# An old member is refused: its frames carry the old cluster ID.
kill -9 "$(member_pid 3)"
"$FENCE_BIN_DIR/fence-coordinator" --id 3 --client-addr "127.0.0.1:$(client_port 3)" --data-dir "$DIR/old-3" \
    --admin-without-auth --peers "$(grep ^PEERS= "$DIR/cluster.env" | cut -d= -f2-)" >"$DIR/old.log" 2>&1 &
echo $! >"$DIR/3.pid"
refused() { grep -q "event=peer_frame_refused.*frame for cluster $old_cluster" "$DIR/1.log" "$DIR/2.log"; }
wait_until 10 "the restored members refuse the old member's frames" refused
t2=$(fctl acquire after:old-member --lease 5s) || fail "acquire with an old member around"
((t2 > t)) || fail "token $t2 after $t"
pass "restored cluster $new_cluster from $old_cluster: token $t2 > $LAST_TOKEN, the old cluster's last"
