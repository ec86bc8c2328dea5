/*
 * resources_guard.c
 *	  fence_resources_guard(): the row trigger (BEFORE UPDATE OR DELETE ON
 *	  fence_resources) that keeps direct writes from undoing require_proof.
 *
 * The application role may write fence_resources directly (the resource
 * functions are SECURITY INVOKER and need INSERT and UPDATE on it).
 * Unless one of pg_fence's own statements on the table is running
 * (FenceResourcesOwnWrite, resources.c), the trigger refuses with 42501
 *	  an UPDATE that changes require_proof,
 *	  an UPDATE of a require_proof row that changes its fence, seq (1.3) or
 *	  resource,
 *	  a DELETE of a require_proof row.
 * INSERTs stay allowed: pg_dump restores the table with COPY, a new row
 * with require_proof is only stricter, and one without it is what
 * fence_advance would insert.  TRUNCATE fires no row trigger; it needs the
 * TRUNCATE privilege.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "pg_fence.h"

PG_FUNCTION_INFO_V1(fence_resources_guard);

/* Column colname of a fence_resources row (not NULL: the table says so) */
static Datum
ResourceColumn(Relation rel, HeapTuple tuple, const char *colname)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	int			attnum = SPI_fnumber(tupdesc, colname);
	bool		isnull;
	Datum		value;

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of table \"%s\" does not exist",
						colname, RelationGetRelationName(rel)),
				 errhint("Update the extension: ALTER EXTENSION pg_fence UPDATE.")));
	value = heap_getattr(tuple, attnum, tupdesc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("column \"%s\" of table \"%s\" is NULL",
						colname, RelationGetRelationName(rel))));
	return value;
}

/* "42", or "NULL" when seq is NULL or fence_resources has no seq (before 1.3) */
static char *
ResourceSeqText(Relation rel, HeapTuple tuple)
{
	int			attnum = SPI_fnumber(RelationGetDescr(rel), "seq");
	bool		isnull = true;
	Datum		value = (Datum) 0;

	if (attnum > 0)
		value = heap_getattr(tuple, attnum, RelationGetDescr(rel), &isnull);
	if (isnull)
		return pstrdup("NULL");
	return psprintf(INT64_FORMAT, DatumGetInt64(value));
}

/* Raise 42501 for a direct write to the row of resource, which requires proofs */
static void
RefuseProofRowWrite(const char *resource, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("resource \"%s\" requires token proofs: only pg_fence's functions "
					"may change its fence or remove its row of fence_resources", resource),
			 errdetail_internal("%s", detail),
			 errhint("Advance its fence with fence_admit or fence_advance and the token's "
					 "proof, or stop requiring proofs first with "
					 "fence_require_proof(%s, false).", quote_literal_cstr(resource))));
}

/* fence_resources_guard's check of a direct UPDATE of resource's row */
static void
CheckResourceUpdate(Relation rel, const char *resource, HeapTuple oldtuple,
					HeapTuple newtuple)
{
	bool		old_required = DatumGetBool(ResourceColumn(rel, oldtuple, "require_proof"));
	bool		new_required = DatumGetBool(ResourceColumn(rel, newtuple, "require_proof"));
	int64		old_fence;
	int64		new_fence;
	char	   *old_seq;
	char	   *new_seq;
	char	   *new_resource;

	if (new_required != old_required)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only fence_require_proof may change whether resource \"%s\" "
						"requires token proofs", resource),
				 errdetail("The UPDATE sets require_proof from %s to %s.",
						   old_required ? "true" : "false",
						   new_required ? "true" : "false"),
				 errhint("Run SELECT fence_require_proof(%s, %s); it is superuser only "
						 "unless granted.", quote_literal_cstr(resource),
						 new_required ? "true" : "false")));
	if (!old_required)
		return;
	old_fence = DatumGetInt64(ResourceColumn(rel, oldtuple, "fence"));
	new_fence = DatumGetInt64(ResourceColumn(rel, newtuple, "fence"));
	if (new_fence != old_fence)
		RefuseProofRowWrite(resource,
							psprintf("The UPDATE sets its fence from " INT64_FORMAT
									 " to " INT64_FORMAT ".", old_fence, new_fence));
	old_seq = ResourceSeqText(rel, oldtuple);
	new_seq = ResourceSeqText(rel, newtuple);
	if (strcmp(old_seq, new_seq) != 0)
		RefuseProofRowWrite(resource,
							psprintf("The UPDATE sets its sequence number from %s to %s.",
									 old_seq, new_seq));
	new_resource = TextDatumGetCString(ResourceColumn(rel, newtuple, "resource"));
	if (strcmp(new_resource, resource) != 0)
		RefuseProofRowWrite(resource,
							psprintf("The UPDATE renames the resource to \"%s\".",
									 new_resource));
}

/*
 * Trigger (BEFORE UPDATE OR DELETE ON fence_resources, FOR EACH ROW): keep
 * direct writes from undoing require_proof (see the file comment)
 */
Datum
fence_resources_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	HeapTuple	oldtuple;
	char	   *resource;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_resources_guard: not called by trigger manager")));
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!(TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ||
		  TRIGGER_FIRED_BY_DELETE(trigdata->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_resources_guard: must be fired BEFORE UPDATE OR DELETE, "
						"FOR EACH ROW")));
	rel = trigdata->tg_relation;
	oldtuple = trigdata->tg_trigtuple;
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		if (!FenceResourcesOwnWrite())
		{
			resource = TextDatumGetCString(ResourceColumn(rel, oldtuple, "resource"));
			CheckResourceUpdate(rel, resource, oldtuple, trigdata->tg_newtuple);
		}
		return PointerGetDatum(trigdata->tg_newtuple);
	}
	if (!FenceResourcesOwnWrite() &&
		DatumGetBool(ResourceColumn(rel, oldtuple, "require_proof")))
	{
		resource = TextDatumGetCString(ResourceColumn(rel, oldtuple, "resource"));
		RefuseProofRowWrite(resource, "A DELETE would remove the resource's fence "
							"and its require_proof.");
	}
	return PointerGetDatum(oldtuple);
}
