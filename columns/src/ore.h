/*-------------------------------------------------------------------------
 *
 * ore.h
 *	  Server side of Lewi–Wu block order-revealing encryption: comparing a
 *	  value's left ciphertext with another's right ciphertext
 *	  (docs/design.md, sections 13.5 and 13.5b).  Encryption is the
 *	  client's (Go).
 *
 *-------------------------------------------------------------------------
 */
#ifndef PGCIPHER_ORE_H
#define PGCIPHER_ORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ORE_KEY_SIZE	16
#define ORE_NONCE_SIZE	16
#define ORE_ROW_SIZE	4		/* 16 entries of 2 bits per block */

typedef enum OreResult
{
	ORE_OK = 0,
	ORE_CORRUPT,				/* the first differing block says "equal" */
	ORE_CRYPTO_FAILED			/* OpenSSL could not hash */
} OreResult;

/* The hash H of each ORE version: SHA-256 (1) or AES-128 (2). */
typedef enum OreVersion
{
	ORE_V1 = 1,
	ORE_V2 = 2
} OreVersion;

/* Bytes of the left part alone (a version-2 query operand). */
static inline size_t
ore_left_size(int nblocks)
{
	return (size_t) nblocks * ORE_KEY_SIZE + (size_t) (nblocks + 1) / 2;
}

/* Bytes of an ORE ciphertext (left then right part) of nblocks blocks. */
static inline size_t
ore_ciphertext_size(int nblocks)
{
	return (size_t) nblocks * ORE_KEY_SIZE + (size_t) (nblocks + 1) / 2 +
		ORE_NONCE_SIZE + (size_t) nblocks * ORE_ROW_SIZE;
}

extern bool ore_ciphertext_valid(const uint8_t *ore, int nblocks);
extern bool ore_left_equal(const uint8_t *a, const uint8_t *b, int nblocks);
extern OreResult ore_compare(OreVersion version, const uint8_t *a,
							 const uint8_t *b, int nblocks, int *result);

#endif							/* PGCIPHER_ORE_H */
