/*-------------------------------------------------------------------------
 *
 * ore.c
 *	  Compare two Lewi–Wu ORE ciphertexts (Lewi and Wu, "Order-Revealing
 *	  Encryption: New Constructions, Applications, and Lower Bounds",
 *	  CCS 2016, section 4), 4-bit blocks.  Version 1 hashes with SHA-256,
 *	  version 2 with AES-128 keyed by the left key (design 13.5b); the
 *	  layout is the same.
 *
 * Each stored value carries both its left part (per block: a key k' and
 * the permuted nibble x~) and its right part (a nonce r and, per block,
 * sixteen 2-bit entries).  Left parts are deterministic, so the first
 * block where a's (k', x~) differs from b's is the first block where the
 * plaintexts differ -- something the scheme's leakage already reveals --
 * and only that block needs the hash: one SHA-256 (version 1) or one AES
 * block, keyed by a cached key schedule where the key came before
 * (version 2), per comparison.  The first operand may be a left part alone
 * (a version-2 query).
 *
 * The hash and cipher contexts are created once per process and reused;
 * nothing is allocated per comparison.
 *
 *-------------------------------------------------------------------------
 */
#include "ore.h"

#include <string.h>

#include <openssl/evp.h>

static EVP_MD_CTX *hash_ctx;
static const EVP_MD *sha256;

/* H(k, r) = (first 8 bytes of SHA-256(k || r), big-endian) mod 3 */
static int
ore_hash(const uint8_t *key, const uint8_t *nonce)
{
	uint8_t		digest[32];
	unsigned int digest_len;
	uint64_t	v = 0;

	if (hash_ctx == NULL)
	{
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
		/* fetched once: EVP_sha256() would be looked up at every init */
		if (sha256 == NULL)
			sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
#else
		sha256 = EVP_sha256();
#endif
		if (sha256 == NULL)
			return -1;
		hash_ctx = EVP_MD_CTX_new();
		if (hash_ctx == NULL)
			return -1;
	}
	if (EVP_DigestInit_ex(hash_ctx, sha256, NULL) != 1 ||
		EVP_DigestUpdate(hash_ctx, key, ORE_KEY_SIZE) != 1 ||
		EVP_DigestUpdate(hash_ctx, nonce, ORE_NONCE_SIZE) != 1 ||
		EVP_DigestFinal_ex(hash_ctx, digest, &digest_len) != 1)
		return -1;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | digest[i];
	return (int) (v % 3);
}

/*
 * Version 2's H keys AES with the left key of the first differing block.
 * A range scan compares one query operand with every row, so its keys (one
 * per block) come back again and again: the key schedules are kept in a
 * small direct-mapped cache of cipher contexts, and a hit costs one AES
 * block.  Keys are PRF outputs, so their first bytes spread them evenly.
 */
#define ORE_AES_CACHE	64

typedef struct OreAesSlot
{
	EVP_CIPHER_CTX *ctx;
	bool		keyed;
	uint8_t		key[ORE_KEY_SIZE];
} OreAesSlot;

static OreAesSlot aes_cache[ORE_AES_CACHE];
static const EVP_CIPHER *aes128;

/* H(k, r) = (first 8 bytes of AES-128_k(r), big-endian) mod 3 */
static int
ore_hash_aes(const uint8_t *key, const uint8_t *nonce)
{
	uint8_t		block[32];
	uint64_t	v = 0;
	OreAesSlot *slot;

	if (aes128 == NULL)
	{
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
		aes128 = EVP_CIPHER_fetch(NULL, "AES-128-ECB", NULL);
#else
		aes128 = EVP_aes_128_ecb();
#endif
		if (aes128 == NULL)
			return -1;
	}
	slot = &aes_cache[(key[0] | (key[1] << 8)) % ORE_AES_CACHE];
	if (slot->ctx == NULL)
	{
		slot->ctx = EVP_CIPHER_CTX_new();
		if (slot->ctx == NULL)
			return -1;
		if (EVP_EncryptInit_ex(slot->ctx, aes128, NULL, NULL, NULL) != 1 ||
			EVP_CIPHER_CTX_set_padding(slot->ctx, 0) != 1)
		{
			EVP_CIPHER_CTX_free(slot->ctx);
			slot->ctx = NULL;
			return -1;
		}
	}
	if (!slot->keyed || memcmp(slot->key, key, ORE_KEY_SIZE) != 0)
	{
		/* a new key on the context keeps its cipher: only the schedule */
		slot->keyed = false;
		if (EVP_EncryptInit_ex(slot->ctx, NULL, NULL, key, NULL) != 1)
			return -1;
		memcpy(slot->key, key, ORE_KEY_SIZE);
		slot->keyed = true;
	}

	/*
	 * One whole block in ECB without padding: EVP_Cipher goes straight to the
	 * cipher, without EVP_EncryptUpdate's buffering of partial blocks.
	 */
	if (EVP_Cipher(slot->ctx, block, nonce, ORE_NONCE_SIZE) <= 0)
		return -1;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | block[i];
	return (int) (v % 3);
}

static inline int
permuted_nibble(const uint8_t *nibbles, int block)
{
	uint8_t		byte = nibbles[block / 2];

	return (block % 2 == 0) ? byte >> 4 : byte & 0x0F;
}

/*
 * Structural check of an ORE ciphertext: every 2-bit entry of the right
 * part is a residue mod 3.  (Entries that are residues but wrong cannot be
 * detected without the key: see design 13.1 on writers of a column.)
 */
bool
ore_ciphertext_valid(const uint8_t *ore, int nblocks)
{
	const uint8_t *rows = ore + (size_t) nblocks * ORE_KEY_SIZE + (nblocks + 1) / 2 +
		ORE_NONCE_SIZE;

	for (int i = 0; i < nblocks * ORE_ROW_SIZE; i++)
	{
		uint8_t		b = rows[i];

		/* an entry is 3 when both of its bits are set */
		if ((b & (b >> 1) & 0x55) != 0)
			return false;
	}
	return true;
}

/* Are the left parts (per block: k' and the permuted nibble) identical? */
bool
ore_left_equal(const uint8_t *a, const uint8_t *b, int nblocks)
{
	size_t		left = (size_t) nblocks * ORE_KEY_SIZE + (nblocks + 1) / 2;

	return memcmp(a, b, left) == 0;
}

/*
 * Compare the ORE parts of a and b (both nblocks blocks, of one version; a
 * may be a left part alone); *result is -1, 0 or 1.  0 means every block
 * is equal: the order inputs are equal.
 */
OreResult
ore_compare(OreVersion version, const uint8_t *a, const uint8_t *b,
			int nblocks, int *result)
{
	const size_t keys_size = (size_t) nblocks * ORE_KEY_SIZE;
	const uint8_t *a_nibbles = a + keys_size;
	const uint8_t *b_nibbles = b + keys_size;
	const uint8_t *b_nonce = b_nibbles + (nblocks + 1) / 2;
	const uint8_t *b_rows = b_nonce + ORE_NONCE_SIZE;
	int			block;
	int			x,
				entry,
				h,
				v;

	for (block = 0; block < nblocks; block++)
	{
		if (permuted_nibble(a_nibbles, block) != permuted_nibble(b_nibbles, block) ||
			memcmp(a + block * ORE_KEY_SIZE, b + block * ORE_KEY_SIZE, ORE_KEY_SIZE) != 0)
			break;
	}
	if (block == nblocks)
	{
		*result = 0;
		return ORE_OK;
	}

	x = permuted_nibble(a_nibbles, block);
	entry = (b_rows[block * ORE_ROW_SIZE + x / 4] >> (2 * (x % 4))) & 3;
	if (entry == 3)
		return ORE_CORRUPT;		/* entries are residues mod 3 */
	if (version == ORE_V2)
		h = ore_hash_aes(a + block * ORE_KEY_SIZE, b_nonce);
	else
		h = ore_hash(a + block * ORE_KEY_SIZE, b_nonce);
	if (h < 0)
		return ORE_CRYPTO_FAILED;
	v = (entry - h + 3) % 3;
	if (v == 0)
		return ORE_CORRUPT;
	*result = (v == 1) ? 1 : -1;
	return ORE_OK;
}
