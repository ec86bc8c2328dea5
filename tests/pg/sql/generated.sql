-- generated: a generated column can be neither the fence column nor a lock
-- key placeholder, whatever its kind: STORED (every major) and VIRTUAL (the
-- default kind from PostgreSQL 18 on; before 18 this test makes the same
-- columns STORED, so its output is the same on every major). A BEFORE
-- trigger sees neither kind's value.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_fence;
RESET client_min_messages;
CREATE TABLE gen (id int PRIMARY KEY, body text, fence bigint NOT NULL DEFAULT 0);
DO $$
DECLARE
  kind text := CASE WHEN current_setting('server_version_num')::int >= 180000
                    THEN 'VIRTUAL' ELSE 'STORED' END;
BEGIN
  EXECUTE format('ALTER TABLE gen ADD COLUMN g_fence bigint GENERATED ALWAYS AS (id * 2) %s', kind);
  EXECUTE format('ALTER TABLE gen ADD COLUMN g_key text GENERATED ALWAYS AS (''k'' || id) %s', kind);
END $$;
-- the kind each column got: v from 18 on, s before
SELECT attname, attgenerated = CASE WHEN current_setting('server_version_num')::int >= 180000
                                    THEN 'v' ELSE 's' END AS expected_kind
  FROM pg_attribute WHERE attrelid = 'gen'::regclass AND attgenerated <> '' ORDER BY attnum;
\set VERBOSITY default
SELECT fence_protect('gen', fence_column => 'g_fence');
SELECT fence_protect('gen', lock_key => 'gen:{g_key}');
-- a lock key over the columns it is generated from is fine
SELECT fence_protect('gen', lock_key => 'gen:{id}');
SELECT fence_unprotect('gen');
DROP TABLE gen;
