/*-------------------------------------------------------------------------
 *
 * fuzz_compare.c
 *	  libFuzzer target for the parts of pgcipher_columns that read
 *	  untrusted bytes: the ciphertext parser and the ORE comparison.
 *
 * The input is split in two where its first two bytes say; each half is parsed, and
 * when both are valid ORD values of one type, compared both ways.  The
 * comparison must not read outside what the parser accepted (ASan), and
 * must be antisymmetric.  Build and run with run.sh.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

#include "ciphertext.h"
#include "ore.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	EncValue	a,
				b;
	size_t		split;
	uint8_t    *first,
			   *second;
	int			ab,
				ba;
	OreResult	rab,
				rba;

	if (size < 2)
		return 0;
	split = ((size_t) data[0] << 8) | data[1];
	data += 2;
	size -= 2;
	if (split > size)
		split = size;

	/* copies, so ASan sees the exact bounds of each value */
	first = malloc(split ? split : 1);
	second = malloc(size - split ? size - split : 1);
	memcpy(first, data, split);
	memcpy(second, data + split, size - split);

	if (enc_validate(first, split, &a) == ENC_PARSE_OK &&
		enc_validate(second, size - split, &b) == ENC_PARSE_OK &&
		a.level == ENC_ORD && b.level == ENC_ORD && a.type == b.type &&
		a.version == b.version && !a.ore_left_only && !b.ore_left_only)
	{
		OreVersion	v = a.version == ENC_VERSION_ORE2 ? ORE_V2 : ORE_V1;

		rab = ore_compare(v, a.ore, b.ore, a.ore_blocks, &ab);
		rba = ore_compare(v, b.ore, a.ore, b.ore_blocks, &ba);
		if (rab == ORE_OK && rba == ORE_OK && ab == 0 && ba != 0)
			abort();			/* equal one way, unequal the other */
	}
	free(first);
	free(second);
	return 0;
}
