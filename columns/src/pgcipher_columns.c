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

#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "fmgr.h"
#include "varatt.h"

#include "pgcipher_columns.h"

PG_MODULE_MAGIC;

/* glibc's malloc thresholds while this module is loaded (design 13.11) */
#define ENC_MALLOC_THRESHOLD (4 * 1024 * 1024)

/*
 * Module load.  A query over encrypted columns builds and frees, at every
 * execution, memory contexts of hundreds of kilobytes: ciphertexts of
 * hundreds of bytes, array_agg of a group for the proxy.  glibc's dynamic
 * thresholds then hand the top of the heap back to the kernel at each free
 * and fault it in again at the next query; on a 100-row range that was a
 * third of the backend's CPU.  Fixed thresholds of 4 MB stop it, at the
 * cost of a backend keeping up to that much free memory.  A DBA who set
 * glibc's own environment variables or tunables keeps them.
 */
void
_PG_init(void)
{
#ifdef __GLIBC__
	const char *tunables = getenv("GLIBC_TUNABLES");

	if (getenv("MALLOC_TRIM_THRESHOLD_") == NULL &&
		getenv("MALLOC_MMAP_THRESHOLD_") == NULL &&
		(tunables == NULL || strstr(tunables, "glibc.malloc.") == NULL))
	{
		mallopt(M_TRIM_THRESHOLD, ENC_MALLOC_THRESHOLD);
		mallopt(M_MMAP_THRESHOLD, ENC_MALLOC_THRESHOLD);
	}
#endif
}

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
