-- schema: the extension works when installed in another schema that is not
-- on search_path (it finds its own objects through its functions' schema).
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_fence CASCADE;
CREATE SCHEMA fencing;
CREATE EXTENSION pg_fence SCHEMA fencing;
RESET client_min_messages;

SELECT pg_describe_object(classid, objid, 0) AS object
  FROM pg_depend
 WHERE refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_fence')
   AND deptype = 'e' AND classid = 'pg_class'::regclass
 ORDER BY 1;

SELECT fencing.fence_stats_reset();
CREATE TABLE sc (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO sc VALUES (1, 'a');
SELECT fencing.fence_protect('sc');
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = 'sc'::regclass;
UPDATE sc SET body = 'b', fence = 2 WHERE id = 1;
UPDATE sc SET body = 'c', fence = 1 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT fencing.fenced_update('sc', '{"id": 1}', '{"body": "d"}', 3);
SELECT fencing.fence_advance('sc:res', 5), fencing.fence_admit('sc:res', 5);
SELECT fencing.fence_current('sc:res');
SELECT resource, fence FROM fencing.fence_resources;
SELECT kind, relation, resource, accepted, rejected_stale FROM fencing.fence_stats
 ORDER BY kind;
SELECT fencing.fence_unprotect('sc');
SELECT * FROM sc;

-- back to the default schema for the other tests
SET client_min_messages = warning;
DROP TABLE sc;
DROP EXTENSION pg_fence CASCADE;
DROP SCHEMA fencing;
CREATE EXTENSION pg_fence;
RESET client_min_messages;
