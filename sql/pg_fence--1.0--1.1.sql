/* pg_fence--1.0--1.1.sql: verifiable tokens (token proofs signed by the coordinator) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_fence UPDATE TO '1.1'" to load this file. \quit

-- Functions that gain a parameter are replaced, not overloaded: a call
-- with the old arguments then resolves to the new function, through the
-- new parameter's default.  GRANTs made on the old functions are dropped
-- with them.

-- Row fences -------------------------------------------------------------

COMMENT ON FUNCTION fence_guard() IS
'Trigger (BEFORE UPDATE OR DELETE, FOR EACH ROW; args: fence column, mode; with a third, a lock key template: BEFORE INSERT OR UPDATE OR DELETE, and token proofs are checked) that raises 55F01 for a stale token and 55F02 for a refused proof; installed by fence_protect';

DROP FUNCTION fence_protect(regclass, name, text);
CREATE FUNCTION fence_protect(rel regclass,
                              fence_column name DEFAULT 'fence',
                              mode text DEFAULT 'strict',
                              lock_key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'fence_protect'
LANGUAGE C;
COMMENT ON FUNCTION fence_protect(regclass, name, text, text) IS
'Validates the fence column (bigint NOT NULL) and installs or replaces the zzz_fence_guard trigger; mode is strict or same_generation; lock_key (e.g. ''report:{report_id}'') makes the table verify token proofs, NULL turns verification off';

DROP FUNCTION fenced_update(regclass, jsonb, jsonb, bigint, name);
CREATE FUNCTION fenced_update(rel regclass,
                              key jsonb,
                              changes jsonb,
                              token bigint,
                              fence_column name DEFAULT 'fence',
                              proof text DEFAULT NULL)
RETURNS fence_outcome
AS 'MODULE_PATHNAME', 'fenced_update'
LANGUAGE C;
COMMENT ON FUNCTION fenced_update(regclass, jsonb, jsonb, bigint, name, text) IS
'One conditional UPDATE: sets changes and fence = token on the row matching key if its fence < token; returns applied, stale or not_found (stale is returned, counted and logged, not raised); on a table that verifies proofs, proof (else pg_fence.proof) must verify, or 55F02 is raised';

-- Trusted keys -------------------------------------------------------------

CREATE TABLE fence_trusted_keys (
    key_id     text PRIMARY KEY,
    public_key text NOT NULL,
    cluster_id numeric(20,0) NULL
               CHECK (cluster_id BETWEEN 1 AND 18446744073709551615),
    trusted_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE fence_trusted_keys IS
'Ed25519 public keys (PEM) whose token proofs pg_fence accepts, by key id; a cluster_id binds a key to that cluster''s proofs; written by fence_trust_key and fence_distrust_key';
-- Trust is configuration: pg_dump must keep it.
SELECT pg_catalog.pg_extension_config_dump('fence_trusted_keys', '');
-- Public keys are not secret, and verification reads them as the caller.
REVOKE ALL ON fence_trusted_keys FROM PUBLIC;
GRANT SELECT ON fence_trusted_keys TO PUBLIC;

CREATE FUNCTION fence_trusted_keys_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_trusted_keys_changed'
LANGUAGE C;
COMMENT ON FUNCTION fence_trusted_keys_changed() IS
'Statement trigger on fence_trusted_keys: tells every backend to drop its cache of trusted keys and verified proofs';

CREATE TRIGGER fence_trusted_keys_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON fence_trusted_keys
FOR EACH STATEMENT EXECUTE FUNCTION fence_trusted_keys_changed();

CREATE FUNCTION fence_trust_key(public_key text, cluster_id numeric DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'fence_trust_key'
LANGUAGE C;
COMMENT ON FUNCTION fence_trust_key(text, numeric) IS
'Trusts an Ed25519 public key (PEM, as openssl pkey -pubout writes it) for token proofs, only from cluster_id if given; trusting a key again replaces its cluster binding; returns the key id; superuser only unless granted';
REVOKE ALL ON FUNCTION fence_trust_key(text, numeric) FROM PUBLIC;

CREATE FUNCTION fence_distrust_key(key_id text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'fence_distrust_key'
LANGUAGE C;
COMMENT ON FUNCTION fence_distrust_key(text) IS
'Stops trusting the key with this key id; true if a trusted key was removed; superuser only unless granted';
REVOKE ALL ON FUNCTION fence_distrust_key(text) FROM PUBLIC;

-- Resource fences ----------------------------------------------------------

ALTER TABLE fence_resources
    ADD COLUMN require_proof boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN fence_resources.require_proof IS
'fence_admit and fence_advance need a token proof for (resource, token); set by fence_require_proof';

-- The application role may write fence_resources (the resource functions
-- run as the caller); this trigger keeps it from undoing require_proof.
CREATE FUNCTION fence_resources_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'fence_resources_guard'
LANGUAGE C;
COMMENT ON FUNCTION fence_resources_guard() IS
'Trigger (BEFORE UPDATE OR DELETE ON fence_resources, FOR EACH ROW): unless pg_fence''s own functions write, raises 42501 for an UPDATE that changes require_proof, an UPDATE of a require_proof row that changes its fence or resource, and a DELETE of a require_proof row';

CREATE TRIGGER fence_resources_guard
BEFORE UPDATE OR DELETE ON fence_resources
FOR EACH ROW EXECUTE FUNCTION fence_resources_guard();

DROP FUNCTION fence_advance(text, bigint);
CREATE FUNCTION fence_advance(resource text, token bigint, proof text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'fence_advance'
LANGUAGE C;
COMMENT ON FUNCTION fence_advance(text, bigint, text) IS
'Publishes token as the resource''s fence if it is newer; true if the fence is now token, false (counted and logged) if a newer token is already stored; locks the resource row until the transaction ends; raises 55F02 if the resource requires proofs and proof (else pg_fence.proof) is refused';

DROP FUNCTION fence_admit(text, bigint);
CREATE FUNCTION fence_admit(resource text, token bigint, proof text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'fence_admit'
LANGUAGE C;
COMMENT ON FUNCTION fence_admit(text, bigint, text) IS
'Admits the transaction under token: locks the resource row until commit, advances the fence if token is newer, raises 55F01 if the stored fence is newer than token, 55F02 if the resource requires proofs and proof (else pg_fence.proof) is refused';

CREATE FUNCTION fence_require_proof(resource text, required boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'fence_require_proof'
LANGUAGE C;
COMMENT ON FUNCTION fence_require_proof(text, boolean) IS
'Whether fence_admit and fence_advance need a token proof for the resource (issued for the resource name); creates the resource with fence 0 if it has none; superuser only unless granted';
REVOKE ALL ON FUNCTION fence_require_proof(text, boolean) FROM PUBLIC;

-- Statistics ---------------------------------------------------------------

DROP VIEW fence_stats;
DROP FUNCTION fence_stats_entries();
CREATE FUNCTION fence_stats_entries(
    OUT dbid oid,
    OUT relid oid,
    OUT resource text,
    OUT accepted bigint,
    OUT rejected_stale bigint,
    OUT last_accepted_token bigint,
    OUT last_rejected_token bigint,
    OUT last_rejected_at timestamptz,
    OUT rejected_proof bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'fence_stats_entries'
LANGUAGE C;
COMMENT ON FUNCTION fence_stats_entries() IS
'Raw shared-memory counters of the current database (needs shared_preload_libraries = pg_fence); use the fence_stats view';

CREATE VIEW fence_stats AS
SELECT CASE WHEN s.relid IS NOT NULL THEN 'relation' ELSE 'resource' END AS kind,
       s.relid::regclass AS relation,
       s.resource,
       s.accepted,
       s.rejected_stale,
       s.rejected_proof,
       s.last_accepted_token,
       s.last_rejected_token,
       s.last_rejected_at
  FROM fence_stats_entries() AS s
 WHERE s.dbid = (SELECT d.oid FROM pg_catalog.pg_database AS d
                  WHERE d.datname = pg_catalog.current_database());
COMMENT ON VIEW fence_stats IS
'Accepted writes, stale-rejected writes and refused token proofs per relation and resource of the current database, since server start or fence_stats_reset()';
GRANT SELECT ON fence_stats TO PUBLIC;
