-- stats_flood: a role with only the documented fence_resources grants fills
-- fence_stats with junk resources, ten times the resources' share of quiet
-- ones (they only advanced), then a full share of ones that rejected
-- something.  A table's stale rejection is still counted in its own row
-- (relations have their own share, pg_fence.max_tracked); a real
-- resource's stale rejection, with no room left, is counted in the row of
-- kind 'dropped'; fence_stats_dropped() says how many entries were evicted.
-- Holds for any setting (scripts/pg-test.sh runs with 16 of each).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
DROP ROLE IF EXISTS regress_fence_flood;
RESET client_min_messages;
CREATE ROLE regress_fence_flood;
GRANT SELECT, INSERT, UPDATE ON fence_resources TO regress_fence_flood;
SELECT current_setting('pg_fence.max_tracked_resources')::int AS max_resources \gset

CREATE TABLE flood_t (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
INSERT INTO flood_t VALUES (1, 'v0');
SELECT fence_protect('flood_t');
SELECT fence_stats_reset();
SELECT fence_advance('flood:real', 5);

-- the flood
SET ROLE regress_fence_flood;
SELECT count(*) FILTER (WHERE fence_advance('junk:' || i, 1)) = 10 * :max_resources AS quiet_junk
  FROM generate_series(1, 10 * :max_resources) AS i;
SELECT count(*) FILTER (WHERE fence_advance('junk:r:' || i, 2) AND NOT fence_advance('junk:r:' || i, 1))
       = :max_resources AS rejecting_junk
  FROM generate_series(1, :max_resources) AS i;
RESET ROLE;
SELECT count(*) = :max_resources AS share_full_of_rejecting_junk
  FROM fence_stats WHERE kind = 'resource' AND resource LIKE 'junk:r:%' AND rejected_stale = 1;

-- a table's stale rejection is counted in its row
UPDATE flood_t SET body = 'v1', fence = 10 WHERE id = 1;
UPDATE flood_t SET body = 'stale', fence = 9 WHERE id = 1;
\echo SQLSTATE :SQLSTATE
SELECT kind, relation, accepted, rejected_stale, last_accepted_token, last_rejected_token
  FROM fence_stats WHERE kind = 'relation';

-- a real resource's stale rejection finds no room: the dropped row counts it
SELECT fence_advance('flood:real', 4);
SELECT kind, relation, resource, rejected_stale, rejected_proof, last_rejected_token,
       accepted = 10 * :max_resources + 1 AS accepted_of_every_evicted_entry
  FROM fence_stats WHERE kind = 'dropped';
SELECT kind, evicted = accepted AS one_accept_each,
       evicted = CASE kind WHEN 'resource' THEN 10 * :max_resources + 1 ELSE 0 END
         AS evicted_every_quiet_entry,
       rejected_stale, rejected_proof
  FROM fence_stats_dropped() ORDER BY kind;

-- a reset empties the dropped counters too
SELECT fence_stats_reset();
SELECT count(*) AS rows_after_reset FROM fence_stats;
SELECT * FROM fence_stats_dropped() ORDER BY kind;

DROP TABLE flood_t;
DELETE FROM fence_resources;
REVOKE ALL ON fence_resources FROM regress_fence_flood;
DROP ROLE regress_fence_flood;
