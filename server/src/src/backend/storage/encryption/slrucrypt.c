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

#include <sys/stat.h>
#include <unistd.h>

#include "access/slru.h"
#include "access/xlog.h"
#include "common/page_keys.h"
#include "storage/encryption.h"
#include "storage/fd.h"
#include "storage/lwlock.h"

/* pg_upgrade's transform of SLRU files counts pages with our copy */
StaticAssertDecl(ENCRYPTION_SLRU_PAGES_PER_SEGMENT == SLRU_PAGES_PER_SEGMENT,
				 "ENCRYPTION_SLRU_PAGES_PER_SEGMENT must be access/slru.h's SLRU_PAGES_PER_SEGMENT");

#define STATE_UNIT			8192
#define TWOPHASE_DIR		"pg_twophase"	/* twophase.c's */

static ModuleCipher slru_key;	/* the transaction-file key */

/* The module's cipher, keyed from the current key ring */
static XtsCipher *
state_cipher(void)
{
	if (!RefreshModuleCipher(&slru_key))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("no key for transaction files"),
				 errdetail("%s", data_encryption_error_reason())));
	return slru_key.xts;
}

void
InitializeSlruEncryption(void)
{
	StartModuleCipher(&slru_key, false, KEY_SLRU, KEY_RELATION);
}

/*
 * SLRU: returns the page to write (page itself when not encrypting); the
 * result is valid until the next call.
 */
/*
 * The SLRUs a cluster being encrypted online converts one at a time
 * (ConvertSlrusOnline()): each has a bit in pg_encryption/pages' slru_done;
 * an extension's SLRU shares the last.  Until its bit is set an SLRU is
 * read and written in clear.
 */
static const char *const slru_dirs[] = {
	"pg_xact", "pg_commit_ts", "pg_multixact/offsets", "pg_multixact/members",
	"pg_subtrans", "pg_serial", "pg_notify",
};

#define SLRU_BIT_OTHERS		lengthof(slru_dirs)
StaticAssertDecl(PAGE_KEYS_SLRU_ALL == (1U << (lengthof(slru_dirs) + 1)) - 1,
				 "one bit per SLRU directory, and one for the others");

static int
slru_bit(const char *dir)
{
	for (int i = 0; i < lengthof(slru_dirs); i++)
		if (strcmp(dir, slru_dirs[i]) == 0)
			return i;
	return SLRU_BIT_OTHERS;
}

/* Whether the SLRU in dir is encrypted now */
static bool
slru_encrypted(const char *dir)
{
	return DataEncryptionEnabled() &&
		(SlrusConverted() & (1U << slru_bit(dir))) != 0;
}

const char *
EncryptSlruPage(const char *dir, int64 pageno, const char *page)
{
	static PGAlignedBlock out;
	unsigned char tweak[XTS_TWEAK_LEN];

	if (!slru_encrypted(dir) || data_encryption_is_zero(page, BLCKSZ))
		return page;
	slru_encryption_tweak(tweak, dir, pageno);
	if (!xts_encrypt(state_cipher(), tweak, (const unsigned char *) page,
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

	if (!slru_encrypted(dir) || data_encryption_is_zero(page, BLCKSZ))
		return;
	slru_encryption_tweak(tweak, dir, pageno);
	if (!xts_decrypt(state_cipher(), tweak, (unsigned char *) page,
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
			xts_encrypt(state_cipher(), tweak, (unsigned char *) buf + off,
						(unsigned char *) buf + off, n) :
			xts_decrypt(state_cipher(), tweak, (unsigned char *) buf + off,
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
	if (!NewWritesEncrypted())
		return buf;				/* a cluster being decrypted: in clear */
	crypt_state(true, xid, buf, len + sizeof(pg_crc32c));
	memcpy(crc, buf + len, sizeof(pg_crc32c));
	return buf;
}

/*
 * A state file in clear: twophase.c's magic number first and a valid CRC
 * last.  A cluster encrypted online keeps the files of transactions
 * prepared before (design 9.7); an encrypted file passes both checks with
 * probability 2^-64.
 */
#define TWOPHASE_MAGIC_NUMBER	0x57F94534	/* twophase.c's TWOPHASE_MAGIC */

static bool
state_in_clear(const char *buf, size_t len)
{
	uint32		magic;
	pg_crc32c	crc;
	pg_crc32c	stored;

	if (len < sizeof(uint32) + sizeof(pg_crc32c))
		return false;
	memcpy(&magic, buf, sizeof(magic));
	if (magic != TWOPHASE_MAGIC_NUMBER)
		return false;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, len - sizeof(pg_crc32c));
	FIN_CRC32C(crc);
	memcpy(&stored, buf + len - sizeof(pg_crc32c), sizeof(stored));
	return EQ_CRC32C(crc, stored);
}

/* ReadTwoPhaseFile(): the whole file, content and CRC, in place */
void
DecryptTwoPhaseState(TransactionId xid, char *buf, size_t len)
{
	if (DataKeysLoaded() && !state_in_clear(buf, len))
		crypt_state(false, xid, buf, len);
}

/*
 * Online encryption of the SLRUs (design 9.7).  SLRU pages carry no header
 * to mark, so each SLRU switches whole: with every bank lock of it held and
 * no page of it in I/O (every physical read and write of an SLRU page
 * happens with its buffer marked in I/O, which takes a bank lock), its
 * segments are encrypted into pg_encryption/slru/, the bit is committed in
 * pg_encryption/pages (and logged), and the copies are renamed over the
 * originals.  A crash before the commit leaves copies that the next start
 * removes; after it, copies that it renames (CompleteSlruConversion()).  A
 * base backup must not copy an SLRU half-way: the switch backs off while
 * one runs, and one that starts meanwhile waits for the bank locks in its
 * checkpoint, so it copies the SLRU, and pg_encryption/pages, afterwards.
 */
#define SLRU_STAGING_DIR	KEYRING_DIR "/slru"

static SlruCtl registered[16];
static int	nregistered = 0;

/* slru.c's SimpleLruInit(), in the postmaster: children inherit the list */
void
RegisterEncryptedSlru(SlruCtl ctl)
{
	for (int i = 0; i < nregistered; i++)
		if (registered[i] == ctl)
			return;
	if (nregistered < lengthof(registered))
		registered[nregistered++] = ctl;
}

/* A segment's copy: its path with '!' for '/', which finish_staged() reads */
static void
staging_path(char *path, const char *dir, const char *filename)
{
	char		flat[MAXPGPATH];

	snprintf(flat, sizeof(flat), "%s/%s", dir, filename);
	for (char *c = flat; *c; c++)
		if (*c == '/')
			*c = '!';
	snprintf(path, MAXPGPATH, "%s/%s", SLRU_STAGING_DIR, flat);
}

/*
 * SlruScanDirectory() callback: encrypt one segment into the staging dir,
 * or decrypt it (*data: whether to decrypt)
 */
static bool
stage_segment(SlruCtl ctl, char *filename, int64 segpage, void *data)
{
	bool		decrypt = *(bool *) data;
	char		from[MAXPGPATH];
	char		to[MAXPGPATH];
	PGAlignedBlock page;
	int			in,
				out;
	ssize_t		r;
	unsigned char tweak[XTS_TWEAK_LEN];

	snprintf(from, sizeof(from), "%s/%s", ctl->Dir, filename);
	staging_path(to, ctl->Dir, filename);
	in = OpenTransientFile(from, O_RDONLY | PG_BINARY);
	if (in < 0)
		return false;			/* truncated meanwhile: nothing to do */
	out = OpenTransientFile(to, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (out < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", to)));
	for (int64 pageno = segpage;; pageno++)
	{
		r = read(in, page.data, BLCKSZ);
		if (r == 0)
			break;
		if (r != BLCKSZ)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", from)));
		if (!data_encryption_is_zero(page.data, BLCKSZ))
		{
			slru_encryption_tweak(tweak, ctl->Dir, pageno);
			if (!(decrypt ?
				  xts_decrypt(state_cipher(), tweak, (unsigned char *) page.data,
							  (unsigned char *) page.data, BLCKSZ) :
				  xts_encrypt(state_cipher(), tweak, (unsigned char *) page.data,
							  (unsigned char *) page.data, BLCKSZ)))
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("could not encrypt page %lld of \"%s\"",
								(long long) pageno, ctl->Dir),
						 errdetail("%s", data_encryption_error_reason())));
		}
		if (write(out, page.data, BLCKSZ) != BLCKSZ)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write file \"%s\": %m", to)));
	}
	if (pg_fsync(out) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m", to)));
	CloseTransientFile(out);
	CloseTransientFile(in);
	return false;
}

/*
 * Rename the staged copies of the SLRUs whose bit is in done (committed
 * in pg_encryption/pages) over their segments, and remove the others'
 */
static void
finish_staged(uint32 done)
{
	DIR		   *dir = AllocateDir(SLRU_STAGING_DIR);
	struct dirent *de;

	if (dir == NULL)
		return;
	while ((de = ReadDir(dir, SLRU_STAGING_DIR)) != NULL)
	{
		char		path[MAXPGPATH];
		char		target[MAXPGPATH];
		char	   *slash;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", SLRU_STAGING_DIR, de->d_name);
		strlcpy(target, de->d_name, sizeof(target));
		for (char *c = target; *c; c++)
			if (*c == '!')
				*c = '/';
		slash = strrchr(target, '/');
		if (slash != NULL)
		{
			*slash = '\0';
			if ((done & (1U << slru_bit(target))) != 0)
			{
				struct stat st;

				*slash = '/';
				/* not a segment truncated meanwhile: it stays gone */
				if (stat(target, &st) == 0)
				{
					(void) durable_rename(path, target, ERROR);
					continue;
				}
			}
		}
		(void) durable_unlink(path, LOG);
	}
	FreeDir(dir);
}

/*
 * Start-up of an encrypted cluster, before anything reads an SLRU: what a
 * crash left half-way
 */
void
CompleteSlruConversion(void)
{
	struct stat st;

	PageKeysState state;

	GetPageKeysState(&state);
	if (stat(SLRU_STAGING_DIR, &st) == 0)
		finish_staged(state.operation >= PAGE_KEYS_OP_ENABLE ? state.slru_done : 0);
}

/* Every bank lock of ctl, with no page of it in I/O */
static void
lock_whole_slru(SlruCtl ctl)
{
	SlruShared	shared = ctl->shared;

	for (;;)
	{
		bool		busy = false;

		for (int b = 0; b < ctl->nbanks; b++)
			LWLockAcquire(&shared->bank_locks[b].lock, LW_EXCLUSIVE);
		for (int s = 0; s < shared->num_slots && !busy; s++)
			busy = shared->page_status[s] == SLRU_PAGE_READ_IN_PROGRESS ||
				shared->page_status[s] == SLRU_PAGE_WRITE_IN_PROGRESS;
		if (!busy)
			return;
		for (int b = 0; b < ctl->nbanks; b++)
			LWLockRelease(&shared->bank_locks[b].lock);
		pg_usleep(1000L);
	}
}

static void
unlock_whole_slru(SlruCtl ctl)
{
	for (int b = 0; b < ctl->nbanks; b++)
		LWLockRelease(&ctl->shared->bank_locks[b].lock);
}

/* Lock (or unlock) every SLRU that shares bit */
static void
lock_slrus(int bit, bool lock)
{
	for (int i = 0; i < nregistered; i++)
		if (slru_bit(registered[i]->Dir) == bit)
		{
			if (lock)
				lock_whole_slru(registered[i]);
			else
				unlock_whole_slru(registered[i]);
		}
}

/*
 * Encrypt (or decrypt) the SLRUs not done yet, one at a time; commit(bit)
 * records the bit in pg_encryption/pages (the primary writes and logs it;
 * redo on a standby writes its own file).  False if a base backup runs:
 * try later.
 */
bool
ConvertSlrusOnline(uint32 done, bool decrypt, void (*commit) (uint32 bit))
{
	if (MakePGDirectory(SLRU_STAGING_DIR) != 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", SLRU_STAGING_DIR)));
	for (int bit = 0; bit <= SLRU_BIT_OTHERS; bit++)
	{
		if (done & (1U << bit))
			continue;
		lock_slrus(bit, true);
		if (!RecoveryInProgress() && XLogBackupsRunning())
		{
			lock_slrus(bit, false);
			return false;
		}
		for (int i = 0; i < nregistered; i++)
			if (slru_bit(registered[i]->Dir) == bit)
				(void) SlruScanDirectory(registered[i], stage_segment, &decrypt);
		commit(bit);
		EncryptionTestCrashPoint("PGCIPHER_TEST_DATA_ROTATION_CRASH_AT", "slru-committed");
		finish_staged(1U << bit);
		lock_slrus(bit, false);
	}
	(void) rmdir(SLRU_STAGING_DIR); /* empty now */
	return true;
}

/*
 * The end of a decryption (design 9.7): two-phase state files written
 * encrypted (before the decryption began, or from encrypted WAL) are
 * rewritten in clear, so that the server starts without keys.  Under
 * TwoPhaseStateLock no transaction begins to finish; a file removed
 * meanwhile (its transaction finished) stays removed.
 */
void
DecryptTwoPhaseFiles(void)
{
	DIR		   *dir;
	struct dirent *de;

	LWLockAcquire(TwoPhaseStateLock, LW_EXCLUSIVE);
	dir = AllocateDir(TWOPHASE_DIR);
	while ((de = ReadDir(dir, TWOPHASE_DIR)) != NULL)
	{
		char		path[MAXPGPATH];
		char		tmp[MAXPGPATH];
		struct stat st;
		char	   *buf;
		int			fd;
		TransactionId xid;

		if (strspn(de->d_name, "0123456789ABCDEF") != strlen(de->d_name) ||
			strlen(de->d_name) < 8)
			continue;
		snprintf(path, sizeof(path), TWOPHASE_DIR "/%s", de->d_name);
		xid = (TransactionId) strtoul(de->d_name + strlen(de->d_name) - 8, NULL, 16);
		fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
		if (fd < 0 || fstat(fd, &st) != 0)
		{
			if (fd >= 0)
				CloseTransientFile(fd);
			continue;
		}
		buf = palloc(st.st_size);
		if (read(fd, buf, st.st_size) != st.st_size)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", path)));
		CloseTransientFile(fd);
		if (!state_in_clear(buf, st.st_size))
		{
			crypt_state(false, xid, buf, st.st_size);
			snprintf(tmp, sizeof(tmp), "%s.pgcipher", path);
			fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
			if (fd < 0 || write(fd, buf, st.st_size) != st.st_size || pg_fsync(fd) != 0)
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("could not write file \"%s\": %m", tmp)));
			CloseTransientFile(fd);
			if (stat(path, &st) == 0)
				(void) durable_rename(tmp, path, ERROR);
			else
				(void) durable_unlink(tmp, LOG);
		}
		pfree(buf);
	}
	FreeDir(dir);
	LWLockRelease(TwoPhaseStateLock);
}
