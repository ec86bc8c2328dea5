-- settings_memory: the values of pg_fence.token and pg_fence.proof (and the
-- token's parsed "extra") are released by PostgreSQL's GUC machinery, with
-- free() up to 15 and pfree() in its own memory context from 16 on. Every
-- way a value is replaced or dropped runs here, many times, in one backend:
-- memory allocated the wrong way for the major crashes the server ("pfree
-- called with invalid pointer", then a PANIC at commit), and the backend pid
-- compared at the end would be gone.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;
\set proof `sed -n 's/^proof=//p' "$PG_FENCE_VECTORS/token_proof_v1.txt"`
SELECT pg_backend_pid() AS pid \gset
CREATE TABLE mem (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO mem VALUES (1, 'a');
SELECT fence_protect('mem');

-- SET LOCAL, committed: a guarded UPDATE in between
BEGIN;
SET LOCAL pg_fence.token = 50;
UPDATE mem SET body = 'x' WHERE id = 1;
COMMIT;

-- SET LOCAL, rolled back; in a savepoint rolled back; released
BEGIN;
SET LOCAL pg_fence.token = 60;
UPDATE mem SET body = 'y' WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.token = 61;
SAVEPOINT s;
SET LOCAL pg_fence.token = 62;
SET LOCAL pg_fence.proof = :'proof';
ROLLBACK TO SAVEPOINT s;
SHOW pg_fence.token;
SAVEPOINT t;
SET LOCAL pg_fence.token = 63;
RELEASE SAVEPOINT t;
UPDATE mem SET body = 'z' WHERE id = 1;
COMMIT;

-- session SET, replaced, then RESET; set_config, local and not
SET pg_fence.token = 70;
SET pg_fence.token = 71;
SET pg_fence.proof = :'proof';
SET pg_fence.proof = '';
RESET pg_fence.token;
RESET pg_fence.proof;
SELECT set_config('pg_fence.token', '72', false);
BEGIN;
SELECT set_config('pg_fence.token', '73', true);
SELECT set_config('pg_fence.proof', :'proof', true);
COMMIT;
SHOW pg_fence.token;
RESET pg_fence.token;

-- a refused value (the check hook fails): nothing allocated to release
BEGIN;
SET LOCAL pg_fence.token = 80;
SET LOCAL pg_fence.token = 'not a token';
ROLLBACK;

-- many times, in and out of transactions
DO $$
BEGIN
  FOR i IN 1..200 LOOP
    PERFORM set_config('pg_fence.token', (1000 + i)::text, true);
    PERFORM set_config('pg_fence.proof', current_setting('pg_fence.proof'), true);
    PERFORM set_config('pg_fence.token', '', false);
  END LOOP;
END $$;
BEGIN;
SET LOCAL pg_fence.token = 2000;
UPDATE mem SET body = 'last' WHERE id = 1;
COMMIT;
SELECT body, fence FROM mem;
SHOW pg_fence.token;

-- the same backend served all of it
SELECT pg_backend_pid() = :pid AS same_backend;
DROP TABLE mem;
