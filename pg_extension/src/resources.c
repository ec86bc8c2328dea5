/*
 * resources.c
 *	  Per-resource fences for work that is not one row: fence_advance(),
 *	  fence_admit() and fence_current() over the table fence_resources.
 *
 * Both fence_advance and fence_admit run one upsert:
 *	  INSERT ... ON CONFLICT (resource) DO UPDATE SET fence = token
 *	  WHERE fence < token
 * ON CONFLICT DO UPDATE locks the existing row even when its WHERE is false,
 * so after the upsert the caller's transaction holds the resource's row
 * lock until it ends, and the fence cannot change under it.  A concurrent
 * caller blocks on that lock; under READ COMMITTED it then sees the
 * committed fence, under REPEATABLE READ it gets 40001.
 *
 * Outcome by stored fence F and token T:
 *	  F < T or unknown  advanced to T     advance: true   admit: admitted
 *	  F = T             unchanged         advance: true   admit: admitted
 *	  F > T             stale             advance: false  admit: ERROR 55F01
 * fence_advance reports a stale token through its result (and counts and
 * logs it) so a worker can stop cleanly; fence_admit guards a transaction
 * and therefore raises, which aborts that transaction.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "pg_fence.h"

PG_FUNCTION_INFO_V1(fence_advance);
PG_FUNCTION_INFO_V1(fence_admit);
PG_FUNCTION_INFO_V1(fence_current);

/* The extension's table of per-resource fences */
#define RESOURCE_TABLE		"fence_resources"

/* Prepared statements over fence_resources, kept for the session */
typedef struct ResourcePlans
{
	Oid			nspid;			/* schema the plans were built for */
	SPIPlanPtr	upsert;			/* ($1 resource, $2 token) -> new fence */
	SPIPlanPtr	current;		/* ($1 resource) -> fence */
} ResourcePlans;

static ResourcePlans plans = {InvalidOid, NULL, NULL};

/* Raise 22023 unless name is 1..FENCE_RESOURCE_MAXLEN bytes, no controls */
static void
CheckResourceName(const char *name)
{
	size_t		len = strlen(name);

	if (len == 0 || len > FENCE_RESOURCE_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resource name must be 1 to %d bytes long, not %zu",
						FENCE_RESOURCE_MAXLEN, len),
				 errhint("Use the coordinator's lock key, e.g. 'report:7'.")));
	for (const unsigned char *p = (const unsigned char *) name; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("resource name must not contain control characters"),
					 errdetail("Byte 0x%02x at offset %d.", *p,
							   (int) (p - (const unsigned char *) name))));
}

/* The validated resource argument (argument 0) */
static char *
ResourceArg(FunctionCallInfo fcinfo)
{
	char	   *resource;

	FenceCheckNotNull(fcinfo, 0, "resource");
	resource = text_to_cstring(PG_GETARG_TEXT_PP(0));
	CheckResourceName(resource);
	return resource;
}

/* The validated token argument (argument 1) */
static int64
TokenArg(FunctionCallInfo fcinfo)
{
	int64		token;

	FenceCheckNotNull(fcinfo, 1, "token");
	token = PG_GETARG_INT64(1);
	FenceCheckToken(token, "token argument");
	return token;
}

/* Build the session's plans for the extension installed in schema nspid */
static void
EnsurePlans(Oid nspid)
{
	Oid			argtypes[2] = {TEXTOID, INT8OID};
	char	   *table;

	if (plans.nspid == nspid && plans.upsert != NULL && plans.current != NULL)
		return;
	if (plans.upsert != NULL)
		SPI_freeplan(plans.upsert);
	if (plans.current != NULL)
		SPI_freeplan(plans.current);
	plans.upsert = plans.current = NULL;
	plans.nspid = InvalidOid;

	table = quote_qualified_identifier(get_namespace_name(nspid), RESOURCE_TABLE);
	plans.upsert = FencePrepareKeptPlan(psprintf(
		"INSERT INTO %s AS r (resource, fence, updated_at) "
		"VALUES ($1, $2, pg_catalog.now()) "
		"ON CONFLICT (resource) DO UPDATE "
		"SET fence = EXCLUDED.fence, updated_at = EXCLUDED.updated_at "
		"WHERE r.fence OPERATOR(pg_catalog.<) EXCLUDED.fence "
		"RETURNING r.fence", table), 2, argtypes);
	plans.current = FencePrepareKeptPlan(psprintf(
		"SELECT fence FROM %s WHERE resource OPERATOR(pg_catalog.=) $1",
		table), 1, argtypes);
	plans.nspid = nspid;
}

/* Run plans.current; true and *fence set if the resource is known */
static bool
ReadFence(const char *resource, bool read_only, int64 *fence)
{
	Datum		values[1];
	bool		isnull;
	int			ret;

	values[0] = CStringGetTextDatum(resource);
	ret = SPI_execute_plan(plans.current, values, NULL, read_only, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pg_fence: reading fence_resources failed: %s",
			 SPI_result_code_string(ret));
	if (SPI_processed == 0)
		return false;
	*fence = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 1, &isnull));
	return !isnull;
}

/*
 * Advance the resource's fence to token if it is newer, lock the row until
 * the end of the transaction, and return the fence now stored.
 */
static int64
LockAndAdvance(FunctionCallInfo fcinfo, const char *resource, int64 token)
{
	Datum		values[2];
	int64		fence = token;
	int			ret;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	EnsurePlans(get_func_namespace(fcinfo->flinfo->fn_oid));

	values[0] = CStringGetTextDatum(resource);
	values[1] = Int64GetDatum(token);
	ret = SPI_execute_plan(plans.upsert, values, NULL, false, 1);
	if (ret != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "pg_fence: updating fence_resources failed: %s",
			 SPI_result_code_string(ret));
	/* not advanced: the row exists and we hold its lock, so read it */
	if (SPI_processed == 0 && !ReadFence(resource, false, &fence))
		elog(ERROR, "pg_fence: resource \"%s\" vanished while locked", resource);
	SPI_finish();
	return fence;
}

/* fence_advance(resource, token): publish a generation; false if stale */
Datum
fence_advance(PG_FUNCTION_ARGS)
{
	char	   *resource = ResourceArg(fcinfo);
	int64		token = TokenArg(fcinfo);
	int64		fence = LockAndAdvance(fcinfo, resource, token);

	if (fence > token)
	{
		FenceStatsRejected(InvalidOid, resource, token, fence, FENCE_PATH_ADVANCE);
		PG_RETURN_BOOL(false);
	}
	FenceStatsAccepted(InvalidOid, resource, token);
	PG_RETURN_BOOL(true);
}

/* fence_admit(resource, token): admit this transaction or raise 55F01 */
Datum
fence_admit(PG_FUNCTION_ARGS)
{
	char	   *resource = ResourceArg(fcinfo);
	int64		token = TokenArg(fcinfo);
	int64		fence = LockAndAdvance(fcinfo, resource, token);

	if (fence > token)
	{
		/* Shared-memory counters are not transactional: count first. */
		FenceStatsRejected(InvalidOid, resource, token, fence, FENCE_PATH_ADMIT);
		ereport(ERROR,
				(errcode(ERRCODE_FENCE_STALE),
				 errmsg("stale fencing token " INT64_FORMAT " for resource \"%s\" "
						"(fence is " INT64_FORMAT ")", token, resource, fence),
				 errdetail("fence_admit admits only tokens greater than or equal "
						   "to the resource's fence " INT64_FORMAT ".", fence),
				 errhint("A newer lock holder has been admitted: stop working on "
						 "this resource, and acquire the lock again before retrying.")));
	}
	FenceStatsAccepted(InvalidOid, resource, token);
	PG_RETURN_VOID();
}

/* fence_current(resource): the stored fence, NULL if the resource is unknown */
Datum
fence_current(PG_FUNCTION_ARGS)
{
	char	   *resource = ResourceArg(fcinfo);
	int64		fence = 0;
	bool		found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	EnsurePlans(get_func_namespace(fcinfo->flinfo->fn_oid));
	found = ReadFence(resource, true, &fence);
	SPI_finish();
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64(fence);
}
