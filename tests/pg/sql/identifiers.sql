-- identifiers: schema, table and column names that need quoting work in
-- fence_protect, the guard and fenced_update, under any search_path.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;

CREATE SCHEMA "My Schema";
CREATE TABLE "My Schema"."Report Table" (
  "Report ID" int PRIMARY KEY,
  "Body ""quoted""" text,
  "Fence Col" bigint NOT NULL DEFAULT 0);
INSERT INTO "My Schema"."Report Table" VALUES (7, 'v0');

SELECT fence_protect('"My Schema"."Report Table"', 'Fence Col');
SELECT pg_get_triggerdef(oid) FROM pg_trigger
 WHERE tgrelid = '"My Schema"."Report Table"'::regclass;

UPDATE "My Schema"."Report Table" SET "Body ""quoted""" = 'v1', "Fence Col" = 5;
UPDATE "My Schema"."Report Table" SET "Body ""quoted""" = 'late', "Fence Col" = 4;
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('"My Schema"."Report Table"', '{"Report ID": 7}',
                     '{"Body \"quoted\"": "v2"}', 6, 'Fence Col');
SELECT fenced_update('"My Schema"."Report Table"', '{"Report ID": 7}',
                     '{"Body \"quoted\"": "late"}', 6, 'Fence Col');
-- JSON keys are exact column names: no case folding, no quoting
SELECT fenced_update('"My Schema"."Report Table"', '{"report id": 7}',
                     '{"Body \"quoted\"": "x"}', 7, 'Fence Col');
\echo SQLSTATE :SQLSTATE
SELECT * FROM "My Schema"."Report Table";

-- mixed case names
CREATE TABLE "MixedCase" ("Id" int PRIMARY KEY, "Fence" bigint NOT NULL DEFAULT 0, "Val" text);
INSERT INTO "MixedCase" VALUES (1, 0, 'a');
SELECT fence_protect('"MixedCase"', 'Fence');
SELECT fence_protect('"MixedCase"');
\echo SQLSTATE :SQLSTATE
SELECT fenced_update('"MixedCase"', '{"Id": 1}', '{"Val": "b"}', 3, 'Fence');
UPDATE "MixedCase" SET "Val" = 'c', "Fence" = 2;
\echo SQLSTATE :SQLSTATE
SELECT * FROM "MixedCase";

-- names that would be SQL if pasted unquoted are only names
CREATE TABLE victim (id int);
CREATE TABLE "x; DROP TABLE victim; --" ("id); DROP TABLE victim; --" int PRIMARY KEY,
                                         "v'al" text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO "x; DROP TABLE victim; --" VALUES (1, 'a');
SELECT fence_protect('"x; DROP TABLE victim; --"');
SELECT fenced_update('"x; DROP TABLE victim; --"', '{"id); DROP TABLE victim; --": 1}',
                     '{"v''al": "b''; DROP TABLE victim; --"}', 1);
SELECT * FROM "x; DROP TABLE victim; --";
SELECT to_regclass('victim') IS NOT NULL AS victim_still_there;

-- the generated SQL does not depend on search_path (tables, operators)
SET search_path = pg_catalog;
SELECT public.fenced_update('"My Schema"."Report Table"', '{"Report ID": 7}',
                            '{"Body \"quoted\"": "v3"}', 8, 'Fence Col');
SELECT public.fence_protect('"My Schema"."Report Table"', 'Fence Col', 'same_generation');
-- (same_generation now: the equal token 8 is admitted)
UPDATE "My Schema"."Report Table" SET "Fence Col" = 8;
RESET search_path;
SELECT * FROM "My Schema"."Report Table";
-- an operator "=" planted in a schema searched before pg_catalog is not
-- used: with it, the key would match every row
CREATE TABLE trap_target (id int, val text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO trap_target VALUES (1, 'a'), (2, 'b');
CREATE SCHEMA trap;
CREATE FUNCTION trap.always_true(int, int) RETURNS boolean LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR trap.= (LEFTARG = int, RIGHTARG = int, FUNCTION = trap.always_true);
SET search_path = trap, pg_catalog, public;
SELECT count(*) AS rows_equal_to_1_under_trap FROM trap_target WHERE id = 1;
SELECT fenced_update('trap_target', '{"id": 1}', '{"val": "a1"}', 10);
RESET search_path;
SELECT * FROM trap_target ORDER BY id;

DROP SCHEMA "My Schema" CASCADE;
DROP SCHEMA trap CASCADE;
DROP TABLE "MixedCase", "x; DROP TABLE victim; --", victim, trap_target;
