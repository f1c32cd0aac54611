/*-------------------------------------------------------------------------
 *
 * match.c
 *	  Level MATCH of enc_text: the substring-search candidate test
 *	  value @> query, and the GIN operator class enc_text_match_ops.
 *
 * A MATCH value carries a 256-bit Bloom filter of its plaintext's trigrams
 * (keyed by the client); a query is the filter of a LIKE pattern's literal
 * trigrams.  value @> query is true when every bit of the query's filter is
 * set in the value's -- a superset of the rows the client's LIKE pattern
 * matches, which the client filters after decrypting (docs/design.md,
 * section 13.5a).  The GIN index keys a value by its set bits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/gin.h"
#include "fmgr.h"
#include "varatt.h"

#include "pgcipher_columns.h"

/* Is every bit of the query's filter set in the value's? */
static bool
bloom_contains(const EncValue *value, const EncValue *query)
{
	for (int i = 0; i < ENC_BLOOM_SIZE; i++)
		if ((value->bloom[i] & query->bloom[i]) != query->bloom[i])
			return false;
	return true;
}

/*
 * value @> query.  Both must be MATCH values of one key and join group,
 * both case-folded or both exact: filters under different keys, or of
 * differently folded text, set unrelated bits, so an answer would be
 * noise.
 */
PG_FUNCTION_INFO_V1(enc_match);
Datum
enc_match(PG_FUNCTION_ARGS)
{
	bytea	   *a = PG_GETARG_BYTEA_PP(0);
	bytea	   *b = PG_GETARG_BYTEA_PP(1);
	EncValue	va,
				vb;
	bool		result;

	enc_parse_stored(a, &va);
	enc_parse_stored(b, &vb);
	enc_check_comparable(&va, &vb, ENC_MATCH);
	if ((va.flags ^ vb.flags) & ENC_FLAG_FOLDED)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compare a case-folded MATCH filter with an exact one"),
				 errhint("A column bound case-insensitive folds its values' filters and its queries'; the client encrypted for another binding.")));
	/* another tenant's value never matches (13.13) */
	result = !enc_tenants_differ(&va, &vb) && bloom_contains(&va, &vb);
	PG_FREE_IF_COPY(a, 0);
	PG_FREE_IF_COPY(b, 1);
	PG_RETURN_BOOL(result);
}

/* The set bits of a MATCH value's Bloom filter, as int4 GIN keys. */
static Datum *
bloom_keys(bytea *datum, int32 *nkeys)
{
	EncValue	value;
	Datum	   *keys = palloc(sizeof(Datum) * ENC_BLOOM_SIZE * 8);
	int			n = 0;

	enc_parse_stored(datum, &value);
	if (value.level != ENC_MATCH)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("substring search needs encrypted values of level MATCH, not %s",
						enc_level_name(value.level)),
				 errhint("Encrypt the column at level MATCH to index it with enc_text_match_ops.")));
	for (int bit = 0; bit < ENC_BLOOM_SIZE * 8; bit++)
		if (value.bloom[bit / 8] & (1 << (bit % 8)))
			keys[n++] = Int32GetDatum(bit);
	*nkeys = n;
	return keys;
}

/* GIN extractValue: a stored value's keys. */
PG_FUNCTION_INFO_V1(enc_match_extract_value);
Datum
enc_match_extract_value(PG_FUNCTION_ARGS)
{
	bytea	   *datum = PG_GETARG_BYTEA_PP(0);
	int32	   *nkeys = (int32 *) PG_GETARG_POINTER(1);

	PG_RETURN_POINTER(bloom_keys(datum, nkeys));
}

/* GIN extractQuery: the keys a candidate must all have. */
PG_FUNCTION_INFO_V1(enc_match_extract_query);
Datum
enc_match_extract_query(PG_FUNCTION_ARGS)
{
	bytea	   *datum = PG_GETARG_BYTEA_PP(0);
	int32	   *nkeys = (int32 *) PG_GETARG_POINTER(1);
	int32	   *searchMode = (int32 *) PG_GETARG_POINTER(6);
	Datum	   *keys = bloom_keys(datum, nkeys);

	/* a pattern without a literal run of 3 bytes: every row is a candidate */
	if (*nkeys == 0)
		*searchMode = GIN_SEARCH_MODE_ALL;
	PG_RETURN_POINTER(keys);
}

/*
 * Every query bit present: a candidate.  The operator is rechecked on the
 * row, which also raises the key and join-group mismatch errors the index
 * cannot see.
 */
PG_FUNCTION_INFO_V1(enc_match_consistent);
Datum
enc_match_consistent(PG_FUNCTION_ARGS)
{
	bool	   *check = (bool *) PG_GETARG_POINTER(0);
	int32		nkeys = PG_GETARG_INT32(3);
	bool	   *recheck = (bool *) PG_GETARG_POINTER(5);

	*recheck = true;
	for (int i = 0; i < nkeys; i++)
		if (!check[i])
			PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(true);
}
