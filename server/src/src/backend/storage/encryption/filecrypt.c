/*-------------------------------------------------------------------------
 *
 * filecrypt.c
 *	  pgcipher: encrypt the files, other than relations and WAL, that can
 *	  hold user data.
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
 *	  pg_stat_statements' query texts (pg_stat_tmp/pgss_query_texts.stat
 *	  and the dump in pg_stat/): AES-CTR under the temporary-file key,
 *	  counter = (nonce, byte offset / 16).  The text file is appended to
 *	  and rewritten from offset 0 by garbage collection and resets; each
 *	  rewrite is a new generation (gc_count) and the nonce is a random
 *	  per-start value plus the generation, so no offset is written twice
 *	  under one nonce.  The dump file gets a random nonce of its own,
 *	  stored in it.
 *
 *	  Logical decoding spill files (pg_replslot/<slot>/xid-*.spill):
 *	  append-only, read in order, deleted after use.  AES-CTR under the
 *	  temporary-file key; a 16-byte header holds a random nonce chosen
 *	  when the file is created, the counter is the byte offset / 16.  A
 *	  byte is written once per file, and a file created again (same name
 *	  after a restart) gets a new nonce, so no keystream is reused.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/filecrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "common/hashfn.h"
#include "common/keyring.h"
#include "storage/encryption.h"
#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#define SPILL_MAGIC			"PGCSPIL1"
#define SPILL_HEADER_LEN	16	/* magic (8) + nonce (8) */
#define STATE_UNIT			8192

static XtsCipher *state_cipher = NULL;	/* relation key: SLRU pages, 2PC state */
static CtrCipher *stream_cipher = NULL;	/* temporary-file key: spill files, pgss texts */
static char *spill_buf = NULL;	/* reused for every spill write */
static size_t spill_bufsize = 0;

/* Called by InitializeDataEncryption(), in the postmaster: nothing here
 * allocates later, so SLRU writes in critical sections are safe. */
void
InitializeFileEncryption(void)
{
	const unsigned char *key;
	int			len;

	key = GetDataEncryptionKey(KEY_RELATION, &len);
	if (key != NULL)
		state_cipher = xts_cipher_create(data_encryption_cipher, key);
	key = GetDataEncryptionKey(KEY_TEMPFILE, &len);
	if (key != NULL)
		stream_cipher = ctr_cipher_create(data_encryption_cipher, key);
	if (state_cipher == NULL || stream_cipher == NULL)
		ereport(FATAL,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not set up the ciphers for SLRU, two-phase and spill files")));
	InitializeTempFileEncryption();
}

static bool
is_all_zeros(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != 0)
			return false;
	return true;
}

static void
domain_tweak(unsigned char *tweak, uint64 a, uint32 b, char domain)
{
	memset(tweak, 0, XTS_TWEAK_LEN);
	for (int i = 0; i < 8; i++)
		tweak[i] = (unsigned char) (a >> (8 * i));
	for (int i = 0; i < 4; i++)
		tweak[8 + i] = (unsigned char) (b >> (8 * i));
	tweak[15] = (unsigned char) domain;	/* relation tweaks have 0 here */
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

	if (!DataEncryptionEnabled() || is_all_zeros(page, BLCKSZ))
		return page;
	domain_tweak(tweak, (uint64) pageno,
				 hash_bytes((const unsigned char *) dir, strlen(dir)), 'S');
	if (!xts_encrypt(state_cipher, tweak, (const unsigned char *) page,
					 (unsigned char *) out.data, BLCKSZ))
		elog(PANIC, "could not encrypt page %lld of \"%s\"",
			 (long long) pageno, dir);
	return out.data;
}

void
DecryptSlruPage(const char *dir, int64 pageno, char *page)
{
	unsigned char tweak[XTS_TWEAK_LEN];

	if (!DataEncryptionEnabled() || is_all_zeros(page, BLCKSZ))
		return;
	domain_tweak(tweak, (uint64) pageno,
				 hash_bytes((const unsigned char *) dir, strlen(dir)), 'S');
	if (!xts_decrypt(state_cipher, tweak, (unsigned char *) page,
					 (unsigned char *) page, BLCKSZ))
		elog(PANIC, "could not decrypt page %lld of \"%s\"",
			 (long long) pageno, dir);
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
		domain_tweak(tweak, unit, xid, 'P');
		ok = encrypt ?
			xts_encrypt(state_cipher, tweak, (unsigned char *) buf + off,
						(unsigned char *) buf + off, n) :
			xts_decrypt(state_cipher, tweak, (unsigned char *) buf + off,
						(unsigned char *) buf + off, n);
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not %s two-phase state of transaction %u",
							encrypt ? "encrypt" : "decrypt", xid)));
		off += n;
		unit++;
	}
}

/*
 * RecreateTwoPhaseFile() writes content (len bytes) and then the CRC.
 * Returns the encrypted content (valid until the next call), and replaces *crc by the encrypted CRC,
 * so that the caller's two writes put ciphertext on disk.
 */
void *
EncryptTwoPhaseState(TransactionId xid, const void *content, int len,
					 pg_crc32c *crc)
{
	static char *buf = NULL;
	static size_t bufsize = 0;

	if (bufsize < len + sizeof(pg_crc32c))
	{
		if (buf != NULL)
			pfree(buf);
		bufsize = Max(len + sizeof(pg_crc32c), 8192);
		buf = MemoryContextAlloc(TopMemoryContext, bufsize);
	}
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

/*
 * Spill files and pg_stat_statements texts: AES-CTR with the counter block
 * (nonce, byte offset / 16), for len bytes at offset.
 */
static void
stream_crypt(const unsigned char *nonce, off_t offset, const char *in,
			 char *out, size_t len)
{
	unsigned char iv[16];
	uint64		block = (uint64) offset / 16;

	memcpy(iv, nonce, 8);
	for (int i = 0; i < 8; i++)
		iv[8 + i] = (unsigned char) (block >> (56 - 8 * i));
	if (!ctr_crypt(stream_cipher, iv, offset % 16, (const unsigned char *) in,
				   (unsigned char *) out, len))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not encrypt or decrypt a spill file or statement texts")));
}

/*
 * write() of a change to a spill file opened with O_APPEND.  A new file
 * first gets its header.  Returns what write() returns for data.
 */
ssize_t
WriteSpillFileData(int fd, const char *data, size_t len)
{
	unsigned char header[SPILL_HEADER_LEN];
	off_t		offset;
	char	   *buf;
	ssize_t		r;

	if (!DataEncryptionEnabled())
		return write(fd, data, len);

	offset = lseek(fd, 0, SEEK_END);
	if (offset < 0)
		return -1;
	if (offset == 0)
	{
		memcpy(header, SPILL_MAGIC, 8);
		if (!pg_strong_random(header + 8, 8))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random nonce for a spill file")));
		if (write(fd, header, SPILL_HEADER_LEN) != SPILL_HEADER_LEN)
			return -1;
		offset = SPILL_HEADER_LEN;
	}
	else if (pg_pread(fd, header, SPILL_HEADER_LEN, 0) != SPILL_HEADER_LEN ||
			 memcmp(header, SPILL_MAGIC, 8) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("logical decoding spill file has no valid encryption header")));

	if (len > spill_bufsize)
	{
		if (spill_buf != NULL)
			pfree(spill_buf);
		spill_bufsize = Max(len, 8192);
		spill_buf = MemoryContextAlloc(TopMemoryContext, spill_bufsize);
	}
	buf = spill_buf;
	stream_crypt(header + 8, offset, data, buf, len);
	r = write(fd, buf, len);
	return r;
}

/* pg_stat_statements: encrypt or decrypt len bytes at offset, in place */
void
CryptStatementTexts(uint64 nonce, uint64 offset, char *buf, size_t len)
{
	unsigned char n[8];

	for (int i = 0; i < 8; i++)
		n[i] = (unsigned char) (nonce >> (56 - 8 * i));
	stream_crypt(n, (off_t) offset, buf, buf, len);
}

uint64
RandomStatementTextsNonce(void)
{
	uint64		nonce;

	if (!pg_strong_random(&nonce, sizeof(nonce)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random nonce")));
	return nonce;
}

/* Where the first change of a spill file starts */
off_t
SpillFileFirstOffset(void)
{
	return DataEncryptionEnabled() ? SPILL_HEADER_LEN : 0;
}

/* Decrypt, in place, len bytes read at offset from spill file vfd */
void
DecryptSpillFileData(File vfd, char *data, size_t len, off_t offset)
{
	static File cached_vfd = -1;
	static unsigned char header[SPILL_HEADER_LEN];

	if (!DataEncryptionEnabled() || len == 0)
		return;
	/* files are read one at a time, in order: cache the open one's header */
	if (vfd != cached_vfd || offset == SPILL_HEADER_LEN)
	{
		if (FileRead(vfd, header, SPILL_HEADER_LEN, 0,
					 WAIT_EVENT_REORDER_BUFFER_READ) != SPILL_HEADER_LEN ||
			memcmp(header, SPILL_MAGIC, 8) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("logical decoding spill file \"%s\" has no valid encryption header",
							FilePathName(vfd))));
		cached_vfd = vfd;
	}
	stream_crypt(header + 8, offset, data, data, len);
}
