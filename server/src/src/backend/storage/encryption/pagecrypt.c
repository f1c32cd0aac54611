/*-------------------------------------------------------------------------
 *
 * pagecrypt.c
 *	  pgcipher: encrypt relation pages on their way to disk, decrypt them
 *	  on the way back.
 *
 * md.c calls EncryptBlocksForWrite() before every write or extend and
 * DecryptBlocksAfterRead() after every read, so every fork of every
 * relation kind — tables, indexes, TOAST, sequences, catalogs, permanent,
 * unlogged and temporary — is covered by one mechanism.
 *
 * PostgreSQL 18 reads buffers asynchronously (smgrstartreadv(), under
 * every io_method, "sync" included): the pages are decrypted by
 * DecryptBlocksAfterAsyncRead(), which md.c's completion callback calls
 * before bufmgr's verifies the pages.  That callback runs in a critical
 * section, in whichever process completes the I/O (the issuer, another
 * backend waiting for it, or an I/O worker): the decryption there
 * allocates nothing, runs no key command and never throws; every process
 * has the key from the postmaster, and a failure becomes the I/O's error.
 *
 * A page is encrypted with AES-XTS as one data unit, from byte
 * PAGE_ENCRYPTION_OFFSET to the end; the first bytes (LSN, checksum,
 * flags, lower, upper) stay in clear.  The tweak is the page's location in
 * its relation: relation file number, fork and block number.  It contains
 * neither the database nor the tablespace, so files copied as they are
 * (CREATE DATABASE ... FILE_COPY, ALTER DATABASE ... SET TABLESPACE,
 * pg_upgrade --link, pg_rewind, base backups) stay readable; an init fork
 * is encrypted as the main fork it is copied over at the end of recovery.
 *
 * All-zero pages are left as zeros: they are what mdzeroextend() and holes
 * in files produce, and PostgreSQL treats them as new pages.
 *
 * Every page written carries a mark in its clear pd_flags saying which of
 * two page key slots it is under (common/data_encryption.c, design 4.2),
 * so that a relation can hold pages of two key generations while an
 * online rotation (datarotation.c) rewrites it: a page is written under
 * the generation state.c says now, and read under the slot its mark says.
 * The mark is set on the copy written and cleared on the page read.  Each
 * process holds one XTS cipher per slot, set up in the postmaster and
 * re-keyed in place, without allocating, when the shared key ring changes.
 *
 * With data checksums on, the checksum stored in the page is computed over
 * the ciphertext, so pg_checksums and base backups verify pages without
 * the key.  It is computed once per write, here (bufpage.c skips its
 * plaintext checksum), and verified once per read, here: the verdict is
 * kept until bufmgr's PageIsVerifiedExtended() asks for it through
 * PageChecksumVerifiedOnRead(), so damage is reported, counted and
 * handled (ignore_checksum_failure) exactly as without encryption.  In
 * memory, pd_checksum keeps the value read from disk.
 *
 * The cipher context and a write buffer of 32 pages are set up once, in
 * the postmaster: nothing is allocated and no key is expanded per page.
 * A write of more pages (PG_IOV_MAX is 128 on 18) grows the process's
 * buffer to PG_IOV_MAX pages once; a buffer of PG_IOV_MAX pages from the
 * start cost every backend of 18 1 MB of TopMemoryContext (Citus's
 * columnar_memory test counts it), for writes that are one page almost
 * always.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/pagecrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "common/keyring.h"
#include "common/page_keys.h"
#include "port/pg_iovec.h"
#if PG_VERSION_NUM >= 180000
#include "storage/aio.h"
#include "storage/aio_internal.h"	/* the handle's flags and iovec */
#endif
#include "storage/bufpage.h"
#include "storage/checksum.h"
#include "storage/encryption.h"
#include "utils/memutils.h"

StaticAssertDecl(offsetof(PageHeaderData, pd_flags) == PAGE_FLAGS_OFFSET,
				 "the page mark lives in pd_flags");
StaticAssertDecl((PAGE_MARK_BITS & PD_VALID_FLAG_BITS) == 0,
				 "the page mark must not be a flag PostgreSQL uses");

/* One cipher per page key slot, and whether the ring holds its key */
static XtsCipher *slot_cipher[2] = {NULL, NULL};
static bool slot_has_key[2] = {false, false};
static uint32 keys_version_seen = 0;
static char *write_buffer = NULL;	/* encrypted pages for writing */
static int	write_buffer_pages = 0;

#define WRITE_BUFFER_START_PAGES Min(PG_IOV_MAX, 32)

/*
 * Pages whose ciphertext checksum failed on their latest read, until
 * PageIsVerifiedExtended() looks at them (right after the read, in this
 * process).  A later intact read into the same buffer clears its entry.
 */
typedef struct FailedPage
{
	const void *page;
	uint16		computed;		/* checksum of the ciphertext as read */
} FailedPage;

static FailedPage failed_pages[PG_IOV_MAX];
static int	nfailed_pages = 0;

/* Index of page in failed_pages, or -1 */
static inline int
find_failed_page(const void *page)
{
	for (int i = 0; i < nfailed_pages; i++)
		if (failed_pages[i].page == page)
			return i;
	return -1;
}

static inline void
drop_failed_page(int i)
{
	failed_pages[i] = failed_pages[--nfailed_pages];
}

static void
remember_failed_page(const void *page, uint16 computed)
{
	int			i = find_failed_page(page);

	if (i < 0)
	{
		/* full only if bufmgr never verified earlier reads: reuse a slot */
		i = (nfailed_pages < PG_IOV_MAX) ? nfailed_pages++ : 0;
	}
	failed_pages[i].page = page;
	failed_pages[i].computed = computed;
}

bool
PageChecksumVerifiedOnRead(const void *page, uint16 *computed)
{
	int			i = find_failed_page(page);

	if (i < 0)
	{
		*computed = ((PageHeader) page)->pd_checksum;
		return true;
	}
	*computed = failed_pages[i].computed;
	drop_failed_page(i);
	return false;
}

/*
 * Re-key the slots from the shared key ring when it changed.  Allocates
 * nothing and never throws; false if a key it holds could not be set.
 */
static bool
refresh_slots(void)
{
	uint32		version = DataKeysVersion();
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];
	bool		ok = true;

	if (likely(version == keys_version_seen))
		return true;
	for (int slot = PAGE_SLOT_A; slot <= PAGE_SLOT_B; slot++)
	{
		slot_has_key[slot] = CopyDataKey(page_keys_slot_key_id(slot), key);
		if (slot_has_key[slot] &&
			!xts_cipher_rekey(slot_cipher[slot], DataKeysCipher(), key))
			slot_has_key[slot] = ok = false;
	}
	data_encryption_wipe(key, sizeof(key));
	/* the ring changed while we copied: look again next time */
	if (ok && version % 2 == 0)
		keys_version_seen = version;
	return ok;
}

/*
 * Called by InitializeDataEncryption() in the postmaster (or a single-user
 * or bootstrap backend) with the key ring loaded; children inherit the
 * ciphers and the buffer.  Both slots get a cipher now, keyed with slot
 * A's key until the ring holds one for B, so that re-keying never
 * allocates.
 */
void
InitializePageEncryption(int cipher)
{
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];

	CopyStartupSlotKey(KEY_RELATION, KEY_RELATION_B, "page key", key);
	if (cipher == DATA_ENCRYPTION_OFF)
		cipher = DATA_ENCRYPTION_AES256;	/* a placeholder's (design 9.7) */
	for (int slot = PAGE_SLOT_A; slot <= PAGE_SLOT_B; slot++)
		if (slot_cipher[slot] == NULL)
			slot_cipher[slot] = StartupCipher(xts_cipher_create(cipher, key));
	data_encryption_wipe(key, sizeof(key));
	keys_version_seen = DataKeysVersion() + 1;	/* odd: never seen */
	if (!refresh_slots())
		(void) StartupCipher(NULL);
	if (write_buffer == NULL)
	{
		write_buffer = MemoryContextAllocAligned(TopMemoryContext,
												 WRITE_BUFFER_START_PAGES * BLCKSZ,
												 PG_IO_ALIGN_SIZE, 0);
		write_buffer_pages = WRITE_BUFFER_START_PAGES;
	}
}

void
EncryptPage(RelFileNumber relnumber, ForkNumber forknum,
			BlockNumber blocknum, const char *in, char *out)
{
	int			slot = page_keys_slot(PageWriteGeneration());

	Assert(slot_cipher[slot] != NULL);	/* InitializeDataEncryption() ran */
	if (unlikely(!NewWritesEncrypted()))
	{
		/* a cluster being decrypted (design 9.7): stock bytes, no mark */
		if (out != in)
			memcpy(out, in, BLCKSZ);
		page_clear_mark(out);
		if (DataChecksumsEnabled() && !PageIsNew((Page) in))
			((PageHeader) out)->pd_checksum = pg_checksum_page(out, blocknum);
		return;
	}
	if (!refresh_slots() || !slot_has_key[slot] ||
		!page_crypt(slot_cipher[slot], true, relnumber, forknum, blocknum, in, out))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not encrypt block %u of relation file %u fork %d",
						blocknum, relnumber, forknum),
				 errdetail("%s", slot_has_key[slot] ? data_encryption_error_reason() :
						   "The key ring holds no key for the page key slot new pages are written under.")));
	if (!page_is_all_zeros(in))
		page_set_stored_slot(out, slot);
	/* (a "new" page that is not all zeros is damaged: no checksum to keep) */
	if (DataChecksumsEnabled() && !PageIsNew((Page) in))
		((PageHeader) out)->pd_checksum = pg_checksum_page(out, blocknum);
}

/*
 * Decrypt one page in place, remembering a checksum failure for
 * PageChecksumVerifiedOnRead(); false if the cipher failed.  Allocates
 * nothing and never throws: the asynchronous read path calls it in a
 * critical section.
 */
static bool
decrypt_page(RelFileNumber relnumber, ForkNumber forknum,
			 BlockNumber blocknum, char *page)
{
	bool		checksums;
	uint16		computed = 0;
	int			slot;

	if (page_is_all_zeros(page))
		return true;			/* never written: zeros on disk */
	if (slot_cipher[PAGE_SLOT_A] == NULL || !refresh_slots())
		return false;			/* InitializeDataEncryption() did not run */
	/* pd_upper is in clear: a "new" page that is not all zeros is damaged */
	checksums = DataChecksumsEnabled() && !PageIsNew((Page) page);
	if (checksums)
	{
		computed = pg_checksum_page(page, blocknum);
		if (computed == ((PageHeader) page)->pd_checksum)
		{
			int			i;

			/* an intact re-read clears what an earlier failed read left */
			if (unlikely(nfailed_pages > 0) && (i = find_failed_page(page)) >= 0)
				drop_failed_page(i);
		}
		else
			remember_failed_page(page, computed);
	}
	slot = page_stored_slot(page, PagesMarked());
	if (slot == PAGE_SLOT_CLEAR)
		return true;			/* written before the cluster was encrypted */
	if (!slot_has_key[slot])
		return false;
	page_clear_mark(page);
	return page_crypt(slot_cipher[slot], false, relnumber, forknum, blocknum, page, page);
}

void
DecryptPage(RelFileNumber relnumber, ForkNumber forknum,
			BlockNumber blocknum, char *page)
{
	if (!decrypt_page(relnumber, forknum, blocknum, page))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not decrypt block %u of relation file %u fork %d",
						blocknum, relnumber, forknum),
				 errdetail("%s", data_encryption_error_reason())));
}

/*
 * Encrypt nblocks (at most PG_IOV_MAX) pages for writing at blocknum; the
 * caller's buffers are left alone (they may be shared buffers).  Returns
 * pointers to the pages to write, valid until the next call.
 */
const void **
EncryptBlocksForWrite(RelFileLocator rlocator, ForkNumber forknum,
					  BlockNumber blocknum, const void **buffers,
					  BlockNumber nblocks)
{
	static const void *encrypted[PG_IOV_MAX];

	Assert(nblocks <= PG_IOV_MAX);
	if (nblocks > write_buffer_pages)
	{
		/* once per process, and never in a critical section (md.c's writes) */
		char	   *grown = MemoryContextAllocAligned(TopMemoryContext,
													  (Size) PG_IOV_MAX * BLCKSZ,
													  PG_IO_ALIGN_SIZE, 0);

		pfree(write_buffer);
		write_buffer = grown;
		write_buffer_pages = PG_IOV_MAX;
	}
	for (BlockNumber i = 0; i < nblocks; i++)
	{
		char	   *out = write_buffer + (size_t) i * BLCKSZ;

		EncryptPage(rlocator.relNumber, forknum, blocknum + i, buffers[i], out);
		encrypted[i] = out;
	}
	return encrypted;
}

/* Decrypt, in place, nblocks pages just read from blocknum on */
void
DecryptBlocksAfterRead(RelFileLocator rlocator, ForkNumber forknum,
					   BlockNumber blocknum, void **buffers,
					   BlockNumber nblocks)
{
	for (BlockNumber i = 0; i < nblocks; i++)
		DecryptPage(rlocator.relNumber, forknum, blocknum + i, buffers[i]);
}

#if PG_VERSION_NUM >= 180000
/*
 * Called by mdstartreadv() before the read is staged.  The completion
 * callback decrypts through the read's iovec, which for a temporary
 * relation points into this backend's local buffers; with io_method=
 * io_uring any backend that drains this backend's ring could complete the
 * read, and there those addresses are not our buffers.  So reads into
 * local memory execute synchronously, completing here (io_method=worker
 * already does so for them).
 */
void
PrepareAsyncRead(PgAioHandle *ioh)
{
	if (ioh->flags & PGAIO_HF_REFERENCES_LOCAL)
		pgaio_io_set_flag(ioh, PGAIO_HF_SYNCHRONOUS);
}

/*
 * Decrypt, in place, the first nblocks pages an asynchronous read put into
 * its buffers (a short read completes fewer than it asked for; bufmgr
 * retries the rest).  The iovec is the one the read used: neighbouring
 * buffers share an entry.  Called from md.c's completion callback, in a
 * critical section: no allocation, no ERROR; false if a page could not be
 * decrypted.
 */
bool
DecryptBlocksAfterAsyncRead(PgAioHandle *ioh, const PgAioTargetData *td,
							int nblocks)
{
	struct iovec *iov;
	int			iovcnt = pgaio_io_get_iovec_length(ioh, &iov);
	BlockNumber blocknum = td->smgr.blockNum;

	for (int i = 0; i < iovcnt && nblocks > 0; i++)
	{
		char	   *page = iov[i].iov_base;

		for (size_t off = 0; off < iov[i].iov_len && nblocks > 0;
			 off += BLCKSZ, nblocks--)
		{
			if (!decrypt_page(td->smgr.rlocator.relNumber, td->smgr.forkNum,
							  blocknum++, page + off))
				return false;
		}
	}
	return true;
}
#endif
