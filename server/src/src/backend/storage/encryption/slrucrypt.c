/*-------------------------------------------------------------------------
 *
 * slrucrypt.c
 *	  pgcipher: encrypt SLRU pages and two-phase state files, the small
 *	  transaction-status files that can hold user data.
 *
 *	  SLRU pages (pg_xact, pg_multixact, pg_subtrans, pg_commit_ts,
 *	  pg_serial and pg_notify, whose pages hold NOTIFY payloads): AES-XTS
 *	  over the whole page under the relation key, tweak = (page number,
 *	  hash of the SLRU's directory, 'S'), which can never equal a relation
 *	  page's tweak.  All-zero pages stay zeros, as for relations: SLRUs
 *	  read missing pages as zeros and the documented pg_resetwal recipes
 *	  create files of zeros.  A page rewritten in place reveals at most
 *	  which 16-byte blocks did not change.
 *
 *	  Two-phase state files (pg_twophase): written once and read whole.
 *	  Content and CRC are encrypted together with AES-XTS under the
 *	  relation key, tweak = (unit, xid, 'P'), in units of 8 kB; a last
 *	  piece shorter than an AES block joins the unit before it.  The file
 *	  keeps its length.
 *
 *	  The cipher is set up by InitializeDataEncryption() in the postmaster:
 *	  nothing here allocates on the write path of an SLRU page, so writes
 *	  in critical sections are safe.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/slrucrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/slru.h"
#include "storage/encryption.h"

/* pg_upgrade's transform of SLRU files counts pages with our copy */
StaticAssertDecl(ENCRYPTION_SLRU_PAGES_PER_SEGMENT == SLRU_PAGES_PER_SEGMENT,
				 "ENCRYPTION_SLRU_PAGES_PER_SEGMENT must be access/slru.h's SLRU_PAGES_PER_SEGMENT");

#define STATE_UNIT			8192

static XtsCipher *state_cipher = NULL;	/* relation key */

void
InitializeSlruEncryption(XtsCipher *cipher)
{
	state_cipher = cipher;
}

/*
 * SLRU: returns the page to write (page itself when not encrypting); the
 * result is valid until the next call.
 */
const char *
EncryptSlruPage(const char *dir, int64 pageno, const char *page)
{
	static PGAlignedBlock out;
	unsigned char tweak[XTS_TWEAK_LEN];

	if (!DataEncryptionEnabled() || data_encryption_is_zero(page, BLCKSZ))
		return page;
	slru_encryption_tweak(tweak, dir, pageno);
	if (!xts_encrypt(state_cipher, tweak, (const unsigned char *) page,
					 (unsigned char *) out.data, BLCKSZ))
		ereport(PANIC,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not encrypt page %lld of \"%s\"",
						(long long) pageno, dir),
				 errdetail("%s", data_encryption_error_reason())));
	return out.data;
}

void
DecryptSlruPage(const char *dir, int64 pageno, char *page)
{
	unsigned char tweak[XTS_TWEAK_LEN];

	if (!DataEncryptionEnabled() || data_encryption_is_zero(page, BLCKSZ))
		return;
	slru_encryption_tweak(tweak, dir, pageno);
	if (!xts_decrypt(state_cipher, tweak, (unsigned char *) page,
					 (unsigned char *) page, BLCKSZ))
		ereport(PANIC,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not decrypt page %lld of \"%s\"",
						(long long) pageno, dir),
				 errdetail("%s", data_encryption_error_reason())));
}

/* Two-phase state: XTS over buf[0..len) in place, units of STATE_UNIT */
static void
crypt_state(bool encrypt, TransactionId xid, char *buf, size_t len)
{
	size_t		off = 0;
	uint32		unit = 0;

	if (len < 16)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("two-phase state file for transaction %u is too short to be encrypted (%zu bytes)",
						xid, len)));
	while (off < len)
	{
		size_t		n = Min(STATE_UNIT, len - off);
		unsigned char tweak[XTS_TWEAK_LEN];
		bool		ok;

		if (len - off - n < 16)
			n = len - off;		/* a short last piece joins this unit */
		domain_encryption_tweak(tweak, unit, xid, 'P');
		ok = encrypt ?
			xts_encrypt(state_cipher, tweak, (unsigned char *) buf + off,
						(unsigned char *) buf + off, n) :
			xts_decrypt(state_cipher, tweak, (unsigned char *) buf + off,
						(unsigned char *) buf + off, n);
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 encrypt ?
					 errmsg("could not encrypt the two-phase state of transaction %u", xid) :
					 errmsg("could not decrypt the two-phase state of transaction %u", xid),
					 errdetail("%s", data_encryption_error_reason())));
		off += n;
		unit++;
	}
}

/*
 * RecreateTwoPhaseFile() writes content (len bytes) and then the CRC.
 * Returns the encrypted content (valid until the next call), and replaces
 * *crc by the encrypted CRC, so that the caller's two writes put
 * ciphertext on disk.
 */
void *
EncryptTwoPhaseState(TransactionId xid, const void *content, int len,
					 pg_crc32c *crc)
{
	static char *buf = NULL;
	static size_t bufsize = 0;

	buf = GrowStaticBuffer(buf, &bufsize, len + sizeof(pg_crc32c));
	memcpy(buf, content, len);
	memcpy(buf + len, crc, sizeof(pg_crc32c));
	crypt_state(true, xid, buf, len + sizeof(pg_crc32c));
	memcpy(crc, buf + len, sizeof(pg_crc32c));
	return buf;
}

/* ReadTwoPhaseFile(): the whole file, content and CRC, in place */
void
DecryptTwoPhaseState(TransactionId xid, char *buf, size_t len)
{
	if (DataEncryptionEnabled())
		crypt_state(false, xid, buf, len);
}
