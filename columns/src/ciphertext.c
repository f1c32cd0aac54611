/*-------------------------------------------------------------------------
 *
 * ciphertext.c
 *	  Parse and validate the formats of an always-encrypted value: version
 *	  1, and version 2 (level ORD only; its ORE is built on AES, and a
 *	  value may also carry its version-1 ORE while its column is moved).
 *
 * The server never decrypts, so validation is structural: a known version,
 * type and level, known flags, and lengths that add up exactly for the type
 * and level.  A value that passes can be compared without further bounds
 * checks; one that does not is rejected on input and never stored.
 *
 *-------------------------------------------------------------------------
 */
#include "ciphertext.h"

#include "ore.h"

/* Bytes of the order input the client feeds to ORE for each type. */
int
enc_order_input_size(EncType type)
{
	switch (type)
	{
		case ENC_INT4:
		case ENC_DATE:
			return 4;
		case ENC_INT8:
		case ENC_TIMESTAMPTZ:
		case ENC_FLOAT8:
			return 8;
		case ENC_BOOL:
			return 1;
		case ENC_NUMERIC:
		case ENC_TEXT:
		case ENC_BYTEA:
			return 16;
	}
	return -1;
}

/*
 * Plaintext bytes of fixed-size types, -1 for variable-length ones.  A
 * fixed-size type's order input is its plaintext with the sign bit moved
 * (design 13.3), so the sizes are the same.
 */
int
enc_fixed_plaintext_size(EncType type)
{
	switch (type)
	{
		case ENC_NUMERIC:
		case ENC_TEXT:
		case ENC_BYTEA:
			return -1;
		default:
			return enc_order_input_size(type);
	}
}

/*
 * enc_validate: enc_parse, plus the checks that need a pass over the ORE
 * part.  For values arriving from a client; stored values were validated
 * and are only parsed.
 */
EncParseResult
enc_validate(const uint8_t *data, size_t len, EncValue *value)
{
	EncParseResult result = enc_parse(data, len, value);

	if (result != ENC_PARSE_OK || value->level != ENC_ORD)
		return result;
	if (!value->ore_left_only &&
		!ore_ciphertext_valid(value->ore, value->ore_blocks))
		return ENC_PARSE_BAD_ORE;
	if (value->ore1 != NULL && value->ore1 != value->ore &&
		!ore_ciphertext_valid(value->ore1, value->ore_blocks))
		return ENC_PARSE_BAD_ORE;
	return result;
}

EncParseResult
enc_parse(const uint8_t *data, size_t len, EncValue *value)
{
	size_t		pos = ENC_HEADER_SIZE;
	int			fixed;
	uint8_t		other_flags;

	if (len < ENC_HEADER_SIZE)
		return ENC_PARSE_TOO_SHORT;
	if (data[0] != ENC_VERSION && data[0] != ENC_VERSION_ORE2)
		return ENC_PARSE_BAD_VERSION;
	if (data[1] < 1 || data[1] > ENC_TYPE_MAX)
		return ENC_PARSE_BAD_TYPE;
	if (data[2] < ENC_RND || data[2] > ENC_LEVEL_MAX ||
		(data[2] == ENC_MATCH && data[1] != ENC_TEXT) ||
		(data[0] == ENC_VERSION_ORE2 && data[2] != ENC_ORD))
		return ENC_PARSE_BAD_LEVEL;
	/* the tenant flag goes with any other (13.13); the rest as before */
	other_flags = data[3] & ~ENC_FLAG_TENANT;
	if (data[0] == ENC_VERSION ?
		(other_flags != 0 && !((other_flags & ~(ENC_FLAG_QUERY | ENC_FLAG_FOLDED)) == 0 &&
							   data[2] == ENC_MATCH)) :
		(other_flags != 0 && other_flags != ENC_FLAG_QUERY && other_flags != ENC_FLAG_ORE1))
		return ENC_PARSE_BAD_FLAGS;

	value->type = (EncType) data[1];
	value->level = (EncLevel) data[2];
	value->key_id = enc_read_uint32(data + 4);
	value->group_tag = enc_read_uint32(data + 8);
	value->flags = data[3];
	value->version = data[0];
	value->token = NULL;
	value->ore = NULL;
	value->ore_left_only = false;
	value->ore1 = NULL;
	value->ore_blocks = 0;
	value->bloom = NULL;

	if (value->level >= ENC_EQ)
	{
		if (len - pos < ENC_TOKEN_SIZE)
			return ENC_PARSE_TOO_SHORT;
		value->token = data + pos;
		pos += ENC_TOKEN_SIZE;
	}
	if (value->level == ENC_ORD)
	{
		int			blocks = 2 * enc_order_input_size(value->type);
		size_t		size = ore_ciphertext_size(blocks);

		value->ore_blocks = blocks;
		if (value->version == ENC_VERSION_ORE2 && other_flags == ENC_FLAG_QUERY)
		{
			/* a left-only operand: no right part, and no payload */
			size = ore_left_size(blocks);
			if (len - pos != size)
				return len - pos < size ? ENC_PARSE_TOO_SHORT : ENC_PARSE_BAD_PAYLOAD;
			value->ore = data + pos;
			value->ore_left_only = true;
			value->payload = data + len;
			value->payload_len = 0;
			return ENC_PARSE_OK;
		}
		if (len - pos < size)
			return ENC_PARSE_TOO_SHORT;
		value->ore = data + pos;
		pos += size;
		if (value->version == ENC_VERSION)
			value->ore1 = value->ore;
		else if (other_flags == ENC_FLAG_ORE1)
		{
			if (len - pos < size)
				return ENC_PARSE_TOO_SHORT;
			value->ore1 = data + pos;
			pos += size;
		}
	}

	if (value->level == ENC_MATCH)
	{
		if (len - pos < ENC_BLOOM_SIZE)
			return ENC_PARSE_TOO_SHORT;
		value->bloom = data + pos;
		pos += ENC_BLOOM_SIZE;
	}

	value->payload = data + pos;
	value->payload_len = len - pos;
	if (value->payload_len < ENC_MIN_PAYLOAD)
		return ENC_PARSE_TOO_SHORT;
	fixed = enc_fixed_plaintext_size(value->type);
	if (fixed >= 0 && value->payload_len != (size_t) (ENC_MIN_PAYLOAD + fixed))
		return ENC_PARSE_BAD_PAYLOAD;
	return ENC_PARSE_OK;
}

const char *
enc_parse_result_string(EncParseResult result)
{
	switch (result)
	{
		case ENC_PARSE_OK:
			return "valid";
		case ENC_PARSE_TOO_SHORT:
			return "the value is truncated";
		case ENC_PARSE_BAD_VERSION:
			return "unknown format version";
		case ENC_PARSE_BAD_TYPE:
			return "unknown type code";
		case ENC_PARSE_BAD_LEVEL:
			return "unknown level (or MATCH for a type other than text, or format version 2 below ORD)";
		case ENC_PARSE_BAD_FLAGS:
			return "reserved flags are set";
		case ENC_PARSE_BAD_PAYLOAD:
			return "the payload length does not fit the type";
		case ENC_PARSE_BAD_ORE:
			return "the order-revealing part holds an impossible entry";
	}
	return "unknown error";
}

const char *
enc_type_name(EncType type)
{
	static const char *const names[] = {
		"?", "int4", "int8", "float8", "numeric", "text", "bytea", "date",
		"timestamptz", "bool"
	};

	return (type >= 1 && type <= ENC_TYPE_MAX) ? names[type] : "?";
}

const char *
enc_level_name(EncLevel level)
{
	switch (level)
	{
		case ENC_RND:
			return "RND";
		case ENC_EQ:
			return "EQ";
		case ENC_ORD:
			return "ORD";
		case ENC_MATCH:
			return "MATCH";
	}
	return "?";
}
