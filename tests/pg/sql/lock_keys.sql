-- lock_keys: lock keys that cannot collide, and what a proof's scope is.
--  - fence_protect refuses a template under which two different rows could
--    have the same lock key (22023), and accepts one whose columns can be
--    read back (template.c states the rule);
--  - a property test: random templates over integer, uuid and text columns;
--    for each one fence_protect accepts, random rows with adversarial values
--    (separators and digits inside texts, negative numbers) never share a
--    key; fence_lock_key(rel, row) gives the key the guard checks;
--  - in a LATIN1 database a proof verifies for the key's characters, never
--    for another key whose UTF-8 bytes equal the key's LATIN1 bytes; a
--    SQL_ASCII database refuses non-ASCII keys (55F02) and verifies ASCII
--    ones;
--  - a proof is scoped by its lock key only: two tables with the same
--    template, and a resource named like a template's key, accept the same
--    proof (docs/guarantees.md says so).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DROP DATABASE IF EXISTS regress_fence_latin1;
DROP DATABASE IF EXISTS regress_fence_sql_ascii;
RESET client_min_messages;

\set pub `cat "$PG_FENCE_VECTORS/token_proof_v1.pub"`
\set key_file `echo "$PG_FENCE_VECTORS/token_proof_v1.key"`
\set k7_910 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 910 inv:7:x`
\set job_920 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 920 job:5`
\set latin_930 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 930 'é©©'`
\set cjk_940 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 940 '驩'`
\set e_950 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 950 'é'`
\set ascii_960 `"$PG_FENCE_SIGN" "$PG_FENCE_VECTORS/token_proof_v1.key" 12345678901234567890 960 'job:ascii'`
SELECT fence_trust_key(:'pub') AS kid;

-- Ambiguous templates are refused -------------------------------------------

CREATE TABLE keyed (a int, b bigint, c smallint, t text, v varchar, u uuid,
                    fence bigint NOT NULL DEFAULT 0);
-- (1, 23) and (12, 3) would both be "123"
SELECT fence_protect('keyed', lock_key => '{a}{b}');
\echo SQLSTATE :SQLSTATE
-- integers print '-' ((1, -2) is "1--2"); uuids print 'a'; text anything
SELECT fence_protect('keyed', lock_key => '{a}-{b}');
SELECT fence_protect('keyed', lock_key => 'x:{u}a{t}');
SELECT fence_protect('keyed', lock_key => '{u}-{u}');
-- two text columns: ('a:b', 'c') and ('a', 'b:c') are both "a:b:c"
SELECT fence_protect('keyed', lock_key => '{t}:{v}');
SELECT fence_protect('keyed', lock_key => 'k:{a}:{t}:{v}');
-- accepted: every column readable from one side
SELECT fence_protect('keyed', lock_key => 'report:{a}:{b}');
SELECT fence_protect('keyed', lock_key => '{t}/{a}');
SELECT fence_protect('keyed', lock_key => '{a}.{t}');
SELECT fence_protect('keyed', lock_key => 'k:{a}:{t}:{b}:{u}');
SELECT fence_protect('keyed', lock_key => '{u}:{a}x{c}');
SELECT fence_protect('keyed', lock_key => 'only:{t}');
-- the uuid is read from the left, the integer after 'a' from the right
SELECT fence_protect('keyed', lock_key => 'x:{u}a{a}');

-- Property: accepted templates never give two rows one key --------------------

-- values chosen to collide: short numbers, separators and digits in texts
CREATE FUNCTION pg_temp.random_value(col text) RETURNS text LANGUAGE sql AS $$
  SELECT CASE
    WHEN col IN ('a', 'b', 'c') THEN ((random() * 30)::int - 10)::text
    WHEN col = 'u' THEN (ARRAY['00000000-0000-0000-0000-000000000001',
                               '00000000-0000-0000-0000-00000000001a',
                               'a0000000-0000-0000-0000-000000000000'])[1 + (random() * 2)::int]
    ELSE (SELECT coalesce(string_agg((ARRAY['', 'a', ':', '/', '-', '.', 'x', '1', '2', 'a1'])
                              [1 + (random() * 9)::int], ''), '')
            FROM generate_series(1, (random() * 3)::int))
  END
$$;

DO $$
DECLARE
    cols text[] := ARRAY['a', 'b', 'c', 't', 'v', 'u'];
    seps text[] := ARRAY['', '-', ':', '/', 'a', '1', 'x-', '-x', ':1', '1:', '.'];
    template text;
    accepted int := 0;
    refused int := 0;
    rows_checked int := 0;
    collisions int := 0;
    ncols int;
BEGIN
    PERFORM setseed(0.25);
    FOR round IN 1..150 LOOP
        ncols := 2 + (random() * 1.5)::int;
        template := 'k' || seps[1 + (random() * 10)::int];
        FOR i IN 1..ncols LOOP
            template := template || '{' || cols[1 + (random() * 5)::int] || '}';
            IF i < ncols THEN
                template := template || seps[1 + (random() * 10)::int];
            END IF;
        END LOOP;
        BEGIN
            PERFORM fence_protect('keyed', lock_key => template);
        EXCEPTION WHEN invalid_parameter_value THEN
            refused := refused + 1;
            CONTINUE;
        END;
        accepted := accepted + 1;
        CREATE TEMP TABLE sample AS
        SELECT k.*, fence_lock_key('keyed', ROW(k.*)::keyed) AS lock_key
          FROM (SELECT pg_temp.random_value('a')::int AS a, pg_temp.random_value('b')::bigint AS b,
                       pg_temp.random_value('c')::smallint AS c, pg_temp.random_value('t') AS t,
                       pg_temp.random_value('v')::varchar AS v, pg_temp.random_value('u')::uuid AS u,
                       0::bigint AS fence
                  FROM generate_series(1, 200)) AS k;
        -- rows that differ in the template's columns must differ in their key
        EXECUTE format('SELECT count(*) FROM (SELECT lock_key FROM sample
                          GROUP BY lock_key HAVING count(DISTINCT (%s)) > 1) AS shared',
                       (SELECT string_agg(DISTINCT m[1], ', ')
                          FROM regexp_matches(template, '\{(\w)\}', 'g') AS m))
           INTO ncols;
        IF ncols > 0 THEN
            RAISE WARNING 'template % gives one key to different rows', template;
            collisions := collisions + ncols;
        END IF;
        rows_checked := rows_checked + 200;
        DROP TABLE sample;
    END LOOP;
    RAISE NOTICE 'templates accepted: %, refused: %, rows checked: %, shared keys: %',
        accepted > 20, refused > 20, rows_checked >= 4000, collisions;
END
$$;
DROP FUNCTION pg_temp.random_value(text);

-- fence_lock_key is the key the guard checks -----------------------------------

CREATE TABLE inv (id int PRIMARY KEY, owner text, body text, fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('inv', lock_key => 'inv:{id}:{owner}');
INSERT INTO inv VALUES (7, 'x', 'a', 0);
SELECT fence_lock_key('inv', i) FROM inv AS i;
BEGIN;
SET LOCAL pg_fence.proof = :'k7_910';
UPDATE inv SET body = 'b', fence = 910 WHERE id = 7;
COMMIT;
SELECT * FROM inv;
-- refused: a row of another table (42804), a table that does not verify
-- (55000), NULL
SELECT fence_lock_key('inv', ROW(1, 2, 3, 't', 'v', NULL, 0)::keyed);
\echo SQLSTATE :SQLSTATE
CREATE TABLE plain (id int, fence bigint NOT NULL DEFAULT 0);
SELECT fence_protect('plain');
SELECT fence_lock_key('plain', ROW(1, 0)::plain);
\echo SQLSTATE :SQLSTATE
SELECT fence_lock_key('inv', NULL::inv);
SELECT fence_lock_key('inv', (8, NULL, 'b', 0)::inv);
\echo SQLSTATE :SQLSTATE

-- A proof is scoped by its lock key only -------------------------------------

-- two tables with the template 'job:{id}' accept the same proof
CREATE TABLE jobs_a (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0);
CREATE TABLE jobs_b (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0);
INSERT INTO jobs_a VALUES (5, 0);
INSERT INTO jobs_b VALUES (5, 0);
SELECT fence_protect('jobs_a', lock_key => 'job:{id}');
SELECT fence_protect('jobs_b', lock_key => 'job:{id}');
BEGIN;
SET LOCAL pg_fence.proof = :'job_920';
UPDATE jobs_a SET fence = 920 WHERE id = 5;
UPDATE jobs_b SET fence = 920 WHERE id = 5;
COMMIT;
-- and so does a resource named like the key
SELECT fence_require_proof('job:5');
SELECT fence_advance('job:5', 920, :'job_920');
SELECT (SELECT fence FROM jobs_a) AS a, (SELECT fence FROM jobs_b) AS b,
       fence_current('job:5') AS resource;

-- Lock keys in other database encodings ----------------------------------------

SELECT convert_to('驩', 'UTF8') = '\xe9a9a9'::bytea AS utf8_bytes;
CREATE DATABASE regress_fence_latin1 ENCODING 'LATIN1' LOCALE 'C' TEMPLATE template0;
CREATE DATABASE regress_fence_sql_ascii ENCODING 'SQL_ASCII' LOCALE 'C' TEMPLATE template0;

\c regress_fence_latin1
SET client_encoding = 'UTF8';
SET client_min_messages = warning;
CREATE EXTENSION pg_fence;
RESET client_min_messages;
SELECT fence_trust_key(:'pub') AS kid;
-- 'é©©' is stored as the LATIN1 bytes e9 a9 a9, the UTF-8 of '驩' (above)
SELECT convert_to('é©©', 'LATIN1') = '\xe9a9a9'::bytea AS same_bytes;
SELECT fence_require_proof('é©©');
-- a proof for '驩' does not verify for 'é©©' (55F02) ...
SELECT fence_advance('é©©', 940, :'cjk_940');
\echo SQLSTATE :SQLSTATE
-- ... the proof for 'é©©' does
SELECT fence_advance('é©©', 930, :'latin_930');
SELECT resource, fence FROM fence_resources;
-- rows too: the key is converted from the database's encoding
CREATE TABLE names (name text PRIMARY KEY, fence bigint NOT NULL DEFAULT 0);
INSERT INTO names VALUES ('é©©', 0);
SELECT fence_protect('names', lock_key => '{name}');
BEGIN;
SET LOCAL pg_fence.proof = :'cjk_940';
UPDATE names SET fence = 940;
\echo SQLSTATE :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL pg_fence.proof = :'latin_930';
UPDATE names SET fence = 930;
COMMIT;
SELECT * FROM names;

\c regress_fence_sql_ascii
SET client_min_messages = warning;
CREATE EXTENSION pg_fence;
RESET client_min_messages;
SELECT fence_trust_key(:'pub') AS kid;
-- SQL_ASCII does not say which characters a byte above 127 is: refused
SELECT fence_require_proof('é');
SELECT fence_advance('é', 950, :'e_950');
\echo SQLSTATE :SQLSTATE
-- with pg_fence.preempt the key is refused before preempting: recorded for
-- the resource and fence_advance, as without
SET pg_fence.preempt = on;
SELECT fence_advance('é', 950, :'e_950');
\echo SQLSTATE :SQLSTATE
RESET pg_fence.preempt;
SELECT relation, resource, lock_key, token, path, reason, sqlstate FROM fence_rejections;
-- ASCII keys are the same bytes in every encoding: verified
SELECT fence_require_proof('job:ascii');
SELECT fence_advance('job:ascii', 960, :'ascii_960');

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE regress_fence_latin1;
DROP DATABASE regress_fence_sql_ascii;
DROP TABLE keyed, inv, plain, jobs_a, jobs_b;
SELECT fence_require_proof('job:5', false);
DELETE FROM fence_resources WHERE resource = 'job:5';
DELETE FROM fence_trusted_keys;
RESET client_min_messages;
