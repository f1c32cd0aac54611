/*-------------------------------------------------------------------------
 *
 * pgsscrypt.c
 *	  pgcipher: encrypt pg_stat_statements' query texts.
 *
 *	  pg_stat_statements keeps query texts, literals and all, outside
 *	  shared buffers: in pg_stat_tmp/pgss_query_texts.stat while the server
 *	  runs and in its dump in pg_stat/ across a clean restart.  Both are
 *	  encrypted with AES-CTR under the temporary-file key, counter = (nonce,
 *	  byte offset / 16).  The text file is appended to and rewritten from
 *	  offset 0 by garbage collection and resets; each rewrite is a new
 *	  generation (gc_count) and the nonce is a random per-start value plus
 *	  the generation, so no offset is written twice under one nonce.  The
 *	  dump file gets a random nonce of its own, stored after its header.
 *	  The temporary-file key's slot the texts are under (a rotation of the
 *	  data keys moves them to the other one at the next start: design 9.6)
 *	  is the nonce's top bit, and the bit below it is clear, so that adding
 *	  the generation never changes the top bit.
 *
 *	  The texts file lives while the server runs, and is read and written
 *	  under the key its slot held when the postmaster started, whatever
 *	  happens to the key ring meanwhile: a standby replays its primary's
 *	  rotations, which may replace that slot's key.  The dump, read at the
 *	  next start, is written under the key ring as it is at shutdown, in the
 *	  slot new files use then; its nonce says so by the bit below the top
 *	  one (a dump without it was written before the texts kept their key,
 *	  and is read at start-up, when both are the same).
 *
 *	  Each function does nothing (or what pg_stat_statements did before)
 *	  when the cluster is not encrypted, so the hooks in
 *	  pg_stat_statements.c are plain calls.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/pgsscrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/page_keys.h"
#include "storage/encryption.h"

static TempKeyCiphers texts_key;	/* the temporary-file key's slots: the
									 * dump's */
static TempKeyCiphers texts_start;	/* the same, keyed at start-up and never
									 * again: the texts file's */

/*
 * The texts file follows the rule the server started with: a cluster
 * encrypted online (design 9.7) keeps writing it in clear until the next
 * start, which writes a new file.  The dump written at shutdown says which
 * by its nonce: 0 for texts in clear.
 */
static bool texts_encrypted = false;
static int	texts_slot = PAGE_SLOT_A;	/* the slot new texts are under */

#define NONCE_SLOT_B	(UINT64CONST(1) << 63)
#define NONCE_HEADROOM	(UINT64CONST(1) << 62)	/* texts: clear; dump: set */

/*
 * The cipher of the slot a nonce names: the texts file's keyed at start-up,
 * the dump's from the current key ring
 */
static CtrCipher *
texts_cipher(uint64 nonce)
{
	int			slot = (nonce & NONCE_SLOT_B) ? PAGE_SLOT_B : PAGE_SLOT_A;

	if ((nonce & NONCE_HEADROOM) == 0)
		return texts_start.slot[slot].ctr;
	return TempKeyCipher(&texts_key, slot, "pg_stat_statements query texts")->ctr;
}

void
InitializeStatementTextEncryption(void)
{
	StartTempKeyCiphers(&texts_key, true);
	StartTempKeyCiphers(&texts_start, true);
	texts_encrypted = DataEncryptionEnabled();
	texts_slot = TempWriteSlot();
}

/* Encrypt or decrypt len bytes at offset of a file under nonce, in place */
void
CryptStatementTexts(uint64 nonce, uint64 offset, char *buf, size_t len)
{
	if (!texts_encrypted || nonce == 0 || len == 0)
		return;
	if (!ctr_crypt_at(texts_cipher(nonce), nonce, offset, (unsigned char *) buf,
					  (unsigned char *) buf, len))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not encrypt or decrypt pg_stat_statements query texts"),
				 errdetail("%s", data_encryption_error_reason())));
}

/* A random nonce under slot, the dump's or the texts file's */
static uint64
new_nonce(int slot, bool dump)
{
	uint64		nonce;

	if (!pg_strong_random(&nonce, sizeof(nonce)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random nonce for pg_stat_statements query texts")));
	nonce &= ~(NONCE_SLOT_B | NONCE_HEADROOM);
	if (slot == PAGE_SLOT_B)
		nonce |= NONCE_SLOT_B;
	if (dump)
		nonce |= NONCE_HEADROOM;
	return nonce == 0 ? 1 : nonce;	/* 0 says "in clear" */
}

/* The nonce of a new generation of texts: random; 0 when not encrypting */
uint64
NewStatementTextsNonce(void)
{
	return texts_encrypted ? new_nonce(texts_slot, false) : 0;
}

/*
 * qtext_store(): write a query text and its terminator at off.  Returns
 * false with errno set when the write fails.
 */
bool
WriteStatementText(int fd, const char *query, int query_len, off_t off,
				   uint64 nonce)
{
	char	   *buf;
	bool		ok;

	if (!texts_encrypted)
		return pg_pwrite(fd, query, query_len, off) == query_len &&
			pg_pwrite(fd, "\0", 1, off + query_len) == 1;

	buf = palloc(query_len + 1);
	memcpy(buf, query, query_len);
	buf[query_len] = '\0';
	CryptStatementTexts(nonce, off, buf, query_len + 1);
	ok = pg_pwrite(fd, buf, query_len + 1, off) == query_len + 1;
	pfree(buf);
	return ok;
}

/*
 * The dump file's nonce follows its header when the cluster is encrypted.
 * Both return false when the file cannot be written or read.
 */
bool
WriteStatementTextsDumpNonce(FILE *file, uint64 *nonce)
{
	/*
	 * 0 for a cluster encrypted since this server started, or decrypted:
	 * texts in clear
	 */
	*nonce = (texts_encrypted && DataEncryptionEnabled()) ?
		new_nonce(TempWriteSlot(), true) : 0;
	return !DataEncryptionEnabled() ||
		fwrite(nonce, sizeof(uint64), 1, file) == 1;
}

bool
ReadStatementTextsDumpNonce(FILE *file, uint64 *nonce)
{
	*nonce = 0;
	return !DataEncryptionEnabled() ||
		fread(nonce, sizeof(uint64), 1, file) == 1;
}
