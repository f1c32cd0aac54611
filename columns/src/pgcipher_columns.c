/*-------------------------------------------------------------------------
 *
 * pgcipher_columns.c
 *	  SQL-callable functions of the always-encrypted column types: input
 *	  and output, comparison, hashing and the column-binding check.
 *
 * Every enc_T and enc_T_ord type shares one representation (a varlena
 * holding the client's ciphertext, ciphertext.h); the per-type input and
 * receive functions only fix which type code and levels they accept.
 * Comparisons work on the equality token (memcmp) and the ORE ciphertext
 * (ore.c); they never decrypt -- the server has no key -- and they refuse,
 * with an error rather than an answer, values whose level lacks what the
 * operation needs or that belong to different keys or join groups.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_statistic.h"
#include "commands/vacuum.h"
#include "common/base64.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "access/gin.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/selfuncs.h"
#include "utils/sortsupport.h"
#include "varatt.h"

#include "ciphertext.h"
#include "ore.h"

PG_MODULE_MAGIC;

/* Parse a stored value; stored values were validated on input. */
static void
parse_stored(const bytea *datum, EncValue *value)
{
	EncParseResult result;

	result = enc_parse((const uint8_t *) VARDATA_ANY(datum),
					   VARSIZE_ANY_EXHDR(datum), value);
	if (result != ENC_PARSE_OK)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("malformed encrypted value: %s",
						enc_parse_result_string(result))));
}

/*
 * Validate a value on its way in: its structure, and that its type code
 * and level belong to the SQL type it is given as.  Returns false after
 * reporting a soft error through escontext.
 */
static bool
validate_input(const uint8_t *data, size_t len, EncType type, bool ordered,
			   Node *escontext)
{
	EncValue	value;
	EncParseResult result;

	result = enc_validate(data, len, &value);
	if (result != ENC_PARSE_OK)
		ereturn(escontext, false,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("malformed encrypted value: %s",
						enc_parse_result_string(result)),
				 errhint("Encrypted values are written by the pgcipher client side; they cannot be typed in.")));
	if (value.type != type)
		ereturn(escontext, false,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("encrypted %s value given for type enc_%s%s",
						enc_type_name(value.type), enc_type_name(type),
						ordered ? "_ord" : "")));
	if (ordered && value.level != ENC_ORD)
		ereturn(escontext, false,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("encrypted value of level %s given for type enc_%s_ord",
						enc_level_name(value.level), enc_type_name(type)),
				 errhint("Type enc_%s_ord holds values of level ORD; use enc_%s for RND and EQ.",
						 enc_type_name(type), enc_type_name(type))));
	if (!ordered && value.level == ENC_ORD)
		ereturn(escontext, false,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("encrypted value of level ORD given for type enc_%s",
						enc_type_name(type)),
				 errhint("Use type enc_%s_ord for ORD values.", enc_type_name(type))));
	return true;
}

static Datum
enc_input(FunctionCallInfo fcinfo, EncType type, bool ordered)
{
	char	   *text = PG_GETARG_CSTRING(0);
	int			text_len = strlen(text);
	bytea	   *result;
	int			len;

	result = palloc(VARHDRSZ + pg_b64_dec_len(text_len));
	len = pg_b64_decode(text, text_len, VARDATA(result), pg_b64_dec_len(text_len));
	if (len < 0)
		ereturn(fcinfo->context, (Datum) 0,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type enc_%s%s: not base64",
						enc_type_name(type), ordered ? "_ord" : ""),
				 errhint("Encrypted values are written by the pgcipher client side; they cannot be typed in.")));
	if (!validate_input((uint8_t *) VARDATA(result), len, type, ordered, fcinfo->context))
		return (Datum) 0;
	SET_VARSIZE(result, VARHDRSZ + len);
	PG_RETURN_BYTEA_P(result);
}

static Datum
enc_receive(FunctionCallInfo fcinfo, EncType type, bool ordered)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	int			len = buf->len - buf->cursor;
	bytea	   *result;

	result = palloc(VARHDRSZ + len);
	SET_VARSIZE(result, VARHDRSZ + len);
	pq_copymsgbytes(buf, VARDATA(result), len);
	validate_input((uint8_t *) VARDATA(result), len, type, ordered, NULL);
	PG_RETURN_BYTEA_P(result);
}

/* The input and receive functions of each SQL type. */
#define ENC_IO_FUNCTIONS(sqlname, type, ordered) \
PG_FUNCTION_INFO_V1(enc_##sqlname##_in); \
Datum enc_##sqlname##_in(PG_FUNCTION_ARGS) { return enc_input(fcinfo, type, ordered); } \
PG_FUNCTION_INFO_V1(enc_##sqlname##_recv); \
Datum enc_##sqlname##_recv(PG_FUNCTION_ARGS) { return enc_receive(fcinfo, type, ordered); }

ENC_IO_FUNCTIONS(int4, ENC_INT4, false)
ENC_IO_FUNCTIONS(int8, ENC_INT8, false)
ENC_IO_FUNCTIONS(float8, ENC_FLOAT8, false)
ENC_IO_FUNCTIONS(numeric, ENC_NUMERIC, false)
ENC_IO_FUNCTIONS(text, ENC_TEXT, false)
ENC_IO_FUNCTIONS(bytea, ENC_BYTEA, false)
ENC_IO_FUNCTIONS(date, ENC_DATE, false)
ENC_IO_FUNCTIONS(timestamptz, ENC_TIMESTAMPTZ, false)
ENC_IO_FUNCTIONS(bool, ENC_BOOL, false)
ENC_IO_FUNCTIONS(int4_ord, ENC_INT4, true)
ENC_IO_FUNCTIONS(int8_ord, ENC_INT8, true)
ENC_IO_FUNCTIONS(float8_ord, ENC_FLOAT8, true)
ENC_IO_FUNCTIONS(numeric_ord, ENC_NUMERIC, true)
ENC_IO_FUNCTIONS(text_ord, ENC_TEXT, true)
ENC_IO_FUNCTIONS(bytea_ord, ENC_BYTEA, true)
ENC_IO_FUNCTIONS(date_ord, ENC_DATE, true)
ENC_IO_FUNCTIONS(timestamptz_ord, ENC_TIMESTAMPTZ, true)
ENC_IO_FUNCTIONS(bool_ord, ENC_BOOL, true)

PG_FUNCTION_INFO_V1(enc_out);
Datum
enc_out(PG_FUNCTION_ARGS)
{
	bytea	   *value = PG_GETARG_BYTEA_PP(0);
	int			len = VARSIZE_ANY_EXHDR(value);
	int			out_len = pg_b64_enc_len(len);
	char	   *out = palloc(out_len + 1);
	int			n;

	n = pg_b64_encode(VARDATA_ANY(value), len, out, out_len);
	if (n < 0)
		elog(ERROR, "could not encode encrypted value as base64");
	out[n] = '\0';
	PG_RETURN_CSTRING(out);
}

PG_FUNCTION_INFO_V1(enc_send);
Datum
enc_send(PG_FUNCTION_ARGS)
{
	bytea	   *value = PG_GETARG_BYTEA_P_COPY(0);

	/* the binary form is the ciphertext itself: a bytea without header */
	PG_RETURN_BYTEA_P(value);
}

/*
 * Operands of a comparison: both must be of one key and join group, and at
 * least at the level the operation needs.
 */
static void
check_comparable(const EncValue *a, const EncValue *b, EncLevel needed,
				 const char *operation)
{
	if (a->type != b->type)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compare encrypted %s with encrypted %s",
						enc_type_name(a->type), enc_type_name(b->type))));
	if (a->key_id != b->key_id || a->group_tag != b->group_tag)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compare encrypted values of different columns"),
				 errdetail("One value is under key %u, join group %08x; the other under key %u, join group %08x.",
						   a->key_id, a->group_tag, b->key_id, b->group_tag),
				 errhint("Only columns encrypted with one key and one join group can be compared.")));
	/* EQ, ORD and MATCH values all have tokens; only ORD values have order */
	if ((needed == ENC_ORD && (a->level != ENC_ORD || b->level != ENC_ORD)) ||
		(needed == ENC_MATCH && (a->level != ENC_MATCH || b->level != ENC_MATCH)) ||
		a->level < needed || b->level < needed)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s needs encrypted values of level %s, not %s",
						operation, enc_level_name(needed),
						enc_level_name(a->level != needed ? a->level : b->level)),
				 errhint("Encrypt the column at level %s to allow this.",
						 enc_level_name(needed))));
}

static int
compare_tokens(const EncValue *a, const EncValue *b)
{
	int			c = memcmp(a->token, b->token, ENC_TOKEN_SIZE);

	return (c > 0) - (c < 0);
}

/* Order of two ORD values: ORE first, equality tokens break prefix ties. */
static int
compare_ordered(const EncValue *a, const EncValue *b)
{
	int			result;

	check_comparable(a, b, ENC_ORD, "ordering");
	switch (ore_compare(a->ore, b->ore, a->ore_blocks, &result))
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
					 errmsg("could not compute SHA-256 for an order comparison")));
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

	parse_stored(a, &va);
	parse_stored(b, &vb);
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
	check_comparable(a, b, ENC_EQ, "equality");
	if (memcmp(a->token, b->token, ENC_TOKEN_SIZE) != 0)
		return false;
	if (a->level == ENC_ORD && b->level == ENC_ORD)
		return ore_left_equal(a->ore, b->ore, a->ore_blocks);
	return true;
}

/* What compare_args() computes. */
typedef enum ArgComparison
{
	ARGS_EQUAL,					/* 0 if equal, 1 if not */
	ARGS_TOKEN_ORDER,			/* enc_T's internal order of tokens */
	ARGS_ORDER					/* enc_T_ord's order: ORE, then tokens */
} ArgComparison;

static int
compare_args(FunctionCallInfo fcinfo, ArgComparison how)
{
	bytea	   *a = PG_GETARG_BYTEA_PP(0);
	bytea	   *b = PG_GETARG_BYTEA_PP(1);
	EncValue	va,
				vb;
	int			result = 0;

	parse_stored(a, &va);
	parse_stored(b, &vb);
	switch (how)
	{
		case ARGS_EQUAL:
			result = values_equal(&va, &vb) ? 0 : 1;
			break;
		case ARGS_TOKEN_ORDER:
			check_comparable(&va, &vb, ENC_EQ, "equality");
			result = compare_tokens(&va, &vb);
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

static const uint8_t *
token_for_hashing(bytea *datum)
{
	EncValue	value;

	parse_stored(datum, &value);
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

/*
 * enc_binding_ok(value, key_id, level, group_tag, label): the CHECK that
 * pgcipher.encrypt_column() adds, so a column only ever holds values of
 * its own key, level and join group.
 */
PG_FUNCTION_INFO_V1(enc_binding_ok);
Datum
enc_binding_ok(PG_FUNCTION_ARGS)
{
	bytea	   *datum = PG_GETARG_BYTEA_PP(0);
	int32		key_id = PG_GETARG_INT32(1);
	int32		level = PG_GETARG_INT32(2);
	bytea	   *tag = PG_GETARG_BYTEA_PP(3);
	EncValue	value;
	uint32		expected_tag;

	if (VARSIZE_ANY_EXHDR(tag) != 4)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("join-group tag must be 4 bytes")));
	expected_tag = enc_read_uint32((const uint8 *) VARDATA_ANY(tag));
	parse_stored(datum, &value);
	/* the label (argument 4) is only read for the error messages */
	if (value.flags != 0)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("a MATCH query cannot be stored in column %s",
						text_to_cstring(PG_GETARG_TEXT_PP(4))),
				 errhint("Queries (LIKE patterns encrypted by the client) are compared with @>, not stored.")));
	if (value.key_id != (uint32) key_id)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("encrypted value for column %s is under key %u, not the column's key %d",
						text_to_cstring(PG_GETARG_TEXT_PP(4)), value.key_id, key_id),
				 errhint("The client encrypted it for another column or with another key.")));
	if ((int32) value.level != level)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("encrypted value for column %s has level %s, not the column's level %s",
						text_to_cstring(PG_GETARG_TEXT_PP(4)), enc_level_name(value.level),
						enc_level_name((EncLevel) level))));
	if (value.group_tag != expected_tag)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("encrypted value for column %s belongs to join group %08x, not the column's %08x",
						text_to_cstring(PG_GETARG_TEXT_PP(4)), value.group_tag, expected_tag),
				 errhint("The client encrypted it for another column.")));
	PG_RETURN_BOOL(true);
}

/* enc_describe(value): what the server can see of a value, for humans. */
PG_FUNCTION_INFO_V1(enc_describe);
Datum
enc_describe(PG_FUNCTION_ARGS)
{
	bytea	   *datum = PG_GETARG_BYTEA_PP(0);
	EncValue	value;

	parse_stored(datum, &value);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%s %s%s key=%u group=%08x bytes=%zu payload=%zu",
											  enc_type_name(value.type),
											  enc_level_name(value.level),
											  value.flags & ENC_FLAG_QUERY ? " query" : "",
											  value.key_id, value.group_tag,
											  (size_t) VARSIZE_ANY_EXHDR(datum),
											  value.payload_len)));
}

/*
 * ANALYZE.  The standard statistics compare sample values with = (and <),
 * which RND values, and values of different keys or join groups, refuse
 * with an error -- and an error in ANALYZE would also fail autovacuum on
 * the table forever.  So the sample is checked first: when every value can
 * be compared with every other, the standard statistics are computed
 * (most common values for EQ, a histogram for ORD, both as ciphertext);
 * otherwise only the null fraction and the average width.
 */
typedef struct EncAnalyzeData
{
	AnalyzeAttrComputeStatsFunc std_compute_stats;
	void	   *std_extra_data;
} EncAnalyzeData;

static void
enc_compute_stats(VacAttrStats *stats, AnalyzeAttrFetchFunc fetchfunc,
				  int samplerows, double totalrows)
{
	EncAnalyzeData *data = (EncAnalyzeData *) stats->extra_data;
	bool		comparable = true;
	bool		have_first = false;
	uint32		first_key = 0,
				first_tag = 0;
	int			nulls = 0;
	double		total_width = 0;

	for (int i = 0; i < samplerows; i++)
	{
		bool		isnull;
		Datum		datum = fetchfunc(stats, i, &isnull);
		bytea	   *value;
		EncValue	v;

		vacuum_delay_point();
		if (isnull)
		{
			nulls++;
			continue;
		}
		total_width += VARSIZE_ANY(DatumGetPointer(datum));
		if (!comparable)
			continue;
		value = DatumGetByteaPP(datum);
		parse_stored(value, &v);
		if (v.level < ENC_EQ ||
			(have_first && (v.key_id != first_key || v.group_tag != first_tag)))
			comparable = false;
		else if (!have_first)
		{
			first_key = v.key_id;
			first_tag = v.group_tag;
			have_first = true;
		}
		if ((Pointer) value != DatumGetPointer(datum))
			pfree(value);
	}

	if (comparable)
	{
		stats->extra_data = data->std_extra_data;
		data->std_compute_stats(stats, fetchfunc, samplerows, totalrows);
		return;
	}
	stats->stats_valid = true;
	stats->stanullfrac = samplerows > 0 ? (double) nulls / samplerows : 0.0;
	stats->stawidth = samplerows > nulls ? total_width / (samplerows - nulls) : 0;
	stats->stadistinct = 0.0;	/* unknown */
}

PG_FUNCTION_INFO_V1(enc_typanalyze);
Datum
enc_typanalyze(PG_FUNCTION_ARGS)
{
	VacAttrStats *stats = (VacAttrStats *) PG_GETARG_POINTER(0);
	EncAnalyzeData *data;

	if (!std_typanalyze(stats))
		PG_RETURN_BOOL(false);
	data = palloc(sizeof(EncAnalyzeData));
	data->std_compute_stats = stats->compute_stats;
	data->std_extra_data = stats->extra_data;
	stats->extra_data = data;
	stats->compute_stats = enc_compute_stats;
	PG_RETURN_BOOL(true);
}

/*
 * Selectivity.  PostgreSQL's estimators compare the query's constant with
 * the column's most common values and histogram using the operator itself;
 * if the statistics hold values of another key or join group (the table
 * was reloaded or re-keyed since the last ANALYZE), that comparison would
 * fail and take planning down with it.  These wrappers look at the headers
 * first and fall back to the default selectivity on a mismatch.
 */
static bool
header_of(Datum datum, EncValue *value)
{
	bytea	   *b = DatumGetByteaPP(datum);
	bool		ok = enc_parse((const uint8_t *) VARDATA_ANY(b),
							   VARSIZE_ANY_EXHDR(b), value) == ENC_PARSE_OK;

	if ((Pointer) b != DatumGetPointer(datum))
		pfree(b);
	return ok;
}

/* Do the statistics of vardata hold values comparable with value? */
static bool
stats_comparable(VariableStatData *vardata, const EncValue *value)
{
	static const int kinds[] = {STATISTIC_KIND_MCV, STATISTIC_KIND_HISTOGRAM};
	bool		ok = true;

	if (!HeapTupleIsValid(vardata->statsTuple))
		return true;
	for (int i = 0; i < lengthof(kinds) && ok; i++)
	{
		AttStatsSlot sslot;
		EncValue	stored;

		if (!get_attstatsslot(&sslot, vardata->statsTuple, kinds[i], InvalidOid,
							  ATTSTATSSLOT_VALUES))
			continue;
		if (sslot.nvalues > 0 &&
			(!header_of(sslot.values[0], &stored) ||
			 stored.key_id != value->key_id || stored.group_tag != value->group_tag ||
			 stored.level < ENC_EQ || value->level < ENC_EQ))
			ok = false;
		free_attstatsslot(&sslot);
	}
	return ok;
}

/* For restriction estimators: is "column op constant" safe to estimate? */
static bool
restriction_estimable(FunctionCallInfo fcinfo)
{
	PlannerInfo *root = (PlannerInfo *) PG_GETARG_POINTER(0);
	List	   *args = (List *) PG_GETARG_POINTER(2);
	int			varRelid = PG_GETARG_INT32(3);
	VariableStatData vardata;
	Node	   *other;
	bool		varonleft;
	bool		ok = true;
	EncValue	value;

	if (!get_restriction_variable(root, args, varRelid, &vardata, &other, &varonleft))
		return true;
	if (IsA(other, Const) && !((Const *) other)->constisnull)
		ok = header_of(((Const *) other)->constvalue, &value) &&
			stats_comparable(&vardata, &value);
	ReleaseVariableStats(vardata);
	return ok;
}

#define ENC_RESTRICTION_ESTIMATOR(name, wrapped, fallback) \
PG_FUNCTION_INFO_V1(name); \
Datum name(PG_FUNCTION_ARGS) \
{ \
	if (!restriction_estimable(fcinfo)) \
		PG_RETURN_FLOAT8(fallback); \
	return wrapped(fcinfo); \
}

ENC_RESTRICTION_ESTIMATOR(enc_eqsel, eqsel, DEFAULT_EQ_SEL)
ENC_RESTRICTION_ESTIMATOR(enc_neqsel, neqsel, 1.0 - DEFAULT_EQ_SEL)
ENC_RESTRICTION_ESTIMATOR(enc_scalarltsel, scalarltsel, DEFAULT_INEQ_SEL)
ENC_RESTRICTION_ESTIMATOR(enc_scalarlesel, scalarlesel, DEFAULT_INEQ_SEL)
ENC_RESTRICTION_ESTIMATOR(enc_scalargtsel, scalargtsel, DEFAULT_INEQ_SEL)
ENC_RESTRICTION_ESTIMATOR(enc_scalargesel, scalargesel, DEFAULT_INEQ_SEL)

/* For join estimators: do both sides' statistics hold comparable values? */
static bool
join_estimable(FunctionCallInfo fcinfo)
{
	PlannerInfo *root = (PlannerInfo *) PG_GETARG_POINTER(0);
	List	   *args = (List *) PG_GETARG_POINTER(2);
	SpecialJoinInfo *sjinfo = (SpecialJoinInfo *) PG_GETARG_POINTER(4);
	VariableStatData vardata1,
				vardata2;
	bool		reversed;
	bool		ok = true;
	AttStatsSlot sslot;
	EncValue	value;

	if (list_length(args) != 2)
		return true;
	get_join_variables(root, args, sjinfo, &vardata1, &vardata2, &reversed);
	if (HeapTupleIsValid(vardata1.statsTuple) &&
		get_attstatsslot(&sslot, vardata1.statsTuple, STATISTIC_KIND_MCV, InvalidOid,
						 ATTSTATSSLOT_VALUES))
	{
		if (sslot.nvalues > 0)
			ok = header_of(sslot.values[0], &value) && stats_comparable(&vardata2, &value);
		free_attstatsslot(&sslot);
	}
	ReleaseVariableStats(vardata1);
	ReleaseVariableStats(vardata2);
	return ok;
}

PG_FUNCTION_INFO_V1(enc_eqjoinsel);
Datum
enc_eqjoinsel(PG_FUNCTION_ARGS)
{
	if (!join_estimable(fcinfo))
		PG_RETURN_FLOAT8(DEFAULT_EQ_SEL);
	return eqjoinsel(fcinfo);
}

PG_FUNCTION_INFO_V1(enc_neqjoinsel);
Datum
enc_neqjoinsel(PG_FUNCTION_ARGS)
{
	if (!join_estimable(fcinfo))
		PG_RETURN_FLOAT8(1.0 - DEFAULT_EQ_SEL);
	return neqjoinsel(fcinfo);
}

/*
 * MATCH (text): value @> query is true when every bit of the query's
 * trigram Bloom filter is set in the value's -- a superset of the rows the
 * client's LIKE pattern matches, which the client filters after
 * decrypting (design 13.5a).
 */
static bool
bloom_contains(const EncValue *value, const EncValue *query)
{
	for (int i = 0; i < ENC_BLOOM_SIZE; i++)
		if ((value->bloom[i] & query->bloom[i]) != query->bloom[i])
			return false;
	return true;
}

PG_FUNCTION_INFO_V1(enc_match);
Datum
enc_match(PG_FUNCTION_ARGS)
{
	bytea	   *a = PG_GETARG_BYTEA_PP(0);
	bytea	   *b = PG_GETARG_BYTEA_PP(1);
	EncValue	va,
				vb;
	bool		result;

	parse_stored(a, &va);
	parse_stored(b, &vb);
	check_comparable(&va, &vb, ENC_MATCH, "substring search");
	result = bloom_contains(&va, &vb);
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

	parse_stored(datum, &value);
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

PG_FUNCTION_INFO_V1(enc_match_extract_value);
Datum
enc_match_extract_value(PG_FUNCTION_ARGS)
{
	bytea	   *datum = PG_GETARG_BYTEA_PP(0);
	int32	   *nkeys = (int32 *) PG_GETARG_POINTER(1);

	PG_RETURN_POINTER(bloom_keys(datum, nkeys));
}

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
