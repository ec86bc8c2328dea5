/*
 * outbox.c
 *	  The fenced outbox (1.5): fence_enqueue() records a side effect (an
 *	  HTTP POST of a JSON payload to an endpoint) in the caller's
 *	  transaction, under the token that transaction writes with.
 *
 * fence_enqueue(target, token, operation_id, endpoint, payload, proof)
 *	 1. checks its arguments, each refused with an error naming it: NULL
 *		(22004); operation_id empty, longer than FENCE_OPERATION_ID_MAXLEN
 *		bytes or with control characters (22023); endpoint not
 *		http(s)://host[:port][/path] or longer than FENCE_ENDPOINT_MAXLEN
 *		(22023); payload larger than pg_fence.max_outbox_payload (54000);
 *	 2. admits the token at the per-resource fence named target with
 *		fence_admit's rule (resources.c, FenceAdmitResource): an older
 *		token raises 55F01, an equal or newer one is admitted and the
 *		resource's row stays locked until the transaction ends, a proof is
 *		checked on a require_proof resource (55F02);
 *	 3. inserts the entry into fence_outbox with its idempotency key
 *		(below) and returns the key.  The same (target, token, operation_id)
 *		enqueued again is one entry: the insert does nothing if an entry
 *		with the key exists and has the same endpoint and payload, and
 *		raises 23505 if it has another (one operation id, two effects).
 *
 * The idempotency key is "pgfence-v1-" followed by the hex SHA-256 of
 *	  be32 len(target) | target | be64 token | be32 len(operation_id) | operation_id
 * (target and operation_id as UTF-8, converted from the database encoding;
 * a SQL_ASCII database's bytes as they are),
 * so it depends on nothing but the three values (the lengths keep
 * ("a", "bc") and ("ab", "c") apart), and a receiver, a relay or the
 * client library (pgfence.outbox.idempotency_key) computes the same one.
 *
 * The trigger fence_outbox_guard (BEFORE INSERT OR UPDATE ON fence_outbox,
 * FOR EACH ROW) keeps the table to what fence_enqueue admitted: the
 * application role needs INSERT on it (fence_enqueue is SECURITY INVOKER),
 * and a direct INSERT would skip the fence, require_proof and the checks
 * above.  It refuses with 42501
 *	  an INSERT, unless fence_enqueue's own INSERT is running
 *	  (own_insert_depth) or the current user is a superuser (a restore's
 *	  COPY; a superuser could disable the trigger anyway);
 *	  an UPDATE that changes id, target, token, operation_id,
 *	  idempotency_key, endpoint, payload or created_at: the relay and the
 *	  operator change only the delivery state (state, attempts,
 *	  next_attempt_at, last_status, last_error, updated_at, delivered_at).
 * DELETE stays allowed (fence_outbox_purge, the operator).
 *
 * Delivery is the relay's (clients/python/pgfence/relay.py): it claims
 * pending entries with FOR UPDATE SKIP LOCKED, marks an entry whose token
 * is older than its target's fence superseded, and marks the others
 * delivered after a 2xx, parked after another 4xx, or due again later.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "pg_fence.h"

PG_FUNCTION_INFO_V1(fence_enqueue);
PG_FUNCTION_INFO_V1(fence_outbox_key);
PG_FUNCTION_INFO_V1(fence_outbox_guard);

#define OUTBOX_TABLE				"fence_outbox"
#define FENCE_OPERATION_ID_MAXLEN	256
#define FENCE_ENDPOINT_MAXLEN		2048
#define FENCE_KEY_PREFIX			"pgfence-v1-"

/* pg_fence.max_outbox_payload, in kB */
#define FENCE_MAX_PAYLOAD_DEFAULT	64
#define FENCE_MAX_PAYLOAD_MIN		1
#define FENCE_MAX_PAYLOAD_MAX		(16 * 1024)

/* fence_enqueue's arguments */
enum
{
	ARG_TARGET, ARG_TOKEN, ARG_OPERATION_ID, ARG_ENDPOINT, ARG_PAYLOAD, ARG_PROOF
};

static int	fence_max_outbox_payload = FENCE_MAX_PAYLOAD_DEFAULT;

/* Prepared statements over fence_outbox, kept for the session */
static Oid	plans_nspid = InvalidOid;
static SPIPlanPtr insert_plan = NULL;	/* -> id, or no row if the key exists */
static SPIPlanPtr existing_plan = NULL; /* ($1 key) -> endpoint, payload */

/*
 * > 0 while fence_enqueue's INSERT runs: fence_outbox_guard admits it.
 * Restored by PG_FINALLY also when the INSERT fails.
 */
static int	own_insert_depth = 0;

/* Define pg_fence.max_outbox_payload (from _PG_init) */
void
FenceOutboxInit(void)
{
	DefineCustomIntVariable("pg_fence.max_outbox_payload",
							"Largest payload fence_enqueue accepts.",
							"The size of the payload as stored (jsonb).",
							&fence_max_outbox_payload,
							FENCE_MAX_PAYLOAD_DEFAULT,
							FENCE_MAX_PAYLOAD_MIN,
							FENCE_MAX_PAYLOAD_MAX,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/* Raise 22023 naming argname if text has a control character */
static void
CheckNoControls(const char *text, size_t len, const char *argname)
{
	for (size_t i = 0; i < len; i++)
	{
		unsigned char c = (unsigned char) text[i];

		if (c < 0x20 || c == 0x7f)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must not contain control characters", argname),
					 errdetail("Byte 0x%02x at offset %zu.", c, i)));
	}
}

/* Raise 22023 unless operation_id is 1..FENCE_OPERATION_ID_MAXLEN bytes, no controls */
static void
CheckOperationId(const char *op, size_t len)
{
	if (len == 0 || len > FENCE_OPERATION_ID_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("operation_id must be 1 to %d bytes long, not %zu",
						FENCE_OPERATION_ID_MAXLEN, len),
				 errhint("Name the effect, stable across retries: e.g. 'invoice:7:mail'.")));
	CheckNoControls(op, len, "operation_id");
}

/* Raise 22023 naming the endpoint and what is wrong with it */
static void
BadEndpoint(const char *endpoint, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid endpoint \"%s\": %s", endpoint, why),
			 errhint("An endpoint is http://host[:port][/path] or https://host[:port][/path].")));
}

/*
 * Raise 22023 unless endpoint is http:// or https://, a host (a name of
 * letters, digits, '-' and '.', or an IPv6 address in brackets), an
 * optional port 1..65535, then nothing or a path, query or fragment
 * without spaces or control characters; at most FENCE_ENDPOINT_MAXLEN
 * bytes, and no user information (user@host)
 */
static void
CheckEndpoint(const char *endpoint, size_t len)
{
	const char *p;
	const char *host;

	if (len > FENCE_ENDPOINT_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("endpoint must be at most %d bytes long, not %zu",
						FENCE_ENDPOINT_MAXLEN, len)));
	if (strlen(endpoint) != len)
		BadEndpoint(endpoint, "it contains a NUL byte");
	if (pg_strncasecmp(endpoint, "http://", 7) == 0)
		p = endpoint + 7;
	else if (pg_strncasecmp(endpoint, "https://", 8) == 0)
		p = endpoint + 8;
	else
		BadEndpoint(endpoint, "the scheme must be http or https");
	host = p;
	if (strcspn(p, "@/?#") < strcspn(p, "/?#"))
		BadEndpoint(endpoint, "user information (user@host) is not allowed");
	if (*p == '[')
	{
		p++;
		while (isxdigit((unsigned char) *p) || *p == ':' || *p == '.')
			p++;
		if (*p != ']' || p == host + 1)
			BadEndpoint(endpoint, "bad IPv6 address in brackets");
		p++;
	}
	else
	{
		while (isalnum((unsigned char) *p) || *p == '-' || *p == '.')
			p++;
		if (p == host)
			BadEndpoint(endpoint, "no host");
		if (p - host > 253)
			BadEndpoint(endpoint, "host longer than 253 bytes");
	}
	if (*p == ':')
	{
		long		port = 0;
		const char *digits = ++p;

		while (isdigit((unsigned char) *p) && p - digits < 6)
			port = port * 10 + (*p++ - '0');
		if (p == digits || port < 1 || port > 65535)
			BadEndpoint(endpoint, "the port must be 1 to 65535");
	}
	if (*p != '\0' && *p != '/' && *p != '?' && *p != '#')
		BadEndpoint(endpoint, "bad character after the host");
	for (; *p; p++)
		if ((unsigned char) *p <= 0x20 || (unsigned char) *p == 0x7f)
			BadEndpoint(endpoint, "spaces and control characters are not allowed");
}

/* Raise 54000 if the payload is larger than pg_fence.max_outbox_payload */
static void
CheckPayload(Jsonb *payload)
{
	size_t		size = VARSIZE_ANY_EXHDR(payload);
	size_t		limit = (size_t) fence_max_outbox_payload * 1024;

	if (size > limit)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("payload of %zu bytes is larger than pg_fence.max_outbox_payload (%zu bytes)",
						size, limit),
				 errhint("Send a reference to the data (a row id, a URL) rather than the data.")));
}

/* Hash len and data, converted from the database encoding to UTF-8 */
static void
HashField(pg_cryptohash_ctx *ctx, const char *text, size_t text_len)
{
	const char *data = pg_server_to_any(text, (int) text_len, PG_UTF8);
	uint32		len = data == text ? (uint32) text_len : (uint32) strlen(data);
	uint8		be[4] = {len >> 24, len >> 16, len >> 8, len};

	if (pg_cryptohash_update(ctx, be, 4) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0)
		elog(ERROR, "pg_fence: SHA-256 failed: %s", pg_cryptohash_error(ctx));
}

/* The idempotency key of (target, token, operation_id) (file comment), palloc'd */
static char *
IdempotencyKey(const char *target, size_t target_len, int64 token,
			   const char *op, size_t op_len)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	uint8		be[8];
	uint64		t = (uint64) token;
	char	   *key = palloc(strlen(FENCE_KEY_PREFIX) + 2 * PG_SHA256_DIGEST_LENGTH + 1);
	char	   *out;

	for (int i = 0; i < 8; i++)
		be[i] = (uint8) (t >> (56 - 8 * i));
	if (ctx == NULL || pg_cryptohash_init(ctx) < 0)
		elog(ERROR, "pg_fence: SHA-256 failed: %s", pg_cryptohash_error(ctx));
	HashField(ctx, target, target_len);
	if (pg_cryptohash_update(ctx, be, 8) < 0)
		elog(ERROR, "pg_fence: SHA-256 failed: %s", pg_cryptohash_error(ctx));
	HashField(ctx, op, op_len);
	if (pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "pg_fence: SHA-256 failed: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);

	strcpy(key, FENCE_KEY_PREFIX);
	out = key + strlen(FENCE_KEY_PREFIX);
	for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
	{
		*out++ = "0123456789abcdef"[digest[i] >> 4];
		*out++ = "0123456789abcdef"[digest[i] & 15];
	}
	*out = '\0';
	return key;
}

/* Build the session's plans for the extension installed in schema nspid */
static void
EnsurePlans(Oid nspid)
{
	Oid			argtypes[6] = {TEXTOID, INT8OID, TEXTOID, TEXTOID, TEXTOID, JSONBOID};
	char	   *table;

	if (plans_nspid == nspid && insert_plan != NULL && existing_plan != NULL)
		return;
	if (insert_plan != NULL)
		SPI_freeplan(insert_plan);
	if (existing_plan != NULL)
		SPI_freeplan(existing_plan);
	insert_plan = existing_plan = NULL;
	plans_nspid = InvalidOid;

	table = quote_qualified_identifier(get_namespace_name(nspid), OUTBOX_TABLE);
	insert_plan = FencePrepareKeptPlan(psprintf(
		"INSERT INTO %s AS o (target, token, operation_id, idempotency_key, endpoint, payload) "
		"VALUES ($1, $2, $3, $4, $5, $6) "
		"ON CONFLICT (idempotency_key) DO NOTHING RETURNING o.id", table), 6, argtypes);
	existing_plan = FencePrepareKeptPlan(psprintf(
		"SELECT o.endpoint OPERATOR(pg_catalog.=) $2 AND o.payload OPERATOR(pg_catalog.=) $3 "
		"FROM %s AS o WHERE o.idempotency_key OPERATOR(pg_catalog.=) $1",
		table), 3, (Oid[]) {TEXTOID, TEXTOID, JSONBOID});
	plans_nspid = nspid;
}

/*
 * fence_enqueue(target, token, operation_id, endpoint, payload, proof):
 * admit the token at target's fence and record the entry; its key
 */
Datum
fence_enqueue(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"target", "token", "operation_id", "endpoint", "payload"};
	text	   *target_text;
	text	   *op_text;
	text	   *endpoint_text;
	char	   *endpoint;
	Jsonb	   *payload;
	char	   *key;
	Datum		values[6];
	int			ret;

	for (int i = ARG_TARGET; i <= ARG_PAYLOAD; i++)
		FenceCheckNotNull(fcinfo, i, names[i]);
	target_text = PG_GETARG_TEXT_PP(ARG_TARGET);
	op_text = PG_GETARG_TEXT_PP(ARG_OPERATION_ID);
	endpoint_text = PG_GETARG_TEXT_PP(ARG_ENDPOINT);
	endpoint = text_to_cstring(endpoint_text);
	payload = PG_GETARG_JSONB_P(ARG_PAYLOAD);
	CheckOperationId(VARDATA_ANY(op_text), VARSIZE_ANY_EXHDR(op_text));
	CheckEndpoint(endpoint, VARSIZE_ANY_EXHDR(endpoint_text));
	CheckPayload(payload);

	/* fence_admit(target, token, proof): 55F01 if stale; the row stays locked */
	FenceAdmitResource(fcinfo, ARG_PROOF);

	key = IdempotencyKey(VARDATA_ANY(target_text), VARSIZE_ANY_EXHDR(target_text),
						 PG_GETARG_INT64(ARG_TOKEN),
						 VARDATA_ANY(op_text), VARSIZE_ANY_EXHDR(op_text));
	values[0] = PointerGetDatum(target_text);
	values[1] = PG_GETARG_DATUM(ARG_TOKEN);
	values[2] = PointerGetDatum(op_text);
	values[3] = CStringGetTextDatum(key);
	values[4] = PointerGetDatum(endpoint_text);
	values[5] = JsonbPGetDatum(payload);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	EnsurePlans(get_func_namespace(fcinfo->flinfo->fn_oid));
	own_insert_depth++;
	PG_TRY();
	{
		ret = SPI_execute_plan(insert_plan, values, NULL, false, 1);
	}
	PG_FINALLY();
	{
		own_insert_depth--;
	}
	PG_END_TRY();
	if (ret != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "pg_fence: inserting into fence_outbox failed: %s",
			 SPI_result_code_string(ret));
	if (SPI_processed == 0)
	{
		/* the key exists: the same entry again, or another effect under its key */
		Datum		existing[3] = {values[3], values[4], values[5]};
		bool		isnull;
		bool		same;

		ret = SPI_execute_plan(existing_plan, existing, NULL, false, 1);
		if (ret != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "pg_fence: fence_outbox entry %s vanished", key);
		same = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										  1, &isnull));
		if (!same)
			ereport(ERROR,
					(errcode(ERRCODE_UNIQUE_VIOLATION),
					 errmsg("operation_id \"%s\" was already enqueued for target \"%s\" "
							"under token " INT64_FORMAT " with another endpoint or payload",
							text_to_cstring(op_text), text_to_cstring(target_text),
							PG_GETARG_INT64(ARG_TOKEN)),
					 errdetail("Its idempotency key is %s.", key),
					 errhint("Give each side effect its own operation_id.")));
	}
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(key));
}

/*
 * fence_outbox_key(target, token, operation_id): the idempotency key
 * fence_enqueue gives the entry, without enqueueing anything (STRICT)
 */
Datum
fence_outbox_key(PG_FUNCTION_ARGS)
{
	text	   *target = PG_GETARG_TEXT_PP(0);
	text	   *op = PG_GETARG_TEXT_PP(2);

	FenceCheckToken(PG_GETARG_INT64(1), "token argument");

	PG_RETURN_TEXT_P(cstring_to_text(IdempotencyKey(VARDATA_ANY(target),
													VARSIZE_ANY_EXHDR(target),
													PG_GETARG_INT64(1),
													VARDATA_ANY(op),
													VARSIZE_ANY_EXHDR(op))));
}

/* Columns of fence_outbox only fence_enqueue sets (fence_outbox_guard) */
static const char *const outbox_fixed_columns[] = {
	"id", "target", "token", "operation_id", "idempotency_key", "endpoint", "payload",
	"created_at"
};

/* Raise 42501 unless an UPDATE of fence_outbox keeps outbox_fixed_columns */
static void
CheckOutboxUpdate(Relation rel, HeapTuple oldtuple, HeapTuple newtuple)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);

	for (int i = 0; i < lengthof(outbox_fixed_columns); i++)
	{
		int			attnum = SPI_fnumber(tupdesc, outbox_fixed_columns[i]);
		Form_pg_attribute att;
		bool		old_null;
		bool		new_null;
		Datum		old_value;
		Datum		new_value;

		if (attnum <= 0)
			continue;
		att = TupleDescAttr(tupdesc, attnum - 1);
		old_value = heap_getattr(oldtuple, attnum, tupdesc, &old_null);
		new_value = heap_getattr(newtuple, attnum, tupdesc, &new_null);
		if (old_null == new_null &&
			(old_null || datumIsEqual(old_value, new_value, att->attbyval, att->attlen)))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("column \"%s\" of a %s entry cannot be changed",
						outbox_fixed_columns[i], RelationGetRelationName(rel)),
				 errdetail("fence_enqueue admitted the entry as it is; only its delivery "
						   "state (state, attempts, next_attempt_at, last_status, "
						   "last_error, updated_at, delivered_at) may change."),
				 errhint("Enqueue the changed effect with fence_enqueue under a new "
						 "operation_id.")));
	}
}

/*
 * Trigger (BEFORE INSERT OR UPDATE ON fence_outbox, FOR EACH ROW): only
 * fence_enqueue inserts, and an UPDATE changes only the delivery state
 * (see the file comment)
 */
Datum
fence_outbox_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_outbox_guard: not called by trigger manager")));
	if (!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) ||
		  TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_outbox_guard: must be fired BEFORE INSERT OR UPDATE, "
						"FOR EACH ROW")));
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		CheckOutboxUpdate(trigdata->tg_relation, trigdata->tg_trigtuple,
						  trigdata->tg_newtuple);
		return PointerGetDatum(trigdata->tg_newtuple);
	}
	if (own_insert_depth == 0 && !superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only fence_enqueue may insert into %s",
						RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("A direct INSERT would skip the fence of its target, its proof "
						   "and the checks of its endpoint and payload."),
				 errhint("Call fence_enqueue(target, token, operation_id, endpoint, "
						 "payload).")));
	return PointerGetDatum(trigdata->tg_trigtuple);
}
