/* pg_fence--1.2--1.3.sql: the lock key of a row; unambiguous templates */

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
