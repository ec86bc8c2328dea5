/* pg_fence--1.4--1.5.sql: preemption (fence_preempt_stats) and the fenced
   outbox (fence_enqueue, the table fence_outbox, the view fence_outbox_backlog,
   fence_outbox_retry and fence_outbox_purge); see each section's header */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_fence UPDATE TO '1.5'" to load this file. \quit

-- preemption
-- pg_fence.preempt (a setting, no SQL object) ends the open transactions
-- that admitted an older token for a target a newer token reaches;
-- fence_preempt_stats() counts what it did, all databases together.
CREATE FUNCTION fence_preempt_stats(
    OUT preempted bigint,
    OUT cancelled bigint,
    OUT terminated bigint,
    OUT denied bigint,
    OUT unregistered bigint,
    OUT inflight integer,
    OUT refused_in_flight bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'fence_preempt_stats'
LANGUAGE C;
COMMENT ON FUNCTION fence_preempt_stats() IS
'Preemptions by pg_fence.preempt, all databases together, since server start or fence_stats_reset(): transactions preempted (marked so they cannot commit), cancelled, terminated, denied a signal by the signal rules; admissions the full registry could not take; admissions registered now; admissions refused because another open transaction admitted a newer token for the target (needs shared_preload_libraries = pg_fence)';

-- outbox
-- Side effects recorded under a fencing token in the transaction of the
-- fenced write, delivered by a relay (fence-relay) to an HTTP endpoint with
-- an Idempotency-Key header.  An entry is pending until the relay marks it
-- delivered (after a 2xx), parked (another 4xx, or out of attempts) or
-- superseded (its token is older than its target's fence: a newer holder
-- owns the work).
CREATE TABLE fence_outbox (
    id bigserial PRIMARY KEY,
    target text NOT NULL CHECK (octet_length(target) BETWEEN 1 AND 512),
    token bigint NOT NULL CHECK (token >= 0),
    operation_id text NOT NULL CHECK (octet_length(operation_id) BETWEEN 1 AND 256),
    idempotency_key text COLLATE "C" NOT NULL UNIQUE,
    endpoint text NOT NULL CHECK (octet_length(endpoint) <= 2048),
    payload jsonb NOT NULL,
    state text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'delivered', 'parked', 'superseded')),
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status integer,
    last_error text CHECK (octet_length(last_error) <= 1024),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz
);
COMMENT ON TABLE fence_outbox IS
'Side effects enqueued by fence_enqueue under a fencing token, delivered by fence-relay';
-- the relay's claim: due pending entries, oldest due first
CREATE INDEX fence_outbox_due ON fence_outbox (next_attempt_at, id) WHERE state = 'pending';
-- a restored database must still deliver what it had not delivered, and
-- keep the keys of what it had
SELECT pg_catalog.pg_extension_config_dump('fence_outbox', '');
SELECT pg_catalog.pg_extension_config_dump('fence_outbox_id_seq', '');
REVOKE ALL ON fence_outbox FROM PUBLIC;
REVOKE ALL ON SEQUENCE fence_outbox_id_seq FROM PUBLIC;

CREATE FUNCTION fence_enqueue(target text, token bigint, operation_id text,
                              endpoint text, payload jsonb, proof text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'fence_enqueue'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION fence_enqueue(text, bigint, text, text, jsonb, text) IS
'Admits token at target''s fence as fence_admit does (55F01 if stale) and records an HTTP POST of payload to endpoint in fence_outbox; returns its idempotency key';

CREATE FUNCTION fence_outbox_key(target text, token bigint, operation_id text)
RETURNS text
AS 'MODULE_PATHNAME', 'fence_outbox_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION fence_outbox_key(text, bigint, text) IS
'The idempotency key fence_enqueue gives (target, token, operation_id)';

CREATE VIEW fence_outbox_backlog AS
SELECT s.state,
       pg_catalog.count(o.id) AS entries,
       pg_catalog.count(o.id) FILTER (WHERE o.attempts > 0) AS retried,
       pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.min(o.created_at) AS oldest_age,
       pg_catalog.min(o.next_attempt_at) AS next_attempt_at
  FROM pg_catalog.unnest(ARRAY['pending', 'parked', 'delivered', 'superseded'])
       WITH ORDINALITY AS s(state, ord)
  LEFT JOIN fence_outbox AS o ON o.state OPERATOR(pg_catalog.=) s.state
 GROUP BY s.state, s.ord
 ORDER BY s.ord;
COMMENT ON VIEW fence_outbox_backlog IS
'fence_outbox per state: entries, entries retried at least once, age of the oldest, earliest next attempt';
REVOKE ALL ON fence_outbox_backlog FROM PUBLIC;

CREATE FUNCTION fence_outbox_retry(entry_id bigint)
RETURNS boolean
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
WITH retried AS (
  UPDATE @extschema@.fence_outbox
     SET state = 'pending', attempts = 0, next_attempt_at = now(), updated_at = now()
   WHERE id = entry_id AND state = 'parked'
  RETURNING 1)
SELECT count(*) > 0 FROM retried
$$;
COMMENT ON FUNCTION fence_outbox_retry(bigint) IS
'Makes a parked fence_outbox entry pending again, due now, with its attempts reset; false if it is not parked';
REVOKE ALL ON FUNCTION fence_outbox_retry(bigint) FROM PUBLIC;

CREATE FUNCTION fence_outbox_purge(older_than interval)
RETURNS bigint
LANGUAGE sql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
WITH gone AS (
  DELETE FROM @extschema@.fence_outbox
   WHERE state IN ('delivered', 'superseded') AND updated_at < now() - older_than
  RETURNING 1)
SELECT count(*) FROM gone
$$;
COMMENT ON FUNCTION fence_outbox_purge(interval) IS
'Deletes delivered and superseded fence_outbox entries last changed more than older_than ago; how many';
REVOKE ALL ON FUNCTION fence_outbox_purge(interval) FROM PUBLIC;

-- The application role needs INSERT on fence_outbox (fence_enqueue runs as
-- the caller), the relay UPDATE; this trigger refuses a direct INSERT (one
-- that is not fence_enqueue's, unless by a superuser: a restore) and an
-- UPDATE of anything but an entry's delivery state.
CREATE FUNCTION fence_outbox_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_outbox_guard'
LANGUAGE C;
COMMENT ON FUNCTION fence_outbox_guard() IS
'Trigger (BEFORE INSERT OR UPDATE ON fence_outbox, FOR EACH ROW): raises 42501 for an INSERT not made by fence_enqueue (superusers excepted, for restores), and for an UPDATE that changes id, target, token, operation_id, idempotency_key, endpoint, payload or created_at';

CREATE TRIGGER fence_outbox_guard
BEFORE INSERT OR UPDATE ON fence_outbox
FOR EACH ROW EXECUTE FUNCTION fence_outbox_guard();
