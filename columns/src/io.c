/*-------------------------------------------------------------------------
 *
 * io.c
 *	  Input, output, send and receive of the enc_T and enc_T_ord types; the
 *	  CHECK that binds a column to its key, level and join group; and
 *	  enc_describe().
 *
 * The text form of a value is the base64 of its ciphertext and the binary
 * form the ciphertext itself.  Every type shares one representation, so
 * the per-type input and receive functions only fix which type code and
 * levels they accept: a value of another type, or of a level its type does
 * not hold, is refused before it is stored, and everything else may then
 * trust what it reads (pgcipher_columns.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/base64.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"
#include "varatt.h"

#include "pgcipher_columns.h"

/* The SQL name of the type a value is given as: enc_int4, enc_int4_ord. */
static const char *
sql_type_name(EncType type, bool ordered)
{
	return ordered ? psprintf("enc_%s_ord", enc_type_name(type)) :
		psprintf("enc_%s", enc_type_name(type));
}

/*
 * Validate a value on its way in: its structure, and that its type code
 * and level belong to the SQL type it is given as.  Returns false after
 * reporting a soft error through escontext (pg_input_is_valid() and COPY's
 * ON_ERROR ask for those instead of an error).
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
				 errmsg("encrypted %s value given for type %s",
						enc_type_name(value.type), sql_type_name(type, ordered))));
	if (ordered && value.level != ENC_ORD)
		ereturn(escontext, false,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("encrypted value of level %s given for type %s",
						enc_level_name(value.level), sql_type_name(type, true)),
				 errhint("Type %s holds values of level ORD; use %s for RND and EQ.",
						 sql_type_name(type, true), sql_type_name(type, false))));
	if (!ordered && value.level == ENC_ORD)
		ereturn(escontext, false,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("encrypted value of level ORD given for type %s",
						sql_type_name(type, false)),
				 errhint("Use type %s for ORD values.", sql_type_name(type, true))));
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
	len = pg_b64_decode(text, text_len, (void *) VARDATA(result), pg_b64_dec_len(text_len));
	if (len < 0)
		ereturn(fcinfo->context, (Datum) 0,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s: not base64",
						sql_type_name(type, ordered)),
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
	/* no soft errors in binary input: escontext NULL raises them */
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

/* Output is shared by every type: nothing in it depends on the type. */
PG_FUNCTION_INFO_V1(enc_out);
Datum
enc_out(PG_FUNCTION_ARGS)
{
	bytea	   *value = PG_GETARG_BYTEA_PP(0);
	int			len = VARSIZE_ANY_EXHDR(value);
	int			out_len = pg_b64_enc_len(len);
	char	   *out = palloc(out_len + 1);
	int			n;

	n = pg_b64_encode((void *) VARDATA_ANY(value), len, out, out_len);
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not encode encrypted value as base64")));
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
 * enc_binding_ok(value, key_id, level, group_tag, label [, variant]): the
 * CHECK that pgcipher.encrypt_column() adds, so a column only ever holds
 * values of its own key, level and join group.  variant: at ORD the order
 * formats allowed (a bit mask, default format 1), at MATCH 1 for a column
 * bound case-insensitive (default 0, case-sensitive).
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
	enc_parse_stored(datum, &value);
	/* the label (argument 4) is only read for the error messages */
	if (value.flags & ENC_FLAG_QUERY)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("an encrypted query operand cannot be stored in column %s",
						text_to_cstring(PG_GETARG_TEXT_PP(4))),
				 errhint("Queries (LIKE patterns, or order operands without a payload) are compared with, not stored.")));
	/* MATCH: argument 5 is 1 for a column bound case-insensitive */
	if (value.level == ENC_MATCH)
	{
		bool		folded = PG_NARGS() > 5 && PG_GETARG_INT32(5) == 1;

		if (((value.flags & ENC_FLAG_FOLDED) != 0) != folded)
			ereport(ERROR,
					(errcode(ERRCODE_CHECK_VIOLATION),
					 errmsg("encrypted value for column %s has a %s filter, the column is bound %s",
							text_to_cstring(PG_GETARG_TEXT_PP(4)),
							folded ? "case-exact" : "case-folded",
							folded ? "case-insensitive" : "case-sensitive"),
					 errhint("The client read an old description of the column: reload the proxy's catalog (SIGHUP) and retry.")));
	}
	/* formats: bit f for format f of enc_format(); 5 arguments: format 1 */
	if (value.level == ENC_ORD)
	{
		int32		formats = PG_NARGS() > 5 ? PG_GETARG_INT32(5) : (1 << 1);
		int			format = enc_value_format(&value);

		if ((formats & (1 << format)) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_CHECK_VIOLATION),
					 errmsg("encrypted value for column %s is of order format %s, which the column does not hold now",
							text_to_cstring(PG_GETARG_TEXT_PP(4)), enc_format_name(format)),
					 errhint("The client read an old description of the column: reload the proxy's catalog (SIGHUP) and retry.")));
	}

	/*
	 * key id 0: a tenant-keyed column, whose values name a tenant's key
	 * (13.13)
	 */
	if (key_id == 0 && !(value.flags & ENC_FLAG_TENANT))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("encrypted value for column %s is under column key %u, not a tenant's key",
						text_to_cstring(PG_GETARG_TEXT_PP(4)), value.key_id),
				 errhint("The column is tenant-keyed: the client must encrypt under the tenant's key.")));
	if (key_id != 0 && (value.flags & ENC_FLAG_TENANT))
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("encrypted value for column %s is under tenant key %u, and the column is not tenant-keyed",
						text_to_cstring(PG_GETARG_TEXT_PP(4)), value.key_id),
				 errhint("The client encrypted it for another column.")));
	if (key_id != 0 && value.key_id != (uint32) key_id)
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

/*
 * The order format of an ORD value: 1 (version 1), 2 (version 2) or 3
 * (version 2 carrying version 1's ORE as well, in a column being moved).
 */
int
enc_value_format(const EncValue *value)
{
	if (value->version == ENC_VERSION)
		return 1;
	return value->ore1 != NULL ? 3 : 2;
}

const char *
enc_format_name(int format)
{
	return format == 1 ? "1" : format == 2 ? "2" : "2 with 1";
}

/* enc_format(value): enc_value_format() for SQL; NULL below ORD. */
PG_FUNCTION_INFO_V1(enc_format);
Datum
enc_format(PG_FUNCTION_ARGS)
{
	bytea	   *datum = PG_GETARG_BYTEA_PP(0);
	EncValue	value;

	enc_parse_stored(datum, &value);
	if (value.level != ENC_ORD)
		PG_RETURN_NULL();
	PG_RETURN_INT32(enc_value_format(&value));
}

/* enc_describe(value): what the server can see of a value, for humans. */
PG_FUNCTION_INFO_V1(enc_describe);
Datum
enc_describe(PG_FUNCTION_ARGS)
{
	bytea	   *datum = PG_GETARG_BYTEA_PP(0);
	EncValue	value;

	enc_parse_stored(datum, &value);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%s %s%s%s%s %skey=%u group=%08x bytes=%zu payload=%zu",
											  enc_type_name(value.type),
											  enc_level_name(value.level),
											  value.level == ENC_ORD && value.version != ENC_VERSION ?
											  (value.ore1 != NULL ? " format=2+1" : " format=2") : "",
											  value.level == ENC_MATCH && (value.flags & ENC_FLAG_FOLDED) ?
											  " case-folded" : "",
											  value.flags & ENC_FLAG_QUERY ? " query" : "",
											  value.flags & ENC_FLAG_TENANT ? "tenant-" : "",
											  value.key_id, value.group_tag,
											  (size_t) VARSIZE_ANY_EXHDR(datum),
											  value.payload_len)));
}
