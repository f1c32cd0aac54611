/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  ANALYZE and selectivity estimation for the enc_T and enc_T_ord types.
 *
 * PostgreSQL's standard statistics and estimators compare values with the
 * type's own = and < -- which, here, raise errors for values of level RND
 * or of different keys or join groups.  An error in ANALYZE would fail
 * autovacuum on the table forever, and one in an estimator would fail
 * planning of every query on the column; so both look at the values'
 * headers first and, where the values cannot be compared, settle for less
 * (docs/design.md, section 13.7).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_statistic.h"
#include "commands/vacuum.h"
#include "fmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/selfuncs.h"
#include "varatt.h"

#include "pgcipher_columns.h"

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
	bool		v1_only = false,
				v2_only = false;
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

#if PG_VERSION_NUM >= 180000
		vacuum_delay_point(true);	/* 18: says it is ANALYZE */
#else
		vacuum_delay_point();
#endif
		if (isnull)
		{
			nulls++;
			continue;
		}
		total_width += VARSIZE_ANY(DatumGetPointer(datum));
		if (!comparable)
			continue;
		value = DatumGetByteaPP(datum);
		enc_parse_stored(value, &v);
		if (v.level == ENC_ORD)
		{
			/* order formats 1 and 2 alone cannot be compared (13.5b) */
			if (v.ore1 == NULL)
				v2_only = true;
			else if (v.version == ENC_VERSION)
				v1_only = true;
		}
		if (v.level < ENC_EQ || (v1_only && v2_only) ||
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

		/*
		 * ORD: every value must share an order format with the constant
		 * (statistics taken before a column moved to format 2, 13.5b)
		 */
		for (int j = 0; ok && value->level == ENC_ORD && j < sslot.nvalues; j++)
			ok = header_of(sslot.values[j], &stored) && stored.level == ENC_ORD &&
				enc_ore_comparable(&stored, value);
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
