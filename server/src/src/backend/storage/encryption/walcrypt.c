/*-------------------------------------------------------------------------
 *
 * walcrypt.c
 *	  pgcipher: the server's side of WAL encryption.
 *
 * XLogWrite() hands its pages to WriteWALPages() instead of pg_pwrite():
 * the pages are encrypted into a scratch buffer of this process and that
 * is written, so the WAL buffers in shared memory stay plaintext (inserters
 * keep filling the last page, and logical decoding may read them).  Bytes
 * after the end of the write request go out as zeros.  The cipher work is
 * done under WALWriteLock, like the write itself; at about 1 us per 8 kB
 * page it is small next to the write and fsync (see the wal-heavy
 * benchmark).  The page a flush leaves valid only in part is written again
 * at the next flush; its ciphertext so far is kept (last_partial_page), so
 * each flush encrypts only the bytes it adds, not the page from its start.
 *
 * Epochs.  Each page is encrypted under the epoch recorded in its header
 * padding; a page that has none (a fresh page) takes the epoch of this
 * server incarnation, chosen at random by the postmaster at start and
 * again before the startup process runs after a crash.  The page that
 * holds the end of WAL when recovery ends is given the new epoch
 * (ResetWALPageEpoch), because what follows the end of WAL there may have
 * been written before with other contents; after a clean shutdown that
 * page keeps its epoch, so that a standby which already holds its first
 * part can still decrypt what follows.  XLogFileCopy() re-encrypts the
 * page holding the switch point of a new timeline under the new epoch
 * (CopyWALPagePrefix), so the new timeline's file is consistent from the
 * moment it exists.
 *
 * Key slots.  WAL is under the WAL key of slot A (KEY_WAL) or B
 * (KEY_WAL_B); an online rotation of the data keys moves new WAL to the
 * other slot from a segment boundary (walkeys.c), and WALWriteSlot() says
 * which slot a page's LSN falls in.  Each process holds a cipher per slot,
 * re-keyed in place when the shared key ring changes (the refresh hook
 * common/wal_encryption.c calls before each page), so that neither
 * XLogWrite() nor a WAL reader allocates in a critical section.
 *
 * Decryption happens in the WAL reader (xlogreader.c, xlogrecovery.c);
 * the pages and tweaks are defined in common/wal_encryption.c.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/walcrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "common/page_keys.h"
#include "common/wal_encryption.h"
#include "storage/encryption.h"

/* pages encrypted per write call; XLogWrite() loops over short writes */
#define WAL_SCRATCH_PAGES	64

static char *wal_scratch = NULL;

/* the last page this process wrote in part, for the next flush */
static WALPartialPage *last_partial_page = NULL;

/* epoch for pages first written by this server incarnation; never 0 */
static uint32 wal_write_epoch = 0;

/* a CTR context per WAL key slot, made once, re-keyed in place */
static CtrCipher *slot_cipher[2] = {NULL, NULL};

/* the key ring version they were keyed from (odd: none) */
static uint32 keys_version_seen = 1;

/*
 * Re-key the slot ciphers from the shared key ring when it changed; a slot
 * whose key is not in the ring has none, and WAL under it cannot be read.
 * Allocates nothing and never throws: XLogWrite() and the WAL readers call
 * it, in critical sections too, through wal_encryption_refresh_hook.
 */
static void
refresh_wal_ciphers(void)
{
	uint32		version = DataKeysVersion();
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];

	if (likely(version == keys_version_seen))
		return;
	for (int slot = PAGE_SLOT_A; slot <= PAGE_SLOT_B; slot++)
	{
		bool		have = CopyDataKey(wal_keys_slot_key_id(slot), key) &&
			ctr_cipher_rekey(slot_cipher[slot], DataKeysCipher(), key);

		wal_encryption_set_cipher(slot, have ? slot_cipher[slot] : NULL);
	}
	data_encryption_wipe(key, sizeof(key));
	if (last_partial_page != NULL)
		last_partial_page->valid = 0;
	/* the ring changed while we copied: look again next time */
	if (version % 2 == 0)
		keys_version_seen = version;
}

/*
 * Called by the postmaster before each start of the startup process, and
 * by InitializeWALEncryption(); processes forked later inherit it.
 */
void
ChooseWALEncryptionEpoch(void)
{
	do
	{
		if (!pg_strong_random(&wal_write_epoch, sizeof(wal_write_epoch)))
			ereport(FATAL,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate random WAL encryption epoch")));
	} while (wal_write_epoch == 0);
}

/*
 * Called by InitializeDataEncryption() once the key ring is loaded, in the
 * postmaster (or a single-user or bootstrap backend), before any WAL is
 * written; children inherit the ciphers, the epoch and the buffer.  Both
 * slots get a context now, keyed with whichever WAL key the ring holds,
 * so that re-keying never allocates.
 */
void
InitializeWALEncryption(int cipher)
{
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];

	CopyStartupSlotKey(KEY_WAL, KEY_WAL_B, "WAL key", key);
	if (cipher == DATA_ENCRYPTION_OFF)
		cipher = DATA_ENCRYPTION_AES256;	/* a placeholder's (design 9.7) */
	for (int slot = PAGE_SLOT_A; slot <= PAGE_SLOT_B; slot++)
		if (slot_cipher[slot] == NULL)
			slot_cipher[slot] = StartupCipher(ctr_cipher_create(cipher, key));
	data_encryption_wipe(key, sizeof(key));
	keys_version_seen = DataKeysVersion() + 1;	/* odd: never seen */
	refresh_wal_ciphers();
	wal_encryption_refresh_hook = refresh_wal_ciphers;
	ChooseWALEncryptionEpoch();
	if (wal_scratch == NULL)
	{
		wal_scratch = aligned_alloc(PG_IO_ALIGN_SIZE,
									WAL_SCRATCH_PAGES * XLOG_BLCKSZ);
		last_partial_page = calloc(1, sizeof(WALPartialPage));
		if (wal_scratch == NULL || last_partial_page == NULL)
			ereport(FATAL,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
	}
	last_partial_page->valid = 0;	/* encrypted under the previous key */
}

/* Encrypt a page of the WAL buffers into out, giving it an epoch if new */
static void
encrypt_wal_buffer_page(char *page, char *out, XLogRecPtr pageptr,
						XLogRecPtr valid_end)
{
	uint32		epoch = wal_page_epoch(page);
	int			valid;

	int			slot = WALWriteSlot(pageptr);

	if (slot == PAGE_SLOT_CLEAR)
	{
		/* before the switch of a cluster being encrypted online */
		memcpy(out, page, XLOG_BLCKSZ);
		return;
	}
	if (epoch == 0)
	{
		/* only XLogWrite, under WALWriteLock, reads or sets this field */
		epoch = wal_write_epoch;
		wal_page_set_epoch(page, epoch);
	}
	if (valid_end >= pageptr + XLOG_BLCKSZ)
		valid = XLOG_BLCKSZ;
	else if (valid_end > pageptr)
		valid = valid_end - pageptr;
	else
		valid = 0;
	wal_encrypt_page_cached(last_partial_page, page, out, pageptr, epoch,
							slot, valid);
}

/*
 * pg_pwrite() of WAL: nbytes of buf go to offset of segment segno; WAL is
 * valid up to valid_end (XLogWrite's WriteRqst.Write).  buf points into
 * the WAL buffers, where the page holding it starts offset % XLOG_BLCKSZ
 * bytes earlier.  May write less than asked, like pg_pwrite().
 */
ssize_t
WriteWALPages(int fd, char *buf, size_t nbytes, off_t offset,
			  XLogSegNo segno, XLogRecPtr valid_end)
{
	XLogRecPtr	lsn;
	size_t		pre;
	int			npages;
	size_t		len;

	/* (a cluster decrypted online keeps its keys until it stops) */
	if (!DataEncryptionEnabled() || !wal_encryption_enabled())
		return pg_pwrite(fd, buf, nbytes, offset);

	XLogSegNoOffsetToRecPtr(segno, offset, wal_segment_size, lsn);
	pre = lsn % XLOG_BLCKSZ;
	npages = (pre + nbytes + XLOG_BLCKSZ - 1) / XLOG_BLCKSZ;
	if (npages > WAL_SCRATCH_PAGES)
		npages = WAL_SCRATCH_PAGES;
	for (int i = 0; i < npages; i++)
		encrypt_wal_buffer_page(buf - pre + (Size) i * XLOG_BLCKSZ,
								wal_scratch + (Size) i * XLOG_BLCKSZ,
								lsn - pre + (XLogRecPtr) i * XLOG_BLCKSZ,
								valid_end);
	len = Min(nbytes, (size_t) npages * XLOG_BLCKSZ - pre);
	return pg_pwrite(fd, wal_scratch + pre, len, offset);
}

/*
 * StartupXLOG() has copied the page holding the end of WAL into the WAL
 * buffers; after recovery it gets the new epoch (see the file header).
 */
void
ResetWALPageEpoch(char *page)
{
	wal_page_set_epoch(page, 0);
}

/*
 * XLogFileCopy() has read the first upto bytes of the page at offset of the
 * source segment into page, and zeroed the rest.  Re-read the whole page,
 * decrypt it, and encrypt its first upto bytes again under this
 * incarnation's epoch, the one the new timeline's first write will use.
 */
void
CopyWALPagePrefix(int srcfd, const char *path, char *page, off_t offset,
				  int upto, XLogSegNo segno)
{
	XLogRecPtr	pageptr;
	ssize_t		r;

	if (!DataEncryptionEnabled() || !wal_encryption_enabled() ||
		upto <= 0 || upto >= XLOG_BLCKSZ)
		return;

	XLogSegNoOffsetToRecPtr(segno, offset, wal_segment_size, pageptr);
	r = pg_pread(srcfd, page, XLOG_BLCKSZ, offset);
	if (r != XLOG_BLCKSZ)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": read %d of %d",
						path, (int) r, XLOG_BLCKSZ)));
	if (!wal_page_is_encrypted(page))
	{
		/* a page pg_resetwal wrote in clear */
		memset(page + upto, 0, XLOG_BLCKSZ - upto);
		return;
	}
	(void) wal_decrypt_page(page, pageptr, XLOG_BLCKSZ);
	if (WALWriteSlot(pageptr) == PAGE_SLOT_CLEAR)
	{
		memset(page + upto, 0, XLOG_BLCKSZ - upto);
		return;
	}
	wal_encrypt_page_cached(NULL, page, wal_scratch, pageptr, wal_write_epoch,
							WALWriteSlot(pageptr), upto);
	memcpy(page, wal_scratch, XLOG_BLCKSZ);
}

/*
 * RemoveXlogFile(): whether an old segment may be recycled as a future one.
 * Not one written in clear before the cluster was encrypted online (design
 * 9.7): a recycled segment keeps its bytes until WAL overwrites them, so it
 * is removed instead.  Its first page says, in its clear header.
 */
bool
WALSegmentRecyclable(const char *path)
{
	XLogPageHeaderData hdr;
	int			fd;
	bool		clear;

	if (!DataEncryptionEnabled())
		return true;
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return true;			/* RemoveXlogFile() reports it */
	clear = pg_pread(fd, &hdr, sizeof(hdr), 0) == sizeof(hdr) &&
		!wal_page_is_encrypted((const char *) &hdr);
	CloseTransientFile(fd);
	return !clear;
}
