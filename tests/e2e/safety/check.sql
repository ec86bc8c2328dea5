-- The safety checks of tests/e2e/safety/run.sh, over the database the workers
-- wrote (worker_audit, worker_counters, worker_ledger_a/b) and the workers'
-- CSV logs loaded into e2e_events (see coordinator/worker/event_log.h).
-- e2e_faults (kind, target, start_ns, end_ns) holds the nemesis's faults on
-- the same CLOCK_MONOTONIC time line. psql variables: lease_ns (the workers'
-- lease) and rho_ppm (the clock-rate bound rho, docs/guarantees.md).
-- Output: one line per check, "check|<name>|<violations>|<first example>".
-- A check passes when its violation count is 0. run.sh counts the check lines
-- (13): adding or removing a check here means changing that number there.
\set ON_ERROR_STOP 1
\pset format unaligned
\pset tuples_only on
\pset fieldsep '|'

-- 1. Per key and fence, accepted tokens strictly increase in commit order
--    (audit ids are taken inside the fenced transaction, after the fence
--    row/resource lock: per key they follow commit order); on the sequenced
--    fence, accepted (token, seq) pairs do, in lexicographic order (seq is
--    NULL elsewhere, and compares as 0: there it is the token alone).
WITH s AS (
  SELECT key, fence, id, token, coalesce(seq, 0) AS seq,
         lag(token) OVER w AS prev, lag(coalesce(seq, 0)) OVER w AS prev_seq
    FROM worker_audit
  WINDOW w AS (PARTITION BY key, fence ORDER BY id))
SELECT 'check', 'tokens_increase_in_commit_order', count(*),
       coalesce(min(format('key %s fence %s: (token %s, seq %s) committed after (%s, %s) (audit id %s)',
                           key, fence, token, seq, prev, prev_seq, id)), '')
  FROM s WHERE prev IS NOT NULL AND (token, seq) <= (prev, prev_seq);

-- 1b. A holder's own delayed duplicate is refused: the sequenced path's
--     replay of its first write, sent after its later writes committed, was
--     never accepted.
SELECT 'check', 'no_delayed_duplicate_accepted', count(*),
       coalesce(min(format('%s: replay of (token %s, seq %s) on key %s was accepted',
                           worker, token, value, key)), '')
  FROM e2e_events WHERE event = 'replay' AND outcome = 'accepted';

-- 2. No lost update: the n-th accepted increment of a key left the counter at n,
--    and the counters equal the number of accepted increments.
WITH s AS (
  SELECT key, fence, id, value,
         row_number() OVER (PARTITION BY key, fence ORDER BY id) AS nth
    FROM worker_audit)
SELECT 'check', 'increments_are_consecutive', count(*),
       coalesce(min(format('key %s fence %s: increment #%s left the counter at %s',
                           key, fence, nth, value)), '')
  FROM s WHERE value <> nth;

SELECT 'check', 'counter_equals_accepted_increments', count(*),
       coalesce(min(format('key %s fence %s: counter %s, accepted %s', c.key, c.fence, c.n, a.accepted)), '')
  FROM (SELECT key, n, 'row' AS fence FROM worker_counters
        UNION ALL
        SELECT key, n, 'sequenced' FROM worker_sequenced) c
  LEFT JOIN LATERAL (SELECT count(*) AS accepted FROM worker_audit w
                      WHERE w.key = c.key AND w.fence = c.fence) a ON true
 WHERE c.n <> a.accepted;

SELECT 'check', 'ledgers_equal_admitted_increments', count(*),
       coalesce(min(format('key %s: ledger_a %s, ledger_b %s, admitted %s',
                           la.key, la.n, lb.n, a.admitted)), '')
  FROM worker_ledger_a la
  JOIN worker_ledger_b lb USING (key)
  LEFT JOIN LATERAL (SELECT count(*) AS admitted FROM worker_audit w
                      WHERE w.key = la.key AND w.fence = 'resource') a ON true
 WHERE la.n <> lb.n OR la.n <> a.admitted;

-- 3. Tokens never go backwards: every acknowledged acquire has a token larger
--    than every token acknowledged before that acquire was sent (all workers,
--    all keys; CLOCK_MONOTONIC is one clock for every process on the machine).
WITH acks AS (
  SELECT worker, token, send_ns, ack_ns FROM e2e_events
   WHERE event = 'acquire' AND outcome = 'ok'),
timeline AS (
  SELECT ack_ns AS t, 1 AS is_ack, token, worker FROM acks
  UNION ALL
  SELECT send_ns, 0, token, worker FROM acks),
running AS (
  SELECT t, is_ack, token, worker,
         max(token) FILTER (WHERE is_ack = 1)
           OVER (ORDER BY t, is_ack ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS max_before
    FROM timeline)
SELECT 'check', 'acquired_tokens_grow', count(*),
       coalesce(min(format('%s got token %s, but token %s had been acknowledged before it sent',
                           worker, token, max_before)), '')
  FROM running WHERE is_ack = 0 AND max_before >= token;

-- 4. The database accepted only tokens the coordinator granted to that worker,
--    and every write a worker saw accepted is in the audit table. (A forged
--    write that got through is no_forged_proof_accepted's, below.)
SELECT 'check', 'accepted_tokens_were_granted', count(*),
       coalesce(min(format('%s wrote key %s with token %s it never acquired', w.worker, w.key, w.token)), '')
  FROM worker_audit w
 WHERE w.path NOT LIKE 'forge:%' AND NOT EXISTS (SELECT 1 FROM e2e_events e
                    WHERE e.event = 'acquire' AND e.outcome = 'ok'
                      AND e.worker = w.worker AND e.key = w.key AND e.token = w.token);

SELECT 'check', 'accepted_writes_are_audited', count(*),
       coalesce(min(format('%s saw token %s accepted on key %s, but no audit row', e.worker, e.token, e.key)), '')
  FROM e2e_events e
 WHERE e.event = 'write' AND e.outcome = 'accepted'
   AND NOT EXISTS (SELECT 1 FROM worker_audit w
                    WHERE w.worker = e.worker AND w.key = e.key AND w.token = e.token);

-- 5. Within rho, no two workers held a key at once. A worker holds a key from
--    its acquire's answer until the earlier of its release request and the
--    send time of its last successful acquire or keepalive + lease x (1 - rho)
--    (the client library's own deadline). An acquire that got no answer is not
--    held. An overlap whose later holder was granted while a member's clock ran
--    beyond rho (a clock_far fault, until two leases after its heal) is counted
--    as figure lease_overlaps_beyond_rho instead: beyond rho leases may overlap,
--    and the checks above (the fences) must still hold.
CREATE TEMP TABLE e2e_held AS
WITH acq AS (
  SELECT worker, key, token, send_ns, ack_ns FROM e2e_events
   WHERE event = 'acquire' AND outcome = 'ok'),
renew AS (
  SELECT worker, key, token, max(send_ns) AS last_send FROM e2e_events
   WHERE event = 'keepalive' AND outcome = 'ok' GROUP BY 1, 2, 3),
rel AS (
  SELECT worker, key, token, min(send_ns) AS rel_send FROM e2e_events
   WHERE event = 'release' AND send_ns > 0 GROUP BY 1, 2, 3)
SELECT * FROM (
  SELECT a.worker, a.key, a.token, a.ack_ns AS from_ns,
         least(greatest(a.send_ns, coalesce(r.last_send, 0))
                 + (:lease_ns)::bigint * (1000000 - :rho_ppm) / 1000000,
               coalesce(l.rel_send, 9223372036854775807)) AS to_ns
    FROM acq a
    LEFT JOIN renew r USING (worker, key, token)
    LEFT JOIN rel l USING (worker, key, token)) h
 WHERE to_ns > from_ns;   -- an answer after the deadline holds nothing

CREATE TEMP TABLE e2e_overlaps AS
WITH candidates AS (   -- a holder that starts before every earlier holder of its key ended
  SELECT * FROM (
    SELECT h.*, max(to_ns) OVER (PARTITION BY key ORDER BY from_ns, token
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_to
      FROM e2e_held h) s
   WHERE prev_to > from_ns)
SELECT h.key, h.worker, h.token, h.from_ns, p.worker AS prev_worker, p.token AS prev_token,
       p.to_ns - h.from_ns AS overlap_ns,
       EXISTS (SELECT 1 FROM e2e_faults f
                WHERE f.kind = 'clock_far'
                  AND h.from_ns BETWEEN f.start_ns AND f.end_ns + 2 * (:lease_ns)::bigint) AS beyond_rho
  FROM candidates h
  JOIN LATERAL (SELECT * FROM e2e_held p
                 WHERE p.key = h.key AND p.token <> h.token
                   AND p.from_ns <= h.from_ns AND p.to_ns > h.from_ns
                 ORDER BY p.to_ns DESC LIMIT 1) p ON true;

SELECT 'check', 'one_holder_at_a_time_within_rho', count(*),
       coalesce(min(format('key %s: %s got token %s while %s (token %s) held it for %s ms more',
                           key, worker, token, prev_worker, prev_token, overlap_ns / 1000000)), '')
  FROM e2e_overlaps WHERE NOT beyond_rho;

-- 6. Token proofs. The workers send their grant's proof with every write; the
--    forger (fence-worker --forge) sends forged and misdirected ones: "forge"
--    events whose path is PATH:KIND (corrupt, other_key, other_token,
--    untrusted, missing), and, were one let through, an audit row with path
--    forge:KIND. No forgery got a write in:
WITH f AS (
  SELECT key, token, format('audit id %s (%s, %s)', id, worker, path) AS how
    FROM worker_audit WHERE path LIKE 'forge:%'
  UNION ALL
  SELECT key, token, format('%s saw %s accepted', worker, path)
    FROM e2e_events e
   WHERE event = 'forge' AND outcome = 'accepted'
     AND NOT EXISTS (SELECT 1 FROM worker_audit w
                      WHERE w.path LIKE 'forge:%' AND w.key = e.key AND w.token = e.token))
SELECT 'check', 'no_forged_proof_accepted', count(*),
       coalesce(min(format('key %s, token %s: %s', key, token, how)), '')
  FROM f;

-- Every forgery was refused with 55F02: the proof is checked before the
-- token's order, so a forgery is never "stale" -- except on fenced_update,
-- whose stale outcome writes nothing and so asks no proof. An error (a lock
-- timeout, a lost connection) is no acceptance: figure forged_errors.
SELECT 'check', 'forged_proofs_refused_with_55F02', count(*),
       coalesce(min(format('%s: %s on key %s with token %s answered %s', worker, path, key, token, outcome)), '')
  FROM e2e_events
 WHERE event = 'forge'
   AND NOT (outcome IN ('bad_proof', 'error') OR (outcome = 'stale' AND path LIKE 'fenced_update:%'));

-- No fence holds a token that was not granted for its key: what only a
-- forged or misdirected proof could have set (the forger's other_token is
-- its grant's + 2^40; its other_key, a token granted for another key).
WITH fences AS (
  SELECT key, 'row' AS fence, fence AS token FROM worker_counters WHERE fence > 0
  UNION ALL
  SELECT key, 'sequenced', fence FROM worker_sequenced WHERE fence > 0
  UNION ALL
  SELECT r.resource, 'resource', r.fence FROM fence_resources r
   WHERE r.fence > 0 AND EXISTS (SELECT 1 FROM worker_ledger_a l WHERE l.key = r.resource))
SELECT 'check', 'fences_hold_granted_tokens', count(*),
       coalesce(min(format('key %s: the %s fence is %s, a token never granted for it', key, fence, token)), '')
  FROM fences f
 WHERE NOT EXISTS (SELECT 1 FROM e2e_events e
                    WHERE e.event = 'acquire' AND e.outcome = 'ok' AND e.key = f.key AND e.token = f.token);

-- The genuine proofs were never refused.
SELECT 'check', 'granted_proofs_accepted', count(*),
       coalesce(min(format('%s: the proof of its token %s on key %s was refused (%s, %s)',
                           worker, token, key, event, path)), '')
  FROM e2e_events WHERE event IN ('write', 'replay') AND outcome = 'bad_proof';

-- Figures for the summary: "figure|<name>|<value>".
SELECT 'figure', 'lease_overlaps_within_rho', count(*) FROM e2e_overlaps WHERE NOT beyond_rho;
SELECT 'figure', 'lease_overlaps_beyond_rho', count(*) FROM e2e_overlaps WHERE beyond_rho;
SELECT 'figure', 'keepalives_ok', count(*) FROM e2e_events WHERE event = 'keepalive' AND outcome = 'ok';
SELECT 'figure', 'keepalives_failed', count(*) FROM e2e_events WHERE event = 'keepalive' AND outcome <> 'ok';
SELECT 'figure', 'history_ops', count(*) FROM e2e_events;
SELECT 'figure', 'acquires_attempted', count(*) FROM e2e_events WHERE event = 'acquire';
SELECT 'figure', 'acquires_granted', count(*) FROM e2e_events WHERE event = 'acquire' AND outcome = 'ok';
SELECT 'figure', 'acquires_held', count(*) FROM e2e_events WHERE event = 'acquire' AND outcome = 'held';
SELECT 'figure', 'acquires_unavailable', count(*) FROM e2e_events WHERE event = 'acquire' AND outcome = 'unavailable';
SELECT 'figure', 'writes_accepted', count(*) FROM worker_audit;
SELECT 'figure', 'writes_accepted_guard', count(*) FROM worker_audit WHERE path = 'guard';
SELECT 'figure', 'writes_accepted_fenced_update', count(*) FROM worker_audit WHERE path = 'fenced_update';
SELECT 'figure', 'writes_accepted_admit', count(*) FROM worker_audit WHERE path = 'admit';
SELECT 'figure', 'writes_accepted_sequenced', count(*) FROM worker_audit WHERE path = 'sequenced';
SELECT 'figure', 'replays_refused', count(*) FROM e2e_events WHERE event = 'replay' AND outcome = 'stale';
SELECT 'figure', 'stale_rejections', count(*) FROM e2e_events WHERE event = 'write' AND outcome = 'stale';
SELECT 'figure', 'stale_rejections_by_path',
       coalesce(string_agg(path || '=' || n, ' ' ORDER BY path), 'none')
  FROM (SELECT path, count(*) AS n FROM e2e_events
         WHERE event = 'write' AND outcome = 'stale' GROUP BY path) s;
SELECT 'figure', 'fence_stats_rejected_stale', coalesce(sum(rejected_stale), 0) FROM fence_stats;
SELECT 'figure', 'write_errors', count(*) FROM e2e_events WHERE event = 'write' AND outcome IN ('error', 'not_found');
SELECT 'figure', 'releases_not_held', count(*) FROM e2e_events WHERE event = 'release' AND outcome = 'not_held';
SELECT 'figure', 'max_acknowledged_token', coalesce(max(token), 0) FROM e2e_events WHERE event = 'acquire' AND outcome = 'ok';
SELECT 'figure', 'forged_sent', count(*) FROM e2e_events WHERE event = 'forge';
SELECT 'figure', 'forged_sent_by_kind',
       coalesce(string_agg(kind || '=' || n, ' ' ORDER BY kind), 'none')
  FROM (SELECT split_part(path, ':', 2) AS kind, count(*) AS n FROM e2e_events
         WHERE event = 'forge' GROUP BY 1) s;
SELECT 'figure', 'forged_kinds', count(DISTINCT split_part(path, ':', 2)) FROM e2e_events WHERE event = 'forge';
SELECT 'figure', 'forged_paths', count(DISTINCT split_part(path, ':', 1)) FROM e2e_events WHERE event = 'forge';
SELECT 'figure', 'forged_refused', count(*) FROM e2e_events WHERE event = 'forge' AND outcome = 'bad_proof';
SELECT 'figure', 'forged_stale', count(*) FROM e2e_events WHERE event = 'forge' AND outcome = 'stale';
SELECT 'figure', 'forged_errors', count(*) FROM e2e_events WHERE event = 'forge' AND outcome = 'error';
SELECT 'figure', 'forged_accepted', count(*) FROM e2e_events WHERE event = 'forge' AND outcome = 'accepted';
SELECT 'figure', 'fence_stats_rejected_proof', coalesce(sum(rejected_proof), 0) FROM fence_stats;
