/*
 * protect.c
 *	  fence_protect() / fence_unprotect(): install or remove the guard
 *	  trigger, after checking that the fence column is usable.
 *
 * The trigger is named zzz_fence_guard.  PostgreSQL fires triggers of the
 * same kind in name order (byte order), so the guard runs after the table's
 * other BEFORE triggers: it sees the final NEW row, and no later trigger can
 * overwrite the fence it stamps or skip a row it has already counted.
 * fence_protect warns about any BEFORE trigger whose name sorts after it.
 *
 * With a lock key template (lock_key, template.c) the table verifies token
 * proofs: the trigger fires BEFORE INSERT OR UPDATE OR DELETE and gets the
 * template as its third argument.  Without one it fires BEFORE UPDATE OR
 * DELETE with two arguments, as in version 1.0; protecting a table again
 * without lock_key turns verification off.
 *
 * Partitioned tables: PostgreSQL clones the trigger to every partition, those
 * it has and those created (PARTITION OF) or attached (ATTACH PARTITION)
 * later, and CREATE OR REPLACE replaces the clones too, including a guard a
 * partition had of its own.  A clone follows its partitioned table, so
 * fence_protect and fence_unprotect refuse a partition whose guard is one.
 * ATTACH PARTITION of a table that has its own guard fails (the trigger
 * exists); DETACH PARTITION drops the clone, and the detached table keeps
 * its fences unguarded until it is protected again.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_fence.h"
#include "proof.h"

PG_FUNCTION_INFO_V1(fence_protect);
PG_FUNCTION_INFO_V1(fence_unprotect);

/* Raise 42809 unless rel is a table or a partitioned table */
void
FenceCheckRelkind(Relation rel)
{
	char		relkind = rel->rd_rel->relkind;

	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("Only tables and partitioned tables can be fenced.")));
}

/*
 * Attribute number of a bigint NOT NULL column of rel that the guard reads
 * and stamps; errors otherwise.  what names its role in messages ("fence",
 * "sequence").
 */
static AttrNumber
ValidateBigintColumn(Relation rel, const char *colname, const char *what)
{
	const char *relname = RelationGetRelationName(rel);
	int			attnum = attnameAttNum(rel, colname, false);
	Form_pg_attribute attr;

	if (attnum == InvalidAttrNumber && attnameAttNum(rel, colname, true) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("system column \"%s\" cannot be a %s column", colname, what)));
	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s column \"%s\" of table \"%s\" does not exist",
						what, colname, relname),
				 errhint("Add it first: ALTER TABLE %s ADD COLUMN %s bigint NOT NULL DEFAULT 0;",
						 FenceQualifiedRelName(rel), quote_identifier(colname))));
	attr = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	if (attr->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s column \"%s\" of table \"%s\" must be of type bigint, not %s",
						what, colname, relname, format_type_be(attr->atttypid)),
				 errhint("%s are bigint; use a bigint NOT NULL column.",
						 strcmp(what, "fence") == 0 ? "Fencing tokens" : "Sequence numbers")));
	if (attr->attgenerated != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
				 errmsg("%s column \"%s\" of table \"%s\" must not be a generated column",
						what, colname, relname)));
	if (!attr->attnotnull)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s column \"%s\" of table \"%s\" must be NOT NULL",
						what, colname, relname),
				 errdetail("A NULL %s cannot be compared with a %s.", what,
						   strcmp(what, "fence") == 0 ? "token" : "write's sequence"),
				 errhint("Run: UPDATE %s SET %s = 0 WHERE %s IS NULL; "
						 "ALTER TABLE %s ALTER COLUMN %s SET NOT NULL;",
						 FenceQualifiedRelName(rel), quote_identifier(colname),
						 quote_identifier(colname), FenceQualifiedRelName(rel),
						 quote_identifier(colname))));
	return (AttrNumber) attnum;
}

/* Attribute number of a bigint NOT NULL fence column; errors otherwise */
AttrNumber
FenceValidateColumn(Relation rel, const char *colname)
{
	return ValidateBigintColumn(rel, colname, "fence");
}

/*
 * Attribute number of the bigint NOT NULL sequence column of a sequenced
 * table, which must not be its fence column (fence_attnum); errors otherwise
 */
AttrNumber
FenceValidateSeqColumn(Relation rel, const char *colname, AttrNumber fence_attnum)
{
	AttrNumber	attnum = ValidateBigintColumn(rel, colname, "sequence");

	if (attnum == fence_attnum)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sequence column \"%s\" of table \"%s\" is its fence column",
						colname, RelationGetRelationName(rel)),
				 errdetail("A sequenced table stores the token and the sequence number "
						   "in two columns."),
				 errhint("Add one: ALTER TABLE %s ADD COLUMN fence_seq bigint NOT NULL "
						 "DEFAULT 0;", FenceQualifiedRelName(rel))));
	return attnum;
}

/* Raise 42501 unless the current user may create triggers on relid */
static void
CheckTriggerPrivilege(Oid relid)
{
	AclResult	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER);

	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
}

/*
 * Warn about BEFORE row triggers that would fire after the guard (for
 * UPDATE or DELETE; with_insert: also INSERT, which a lock key template
 * makes the guard check)
 */
static void
WarnAboutLaterTriggers(Relation rel, bool with_insert)
{
	TriggerDesc *trigdesc = rel->trigdesc;

	if (trigdesc == NULL)
		return;
	for (int i = 0; i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];
		int16		type = trigger->tgtype;

		if (!TRIGGER_FOR_ROW(type) || !TRIGGER_FOR_BEFORE(type) ||
			!(TRIGGER_FOR_UPDATE(type) || TRIGGER_FOR_DELETE(type) ||
			  (with_insert && TRIGGER_FOR_INSERT(type))))
			continue;
		if (strcmp(trigger->tgname, FENCE_TRIGGER_NAME) > 0)
			ereport(WARNING,
					(errmsg("trigger \"%s\" on table \"%s\" fires after %s",
							trigger->tgname, RelationGetRelationName(rel),
							FENCE_TRIGGER_NAME),
					 errdetail("Triggers fire in name order; a trigger after the guard "
							   "can change the fence column or skip a row it admitted."),
					 errhint("Rename the trigger so that its name sorts before \"%s\".",
							 FENCE_TRIGGER_NAME)));
	}
}

/* The highest partitioned table above partition relid that has a guard */
static Oid
GuardOrigin(Oid relid)
{
	Oid			origin = InvalidOid;
	ListCell   *lc;

	foreach(lc, get_partition_ancestors(relid))
	{
		if (OidIsValid(get_trigger_oid(lfirst_oid(lc), FENCE_TRIGGER_NAME, true)))
			origin = lfirst_oid(lc);
	}
	return origin;
}

/*
 * Raise 55000 when rel's guard is a clone of a partitioned table's:
 * PostgreSQL neither replaces nor drops a cloned trigger on its own, and the
 * partition is guarded the way its partitioned table is
 */
static void
CheckGuardNotCloned(Relation rel)
{
	TriggerDesc *trigdesc = rel->trigdesc;
	Oid			origin;

	if (trigdesc == NULL || !rel->rd_rel->relispartition)
		return;
	for (int i = 0; i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];

		if (strcmp(trigger->tgname, FENCE_TRIGGER_NAME) != 0 || !trigger->tgisclone)
			continue;
		origin = GuardOrigin(RelationGetRelid(rel));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("partition \"%s\" is guarded by the guard of partitioned table \"%s\"",
						RelationGetRelationName(rel), get_rel_name(origin)),
				 errdetail("A partitioned table's guard is cloned to every partition, with "
						   "its fence column, mode and lock key; a clone cannot be "
						   "replaced or dropped on its own."),
				 errhint("Protect or unprotect \"%s\" (every partition), or detach the "
						 "partition first.", get_rel_name(origin))));
	}
}

/* Run one utility statement through SPI */
static void
ExecuteDdl(const char *sql)
{
	int			ret;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	ret = SPI_execute(sql, false, 0);
	if (ret != SPI_OK_UTILITY)
		elog(ERROR, "pg_fence: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
	SPI_finish();
}

/*
 * The seq_column argument (1.3, argument 4): the sequence column of a
 * sequenced table (default fence_seq), NULL for the other modes, which
 * refuse one
 */
static const char *
SeqColumnArg(FunctionCallInfo fcinfo, FenceMode mode)
{
	const char *seq_column = NULL;

	if (PG_NARGS() >= 5 && !PG_ARGISNULL(4))
		seq_column = pstrdup(NameStr(*PG_GETARG_NAME(4)));
	if (mode != FENCE_MODE_SEQUENCED && seq_column != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seq_column is only for mode 'sequenced', not '%s'",
						FenceModeName(mode)),
				 errhint("Pass mode => 'sequenced', or leave seq_column out.")));
	if (mode == FENCE_MODE_SEQUENCED && seq_column == NULL)
		seq_column = FENCE_DEFAULT_SEQ_COLUMN;
	return seq_column;
}

/*
 * fence_protect(rel, fence_column, mode, lock_key, seq_column): install or
 * replace the guard.  Its arguments: (fence column, mode) and, with a lock
 * key template, the template; a sequenced guard has four, (fence column,
 * 'sequenced', template or '', sequence column).
 */
Datum
fence_protect(PG_FUNCTION_ARGS)
{
	Oid			relid;
	const char *column;
	const char *mode;
	const char *template = NULL;
	const char *seq_column;
	AttrNumber	attnum;
	Relation	rel;
	StringInfoData sql;
	char	   *extschema;

	FenceCheckNotNull(fcinfo, 0, "rel");
	FenceCheckNotNull(fcinfo, 1, "fence_column");
	FenceCheckNotNull(fcinfo, 2, "mode");
	relid = PG_GETARG_OID(0);
	column = NameStr(*PG_GETARG_NAME(1));
	mode = text_to_cstring(PG_GETARG_TEXT_PP(2));
	seq_column = SeqColumnArg(fcinfo, FenceParseMode(mode));
	/* version 1.0 of the SQL function has no lock_key */
	if (PG_NARGS() >= 4 && !PG_ARGISNULL(3))
		template = text_to_cstring(PG_GETARG_TEXT_PP(3));

	CheckTriggerPrivilege(relid);
	/* the lock CREATE TRIGGER takes anyway; taking it now avoids an upgrade */
	rel = table_open(relid, ShareRowExclusiveLock);
	FenceCheckRelkind(rel);
	CheckGuardNotCloned(rel);
	attnum = FenceValidateColumn(rel, column);
	if (seq_column != NULL)
		(void) FenceValidateSeqColumn(rel, seq_column, attnum);
	if (template != NULL)
		FenceCheckKeyTemplateUnambiguous(rel, template,
										 FenceParseKeyTemplate(rel, template, attnum,
															   CurrentMemoryContext));
	WarnAboutLaterTriggers(rel, template != NULL);

	/* the guard function lives in the same schema as this function */
	extschema = get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid));
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE OR REPLACE TRIGGER %s BEFORE %s ON %s "
					 "FOR EACH ROW EXECUTE FUNCTION %s(%s, %s",
					 quote_identifier(FENCE_TRIGGER_NAME),
					 template ? "INSERT OR UPDATE OR DELETE" : "UPDATE OR DELETE",
					 FenceQualifiedRelName(rel),
					 quote_qualified_identifier(extschema, "fence_guard"),
					 quote_literal_cstr(column), quote_literal_cstr(mode));
	if (template != NULL || seq_column != NULL)
		appendStringInfo(&sql, ", %s", quote_literal_cstr(template ? template : ""));
	if (seq_column != NULL)
		appendStringInfo(&sql, ", %s", quote_literal_cstr(seq_column));
	appendStringInfoChar(&sql, ')');
	table_close(rel, NoLock);
	ExecuteDdl(sql.data);
	PG_RETURN_VOID();
}

/* fence_unprotect(rel): drop the guard if present; silent otherwise */
Datum
fence_unprotect(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Relation	rel;
	char	   *sql;

	FenceCheckNotNull(fcinfo, 0, "rel");
	relid = PG_GETARG_OID(0);
	if (!OidIsValid(get_trigger_oid(relid, FENCE_TRIGGER_NAME, true)))
		PG_RETURN_VOID();

	rel = table_open(relid, AccessShareLock);
	CheckGuardNotCloned(rel);
	sql = psprintf("DROP TRIGGER IF EXISTS %s ON %s",
				   quote_identifier(FENCE_TRIGGER_NAME), FenceQualifiedRelName(rel));
	table_close(rel, AccessShareLock);
	ExecuteDdl(sql);
	PG_RETURN_VOID();
}
