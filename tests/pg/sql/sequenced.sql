-- sequenced: mode 'sequenced' (1.3) orders the writes of one token by a
-- sequence number: a write is accepted when its (token, seq) pair is after
-- the row's (fence, fence_seq), in lexicographic order, so a holder's own
-- delayed or replayed write cannot overwrite a newer one.  Also the
-- sequenced forms of fenced_update, fence_admit and fence_advance.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;
SELECT fence_stats_reset();

CREATE TABLE sq (id int PRIMARY KEY, body text,
                 fence bigint NOT NULL DEFAULT 0, fence_seq bigint NOT NULL DEFAULT 0);
INSERT INTO sq VALUES (1, 'a'), (2, 'b');
SELECT fence_protect('sq', mode => 'sequenced');
-- seq_column defaults to fence_seq; the guard gets four arguments
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'sq'::regclass;

-- the seed document's case: (42, 1) delayed, (42, 2) committed first, then the
-- delayed (42, 1) arrives: refused, and the message names both pairs
UPDATE sq SET body = 'second', fence = 42, fence_seq = 2 WHERE id = 1;
UPDATE sq SET body = 'first', fence = 42, fence_seq = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- a replay of the accepted pair is refused too
UPDATE sq SET body = 'second again', fence = 42, fence_seq = 2 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT * FROM sq ORDER BY id;
-- the next sequence number of the same token is accepted; so is a newer
-- token with any sequence (sequences are per token: 43 starts again at 0)
UPDATE sq SET body = 'third', fence = 42, fence_seq = 3 WHERE id = 1;
UPDATE sq SET body = 'new holder', fence = 43, fence_seq = 0 WHERE id = 1;
SELECT * FROM sq ORDER BY id;
-- an older token is refused whatever its sequence; the hint differs
UPDATE sq SET body = 'old holder', fence = 42, fence_seq = 99 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE sq SET body = 'replay', fence = 43, fence_seq = 0 WHERE id = 1;
\echo SQLSTATE :SQLSTATE

-- the pair from the settings: pg_fence.token and pg_fence.seq, stamped
BEGIN;
SET LOCAL pg_fence.token = 43;
SET LOCAL pg_fence.seq = 1;
UPDATE sq SET body = 'by settings' WHERE id = 1;
SELECT * FROM sq WHERE id = 1;
-- a second UPDATE with the same pair in the same transaction is a replay
UPDATE sq SET body = 'by settings again' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- mixed: the token in the SET list, the sequence from pg_fence.seq, and
-- the other way round
BEGIN;
SET LOCAL pg_fence.seq = 5;
UPDATE sq SET body = 'mixed 1', fence = 43 WHERE id = 1;
SET LOCAL pg_fence.token = 43;
UPDATE sq SET body = 'mixed 2', fence_seq = 6 WHERE id = 1;
SELECT * FROM sq WHERE id = 1;
COMMIT;

-- no sequence: refused with 55000 and a hint, never taken as "any"
UPDATE sq SET body = 'no seq', fence = 44 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
BEGIN;
SET LOCAL pg_fence.token = 44;
UPDATE sq SET body = 'no seq' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- no token (with a sequence) is the usual 55000
BEGIN;
SET LOCAL pg_fence.seq = 7;
UPDATE sq SET body = 'no token' WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;

-- bad sequences: NULL (22004), negative (22023), not a bigint (22023 at
-- SET time), beyond bigint (22003 / 22023): errors, never "no sequence"
UPDATE sq SET fence = 44, fence_seq = NULL WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE sq SET fence = 44, fence_seq = -1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SET pg_fence.seq = -1;
SET pg_fence.seq = 'x';
SET pg_fence.seq = '9223372036854775808';
UPDATE sq SET fence = 44, fence_seq = 9223372036854775808 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- pg_fence.seq cannot be a role, database or function default (22023)
ALTER ROLE CURRENT_USER SET pg_fence.seq = 5;
CREATE FUNCTION sequenced_fn() RETURNS int LANGUAGE sql SET pg_fence.seq = 5 AS 'SELECT 1';
SELECT * FROM sq WHERE id = 1;

-- the largest sequence number is the last of its token: nothing is after
-- it but a newer token (no wrap-around to a small number)
UPDATE sq SET body = 'last', fence = 44, fence_seq = 9223372036854775807 WHERE id = 1;
UPDATE sq SET body = 'after last', fence = 44, fence_seq = 0 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE sq SET body = 'next token', fence = 45, fence_seq = 1 WHERE id = 1;
SELECT * FROM sq WHERE id = 1;

-- DELETE takes both from the settings, by the same rule
BEGIN;
SET LOCAL pg_fence.token = 45;
DELETE FROM sq WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.token = 45;
SET LOCAL pg_fence.seq = 1;
DELETE FROM sq WHERE id = 1;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.token = 45;
SET LOCAL pg_fence.seq = 2;
DELETE FROM sq WHERE id = 1;
SELECT count(*) FROM sq WHERE id = 1;
ROLLBACK;
-- INSERT is not checked: the new row's pair is what the INSERT gives
INSERT INTO sq VALUES (3, 'c', 7, 9);
SELECT * FROM sq WHERE id = 3;

-- a statement over several rows: each row is judged by its own pair
UPDATE sq SET body = 'all', fence = 45, fence_seq = 1 WHERE id IN (2, 3);
SELECT * FROM sq ORDER BY id;
UPDATE sq SET body = 'all', fence = 45, fence_seq = 1 WHERE true;
\echo SQLSTATE :SQLSTATE

-- fenced_update's sequenced form: lexicographic, stale returned
SELECT fenced_update('sq', '{"id": 2}', '{"body": "fu"}', 45, 2);
SELECT fenced_update('sq', '{"id": 2}', '{"body": "fu replay"}', 45, 2);
SELECT fenced_update('sq', '{"id": 2}', '{"body": "fu older"}', 45, 1);
SELECT fenced_update('sq', '{"id": 2}', '{"body": "fu newer token"}', 46, 0);
SELECT fenced_update('sq', '{"id": 9}', '{"body": "nobody"}', 46, 5);
SELECT fenced_update('sq', '{"id": 2}', '{"fence_seq": 9}', 46, 5);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('sq', '{"id": 2}', '{"body": "x"}', 46, NULL::bigint);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('sq', '{"id": 2}', '{"body": "x"}', 46, seq => NULL);
\echo SQLSTATE :SQLSTATE
-- an untyped NULL in fifth place resolves to the strict form (fence_column)
SELECT fenced_update('sq', '{"id": 2}', '{"body": "x"}', 46, NULL);
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('sq', '{"id": 2}', '{"body": "x"}', 46, -1);
\echo SQLSTATE :SQLSTATE
SELECT * FROM sq WHERE id = 2;
-- the form without seq on a sequenced table is refused (55000), also with
-- pg_fence.seq set: its WHERE would judge by the token alone and report the
-- holder's second write under one token as stale
SELECT fenced_update('sq', '{"id": 2}', '{"body": "strict"}', 47);
\echo SQLSTATE :SQLSTATE
BEGIN;
SET LOCAL pg_fence.seq = 1;
SELECT fenced_update('sq', '{"id": 2}', '{"body": "strict"}', 47);
\echo SQLSTATE :SQLSTATE
ROLLBACK;
-- the old positional call reaches the old form (refused here, as above)
SELECT fenced_update('sq', '{"id": 2}', '{"body": "old form"}', 1, 'fence');
-- the sequenced form on a table protected in another mode is refused (55000)
CREATE TABLE strict_t (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0,
                       fence_seq bigint NOT NULL DEFAULT 0);
INSERT INTO strict_t VALUES (1, 'a', 0, 0);
SELECT fence_protect('strict_t');
SELECT fenced_update('strict_t', '{"id": 1}', '{"body": "b"}', 5, 1);
\echo SQLSTATE :SQLSTATE
DROP TABLE strict_t;
-- the sequenced form on an unprotected table, with other column names
CREATE TABLE plain (id int PRIMARY KEY, body text, f bigint NOT NULL DEFAULT 0,
                    s bigint NOT NULL DEFAULT 0);
INSERT INTO plain VALUES (1, 'p');
SELECT fenced_update('plain', '{"id": 1}', '{"body": "p1"}', 5, 2,
                     fence_column => 'f', seq_column => 's');
SELECT fenced_update('plain', '{"id": 1}', '{"body": "p0"}', 5, 1, 'f', 's');
SELECT * FROM plain;
SELECT fenced_update('plain', '{"id": 1}', '{"body": "x"}', 5, 3, 'f', 'f');
\echo SQLSTATE :SQLSTATE

-- fence_protect: the sequence column is checked like the fence column
CREATE TABLE badseq (id int, fence bigint NOT NULL DEFAULT 0, s_int int NOT NULL DEFAULT 0,
                     s_null bigint, s_gen bigint GENERATED ALWAYS AS (id) STORED);
SELECT fence_protect('badseq', mode => 'sequenced');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('badseq', mode => 'sequenced', seq_column => 's_int');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('badseq', mode => 'sequenced', seq_column => 's_null');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('badseq', mode => 'sequenced', seq_column => 's_gen');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('badseq', mode => 'sequenced', seq_column => 'fence');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('badseq', mode => 'sequenced', seq_column => 'ctid');
\echo SQLSTATE :SQLSTATE
-- a sequence column with another mode is an error
SELECT fence_protect('sq', mode => 'same_generation', seq_column => 'fence_seq');
\echo SQLSTATE :SQLSTATE
SELECT fence_protect('sq', mode => 'bogus');
\echo SQLSTATE :SQLSTATE
-- the guard checks the column in the relation it fires on, too
CREATE TABLE dropped (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0,
                      fence_seq bigint NOT NULL DEFAULT 0);
INSERT INTO dropped VALUES (1);
SELECT fence_protect('dropped', mode => 'sequenced');
ALTER TABLE dropped DROP COLUMN fence_seq;
UPDATE dropped SET fence = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
-- and refuses a sequence column on a guard of another mode (39P01)
CREATE TRIGGER zzz_fence_guard BEFORE UPDATE ON plain FOR EACH ROW
  EXECUTE FUNCTION fence_guard('f', 'strict', '', 's');
UPDATE plain SET f = 9 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
DROP TRIGGER zzz_fence_guard ON plain;

-- the LOG line of a sequenced rejection names both pairs, under the same
-- token and under an older one (shown here by client_min_messages = log)
SET client_min_messages = log;
UPDATE sq SET body = 'logged', fence = 45, fence_seq = 0 WHERE id = 1;
SELECT fenced_update('sq', '{"id": 2}', '{"body": "logged"}', 46, 0);
SELECT fenced_update('sq', '{"id": 2}', '{"body": "logged"}', 45, 9);
RESET client_min_messages;

-- a partitioned table: the guard (four arguments) is cloned to every
-- partition, and a row moving between partitions is judged once, on its
-- UPDATE, with both columns stamped
CREATE TABLE psq (id int, part int, body text,
                  fence bigint NOT NULL DEFAULT 0, fence_seq bigint NOT NULL DEFAULT 0)
  PARTITION BY LIST (part);
CREATE TABLE psq_1 PARTITION OF psq FOR VALUES IN (1);
CREATE TABLE psq_2 PARTITION OF psq FOR VALUES IN (2);
INSERT INTO psq VALUES (1, 1, 'p');
SELECT fence_protect('psq', mode => 'sequenced');
SELECT tgrelid::regclass, tgnargs FROM pg_trigger
 WHERE tgname = 'zzz_fence_guard' AND tgrelid IN ('psq'::regclass, 'psq_1'::regclass, 'psq_2'::regclass)
 ORDER BY 1;
BEGIN;
SET LOCAL pg_fence.token = 5;
SET LOCAL pg_fence.seq = 2;
UPDATE psq SET part = 2, body = 'moved' WHERE id = 1;
COMMIT;
SELECT tableoid::regclass, * FROM psq;
UPDATE psq SET part = 1, body = 'moved back late', fence = 5, fence_seq = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT tableoid::regclass, * FROM psq;

-- upgrading a same_generation table in place: one transaction
CREATE TABLE up (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO up VALUES (1, 'a');
SELECT fence_protect('up', mode => 'same_generation');
UPDATE up SET body = 'a1', fence = 10 WHERE id = 1;
UPDATE up SET body = 'a0', fence = 10 WHERE id = 1;  -- same_generation: both accepted
BEGIN;
ALTER TABLE up ADD COLUMN fence_seq bigint NOT NULL DEFAULT 0;
SELECT fence_protect('up', mode => 'sequenced');
COMMIT;
-- the row is now (10, 0): the holder of 10 goes on from sequence 1
UPDATE up SET body = 'a2', fence = 10, fence_seq = 1 WHERE id = 1;
UPDATE up SET body = 'a1 delayed', fence = 10 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE up SET body = 'a1 delayed', fence = 10, fence_seq = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT * FROM up;
-- and back: same_generation ignores fence_seq (left as it is)
SELECT fence_protect('up', mode => 'same_generation');
UPDATE up SET body = 'a3', fence = 10 WHERE id = 1;
SELECT * FROM up;

-- verifying tables: the proof is per token (lock key + token), not per
-- sequence; the same proof serves every sequence number of its token
\set pub `cat "$PG_FENCE_VECTORS/token_proof_v1.pub"`
\set p8_901 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 901 report:8`
SELECT fence_trust_key(:'pub', 12345678901234567890) IS NOT NULL AS trusted;
CREATE TABLE vsq (report_id int PRIMARY KEY, body text,
                  fence bigint NOT NULL DEFAULT 0, fence_seq bigint NOT NULL DEFAULT 0);
INSERT INTO vsq VALUES (8, 'r');
SELECT fence_protect('vsq', mode => 'sequenced', lock_key => 'report:{report_id}');
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'vsq'::regclass;
BEGIN;
SELECT set_config('pg_fence.proof', :'p8_901', true) IS NOT NULL AS proof_set;
UPDATE vsq SET body = 'r1', fence = 901, fence_seq = 1 WHERE report_id = 8;
UPDATE vsq SET body = 'r2', fence = 901, fence_seq = 2 WHERE report_id = 8;
SAVEPOINT s;
UPDATE vsq SET body = 'r1 delayed', fence = 901, fence_seq = 1 WHERE report_id = 8;
ROLLBACK TO s;
-- a token without its proof is refused first (55F02), as in other modes
UPDATE vsq SET body = 'r3', fence = 902, fence_seq = 1 WHERE report_id = 8;
ROLLBACK;
BEGIN;
UPDATE vsq SET body = 'no proof', fence = 901, fence_seq = 1 WHERE report_id = 8;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
SELECT fence_lock_key('vsq', v) FROM vsq AS v;
SELECT * FROM vsq;

-- fence_raise on a sequenced table: the raised rows hold (token, 0), as
-- if (token, 0) had been written; the raise's holder goes on from 1
SELECT fence_protect('up', mode => 'sequenced');
UPDATE up SET fence = 10, fence_seq = 5 WHERE id = 1;
SELECT fence_raise('up', 20);
SELECT * FROM up;
UPDATE up SET fence = 20, fence_seq = 0 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
UPDATE up SET body = 'after raise', fence = 20, fence_seq = 1 WHERE id = 1;
SELECT * FROM up;

-- resources: fence_admit / fence_advance (resource, token, seq)
SELECT fence_admit('job:1', 42, 1);
SELECT fence_current('job:1'), fence_current_seq('job:1');
SELECT fence_admit('job:1', 42, 2);
-- the delayed (42, 1) and a replay of (42, 2) are refused, naming both pairs
SELECT fence_admit('job:1', 42, 1);
\echo SQLSTATE :SQLSTATE
SELECT fence_admit('job:1', 42, 2);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('job:1', 42, 2);
SELECT fence_advance('job:1', 42, 3);
SELECT fence_current('job:1'), fence_current_seq('job:1');
-- a call without a sequence under the same token cannot be ordered: 55000
SELECT fence_admit('job:1', 42);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('job:1', 42);
\echo SQLSTATE :SQLSTATE
-- an older token is stale, with or without a sequence; the message names
-- both (the stored one a pair), the detail what the stored pair admits,
-- and so does the LOG line (shown here by client_min_messages = log)
SET client_min_messages = log;
SELECT fence_admit('job:1', 41, 100);
\echo SQLSTATE :SQLSTATE
SELECT fence_admit('job:1', 41);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('job:1', 41, 100);
SELECT fence_advance('job:1', 41);
RESET client_min_messages;
-- a newer token without a sequence stores (43, NULL) ...
SELECT fence_admit('job:1', 43);
SELECT fence_current('job:1'), fence_current_seq('job:1');
-- ... and NULL ranks below every sequence of its token: (43, 0) is after it
SELECT fence_admit('job:1', 43);
SELECT fence_admit('job:1', 43, 0);
SELECT fence_current('job:1'), fence_current_seq('job:1');
-- a newer token starts its sequence again
SELECT fence_admit('job:1', 44, 0);
SELECT resource, fence, seq FROM fence_resources WHERE resource = 'job:1';
-- unknown resources: NULL for both
SELECT fence_current('job:none'), fence_current_seq('job:none');
-- the largest sequence number is the last of its token
SELECT fence_admit('job:1', 44, 9223372036854775807);
SELECT fence_advance('job:1', 44, 0);
-- bad input: a NULL sequence (typed, or by name) is 22004, a negative one
-- 22023
SELECT fence_admit('job:1', 45, NULL::bigint);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('job:1', 45, seq => NULL);
\echo SQLSTATE :SQLSTATE
SELECT fence_admit('job:1', 45, -1);
\echo SQLSTATE :SQLSTATE
SELECT fence_advance('job:1', 45, -1);
\echo SQLSTATE :SQLSTATE
-- an untyped third argument resolves to the form without a sequence (its
-- proof argument): an untyped NULL is "no proof", and a number there is
-- refused (22023) rather than ignored
SELECT fence_admit('job:1', 45, '3');
\echo SQLSTATE :SQLSTATE
SELECT fence_current('job:1'), fence_current_seq('job:1');
-- the old calls resolve to the old functions: proof as the third argument
SELECT fence_advance('job:2', 5, NULL);
SELECT fence_admit('job:2', 5, proof => NULL);
SELECT fence_advance('job:2', 5, seq => 1);
SELECT fence_current('job:2'), fence_current_seq('job:2');

-- fence_resources_guard: a direct write may not change the seq of a row
-- that requires proofs (42501); other rows' seq may be written
SELECT fence_require_proof('job:2');
UPDATE fence_resources SET seq = 7 WHERE resource = 'job:2';
\echo SQLSTATE :SQLSTATE
UPDATE fence_resources SET seq = NULL WHERE resource = 'job:2';
\echo SQLSTATE :SQLSTATE
UPDATE fence_resources SET seq = 7 WHERE resource = 'job:1';
SELECT fence_require_proof('job:2', false);
-- the column refuses a negative sequence
\set VERBOSITY terse
UPDATE fence_resources SET seq = -1 WHERE resource = 'job:1';
\set VERBOSITY default
\echo SQLSTATE :SQLSTATE
-- fence_raise_resources stores the token without a sequence
SELECT fence_raise_resources(100);
SELECT resource, fence, seq FROM fence_resources WHERE resource LIKE 'job:%' ORDER BY resource;
SELECT fence_admit('job:1', 100, 1);

-- every refusal above that was stale is counted (not the 55000 ones)
SELECT kind, relation, resource, accepted, rejected_stale
  FROM fence_stats WHERE relation IN ('sq'::regclass, 'up'::regclass) OR resource LIKE 'job:%'
 ORDER BY kind, relation::text, resource;

SET client_min_messages = warning;
DROP TABLE sq, plain, badseq, dropped, up, vsq, psq;
DROP FUNCTION IF EXISTS sequenced_fn();
DELETE FROM fence_resources WHERE resource LIKE 'job:%';
DELETE FROM fence_trusted_keys;
RESET client_min_messages;
