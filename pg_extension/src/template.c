/*
 * template.c
 *	  Lock key templates: which coordinator lock a row of a verifying table
 *	  belongs to, e.g. 'report:{report_id}' -> report:7.
 *
 * Syntax: literal text, and column names in braces; "{{" and "}}" stand for
 * literal braces.  A template is 1..FENCE_LOCK_KEY_MAXLEN bytes.  Columns
 * must be user columns of type smallint, integer, bigint, text, varchar or
 * uuid (their text form depends on no setting), not generated (a BEFORE
 * trigger sees a stored generated column as NULL), and not the fence column.
 * A template without columns puts every row under one lock.
 *
 * The key of a row is the template with each column replaced by the text
 * form of the row's value; a NULL value, or a key longer than
 * FENCE_LOCK_KEY_MAXLEN bytes, is refused with SQLSTATE 55F02.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_fence.h"
#include "proof.h"

/* May a column of this type appear in a lock key template? */
static bool
IsKeyColumnType(Oid typid)
{
	return typid == INT2OID || typid == INT4OID || typid == INT8OID ||
		typid == TEXTOID || typid == VARCHAROID || typid == UUIDOID;
}

/* Raise 22023 for a template that does not parse */
static void
ErrorBadTemplate(const char *template, const char *problem)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid lock key template \"%s\": %s", template, problem),
			 errhint("Name columns in braces, e.g. 'report:{report_id}'; "
					 "write {{ and }} for literal braces.")));
}

/* The attribute number of a template's column, checked */
static AttrNumber
KeyColumn(Relation rel, const char *template, const char *name,
		  AttrNumber fence_attnum)
{
	int			attnum = attnameAttNum(rel, name, false);
	Oid			typid;

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of lock key template \"%s\" does not exist in table \"%s\"",
						name, template, RelationGetRelationName(rel))));
	if (attnum == fence_attnum)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lock key template \"%s\" must not name the fence column \"%s\"",
						template, name),
				 errdetail("A row's lock key cannot depend on the token written with it.")));
	if (TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attgenerated != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
				 errmsg("column \"%s\" of lock key template \"%s\" is a generated column",
						name, template),
				 errdetail("A BEFORE trigger sees a generated column (stored or virtual) as NULL, so "
						   "no INSERT or UPDATE of table \"%s\" would have a lock key.",
						   RelationGetRelationName(rel)),
				 errhint("Name the columns it is generated from instead.")));
	typid = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;
	if (!IsKeyColumnType(typid))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of lock key template \"%s\" is of type %s",
						name, template, format_type_be(typid)),
				 errdetail("Lock key columns must be smallint, integer, bigint, text, "
						   "varchar or uuid, whose text form depends on no setting.")));
	return (AttrNumber) attnum;
}

/* Add a part (literal when attnum is 0) to t */
static void
AddPart(FenceKeyTemplate *t, Relation rel, AttrNumber attnum, const char *literal,
		MemoryContext mcxt)
{
	FenceKeyPart *part = &t->parts[t->nparts++];

	part->attnum = attnum;
	part->literal = MemoryContextStrdup(mcxt, literal);
	if (attnum != 0)
	{
		Oid			output;
		bool		isvarlena;

		getTypeOutputInfo(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid,
						  &output, &isvarlena);
		fmgr_info_cxt(output, &part->output, mcxt);
	}
}

/* Parse and check template against rel; the result lives in mcxt */
FenceKeyTemplate *
FenceParseKeyTemplate(Relation rel, const char *template, AttrNumber fence_attnum,
					  MemoryContext mcxt)
{
	size_t		len = strlen(template);
	FenceKeyTemplate *t = MemoryContextAllocZero(mcxt, sizeof(FenceKeyTemplate));
	StringInfoData literal;

	if (len == 0 || len > FENCE_LOCK_KEY_MAXLEN)
		ErrorBadTemplate(template, psprintf("it must be 1 to %d bytes long, not %zu",
											FENCE_LOCK_KEY_MAXLEN, len));
	t->parts = MemoryContextAllocZero(mcxt, sizeof(FenceKeyPart) * (len + 1));
	initStringInfo(&literal);
	for (const char *p = template; *p; p++)
	{
		const char *close;
		char	   *name;

		if ((*p == '{' || *p == '}') && p[1] == *p)
		{
			appendStringInfoChar(&literal, *p++);
			continue;
		}
		if (*p == '}')
			ErrorBadTemplate(template, "a } without its {");
		if (*p != '{')
		{
			appendStringInfoChar(&literal, *p);
			continue;
		}
		close = strchr(p + 1, '}');
		if (close == NULL || memchr(p + 1, '{', close - p - 1) != NULL)
			ErrorBadTemplate(template, "a { without its }");
		if (close == p + 1)
			ErrorBadTemplate(template, "{} names no column");
		name = pnstrdup(p + 1, close - p - 1);
		if (literal.len > 0)
			AddPart(t, rel, 0, literal.data, mcxt);
		resetStringInfo(&literal);
		AddPart(t, rel, KeyColumn(rel, template, name, fence_attnum), "", mcxt);
		p = close;
	}
	if (literal.len > 0)
		AddPart(t, rel, 0, literal.data, mcxt);
	return t;
}

/* The lock key of tuple under template (palloc'd); 55F02 if it has none */
char *
FenceBuildLockKey(Relation rel, const FenceKeyTemplate *template, HeapTuple tuple,
				  const FenceProofTarget *target)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	StringInfoData key;

	initStringInfo(&key);
	for (int i = 0; i < template->nparts; i++)
	{
		const FenceKeyPart *part = &template->parts[i];
		bool		isnull;
		Datum		value;

		if (part->attnum == 0)
		{
			appendStringInfoString(&key, part->literal);
			continue;
		}
		value = heap_getattr(tuple, part->attnum, tupdesc, &isnull);
		if (isnull)
			FenceRefuseLockKey(target, ERRCODE_FENCE_PROOF,
							   psprintf("row of table \"%s\" has no lock key: column \"%s\" is NULL",
										RelationGetRelationName(rel),
										NameStr(TupleDescAttr(tupdesc, part->attnum - 1)->attname)),
							   "The table verifies token proofs, and its lock key template "
							   "names this column.");
		appendStringInfoString(&key, OutputFunctionCall((FmgrInfo *) &part->output, value));
	}
	if (key.len > FENCE_LOCK_KEY_MAXLEN)
		FenceRefuseLockKey(target, ERRCODE_FENCE_PROOF,
						   psprintf("lock key of a row of table \"%s\" is %d bytes long, "
									"more than %d", RelationGetRelationName(rel),
									key.len, FENCE_LOCK_KEY_MAXLEN),
						   psprintf("The key begins \"%.64s\".", key.data));
	return key.data;
}
