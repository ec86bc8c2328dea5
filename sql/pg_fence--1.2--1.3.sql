/* pg_fence--1.2--1.3.sql: the lock key of a row; unambiguous templates;
   sequenced fences (several ordered writes per token) */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pg_fence UPDATE TO '1.3'" to load this file. \quit

CREATE FUNCTION fence_lock_key(rel regclass, "row" anyelement)
RETURNS text
AS 'MODULE_PATHNAME', 'fence_lock_key'
LANGUAGE C STABLE;
COMMENT ON FUNCTION fence_lock_key(regclass, anyelement) IS
'The lock key a row of a verifying table is locked under (the coordinator lock whose proof its writes need), from the table''s lock key template';

-- From 1.3 on fence_protect refuses a lock key template under which two
-- different rows could have the same key.  Tables protected before keep
-- their template (refusing their writes now would stop them); warn about
-- each, so that its owner protects it again with an unambiguous one.
CREATE FUNCTION fence_lock_key_problem(rel regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'fence_lock_key_problem'
LANGUAGE C STRICT;

DO $$
DECLARE
    guarded regclass;
    problem text;
BEGIN
    FOR guarded IN
        SELECT tgrelid::regclass FROM pg_catalog.pg_trigger
         WHERE tgname = 'zzz_fence_guard' AND tgnargs >= 3 AND tgparentid = 0
         ORDER BY tgrelid
    LOOP
        BEGIN
            problem := fence_lock_key_problem(guarded);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_fence: the lock key template of table % cannot be used: %',
                guarded, SQLERRM
                USING HINT = 'Every write of the table fails until it is protected again '
                             'with a template that names its columns.';
            CONTINUE;
        END;
        IF problem IS NOT NULL THEN
            RAISE WARNING 'pg_fence: the lock key template of table % is ambiguous', guarded
                USING DETAIL = problem,
                      HINT = 'Two different rows could need the same proof. Protect the table '
                             'again with a template whose columns are separated by a character '
                             'their text cannot contain, e.g. ''report:{a}:{b}''.';
        END IF;
    END LOOP;
END
$$;

DROP FUNCTION fence_lock_key_problem(regclass);

-- Sequenced fences ---------------------------------------------------------

-- Functions that gain a trailing parameter are replaced, not overloaded (a
-- call with the old arguments resolves to the new function through the
-- default); GRANTs made on the old one are dropped with it.  Those that
-- gain a sequence after the token get an overload: seq has no default, so
-- a call without one still resolves to the old function.

COMMENT ON FUNCTION fence_guard() IS
'Trigger (BEFORE UPDATE OR DELETE, FOR EACH ROW; args: fence column, mode; with a third, a lock key template: BEFORE INSERT OR UPDATE OR DELETE, and token proofs are checked; mode sequenced: a fourth, the sequence column, and the template may be empty) that raises 55F01 for a stale token (or (token, sequence) pair) and 55F02 for a refused proof; installed by fence_protect';

DROP FUNCTION fence_protect(regclass, name, text, text);
CREATE FUNCTION fence_protect(rel regclass,
                              fence_column name DEFAULT 'fence',
                              mode text DEFAULT 'strict',
                              lock_key text DEFAULT NULL,
                              seq_column name DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'fence_protect'
LANGUAGE C;
COMMENT ON FUNCTION fence_protect(regclass, name, text, text, name) IS
'Validates the fence column (bigint NOT NULL) and installs or replaces the zzz_fence_guard trigger; mode is strict, same_generation or sequenced (with the sequence column seq_column, default fence_seq, bigint NOT NULL); lock_key (e.g. ''report:{report_id}'') makes the table verify token proofs, NULL turns verification off';

CREATE FUNCTION fenced_update(rel regclass,
                              key jsonb,
                              changes jsonb,
                              token bigint,
                              seq bigint,
                              fence_column name DEFAULT 'fence',
                              seq_column name DEFAULT 'fence_seq',
                              proof text DEFAULT NULL)
RETURNS fence_outcome
AS 'MODULE_PATHNAME', 'fenced_update_seq'
LANGUAGE C;
COMMENT ON FUNCTION fenced_update(regclass, jsonb, jsonb, bigint, bigint, name, name, text) IS
'One conditional UPDATE: sets changes, fence = token and seq_column = seq on the row matching key if (fence, seq_column) < (token, seq); returns applied, stale or not_found (stale is returned, counted and logged, not raised); on a table that verifies proofs, proof (else pg_fence.proof) must verify, or 55F02 is raised';

ALTER TABLE fence_resources
    ADD COLUMN seq bigint CHECK (seq >= 0);
COMMENT ON COLUMN fence_resources.seq IS
'Sequence number stored with the fence by fence_admit/fence_advance(resource, token, seq); NULL when the fence was stored without one (it then ranks below every sequence number of its token)';

COMMENT ON FUNCTION fence_resources_guard() IS
'Trigger (BEFORE UPDATE OR DELETE ON fence_resources, FOR EACH ROW): unless pg_fence''s own functions write, raises 42501 for an UPDATE that changes require_proof, an UPDATE of a require_proof row that changes its fence, seq or resource, and a DELETE of a require_proof row';

CREATE FUNCTION fence_advance(resource text, token bigint, seq bigint, proof text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'fence_advance_seq'
LANGUAGE C;
COMMENT ON FUNCTION fence_advance(text, bigint, bigint, text) IS
'Publishes (token, seq) as the resource''s fence if it is after the stored one (a newer token, or the same token with a greater seq); true if stored, false (counted and logged) otherwise, also for the pair already stored; locks the resource row until the transaction ends; raises 55F02 if the resource requires proofs and proof (else pg_fence.proof) is refused';

CREATE FUNCTION fence_admit(resource text, token bigint, seq bigint, proof text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'fence_admit_seq'
LANGUAGE C;
COMMENT ON FUNCTION fence_admit(text, bigint, bigint, text) IS
'Admits the transaction under (token, seq): locks the resource row until commit, stores the pair if it is after the stored one (a newer token, or the same token with a greater seq), raises 55F01 otherwise (also for the pair already stored), 55F02 if the resource requires proofs and proof (else pg_fence.proof) is refused';

CREATE FUNCTION fence_current_seq(resource text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fence_current_seq'
LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION fence_current_seq(text) IS
'The sequence number stored with the resource''s fence, or NULL if the resource is unknown or its fence was stored without one';
