/*
 * trusted_keys.c
 *	  The public keys whose proofs pg_fence accepts: fence_trust_key(),
 *	  fence_distrust_key(), the trigger that announces changes to
 *	  fence_trusted_keys, and each backend's cache of the parsed keys.
 *
 * fence_trusted_keys(key_id, public_key, cluster_id, trusted_at) holds
 * Ed25519 public keys as PEM (what `openssl pkey -pubout` writes); key_id
 * is the key's kid (trusted_keys.h); a non-NULL cluster_id binds the key to that
 * cluster's proofs.  Verification reads the table as the calling user
 * (SELECT is granted to PUBLIC: public keys are not secret).
 *
 * Cache: each backend parses the keys once and keeps them until the
 * table changes.  Every change sends a relcache invalidation for the table
 * to all backends: fence_trust_key and fence_distrust_key send it, and so
 * does the statement trigger fence_trusted_keys_changed for any other
 * INSERT, UPDATE, DELETE or TRUNCATE.  The relcache callback drops this
 * cache and counts the change (FenceTrustedKeysChanges), which drops the
 * verified proofs that proof.c keeps.  FenceCheckProof reads the
 * invalidations that arrived before it checks a proof, and a load reads the
 * table with a new snapshot, not the transaction's: a change committed in
 * any backend is seen by the next statement that checks a proof in every
 * backend, even inside a REPEATABLE READ or SERIALIZABLE transaction that
 * began before it.
 *
 * A row whose public key does not parse, or whose key_id is not its key's
 * kid (only a direct INSERT can write one), is ignored with a WARNING.
 */
#include "postgres.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sodium.h>

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/snapmgr.h"

#include "pg_fence.h"
#include "trusted_keys.h"

PG_FUNCTION_INFO_V1(fence_trust_key);
PG_FUNCTION_INFO_V1(fence_distrust_key);
PG_FUNCTION_INFO_V1(fence_trusted_keys_changed);

/* The extension's table of trusted keys */
#define TRUSTED_KEYS_TABLE		"fence_trusted_keys"

/* Raw Ed25519 public keys are 32 bytes */
#define ED25519_PUBLIC_KEY_LEN	32

/* One parsed trusted key */
typedef struct TrustedKey
{
	char		kid[FENCE_KID_LEN + 1];
	EVP_PKEY   *pkey;
	unsigned char raw[ED25519_PUBLIC_KEY_LEN];	/* what libsodium verifies with */
	bool		has_cluster;
	uint64		cluster_id;
} TrustedKey;

/* This backend's copy of fence_trusted_keys */
typedef struct TrustedKeys
{
	bool		valid;			/* false: reload before use */
	Oid			nspid;			/* schema it was loaded from */
	Oid			relid;			/* the table, for the relcache callback */
	int			nkeys;
	TrustedKey *keys;			/* in TopMemoryContext */
} TrustedKeys;

static TrustedKeys trusted = {false, InvalidOid, InvalidOid, 0, NULL};

/* Invalidations of the table seen so far; a load is valid if none arrived during it */
static uint64 trusted_invalidations = 0;

/* Relcache callback: fence_trusted_keys (or everything) changed */
static void
TrustedKeysChanged(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == trusted.relid)
	{
		trusted.valid = false;
		trusted_invalidations++;
	}
}

/* Start libsodium and register the relcache callback; once, from _PG_init */
void
FenceTrustedKeysInit(void)
{
	if (sodium_init() < 0)
		elog(ERROR, "pg_fence: libsodium could not be initialized");
	CacheRegisterRelcacheCallback(TrustedKeysChanged, (Datum) 0);
}

/* How many changes of the table this backend has seen (trusted_keys.h) */
uint64
FenceTrustedKeysChanges(void)
{
	return trusted_invalidations;
}

/* Parse a PEM public key; NULL (and *problem set) unless it is Ed25519 */
static EVP_PKEY *
ParsePublicKey(const char *pem, const char **problem)
{
	BIO		   *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY   *pkey = NULL;

	if (bio != NULL)
		pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	BIO_free(bio);
	ERR_clear_error();
	*problem = NULL;
	if (pkey == NULL)
		*problem = "it is not a PEM public key (-----BEGIN PUBLIC KEY-----)";
	else if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_ED25519)
	{
		*problem = "it is not an Ed25519 key";
		EVP_PKEY_free(pkey);
		pkey = NULL;
	}
	return pkey;
}

/*
 * The kid of a key: hex of the first 8 bytes of SHA-256 over the raw key;
 * the raw key itself to raw_out when not NULL.
 */
static bool
ComputeKeyId(EVP_PKEY *pkey, char *kid, unsigned char *raw_out)
{
	unsigned char raw[ED25519_PUBLIC_KEY_LEN];
	size_t		rawlen = sizeof(raw);
	unsigned char digest[EVP_MAX_MD_SIZE];
	unsigned int digestlen = 0;

	if (EVP_PKEY_get_raw_public_key(pkey, raw, &rawlen) != 1 ||
		rawlen != ED25519_PUBLIC_KEY_LEN ||
		EVP_Digest(raw, rawlen, digest, &digestlen, EVP_sha256(), NULL) != 1)
	{
		ERR_clear_error();
		return false;
	}
	for (int i = 0; i < FENCE_KID_LEN / 2; i++)
		snprintf(kid + 2 * i, 3, "%02x", digest[i]);
	if (raw_out != NULL)
		memcpy(raw_out, raw, ED25519_PUBLIC_KEY_LEN);
	return true;
}

/* Free the cached keys */
static void
FreeTrustedKeys(void)
{
	for (int i = 0; i < trusted.nkeys; i++)
		EVP_PKEY_free(trusted.keys[i].pkey);
	if (trusted.keys != NULL)
		pfree(trusted.keys);
	trusted.keys = NULL;
	trusted.nkeys = 0;
	trusted.valid = false;
}

/* Parse one row of fence_trusted_keys into key; false (WARNING) to skip it */
static bool
ParseTrustedRow(HeapTuple row, TupleDesc tupdesc, TrustedKey *key)
{
	char	   *key_id = SPI_getvalue(row, tupdesc, 1);
	char	   *pem = SPI_getvalue(row, tupdesc, 2);
	char	   *cluster = SPI_getvalue(row, tupdesc, 3);
	const char *problem;

	key->pkey = pem ? ParsePublicKey(pem, &problem) : NULL;
	if (key->pkey == NULL)
	{
		ereport(WARNING,
				(errmsg("pg_fence: ignoring trusted key \"%s\": its public key is not "
						"an Ed25519 PEM public key", key_id ? key_id : "")));
		return false;
	}
	/* nothing may raise between parsing key->pkey and storing or freeing it */
	if (!ComputeKeyId(key->pkey, key->kid, key->raw))
	{
		EVP_PKEY_free(key->pkey);
		ereport(WARNING,
				(errmsg("pg_fence: ignoring trusted key \"%s\": could not compute "
						"its key id", key_id ? key_id : "")));
		return false;
	}
	key->has_cluster = (cluster != NULL);
	if ((key_id == NULL || strcmp(key_id, key->kid) != 0) ||
		(cluster != NULL && !FenceParseUint64(cluster, strlen(cluster), &key->cluster_id)))
	{
		EVP_PKEY_free(key->pkey);
		ereport(WARNING,
				(errmsg("pg_fence: ignoring trusted key \"%s\": its key_id is not %s "
						"or its cluster_id is not a valid cluster id",
						key_id ? key_id : "", key->kid),
				 errhint("Trust the key with fence_trust_key() instead of writing the table.")));
		return false;
	}
	return true;
}

/*
 * (Re)load fence_trusted_keys of the extension in schema nspid.  The copy
 * is marked valid only if the load completed and no invalidation of the
 * table arrived meanwhile; otherwise the next check loads it again.
 */
static void
LoadTrustedKeys(Oid nspid)
{
	char	   *sql;
	SPIPlanPtr	plan;
	int			ret;
	uint64		invalidations;

	FreeTrustedKeys();
	trusted.nspid = nspid;
	trusted.relid = get_relname_relid(TRUSTED_KEYS_TABLE, nspid);
	if (!OidIsValid(trusted.relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s does not exist", TRUSTED_KEYS_TABLE),
				 errhint("Update the extension: ALTER EXTENSION pg_fence UPDATE.")));
	invalidations = trusted_invalidations;

	sql = psprintf("SELECT key_id, public_key, cluster_id::pg_catalog.text FROM %s",
				   quote_qualified_identifier(get_namespace_name(nspid),
											  TRUSTED_KEYS_TABLE));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	plan = SPI_prepare(sql, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "pg_fence: reading %s failed: %s", TRUSTED_KEYS_TABLE,
			 SPI_result_code_string(SPI_result));
	/* every change committed so far, whatever the transaction's snapshot */
	ret = SPI_execute_snapshot(plan, NULL, NULL, GetLatestSnapshot(), InvalidSnapshot,
							   true, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "pg_fence: reading %s failed: %s", TRUSTED_KEYS_TABLE,
			 SPI_result_code_string(ret));
	trusted.keys = MemoryContextAllocZero(TopMemoryContext,
										  sizeof(TrustedKey) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		if (ParseTrustedRow(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
							&trusted.keys[trusted.nkeys]))
			trusted.nkeys++;
	}
	SPI_finish();
	trusted.valid = (invalidations == trusted_invalidations);
}

/* The trusted key with this kid, or NULL */
static const TrustedKey *
FindTrustedKey(Oid nspid, const char *kid)
{
	if (!trusted.valid || trusted.nspid != nspid)
		LoadTrustedKeys(nspid);
	for (int i = 0; i < trusted.nkeys; i++)
		if (strcmp(trusted.keys[i].kid, kid) == 0)
			return &trusted.keys[i];
	return NULL;
}

/*
 * Does signature verify message under the raw public key?  libsodium
 * verifies (less than half OpenSSL's time per signature here); OpenSSL only
 * parses the PEM.
 */
static bool
VerifyEd25519(const unsigned char *raw, const unsigned char *signature,
			  const unsigned char *message, size_t length)
{
	return crypto_sign_verify_detached(signature, message, length, raw) == 0;
}

/* Check a signature against the trusted keys (trusted_keys.h) */
FenceKeyCheck
FenceCheckSignature(Oid nspid, const char *kid, uint64 cluster_id,
					const unsigned char *signature, const unsigned char *message,
					size_t length, uint64 *bound_cluster)
{
	const TrustedKey *key = FindTrustedKey(nspid, kid);

	if (key == NULL)
		return FENCE_KEY_UNTRUSTED;
	if (key->has_cluster && key->cluster_id != cluster_id)
	{
		*bound_cluster = key->cluster_id;
		return FENCE_KEY_OTHER_CLUSTER;
	}
	if (!VerifyEd25519(key->raw, signature, message, length))
		return FENCE_KEY_BAD_SIGNATURE;
	return FENCE_KEY_VERIFIED;
}

/* The cluster_id argument as decimal text; 22023 unless in 1..2^64-1 */
static char *
ClusterIdArg(FunctionCallInfo fcinfo, int argno)
{
	char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out,
														   PG_GETARG_DATUM(argno)));
	size_t		len = strcspn(text, ".");
	uint64		value;

	/* 5.000 is the integer 5: only zeros may follow the point */
	for (const char *p = text + len + (text[len] == '.'); *p; p++)
		if (*p != '0')
			len = 0;
	if (!FenceParseUint64(text, len, &value))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid cluster_id %s", text),
				 errdetail("A cluster id is an integer between 1 and 18446744073709551615."),
				 errhint("Use the cluster id the coordinator prints, or NULL to accept "
						 "the key's proofs from any cluster.")));
	return psprintf(UINT64_FORMAT, value);
}

/* A PEM text of pkey, as `openssl pkey -pubout` writes it (palloc'd) */
static char *
PublicKeyPem(EVP_PKEY *pkey)
{
	BIO		   *bio = BIO_new(BIO_s_mem());
	char	   *data = NULL;
	long		len = 0;
	char	   *pem = NULL;

	if (bio != NULL && PEM_write_bio_PUBKEY(bio, pkey) == 1)
	{
		len = BIO_get_mem_data(bio, &data);
		pem = pnstrdup(data, len);
	}
	BIO_free(bio);
	ERR_clear_error();
	if (pem == NULL)
		elog(ERROR, "pg_fence: could not write a public key as PEM");
	return pem;
}

/* Run one statement on fence_trusted_keys; returns the rows it changed */
static uint64
RunKeysStatement(FunctionCallInfo fcinfo, const char *format, int nargs,
				 Oid *argtypes, Datum *values, const char *nulls)
{
	Oid			nspid = get_func_namespace(fcinfo->flinfo->fn_oid);
	char	   *table = quote_qualified_identifier(get_namespace_name(nspid),
												   TRUSTED_KEYS_TABLE);
	uint64		processed;
	int			ret;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pg_fence: SPI_connect failed");
	ret = SPI_execute_with_args(psprintf(format, table), nargs, argtypes, values,
								nulls, false, 0);
	if (ret < 0)
		elog(ERROR, "pg_fence: writing %s failed: %s", TRUSTED_KEYS_TABLE,
			 SPI_result_code_string(ret));
	processed = SPI_processed;
	SPI_finish();
	/* the trigger does this too; say it here as well, it is cheap */
	CacheInvalidateRelcacheByRelid(get_relname_relid(TRUSTED_KEYS_TABLE, nspid));
	return processed;
}

/* fence_trust_key(public_key, cluster_id) -> key_id: trust or re-bind a key */
Datum
fence_trust_key(PG_FUNCTION_ARGS)
{
	char	   *pem;
	const char *problem;
	EVP_PKEY   *pkey;
	char		kid[FENCE_KID_LEN + 1];
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	FenceCheckNotNull(fcinfo, 0, "public_key");
	pem = text_to_cstring(PG_GETARG_TEXT_PP(0));
	pkey = ParsePublicKey(pem, &problem);
	if (pkey == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid public key: %s", problem),
				 errdetail("The public_key argument is \"%.80s\"%s.", pem,
						   strlen(pem) > 80 ? "..." : ""),
				 errhint("Pass the Ed25519 public key as PEM, as "
						 "`openssl pkey -pubout` writes it.")));
	PG_TRY();
	{
		if (!ComputeKeyId(pkey, kid, NULL))
			elog(ERROR, "pg_fence: could not compute the key id of an Ed25519 key");
		values[1] = CStringGetTextDatum(PublicKeyPem(pkey));
	}
	PG_FINALLY();
	{
		EVP_PKEY_free(pkey);
	}
	PG_END_TRY();
	values[0] = CStringGetTextDatum(kid);
	values[2] = (Datum) 0;
	if (PG_ARGISNULL(1))
		nulls[2] = 'n';
	else
		values[2] = CStringGetTextDatum(ClusterIdArg(fcinfo, 1));

	(void) RunKeysStatement(fcinfo,
							"INSERT INTO %s AS k (key_id, public_key, cluster_id, trusted_at) "
							"VALUES ($1, $2, $3::pg_catalog.numeric, pg_catalog.now()) "
							"ON CONFLICT (key_id) DO UPDATE "
							"SET public_key = EXCLUDED.public_key, "
							"cluster_id = EXCLUDED.cluster_id, trusted_at = EXCLUDED.trusted_at",
							3, argtypes, values, nulls);
	PG_RETURN_TEXT_P(cstring_to_text(kid));
}

/* fence_distrust_key(key_id) -> true if a trusted key was removed */
Datum
fence_distrust_key(PG_FUNCTION_ARGS)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	FenceCheckNotNull(fcinfo, 0, "key_id");
	values[0] = PG_GETARG_DATUM(0);
	PG_RETURN_BOOL(RunKeysStatement(fcinfo,
									"DELETE FROM %s WHERE key_id OPERATOR(pg_catalog.=) $1",
									1, argtypes, values, NULL) > 0);
}

/* Statement trigger on fence_trusted_keys: invalidate every backend's cache */
Datum
fence_trusted_keys_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_trusted_keys_changed: must be fired FOR EACH STATEMENT")));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	return PointerGetDatum(NULL);
}
