-- install: the extension installs cleanly; its objects, comments, privileges
-- and settings are what docs/sql.md says.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pg_fence CASCADE;
CREATE EXTENSION pg_fence;
RESET client_min_messages;

SELECT extversion, extrelocatable FROM pg_extension WHERE extname = 'pg_fence';

-- every object that belongs to the extension (but the row types of its
-- tables and views and the array types, which follow from them: PostgreSQL
-- 17 and later record those as members too, 15 does not)
SELECT pg_describe_object(classid, objid, 0) AS object
  FROM pg_depend d
 WHERE refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_fence')
   AND deptype = 'e'
   AND NOT EXISTS (SELECT FROM pg_type t
                    WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
                      AND (t.typrelid <> 0 OR t.typcategory = 'A'))
 ORDER BY 1;

-- every function has a COMMENT, none is SECURITY DEFINER
SELECT p.oid::regprocedure AS function, p.prosecdef AS security_definer,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_fence')
   AND d.deptype = 'e'
 ORDER BY 1::text;

-- fence_resources is a configuration table: pg_dump keeps its rows
SELECT extconfig::regclass[] AS config_tables, extcondition
  FROM pg_extension WHERE extname = 'pg_fence';

-- anyone may read fence_stats; only superusers may reset it
SELECT has_table_privilege('public', 'fence_stats', 'SELECT') AS public_reads_stats,
       has_function_privilege('public', 'fence_stats_reset()', 'EXECUTE') AS public_resets_stats,
       has_function_privilege('public', 'fenced_update(regclass,jsonb,jsonb,bigint,name,text)',
                              'EXECUTE') AS public_calls_fenced_update;

-- anyone may read the trusted keys; only superusers may change them or
-- which resources need proofs
SELECT has_table_privilege('public', 'fence_trusted_keys', 'SELECT') AS public_reads_keys,
       has_table_privilege('public', 'fence_trusted_keys',
                           'INSERT, UPDATE, DELETE, TRUNCATE') AS public_writes_keys,
       has_function_privilege('public', 'fence_trust_key(text,numeric)', 'EXECUTE') AS public_trusts,
       has_function_privilege('public', 'fence_distrust_key(text)', 'EXECUTE') AS public_distrusts,
       has_function_privilege('public', 'fence_require_proof(text,boolean)',
                              'EXECUTE') AS public_requires_proof;

-- the settings and their defaults (boot_val: the server's own setting may differ)
SELECT name, boot_val, context, vartype, min_val, max_val
  FROM pg_settings WHERE name LIKE 'pg_fence.%' ORDER BY name;

-- the outcome type
SELECT enum_range(NULL::fence_outcome);
