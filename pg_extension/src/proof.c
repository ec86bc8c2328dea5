/*
 * proof.c
 *	  Checking a version-1 token proof (format in proof.h) for a lock key
 *	  and a token, and refusing the write with SQLSTATE 55F02 otherwise.
 *
 * Where the proof comes from: the proof argument of fenced_update,
 * fence_admit or fence_advance (fenced_update hands it to the trigger its
 * UPDATE fires, as the "override" below, for the duration of that UPDATE),
 * else the setting pg_fence.proof.
 *
 * Refusals, one SQLSTATE (55F02), the message says which:
 *	  missing        no proof argument and pg_fence.proof is empty
 *	  malformed      not v1.<kid>.<cluster_id>.<signature>
 *	  untrusted      no row of fence_trusted_keys has the proof's kid
 *	  other cluster  the key is trusted only for another cluster
 *	  no verify      the signature does not verify for this lock key and
 *	                 token: forged, or issued for another key or token
 *	                 (Ed25519 cannot tell these apart)
 * A refusal is counted in fence_stats (rejected_proof) before it is raised.
 *
 * Cost: Ed25519 verification is expensive, and a lease re-sends the same
 * proof with every transaction.  Proofs that verified are remembered per
 * backend (proof text -> lock key, token), at most FENCE_VERIFIED_MAX of
 * them (all forgotten when full), and all forgotten whenever
 * fence_trusted_keys changes (FenceTrustedKeysChanges, trusted_keys.h), so
 * a distrusted key's proofs are refused from the next statement that
 * checks a proof on.
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"

#include "pg_fence.h"
#include "proof.h"
#include "trusted_keys.h"

/* Proofs remembered as verified, per backend */
#define FENCE_VERIFIED_MAX			1024

/* The fixed prefix of every signed message, including its NUL byte */
#define FENCE_PROOF_DOMAIN			"pgfence token proof v1"
#define FENCE_PROOF_DOMAIN_LEN		(sizeof(FENCE_PROOF_DOMAIN))

/* Longest signed message: domain, cluster, token, key length, key */
#define FENCE_MESSAGE_MAXLEN \
	(FENCE_PROOF_DOMAIN_LEN + 8 + 8 + 4 + FENCE_LOCK_KEY_MAXLEN)

/* Why a proof is refused */
typedef enum ProofRefusal
{
	PROOF_MISSING,
	PROOF_MALFORMED,
	PROOF_UNTRUSTED,
	PROOF_OTHER_CLUSTER,
	PROOF_BAD_SIGNATURE
} ProofRefusal;

/* A proof that verified, and what it verified for */
typedef struct VerifiedProof
{
	char		proof[FENCE_PROOF_MAXLEN + 1];	/* hash key; must be first */
	int64		token;
	char		lockkey[FENCE_LOCK_KEY_MAXLEN + 1];
} VerifiedProof;

static HTAB *verified = NULL;
/* FenceTrustedKeysChanges() when the table was created: any change since empties it */
static uint64 verified_keys_changes = 0;

/* pg_fence.proof (never NULL), and fenced_update's proof argument */
static const char *proof_setting = "";
static const char *proof_override = NULL;

/* Value of a base64url digit, -1 for anything else */
static int
Base64UrlValue(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

/* Decode exactly FENCE_SIGNATURE_B64LEN canonical base64url digits */
static bool
DecodeSignature(const char *text, unsigned char *signature)
{
	uint32		bits = 0;
	int			nbits = 0;
	int			out = 0;

	for (int i = 0; i < FENCE_SIGNATURE_B64LEN; i++)
	{
		int			v = Base64UrlValue(text[i]);

		if (v < 0)
			return false;
		bits = (bits << 6) | (uint32) v;
		nbits += 6;
		if (nbits >= 8)
		{
			nbits -= 8;
			signature[out++] = (unsigned char) (bits >> nbits);
			bits &= (1U << nbits) - 1;
		}
	}
	/* the 4 bits left over must be zero: one spelling per signature */
	return out == FENCE_SIGNATURE_LEN && bits == 0;
}

/* Parse the wire form; NULL on success, else why it is malformed */
const char *
FenceParseProof(const char *text, FenceProof *proof)
{
	size_t		len = strlen(text);
	const char *cluster;
	const char *dot;

	if (len > FENCE_PROOF_MAXLEN)
		return "it is longer than 127 bytes";
	if (strncmp(text, "v1.", 3) != 0)
		return "it does not start with \"v1.\"";
	for (int i = 0; i < FENCE_KID_LEN; i++)
	{
		char		c = text[3 + i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return "its key id is not 16 lowercase hex digits";
		proof->kid[i] = c;
	}
	proof->kid[FENCE_KID_LEN] = '\0';
	if (text[3 + FENCE_KID_LEN] != '.')
		return "its key id is not 16 lowercase hex digits";
	cluster = text + 3 + FENCE_KID_LEN + 1;
	dot = strchr(cluster, '.');
	if (dot == NULL ||
		!FenceParseUint64(cluster, dot - cluster, &proof->cluster_id))
		return "its cluster id is not an integer between 1 and 18446744073709551615";
	if (strlen(dot + 1) != FENCE_SIGNATURE_B64LEN ||
		!DecodeSignature(dot + 1, proof->signature))
		return "its signature is not 86 base64url digits (64 bytes, unpadded)";
	return NULL;
}

/* Append an unsigned integer in big-endian byte order */
static size_t
PutBigEndian(unsigned char *buf, uint64 value, int bytes)
{
	for (int i = 0; i < bytes; i++)
		buf[i] = (unsigned char) (value >> (8 * (bytes - 1 - i)));
	return bytes;
}

/* The message a proof signs; returns its length */
static size_t
BuildMessage(unsigned char *buf, uint64 cluster_id, int64 token, const char *lockkey)
{
	size_t		keylen = strlen(lockkey);
	size_t		n = 0;

	Assert(keylen <= FENCE_LOCK_KEY_MAXLEN);
	memcpy(buf, FENCE_PROOF_DOMAIN, FENCE_PROOF_DOMAIN_LEN);
	n += FENCE_PROOF_DOMAIN_LEN;
	n += PutBigEndian(buf + n, cluster_id, 8);
	n += PutBigEndian(buf + n, (uint64) token, 8);
	n += PutBigEndian(buf + n, keylen, 4);
	memcpy(buf + n, lockkey, keylen);
	return n + keylen;
}

/* The proof writes are checked with now ('' = none) */
const char *
FenceCurrentProof(void)
{
	if (proof_override != NULL)
		return proof_override;
	if (proof_setting[0] != '\0')
		FenceCheckProofOrigin();
	return proof_setting;
}

/* Assign hook helper of pg_fence.proof: publish the new value */
void
FenceSetProofSetting(const char *proof)
{
	proof_setting = proof ? proof : "";
}

/*
 * Make proof (NULL: none, use pg_fence.proof) the current proof; returns
 * the previous override, to be restored (also on error) by the caller.
 */
const char *
FenceSetProofOverride(const char *proof)
{
	const char *previous = proof_override;

	proof_override = proof;
	return previous;
}

/* The verified-proof table, created or emptied as needed */
static HTAB *
VerifiedTable(void)
{
	HASHCTL		info;

	if (verified != NULL && verified_keys_changes == FenceTrustedKeysChanges() &&
		hash_get_num_entries(verified) < FENCE_VERIFIED_MAX)
		return verified;
	if (verified != NULL)
		hash_destroy(verified);
	verified_keys_changes = FenceTrustedKeysChanges();
	info.keysize = FENCE_PROOF_MAXLEN + 1;
	info.entrysize = sizeof(VerifiedProof);
	info.hcxt = TopMemoryContext;
	verified = hash_create("pg_fence verified proofs", FENCE_VERIFIED_MAX, &info,
						   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	return verified;
}

/* Did exactly this proof already verify for this lock key and token? */
static bool
IsVerified(const char *proof, const char *lockkey, int64 token)
{
	VerifiedProof *entry;

	if (verified == NULL || verified_keys_changes != FenceTrustedKeysChanges() ||
		strlen(proof) > FENCE_PROOF_MAXLEN)
		return false;
	entry = hash_search(verified, proof, HASH_FIND, NULL);
	return entry != NULL && entry->token == token &&
		strcmp(entry->lockkey, lockkey) == 0;
}

/* Remember a proof that verified */
static void
RememberVerified(const char *proof, const char *lockkey, int64 token)
{
	VerifiedProof *entry;

	entry = hash_search(VerifiedTable(), proof, HASH_ENTER, NULL);
	entry->token = token;
	strlcpy(entry->lockkey, lockkey, sizeof(entry->lockkey));
}

/*
 * Count a refusal of target's write in fence_stats and record it in
 * fence_rejections; lockkey and token NULL / negative when unknown
 */
static void
CountRefusal(const FenceProofTarget *target, const char *lockkey, int64 token)
{
	FencePair	in = {token, false, 0};

	if (target == NULL)
		return;
	FenceStatsRejectedProof(target->relid, target->resource);
	FenceRecordRejection(target->path, FENCE_REASON_PROOF, target->relid,
						 OidIsValid(target->relid) ? lockkey : target->resource,
						 token >= 0 ? &in : NULL, NULL);
}

/* Count and raise 55F02 for a lock key that cannot be built */
void
FenceRefuseLockKey(const FenceProofTarget *target, int sqlerrcode,
				   const char *message, const char *detail)
{
	CountRefusal(target, NULL, -1);
	ereport(ERROR,
			(errcode(sqlerrcode),
			 errmsg_internal("%s", message),
			 errdetail_internal("%s", detail),
			 errhint("Rows of the table are locked under the lock key that fence_protect's "
					 "lock_key template builds from them.")));
}

/* Count and raise 55F02 for a refused proof */
static void
RefuseProof(const FenceProofTarget *target, ProofRefusal why, const char *text,
			const FenceProof *proof, const char *reason,
			const char *lockkey, int64 token, uint64 bound_cluster)
{
	CountRefusal(target, lockkey, token);
	switch (why)
	{
		case PROOF_MISSING:
			ereport(ERROR,
					(errcode(ERRCODE_FENCE_PROOF),
					 errmsg("no fencing token proof for lock key \"%s\" and token " INT64_FORMAT,
							lockkey, token),
					 errdetail("Writes under lock key \"%s\" need the proof the coordinator "
							   "granted with the token; no proof argument was given and "
							   "pg_fence.proof is empty.", lockkey),
					 errhint("Run SET LOCAL pg_fence.proof = '<proof>' in the transaction, "
							 "or pass the proof argument.")));
			break;
		case PROOF_MALFORMED:
			ereport(ERROR,
					(errcode(ERRCODE_FENCE_PROOF),
					 errmsg("malformed fencing token proof for lock key \"%s\" and token "
							INT64_FORMAT, lockkey, token),
					 errdetail("The proof \"%.*s\" is malformed: %s.",
							   FENCE_PROOF_MAXLEN + 1, text, reason),
					 errhint("A proof reads v1.<key id>.<cluster id>.<signature>, "
							 "exactly as the coordinator granted it.")));
			break;
		case PROOF_UNTRUSTED:
			ereport(ERROR,
					(errcode(ERRCODE_FENCE_PROOF),
					 errmsg("fencing token proof for lock key \"%s\" and token " INT64_FORMAT
							" is signed by untrusted key %s", lockkey, token, proof->kid),
					 errdetail("No row of fence_trusted_keys has key_id '%s'.", proof->kid),
					 errhint("Trust the coordinator's public key with fence_trust_key(), "
							 "or use a proof from a trusted coordinator.")));
			break;
		case PROOF_OTHER_CLUSTER:
			ereport(ERROR,
					(errcode(ERRCODE_FENCE_PROOF),
					 errmsg("fencing token proof for lock key \"%s\" and token " INT64_FORMAT
							" comes from cluster " UINT64_FORMAT ", but key %s is trusted "
							"only for cluster " UINT64_FORMAT,
							lockkey, token, proof->cluster_id, proof->kid, bound_cluster),
					 errdetail("fence_trusted_keys binds key %s to cluster " UINT64_FORMAT ".",
							   proof->kid, bound_cluster),
					 errhint("Use a lock granted by cluster " UINT64_FORMAT
							 ", or trust the key again with the right cluster_id.",
							 bound_cluster)));
			break;
		case PROOF_BAD_SIGNATURE:
			ereport(ERROR,
					(errcode(ERRCODE_FENCE_PROOF),
					 errmsg("fencing token proof does not verify for lock key \"%s\" and "
							"token " INT64_FORMAT " (key %s)", lockkey, token, proof->kid),
					 errdetail("The signature is forged, or the proof was issued for another "
							   "lock key or token; a verifier cannot tell these apart."),
					 errhint("Use the proof granted together with this token, for this "
							 "lock key.")));
			break;
	}
	pg_unreachable();
}

/*
 * The bytes of lockkey a proof signs: its UTF-8 form, as the coordinator
 * keeps keys.  Keys in another database encoding are converted (LATIN1
 * "\xe9\xa9\xa9" is signed as the UTF-8 of those three characters, never as
 * the UTF-8 character it happens to equal byte for byte); a SQL_ASCII
 * database does not say which characters its bytes are, so a key with a
 * non-ASCII byte is refused there, and so is a key that does not come back
 * unchanged from UTF-8 (an encoding with two byte sequences for one
 * character).  A character with no UTF-8 form raises PostgreSQL's 22P05.
 */
static const char *
SignedLockKey(const FenceProofTarget *target, const char *lockkey)
{
	int			encoding = GetDatabaseEncoding();
	char	   *utf8;

	if (encoding == PG_UTF8)
		return lockkey;
	if (encoding == PG_SQL_ASCII)
	{
		for (const unsigned char *p = (const unsigned char *) lockkey; *p; p++)
			if (*p >= 0x80)
			{
				CountRefusal(target, lockkey, -1);
				ereport(ERROR,
						(errcode(ERRCODE_FENCE_PROOF),
						 errmsg("lock key \"%s\" cannot be verified in a SQL_ASCII database: "
								"it has non-ASCII bytes", lockkey),
						 errdetail("Proofs sign the UTF-8 bytes of a lock key, and a SQL_ASCII "
								   "database does not say which characters its bytes are."),
						 errhint("Use ASCII lock keys, or a database whose encoding is "
								 "not SQL_ASCII.")));
			}
		return lockkey;
	}
	utf8 = pg_server_to_any(lockkey, strlen(lockkey), PG_UTF8);
	/* an encoding that maps two byte sequences to one character cannot key */
	if (strcmp(pg_any_to_server(utf8, strlen(utf8), PG_UTF8), lockkey) != 0)
		FenceRefuseLockKey(target, ERRCODE_FENCE_PROOF,
						   psprintf("lock key \"%s\" does not convert to UTF-8 and back "
									"unchanged in database encoding %s",
									lockkey, GetDatabaseEncodingName()),
						   "Another key of the same characters would accept the same proofs.");
	if (strlen(utf8) > FENCE_LOCK_KEY_MAXLEN)
		FenceRefuseLockKey(target, ERRCODE_FENCE_PROOF,
						   psprintf("lock key \"%s\" is %zu bytes long in UTF-8, more than %d",
									lockkey, strlen(utf8), FENCE_LOCK_KEY_MAXLEN),
						   "Proofs sign the UTF-8 bytes of a lock key.");
	return utf8;
}

/*
 * Return if proof (text; NULL or '' = none) is a valid proof that the
 * coordinator granted token for lockkey; otherwise count and raise 55F02.
 */
void
FenceCheckProof(const FenceProofTarget *target, const char *text,
				const char *lockkey, int64 token)
{
	FenceProof	proof;
	const char *reason;
	unsigned char message[FENCE_MESSAGE_MAXLEN];
	size_t		length;
	uint64		bound_cluster = 0;

	if (text == NULL || text[0] == '\0')
		RefuseProof(target, PROOF_MISSING, text, NULL, NULL, lockkey, token, 0);
	/*
	 * A change of fence_trusted_keys committed by another backend takes
	 * effect here, at the next statement that checks a proof, whatever this
	 * transaction's isolation level: read the invalidations it sent (a
	 * shared-memory flag test when there are none), which drop both caches.
	 */
	AcceptInvalidationMessages();
	if (IsVerified(text, lockkey, token))
		return;
	reason = FenceParseProof(text, &proof);
	if (reason != NULL)
		RefuseProof(target, PROOF_MALFORMED, text, NULL, reason, lockkey, token, 0);

	length = BuildMessage(message, proof.cluster_id, token, SignedLockKey(target, lockkey));
	switch (FenceCheckSignature(target->nspid, proof.kid, proof.cluster_id, proof.signature,
								message, length, &bound_cluster))
	{
		case FENCE_KEY_VERIFIED:
			RememberVerified(text, lockkey, token);
			return;
		case FENCE_KEY_UNTRUSTED:
			RefuseProof(target, PROOF_UNTRUSTED, text, &proof, NULL, lockkey, token, 0);
			break;
		case FENCE_KEY_OTHER_CLUSTER:
			RefuseProof(target, PROOF_OTHER_CLUSTER, text, &proof, NULL, lockkey, token,
						bound_cluster);
			break;
		case FENCE_KEY_BAD_SIGNATURE:
			RefuseProof(target, PROOF_BAD_SIGNATURE, text, &proof, NULL, lockkey, token, 0);
			break;
	}
}

/*
 * Does proof (text; NULL or '' = none) verify for lockkey and token?  As
 * FenceCheckProof, but answers instead of counting and raising: a write
 * preempts older transactions before its own statement decides
 * (preempt.c), and only with a proof that verifies.  Only a lock key that
 * cannot be signed (SignedLockKey) is counted and raised, for target: the
 * caller's table or resource and path, as its own check would.
 */
bool
FenceProofVerifies(const FenceProofTarget *target, const char *text, const char *lockkey,
				   int64 token)
{
	FenceProof	proof;
	unsigned char message[FENCE_MESSAGE_MAXLEN];
	size_t		length;
	uint64		bound_cluster = 0;

	if (text == NULL || text[0] == '\0')
		return false;
	AcceptInvalidationMessages();
	if (IsVerified(text, lockkey, token))
		return true;
	if (FenceParseProof(text, &proof) != NULL)
		return false;
	length = BuildMessage(message, proof.cluster_id, token, SignedLockKey(target, lockkey));
	if (FenceCheckSignature(target->nspid, proof.kid, proof.cluster_id, proof.signature,
							message, length, &bound_cluster) != FENCE_KEY_VERIFIED)
		return false;
	RememberVerified(text, lockkey, token);
	return true;
}
