/*-------------------------------------------------------------------------
 *
 * pgcipher_columns.h
 *	  Declarations shared by the SQL-callable parts of pgcipher_columns:
 *	  reading a stored value and checking that two values may be compared.
 *
 * The extension's C code is split by concern, as pgvector's is:
 *
 *	pgcipher_columns.c	the module itself and reading stored values
 *	io.c				types' input, output, send and receive; the column
 *						binding CHECK and enc_describe()
 *	compare.c			comparison operators, btree and hash support
 *	stats.c				ANALYZE and the selectivity estimators
 *	match.c				MATCH (value @> query) and its GIN operator class
 *	ciphertext.c		the ciphertext format's parser (no PostgreSQL headers)
 *	ore.c				the Lewi-Wu ORE comparison (no PostgreSQL headers)
 *
 * Include after postgres.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PGCIPHER_COLUMNS_H
#define PGCIPHER_COLUMNS_H

#include "ciphertext.h"

/* pgcipher_columns.c */
extern void enc_parse_stored(const bytea *datum, EncValue *value);
extern int	enc_value_format(const EncValue *value);
extern bool enc_ore_comparable(const EncValue *a, const EncValue *b);
extern bool enc_tenants_differ(const EncValue *a, const EncValue *b);
extern const char *enc_format_name(int format);

/* compare.c */
extern void enc_check_comparable(const EncValue *a, const EncValue *b,
								 EncLevel needed);

#endif							/* PGCIPHER_COLUMNS_H */
