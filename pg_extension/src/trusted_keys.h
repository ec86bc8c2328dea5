/*
 * trusted_keys.h
 *	  The public keys whose token proofs pg_fence accepts (the table
 *	  fence_trusted_keys, cached per backend; trusted_keys.c), and checking
 *	  a signature against them.  proof.c builds on this; nothing here
 *	  depends on how a proof is written or where it comes from.
 *
 * A key is named by its kid: the lowercase hex of the first 8 bytes of
 * SHA-256 over the raw 32-byte Ed25519 public key.
 */
#ifndef PG_FENCE_TRUSTED_KEYS_H
#define PG_FENCE_TRUSTED_KEYS_H

#include "postgres.h"

/* A kid in hex, and an Ed25519 signature */
#define FENCE_KID_LEN				16
#define FENCE_SIGNATURE_LEN			64

/* Outcome of checking a signature against the trusted keys */
typedef enum FenceKeyCheck
{
	FENCE_KEY_VERIFIED,
	FENCE_KEY_UNTRUSTED,		/* no trusted key has the kid */
	FENCE_KEY_OTHER_CLUSTER,	/* the key is trusted for another cluster */
	FENCE_KEY_BAD_SIGNATURE		/* forged, or over another message */
} FenceKeyCheck;

/* Start libsodium and watch the table for changes; once, from _PG_init */
extern void FenceTrustedKeysInit(void);

/*
 * How many times this backend has seen fence_trusted_keys change (an
 * invalidation of it, or of every relation).  Only grows; anything that
 * caches a result of FenceCheckSignature keeps it while this is unchanged.
 */
extern uint64 FenceTrustedKeysChanges(void);

/*
 * Check signature (FENCE_SIGNATURE_LEN bytes) over message, made by the
 * key named kid for cluster cluster_id, against the trusted keys of the
 * extension in schema nspid.  For FENCE_KEY_OTHER_CLUSTER, *bound_cluster
 * is the cluster the key is trusted for.
 */
extern FenceKeyCheck FenceCheckSignature(Oid nspid, const char *kid, uint64 cluster_id,
										 const unsigned char *signature,
										 const unsigned char *message, size_t length,
										 uint64 *bound_cluster);

#endif							/* PG_FENCE_TRUSTED_KEYS_H */
