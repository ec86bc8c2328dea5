-- outbox: fence_enqueue records a side effect under the fence of its
-- target (fence_admit's rule), with a deterministic idempotency key; bad
-- input is refused naming it; the backlog view, fence_outbox_retry and
-- fence_outbox_purge.
CREATE EXTENSION IF NOT EXISTS pg_fence;
\set VERBOSITY default

-- admitted at the target's fence like fence_admit: a new target is created
SELECT fence_enqueue('mail:7', 41, 'welcome', 'http://127.0.0.1:9/hook', '{"to": "a@example.org"}');
SELECT fence_current('mail:7');
-- the key is (target, token, operation_id) alone
SELECT fence_outbox_key('mail:7', 41, 'welcome');
SELECT fence_outbox_key('mail:7', 41, 'welcome') = fence_outbox_key('mail:7', 41, 'welcome2'),
       fence_outbox_key('a', 1, 'bc') = fence_outbox_key('ab', 1, 'c'),
       fence_outbox_key('mail:7', 41, 'welcome') = fence_outbox_key('mail:7', 42, 'welcome');
-- the same triple with the same endpoint and payload is one entry
SELECT fence_enqueue('mail:7', 41, 'welcome', 'http://127.0.0.1:9/hook', '{"to": "a@example.org"}');
SELECT count(*) FROM fence_outbox WHERE target = 'mail:7';
-- ... with another payload, an error naming the operation
SELECT fence_enqueue('mail:7', 41, 'welcome', 'http://127.0.0.1:9/hook', '{"to": "b@example.org"}');
SELECT target, token, operation_id, endpoint, payload, state, attempts, last_status, last_error,
       next_attempt_at <= now() AS due, delivered_at
  FROM fence_outbox ORDER BY id;

-- a writer and an enqueue under one token in one transaction
BEGIN;
SELECT fence_admit('mail:7', 42);
SELECT fence_enqueue('mail:7', 42, 'welcome', 'https://hooks.example.org/a?b=c', '[1, 2]');
COMMIT;
-- the older holder is refused, with fence_admit's error, and enqueues nothing
SELECT fence_enqueue('mail:7', 41, 'late', 'http://127.0.0.1:9/hook', '{}');
SELECT count(*) FROM fence_outbox WHERE operation_id = 'late';
-- an enqueue that a rollback undoes leaves nothing behind
BEGIN;
SELECT fence_enqueue('mail:8', 5, 'x', 'http://h/', '{}') IS NOT NULL AS enqueued;
ROLLBACK;
SELECT count(*) FROM fence_outbox WHERE target = 'mail:8';
SELECT fence_current('mail:8');

-- bad input, each refused naming it
SELECT fence_enqueue(NULL, 1, 'op', 'http://h/', '{}');
SELECT fence_enqueue('t', NULL, 'op', 'http://h/', '{}');
SELECT fence_enqueue('t', 1, NULL, 'http://h/', '{}');
SELECT fence_enqueue('t', 1, 'op', NULL, '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://h/', NULL);
SELECT fence_enqueue('t', -1, 'op', 'http://h/', '{}');
SELECT fence_enqueue('', 1, 'op', 'http://h/', '{}');
SELECT fence_enqueue('t', 1, '', 'http://h/', '{}');
SELECT fence_enqueue('t', 1, repeat('o', 257), 'http://h/', '{}');
SELECT fence_enqueue('t', 1, E'op\n', 'http://h/', '{}');
SELECT fence_enqueue('t', 1, 'op', 'ftp://h/', '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://', '{}');
SELECT fence_enqueue('t', 1, 'op', 'http:///path', '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://h:0/', '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://h:65536/', '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://user:pw@h/', '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://h/a b', '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://[::1/', '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://h/' || repeat('p', 2048), '{}');
SELECT fence_enqueue('t', 1, 'op', 'http://h/', jsonb_build_object('big', repeat('x', 70000)));
SELECT fence_enqueue('t', 1, 'op', 'http://h/', '{}', '7');
-- accepted shapes
SELECT count(fence_enqueue('t', 1, 'op' || n, e, '{}'))
  FROM unnest(ARRAY['http://h', 'HTTPS://h.example.org:8443', 'http://[::1]:80/x',
                    'http://10.0.0.1/a/b?c=d#e', 'http://h?q']) WITH ORDINALITY AS u(e, n);
-- the limit is a setting (superuser)
SET pg_fence.max_outbox_payload = '1kB';
SELECT fence_enqueue('t', 1, 'small', 'http://h/', jsonb_build_object('s', repeat('x', 2000)));
RESET pg_fence.max_outbox_payload;
SELECT fence_enqueue('t', 1, 'small', 'http://h/', jsonb_build_object('s', repeat('x', 2000))) IS NOT NULL AS enqueued;
-- nothing was written by the refused calls
SELECT count(*) FROM fence_outbox WHERE target = 't';

-- the backlog, and the operator's functions
SELECT state, entries, retried, oldest_age IS NOT NULL AS has_oldest FROM fence_outbox_backlog;
UPDATE fence_outbox SET state = 'parked', last_status = 400, last_error = 'bad request', attempts = 1
 WHERE operation_id = 'op1';
UPDATE fence_outbox SET state = 'delivered', delivered_at = now(), updated_at = now() - interval '2 days'
 WHERE operation_id = 'op2';
SELECT state, entries, retried FROM fence_outbox_backlog;
SELECT fence_outbox_retry(id) FROM fence_outbox WHERE operation_id = 'op1';
SELECT fence_outbox_retry(id) FROM fence_outbox WHERE operation_id = 'op1';
SELECT state, attempts, last_status, last_error FROM fence_outbox WHERE operation_id = 'op1';
SELECT fence_outbox_purge('1 day');
SELECT fence_outbox_purge('1 day');
SELECT count(*) FROM fence_outbox WHERE operation_id = 'op2';

-- privileges: an application role needs grants on both tables and the sequence,
-- a relay SELECT and UPDATE on fence_outbox
CREATE ROLE regress_outbox_app;
SET ROLE regress_outbox_app;
SELECT fence_enqueue('mail:9', 1, 'x', 'http://h/', '{}');
RESET ROLE;
GRANT SELECT, INSERT, UPDATE ON fence_resources TO regress_outbox_app;
GRANT SELECT, INSERT ON fence_outbox TO regress_outbox_app;
GRANT USAGE ON SEQUENCE fence_outbox_id_seq TO regress_outbox_app;
SET ROLE regress_outbox_app;
SELECT fence_enqueue('mail:9', 1, 'x', 'http://h/', '{}') IS NOT NULL AS enqueued;
SELECT fence_outbox_purge('0');
SELECT * FROM fence_outbox_backlog;
-- INSERT on fence_outbox is for fence_enqueue only: a direct INSERT would
-- skip the fence (mail:9 is at 1), require_proof and the endpoint check
INSERT INTO fence_outbox (target, token, operation_id, idempotency_key, endpoint, payload)
VALUES ('mail:9', 0, 'forged', 'k-forged', 'ftp://evil/', '{}');
\echo SQLSTATE :SQLSTATE
SELECT count(*) FROM fence_outbox WHERE operation_id = 'forged';
-- ... and the relay's UPDATE changes the delivery state only
RESET ROLE;
CREATE ROLE regress_outbox_relay;
GRANT SELECT, UPDATE ON fence_outbox TO regress_outbox_relay;
SET ROLE regress_outbox_relay;
UPDATE fence_outbox SET state = 'parked', attempts = attempts + 1, last_status = 400,
       last_error = 'bad', next_attempt_at = now(), updated_at = now()
 WHERE target = 'mail:9';
UPDATE fence_outbox SET endpoint = 'http://evil/' WHERE target = 'mail:9';
\echo SQLSTATE :SQLSTATE
UPDATE fence_outbox SET token = 2 WHERE target = 'mail:9';
UPDATE fence_outbox SET payload = '{"x": 1}' WHERE target = 'mail:9';
SELECT state, attempts, endpoint, token, payload FROM fence_outbox WHERE target = 'mail:9';
RESET ROLE;
-- a superuser is held to the same UPDATE rule, but may INSERT (a restore)
UPDATE fence_outbox SET target = 'mail:10' WHERE target = 'mail:9';
INSERT INTO fence_outbox (target, token, operation_id, idempotency_key, endpoint, payload)
VALUES ('mail:9', 1, 'restored', 'k-restored', 'http://h/', '{}');
SELECT count(*) FROM fence_outbox WHERE target = 'mail:9';
REVOKE ALL ON fence_resources, fence_outbox FROM regress_outbox_app, regress_outbox_relay;
REVOKE ALL ON SEQUENCE fence_outbox_id_seq FROM regress_outbox_app;
DROP ROLE regress_outbox_app, regress_outbox_relay;

DELETE FROM fence_outbox;
DELETE FROM fence_resources WHERE resource IN ('mail:7', 'mail:8', 'mail:9', 't');

-- the key hashes UTF-8 whatever the database encoding: the same value in a
-- LATIN1 database as here and in pgfence.outbox.idempotency_key (chr(233)
-- is 'é' in both encodings)
SELECT fence_outbox_key('caf' || chr(233), 1, 'op' || chr(233)) =
       'pgfence-v1-0f25cc27458fdf338f64b3e1e305a53d8ef2c34a76568121a8c65573e74086fb' AS utf8_key;
CREATE DATABASE regress_outbox_latin1 ENCODING 'LATIN1' LOCALE 'C' TEMPLATE template0;
\c regress_outbox_latin1
SET client_min_messages = warning;
CREATE EXTENSION pg_fence;
RESET client_min_messages;
SELECT fence_outbox_key('caf' || chr(233), 1, 'op' || chr(233)) =
       'pgfence-v1-0f25cc27458fdf338f64b3e1e305a53d8ef2c34a76568121a8c65573e74086fb' AS latin1_key;
SELECT fence_enqueue('caf' || chr(233), 1, 'op' || chr(233), 'http://h/', '{}') =
       'pgfence-v1-0f25cc27458fdf338f64b3e1e305a53d8ef2c34a76568121a8c65573e74086fb' AS latin1_enqueue;
\c contrib_regression
DROP DATABASE regress_outbox_latin1;
