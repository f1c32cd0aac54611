/*-------------------------------------------------------------------------
 *
 * ciphertext.h
 *	  The formats of an always-encrypted value, as the client writes them
 *	  (docs/design.md, sections 13.3 and 13.5b), and their parser.
 *
 * This file and ciphertext.c use no PostgreSQL headers, so the fuzzer in
 * test/fuzz/ can link them alone.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PGCIPHER_CIPHERTEXT_H
#define PGCIPHER_CIPHERTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENC_VERSION			1
#define ENC_VERSION_ORE2	2	/* level ORD only: ORE on AES (13.5b) */
#define ENC_HEADER_SIZE		12
#define ENC_TOKEN_SIZE		16
#define ENC_NONCE_SIZE		12
#define ENC_TAG_SIZE		16
#define ENC_MIN_PAYLOAD		(ENC_NONCE_SIZE + ENC_TAG_SIZE)
#define ENC_BLOOM_SIZE		32	/* MATCH: 256-bit Bloom filter of trigrams */
#define ENC_FLAG_QUERY		0x01	/* a query, not a value: a LIKE pattern
									 * (MATCH) or a left-only ORE operand
									 * (version 2) */
#define ENC_FLAG_ORE1		0x02	/* version 2: the version-1 ORE part
									 * follows (a column being moved) */
#define ENC_FLAG_FOLDED		0x04	/* version 1, MATCH: the Bloom filter is
									 * of the case-folded text (a column bound
									 * case-insensitive) */
#define ENC_FLAG_TENANT		0x08	/* versions 1 and 2: the key id is a
									 * tenant key's (design 13.13) */

typedef enum EncType
{
	ENC_INT4 = 1,
	ENC_INT8 = 2,
	ENC_FLOAT8 = 3,
	ENC_NUMERIC = 4,
	ENC_TEXT = 5,
	ENC_BYTEA = 6,
	ENC_DATE = 7,
	ENC_TIMESTAMPTZ = 8,
	ENC_BOOL = 9
} EncType;

#define ENC_TYPE_MAX		9

typedef enum EncLevel
{
	ENC_RND = 1,				/* payload only */
	ENC_EQ = 2,					/* + equality token */
	ENC_ORD = 3,				/* + equality token + ORE ciphertext */
	ENC_MATCH = 4				/* text: + equality token + Bloom filter */
} EncLevel;

#define ENC_LEVEL_MAX		4

typedef enum EncParseResult
{
	ENC_PARSE_OK = 0,
	ENC_PARSE_TOO_SHORT,
	ENC_PARSE_BAD_VERSION,
	ENC_PARSE_BAD_TYPE,
	ENC_PARSE_BAD_LEVEL,
	ENC_PARSE_BAD_FLAGS,
	ENC_PARSE_BAD_PAYLOAD,
	ENC_PARSE_BAD_ORE
} EncParseResult;

/* A parsed value: pointers into the caller's bytes, nothing copied. */
typedef struct EncValue
{
	EncType		type;
	EncLevel	level;
	uint32_t	key_id;
	uint32_t	group_tag;
	uint8_t		flags;
	const uint8_t *token;		/* ENC_TOKEN_SIZE bytes, or NULL for RND */
	int			version;		/* format version, byte 0 */
	const uint8_t *ore;			/* ORE ciphertext of the version, or NULL
								 * below ORD */
	bool		ore_left_only;	/* a query: ore has no right part */
	const uint8_t *ore1;		/* the version-1 ORE ciphertext, if any */
	int			ore_blocks;		/* 4-bit blocks in each */
	const uint8_t *bloom;		/* ENC_BLOOM_SIZE bytes for MATCH, else NULL */
	const uint8_t *payload;		/* nonce, GCM ciphertext, tag */
	size_t		payload_len;
} EncValue;

/* Integers in the format are big-endian. */
static inline uint32_t
enc_read_uint32(const uint8_t *p)
{
	return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) |
		((uint32_t) p[2] << 8) | (uint32_t) p[3];
}

extern EncParseResult enc_parse(const uint8_t *data, size_t len, EncValue *value);
extern EncParseResult enc_validate(const uint8_t *data, size_t len, EncValue *value);
extern const char *enc_parse_result_string(EncParseResult result);
extern const char *enc_type_name(EncType type);
extern const char *enc_level_name(EncLevel level);
extern int	enc_order_input_size(EncType type);
extern int	enc_fixed_plaintext_size(EncType type);

#endif							/* PGCIPHER_CIPHERTEXT_H */
