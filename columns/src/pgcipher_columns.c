/*-------------------------------------------------------------------------
 *
 * pgcipher_columns.c
 *	  The pgcipher_columns module: always-encrypted column types whose
 *	  values the client encrypts and the server stores, compares, indexes
 *	  and sorts without a key (docs/design.md, section 13).
 *
 * Every enc_T and enc_T_ord type shares one representation: a varlena
 * holding the client's ciphertext (ciphertext.h).  This file holds what
 * every other part needs, reading a stored value; pgcipher_columns.h lists
 * where the rest lives.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "varatt.h"

#include "pgcipher_columns.h"

PG_MODULE_MAGIC;

/*
 * Parse a stored value.  Values were validated on input, so a failure here
 * means the bytes changed on disk or in a dump: corruption, not bad input.
 */
void
enc_parse_stored(const bytea *datum, EncValue *value)
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
