/*
 * fenced_update_plan.c
 *	  Builds and caches the statements fenced_update() runs:
 *
 *	  UPDATE s.t SET c1 = $k+1, ..., fence = $n
 *	   WHERE k1 = $1 AND ... AND fence < $n
 *	  SELECT fence FROM s.t WHERE k1 = $1 AND ... LIMIT 2
 *
 * and, with a sequence ($m, 1.3), the lexicographic form
 *
 *	  UPDATE s.t SET c1 = $k+1, ..., fence = $n, seq = $m
 *	   WHERE k1 = $1 AND ... AND (fence < $n OR (fence = $n AND seq < $m))
 *	  SELECT fence, seq FROM s.t WHERE k1 = $1 AND ... LIMIT 2
 *
 * Identifiers are quoted, the table is schema-qualified and operators are
 * named with OPERATOR(schema.op), so the statements mean the same under
 * any search_path.  Plans are prepared with SPI_prepare and kept with
 * SPI_keepplan; PostgreSQL's plan cache replans them after DDL and when
 * row-level security depends on the current role.  Our own metadata (column
 * conversion, key uniqueness) is dropped on relcache invalidation.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_index.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "fenced_update.h"
#include "pg_fence.h"

static HTAB *plan_cache = NULL;
static MemoryContext plan_context = NULL;

/* Relation whose plan is being built, and whether it was invalidated meanwhile */
static Oid	building_relid = InvalidOid;
static bool building_invalidated = false;

/* Relcache callback: forget metadata of relid (InvalidOid: of everything) */
static void
InvalidatePlans(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	FuPlan	   *plan;

	if (!OidIsValid(relid) || relid == building_relid)
		building_invalidated = true;
	if (plan_cache == NULL)
		return;
	hash_seq_init(&status, plan_cache);
	while ((plan = hash_seq_search(&status)) != NULL)
		if (!OidIsValid(relid) || plan->key.relid == relid)
			plan->valid = false;
}

/* Create the session's cache and register the invalidation callback */
static void
CreatePlanCache(void)
{
	HASHCTL		ctl;

	plan_context = AllocSetContextCreate(CacheMemoryContext,
										 "pg_fence fenced_update plans",
										 ALLOCSET_SMALL_SIZES);
	ctl.keysize = sizeof(FuPlanKey);
	ctl.entrysize = sizeof(FuPlan);
	ctl.hcxt = plan_context;
	plan_cache = hash_create("pg_fence fenced_update plans", FU_MAX_CACHED_PLANS,
							 &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	CacheRegisterRelcacheCallback(InvalidatePlans, (Datum) 0);
}

/* Release what a cache entry owns (not the entry itself) */
static void
ReleasePlan(FuPlan *plan)
{
	if (plan->update != NULL)
		SPI_freeplan(plan->update);
	if (plan->probe != NULL)
		SPI_freeplan(plan->probe);
	if (plan->columns != NULL)
		pfree(plan->columns);
	plan->update = plan->probe = NULL;
	plan->columns = NULL;
}

/* Empty the cache (when it is full), except plans in use */
static void
FlushPlans(void)
{
	HASH_SEQ_STATUS status;
	FuPlan	   *plan;

	hash_seq_init(&status, plan_cache);
	while ((plan = hash_seq_search(&status)) != NULL)
	{
		if (plan->pincount > 0)
			continue;
		ReleasePlan(plan);
		hash_search(plan_cache, &plan->key, HASH_REMOVE, NULL);
	}
}

/* Does the key contain column attnum? */
static bool
KeyHasColumn(const FuPlanKey *key, AttrNumber attnum)
{
	for (int i = 0; i < key->nkeys; i++)
		if (key->attnums[i] == attnum)
			return true;
	return false;
}

/* Can the index (pg_index row) prove at most one row matches the key? */
static bool
IndexCoversKey(HeapTuple indextup, const FuPlanKey *key)
{
	Form_pg_index index = (Form_pg_index) GETSTRUCT(indextup);

	if (!index->indisunique || !index->indimmediate || !index->indisvalid)
		return false;
	if (!heap_attisnull(indextup, Anum_pg_index_indpred, NULL))
		return false;			/* partial index */
	for (int i = 0; i < index->indnkeyatts; i++)
		if (!KeyHasColumn(key, index->indkey.values[i]))
			return false;		/* also rejects expression columns (0) */
	return true;
}

/* Does an immediate, valid, non-partial unique index cover the key? */
static bool
KeyIsUnique(Relation rel, const FuPlanKey *key)
{
	List	   *indexes;
	ListCell   *lc;
	bool		unique = false;

	/* UPDATE without ONLY also reaches inheritance children */
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE &&
		rel->rd_rel->relhassubclass)
		return false;
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		HeapTuple	indextup = SearchSysCache1(INDEXRELID,
											   ObjectIdGetDatum(lfirst_oid(lc)));

		if (!HeapTupleIsValid(indextup))
			continue;
		unique = IndexCoversKey(indextup, key);
		ReleaseSysCache(indextup);
		if (unique)
			break;
	}
	list_free(indexes);
	return unique;
}

/* Append OPERATOR(schema.op) for the default equality operator of typid */
static void
AppendEqualityOperator(StringInfo sql, Oid typid)
{
	TypeCacheEntry *typentry = lookup_type_cache(typid, TYPECACHE_EQ_OPR);
	HeapTuple	optup;
	Form_pg_operator oper;

	if (!OidIsValid(typentry->eq_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("could not identify an equality operator for type %s",
						format_type_be(typid)),
				 errdetail("Columns named in the key of fenced_update are compared with =.")));
	optup = SearchSysCache1(OPEROID, ObjectIdGetDatum(typentry->eq_opr));
	if (!HeapTupleIsValid(optup))
		elog(ERROR, "cache lookup failed for operator %u", typentry->eq_opr);
	oper = (Form_pg_operator) GETSTRUCT(optup);
	appendStringInfo(sql, " OPERATOR(%s.%s) ",
					 quote_identifier(get_namespace_name(oper->oprnamespace)),
					 NameStr(oper->oprname));
	ReleaseSysCache(optup);
}

/* Append "k1 = $1 AND k2 = $2 ..." */
static void
AppendKeyCondition(StringInfo sql, Relation rel, const FuPlanKey *key)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);

	for (int i = 0; i < key->nkeys; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(tupdesc, key->attnums[i] - 1);

		if (i > 0)
			appendStringInfoString(sql, " AND ");
		appendStringInfoString(sql, quote_identifier(NameStr(attr->attname)));
		AppendEqualityOperator(sql, attr->atttypid);
		appendStringInfo(sql, "$%d", i + 1);
	}
}

/* The quoted name of column attnum */
static const char *
QuotedColumn(Relation rel, AttrNumber attnum)
{
	return quote_identifier(NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname));
}

/* SQL of the conditional UPDATE */
static char *
BuildUpdateSql(Relation rel, const FuPlanKey *key)
{
	const char *fence = QuotedColumn(rel, key->fence_attnum);
	int			token_param = key->nkeys + key->nchanges + 1;
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s SET ", FenceQualifiedRelName(rel));
	for (int i = key->nkeys; i < key->nkeys + key->nchanges; i++)
		appendStringInfo(&sql, "%s = $%d, ", QuotedColumn(rel, key->attnums[i]), i + 1);
	appendStringInfo(&sql, "%s = $%d", fence, token_param);
	if (key->seq_attnum != 0)
		appendStringInfo(&sql, ", %s = $%d", QuotedColumn(rel, key->seq_attnum),
						 token_param + 1);
	appendStringInfoString(&sql, " WHERE ");
	AppendKeyCondition(&sql, rel, key);
	if (key->seq_attnum == 0)
		appendStringInfo(&sql, " AND %s OPERATOR(pg_catalog.<) $%d", fence, token_param);
	else
		appendStringInfo(&sql, " AND (%s OPERATOR(pg_catalog.<) $%d OR (%s "
						 "OPERATOR(pg_catalog.=) $%d AND %s OPERATOR(pg_catalog.<) $%d))",
						 fence, token_param, fence, token_param,
						 QuotedColumn(rel, key->seq_attnum), token_param + 1);
	return sql.data;
}

/* SQL of the probe: the fence (and sequence) of at most two rows matching the key */
static char *
BuildProbeSql(Relation rel, const FuPlanKey *key)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s", QuotedColumn(rel, key->fence_attnum));
	if (key->seq_attnum != 0)
		appendStringInfo(&sql, ", %s", QuotedColumn(rel, key->seq_attnum));
	appendStringInfo(&sql, " FROM %s WHERE ", FenceQualifiedRelName(rel));
	AppendKeyCondition(&sql, rel, key);
	appendStringInfoString(&sql, " LIMIT 2");
	return sql.data;
}

/* Conversion info for every column of the key, in plan_context */
static FuColumn *
BuildColumns(Relation rel, const FuPlanKey *key)
{
	int			ncolumns = key->nkeys + key->nchanges;
	FuColumn   *columns = MemoryContextAllocZero(plan_context,
												 sizeof(FuColumn) * ncolumns);

	for (int i = 0; i < ncolumns; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel),
											   key->attnums[i] - 1);
		Oid			basetype = getBaseType(attr->atttypid);
		Oid			infunc;

		columns[i].typid = attr->atttypid;
		columns[i].typmod = attr->atttypmod;
		columns[i].is_json = (basetype == JSONOID || basetype == JSONBOID);
		getTypeInputInfo(attr->atttypid, &infunc, &columns[i].typioparam);
		fmgr_info_cxt(infunc, &columns[i].input, plan_context);
	}
	return columns;
}

/* Fill everything but the key of a plan; an error leaks nothing */
static void
BuildPlan(Relation rel, const FuPlanKey *key, FuPlan *plan)
{
	int			ncolumns = key->nkeys + key->nchanges;
	Oid			argtypes[FU_MAX_COLUMNS + 2];
	int			nparams = ncolumns + (key->seq_attnum != 0 ? 2 : 1);
	char	   *update_sql = BuildUpdateSql(rel, key);
	char	   *probe_sql = BuildProbeSql(rel, key);
	SPIPlanPtr	update;
	SPIPlanPtr	probe = NULL;

	for (int i = 0; i < ncolumns; i++)
		argtypes[i] = TupleDescAttr(RelationGetDescr(rel), key->attnums[i] - 1)->atttypid;
	argtypes[ncolumns] = INT8OID;
	argtypes[ncolumns + 1] = INT8OID;
	update = FencePrepareKeptPlan(update_sql, nparams, argtypes);
	PG_TRY();
	{
		probe = FencePrepareKeptPlan(probe_sql, key->nkeys, argtypes);
	}
	PG_CATCH();
	{
		SPI_freeplan(update);
		PG_RE_THROW();
	}
	PG_END_TRY();

	plan->key_is_unique = KeyIsUnique(rel, key);
	plan->update = update;
	plan->probe = probe;
	plan->columns = BuildColumns(rel, key);
}

/* The cached plan for key, built on first use; SPI must be connected */
FuPlan *
FuLookupPlan(Relation rel, const FuPlanKey *key)
{
	FuPlan	   *plan;
	FuPlan		built;
	bool		found;

	if (plan_cache == NULL)
		CreatePlanCache();
	plan = hash_search(plan_cache, key, HASH_FIND, NULL);
	/* a plan in use by an outer call is never freed under it: reuse it */
	if (plan != NULL && (plan->valid || plan->pincount > 0))
		return plan;
	if (plan != NULL)
	{
		ReleasePlan(plan);
		hash_search(plan_cache, key, HASH_REMOVE, NULL);
	}
	if (hash_get_num_entries(plan_cache) >= FU_MAX_CACHED_PLANS)
		FlushPlans();

	memset(&built, 0, sizeof(built));
	building_relid = key->relid;
	building_invalidated = false;
	BuildPlan(rel, key, &built);
	building_relid = InvalidOid;
	/* an invalidation that arrived while building: use once, rebuild next time */
	built.valid = !building_invalidated;
	plan = hash_search(plan_cache, key, HASH_ENTER, &found);
	plan->valid = built.valid;
	plan->pincount = 0;
	plan->key_is_unique = built.key_is_unique;
	plan->update = built.update;
	plan->probe = built.probe;
	plan->columns = built.columns;
	return plan;
}

/* Keep plan alive while a fenced_update call uses it */
void
FuPinPlan(FuPlan *plan)
{
	plan->pincount++;
}

/* Release a pin taken by FuPinPlan */
void
FuUnpinPlan(FuPlan *plan)
{
	Assert(plan->pincount > 0);
	plan->pincount--;
}
