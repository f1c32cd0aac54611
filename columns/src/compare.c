/*-------------------------------------------------------------------------
 *
 * compare.c
 *	  Comparison operators of the enc_T and enc_T_ord types, and their
 *	  btree and hash support: = and <> for both, < <= > >= with MIN, MAX
 *	  and sort support for enc_T_ord.
 *
 * Comparisons work on the equality token (memcmp) and the ORE ciphertext
 * (ore.c); they never decrypt -- the server has no key -- and they refuse,
 * with an error rather than an answer, values whose level lacks what the
 * operation needs or that belong to different keys or join groups.  An
 * answer there would be meaningless (tokens of different keys are
 * unrelated) yet look like one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "utils/sortsupport.h"
#include "varatt.h"

#include "ore.h"
#include "pgcipher_columns.h"

/*
 * Does a value of this level have what an operation needing "needed" reads?
 * EQ, ORD and MATCH values all have tokens; only ORD values have order, and
 * only MATCH values a Bloom filter.
 */
static bool
level_allows(EncLevel level, EncLevel needed)
{
	if (needed == ENC_ORD || needed == ENC_MATCH)
		return level == needed;
	return level >= needed;
}

/*
 * Operands of a comparison: both must be of one type, key and join group,
 * and of a level that allows the operation (EQ for equality, ORD for
 * order, MATCH for substring search).
 */
void
enc_check_comparable(const EncValue *a, const EncValue *b, EncLevel needed)
{
	EncLevel	lacking;

	if (a->type != b->type)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compare encrypted %s with encrypted %s",
						enc_type_name(a->type), enc_type_name(b->type))));
	if ((a->flags & ENC_FLAG_TENANT) != (b->flags & ENC_FLAG_TENANT) ||
		(a->key_id != b->key_id && !(a->flags & ENC_FLAG_TENANT)) ||
		a->group_tag != b->group_tag)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compare encrypted values of different columns"),
				 errdetail("One value is under key %u, join group %08x; the other under key %u, join group %08x.",
						   a->key_id, a->group_tag, b->key_id, b->group_tag),
				 errhint("Only columns encrypted with one key and one join group can be compared.")));

	if (level_allows(a->level, needed) && level_allows(b->level, needed))
		return;
	/* name the level of the operand that lacks it */
	lacking = level_allows(a->level, needed) ? b->level : a->level;
	switch (needed)
	{
		case ENC_ORD:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("ordering needs encrypted values of level ORD, not %s",
							enc_level_name(lacking)),
					 errhint("Encrypt the column at level ORD to allow this.")));
			break;
		case ENC_MATCH:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("substring search needs encrypted values of level MATCH, not %s",
							enc_level_name(lacking)),
					 errhint("Encrypt the column at level MATCH to allow this.")));
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("equality needs encrypted values of level EQ, not %s",
							enc_level_name(lacking)),
					 errhint("Encrypt the column at level EQ to allow this.")));
			break;
	}
}

/*
 * Values under two tenants' keys of one column (13.13): unequal, and
 * ordered by key id, a consistent total order whose comparisons hold
 * within a tenant only.  Called after enc_check_comparable().
 */
bool
enc_tenants_differ(const EncValue *a, const EncValue *b)
{
	return (a->flags & ENC_FLAG_TENANT) && a->key_id != b->key_id;
}

static int
compare_key_ids(const EncValue *a, const EncValue *b)
{
	return (a->key_id > b->key_id) - (a->key_id < b->key_id);
}

static int
compare_tokens(const EncValue *a, const EncValue *b)
{
	int			c = memcmp(a->token, b->token, ENC_TOKEN_SIZE);

	return (c > 0) - (c < 0);
}

/*
 * Which ORE parts two ORD values compare with: version 2 where both have
 * it (the left part alone does for one of them), else version 1 where both
 * have it (a column being moved holds values with both, design 13.5b).
 * *swap is set when b is the left-only operand, so that the caller
 * compares b with a and turns the answer around.
 */
static OreVersion
common_ore(const EncValue *a, const EncValue *b, bool *swap)
{
	if (!enc_ore_comparable(a, b))
	{
		if (a->ore_left_only && b->ore_left_only)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot compare two encrypted query operands"),
					 errdetail("A query operand carries only the left part of its order-revealing ciphertext; a stored value is needed on one side."),
					 errhint("Compare a column with a parameter, not two parameters.")));
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot compare encrypted values of order formats 1 and 2"),
				 errdetail("One value has only the version-1 order-revealing part, the other only version 2's."),
				 errhint("A column holds one format; pgcipher-keys reencrypt-column moves a column to format 2 through the proxy, and values of a column being moved carry both.")));
	}
	*swap = b->ore_left_only;
	return a->version == ENC_VERSION_ORE2 && b->version == ENC_VERSION_ORE2 ? ORE_V2 : ORE_V1;
}

/*
 * Can common_ore() compare a and b (both ORD) without an error?  Version 2
 * where both have it (a left part alone on one side only), else version 1
 * where both have it.  The estimators ask too (stats.c).
 */
bool
enc_ore_comparable(const EncValue *a, const EncValue *b)
{
	if (a->version == ENC_VERSION_ORE2 && b->version == ENC_VERSION_ORE2)
		return !(a->ore_left_only && b->ore_left_only);
	return a->ore1 != NULL && b->ore1 != NULL;
}

/* Order of two ORD values: ORE first, equality tokens break prefix ties. */
static int
compare_ordered(const EncValue *a, const EncValue *b)
{
	int			result;
	bool		swap;
	OreVersion	version;
	OreResult	r;

	enc_check_comparable(a, b, ENC_ORD);
	if (enc_tenants_differ(a, b))
		return compare_key_ids(a, b);
	version = common_ore(a, b, &swap);
	if (version == ORE_V1)
		r = ore_compare(ORE_V1, a->ore1, b->ore1, a->ore_blocks, &result);
	else if (swap)
	{
		r = ore_compare(ORE_V2, b->ore, a->ore, a->ore_blocks, &result);
		result = -result;
	}
	else
		r = ore_compare(ORE_V2, a->ore, b->ore, a->ore_blocks, &result);
	switch (r)
	{
		case ORE_OK:
			break;
		case ORE_CORRUPT:
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("corrupt order-revealing ciphertext in encrypted %s value",
							enc_type_name(a->type))));
			break;
		case ORE_CRYPTO_FAILED:
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not compute the hash of an order comparison")));
			break;
	}
	return result != 0 ? result : compare_tokens(a, b);
}

static int
compare_datums_ordered(Datum da, Datum db)
{
	bytea	   *a = DatumGetByteaPP(da);
	bytea	   *b = DatumGetByteaPP(db);
	EncValue	va,
				vb;
	int			result;

	enc_parse_stored(a, &va);
	enc_parse_stored(b, &vb);
	result = compare_ordered(&va, &vb);
	if ((Pointer) a != DatumGetPointer(da))
		pfree(a);
	if ((Pointer) b != DatumGetPointer(db))
		pfree(b);
	return result;
}

/*
 * Equality.  For ORD values it also requires equal ORE left parts, so that
 * = agrees with the btree order (which compares the ORE part first) even
 * for a forged value whose token and ORE part disagree.
 */
static bool
values_equal(const EncValue *a, const EncValue *b)
{
	enc_check_comparable(a, b, ENC_EQ);
	if (enc_tenants_differ(a, b) ||
		memcmp(a->token, b->token, ENC_TOKEN_SIZE) != 0)
		return false;
	if (a->level == ENC_ORD && b->level == ENC_ORD)
	{
		bool		swap;

		if (common_ore(a, b, &swap) == ORE_V1)
			return ore_left_equal(a->ore1, b->ore1, a->ore_blocks);
		return ore_left_equal(a->ore, b->ore, a->ore_blocks);
	}
	return true;
}

/* What compare_args() computes. */
typedef enum ArgComparison
{
	ARGS_EQUAL,					/* 0 if equal, 1 if not */
	ARGS_TOKEN_ORDER,			/* enc_T's internal order of tokens */
	ARGS_ORDER					/* enc_T_ord's order: ORE, then tokens */
} ArgComparison;

/* Compare the two arguments of an operator or support function. */
static int
compare_args(FunctionCallInfo fcinfo, ArgComparison how)
{
	bytea	   *a = PG_GETARG_BYTEA_PP(0);
	bytea	   *b = PG_GETARG_BYTEA_PP(1);
	EncValue	va,
				vb;
	int			result = 0;

	enc_parse_stored(a, &va);
	enc_parse_stored(b, &vb);
	switch (how)
	{
		case ARGS_EQUAL:
			result = values_equal(&va, &vb) ? 0 : 1;
			break;
		case ARGS_TOKEN_ORDER:
			enc_check_comparable(&va, &vb, ENC_EQ);
			result = enc_tenants_differ(&va, &vb) ? compare_key_ids(&va, &vb) :
				compare_tokens(&va, &vb);
			break;
		case ARGS_ORDER:
			result = compare_ordered(&va, &vb);
			break;
	}
	PG_FREE_IF_COPY(a, 0);
	PG_FREE_IF_COPY(b, 1);
	return result;
}

PG_FUNCTION_INFO_V1(enc_eq);
Datum
enc_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo, ARGS_EQUAL) == 0);
}

PG_FUNCTION_INFO_V1(enc_ne);
Datum
enc_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo, ARGS_EQUAL) != 0);
}

/*
 * btree support of enc_T: an arbitrary but consistent order of equality
 * tokens, so UNIQUE, primary and foreign keys work.  enc_T has no < for
 * users, so this order is never shown as if it meant something.
 */
PG_FUNCTION_INFO_V1(enc_token_cmp);
Datum
enc_token_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(compare_args(fcinfo, ARGS_TOKEN_ORDER));
}

/* btree support of enc_T_ord: the plaintext order, as ORE reveals it. */
PG_FUNCTION_INFO_V1(enc_ord_cmp);
Datum
enc_ord_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(compare_args(fcinfo, ARGS_ORDER));
}

PG_FUNCTION_INFO_V1(enc_lt);
Datum
enc_lt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo, ARGS_ORDER) < 0);
}

PG_FUNCTION_INFO_V1(enc_le);
Datum
enc_le(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo, ARGS_ORDER) <= 0);
}

PG_FUNCTION_INFO_V1(enc_gt);
Datum
enc_gt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo, ARGS_ORDER) > 0);
}

PG_FUNCTION_INFO_V1(enc_ge);
Datum
enc_ge(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(compare_args(fcinfo, ARGS_ORDER) >= 0);
}

/* MIN and MAX of enc_T_ord: the support functions of their aggregates. */
PG_FUNCTION_INFO_V1(enc_smaller);
Datum
enc_smaller(PG_FUNCTION_ARGS)
{
	Datum		a = PG_GETARG_DATUM(0);
	Datum		b = PG_GETARG_DATUM(1);

	PG_RETURN_DATUM(compare_datums_ordered(a, b) <= 0 ? a : b);
}

PG_FUNCTION_INFO_V1(enc_larger);
Datum
enc_larger(PG_FUNCTION_ARGS)
{
	Datum		a = PG_GETARG_DATUM(0);
	Datum		b = PG_GETARG_DATUM(1);

	PG_RETURN_DATUM(compare_datums_ordered(a, b) >= 0 ? a : b);
}

static int
enc_sort_compare(Datum a, Datum b, SortSupport ssup)
{
	return compare_datums_ordered(a, b);
}

/* Sorts and index builds of enc_T_ord call the comparison without fmgr. */
PG_FUNCTION_INFO_V1(enc_ord_sortsupport);
Datum
enc_ord_sortsupport(PG_FUNCTION_ARGS)
{
	SortSupport ssup = (SortSupport) PG_GETARG_POINTER(0);

	ssup->comparator = enc_sort_compare;
	PG_RETURN_VOID();
}

/*
 * Hash support (hash indexes, hash joins, hash aggregation): the hash of
 * the equality token, the part equal plaintexts share.
 */
static const uint8_t *
token_for_hashing(bytea *datum)
{
	EncValue	value;

	enc_parse_stored(datum, &value);
	if (value.level < ENC_EQ)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("hashing needs encrypted values of level EQ, not RND"),
				 errhint("Encrypt the column at level EQ to allow this.")));
	return value.token;
}

PG_FUNCTION_INFO_V1(enc_hash);
Datum
enc_hash(PG_FUNCTION_ARGS)
{
	bytea	   *value = PG_GETARG_BYTEA_PP(0);

	return hash_any(token_for_hashing(value), ENC_TOKEN_SIZE);
}

PG_FUNCTION_INFO_V1(enc_hash_extended);
Datum
enc_hash_extended(PG_FUNCTION_ARGS)
{
	bytea	   *value = PG_GETARG_BYTEA_PP(0);

	return hash_any_extended(token_for_hashing(value), ENC_TOKEN_SIZE,
							 PG_GETARG_INT64(1));
}
