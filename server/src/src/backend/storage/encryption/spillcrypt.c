/*-------------------------------------------------------------------------
 *
 * spillcrypt.c
 *	  pgcipher: encrypt logical decoding spill files.
 *
 *	  The reorder buffer spills large transactions to
 *	  pg_replslot/<slot>/xid-*.spill through its own write() and read
 *	  paths.  The files are append-only, read in order and deleted after
 *	  use.  AES-CTR under the temporary-file key; a 16-byte header holds a
 *	  random nonce chosen when the file is created, the counter is the byte
 *	  offset / 16.  A byte is written once per file, and a file created
 *	  again (same name after a restart) gets a new nonce, so no keystream
 *	  is reused.  The magic string names the temporary-file key's slot
 *	  the file began under (a rotation of the data keys moves new files to
 *	  the other one: design 9.6), so each file is read under its own, and
 *	  the slot's key epoch when it is not 0 (a standby replaying its
 *	  primary's rotations may see the slot's key replaced under a file):
 *	  "PGCSPIL1" and "PGCSPILB" are slots A and B at epoch 0, "PGCSE"
 *	  followed by 'A' or 'B' and the epoch's low 16 bits (big-endian)
 *	  another epoch.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/spillcrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "common/page_keys.h"
#include "port/pg_bswap.h"
#include "storage/encryption.h"
#include "storage/fd.h"
#include "utils/wait_event.h"

#define SPILL_MAGIC			"PGCSPIL1"	/* slot A, epoch 0 */
#define SPILL_MAGIC_B		"PGCSPILB"	/* slot B, epoch 0 */
#define SPILL_MAGIC_EPOCH	"PGCSE" /* + slot letter + epoch (2) */
#define SPILL_HEADER_LEN	16	/* magic (8) + nonce (8, big-endian) */

static TempKeyCiphers spill_key;	/* the temporary-file key's slots */

/*
 * The key a header names, its epoch's low 16 bits; false for a file begun
 * in clear
 */
static bool
header_key(const unsigned char *header, TempFileKey *key)
{
	key->epoch = 0;
	if (memcmp(header, SPILL_MAGIC, 8) == 0)
		key->slot = PAGE_SLOT_A;
	else if (memcmp(header, SPILL_MAGIC_B, 8) == 0)
		key->slot = PAGE_SLOT_B;
	else if (memcmp(header, SPILL_MAGIC_EPOCH, 5) == 0 &&
			 (header[5] == 'A' || header[5] == 'B'))
	{
		key->slot = header[5] == 'B' ? PAGE_SLOT_B : PAGE_SLOT_A;
		key->epoch = ((uint32) header[6] << 8) | header[7];
	}
	else
		return false;
	return true;
}

/*
 * A file whose slot's key was replaced since it began is an error: the
 * header holds the epoch's low 16 bits, which must be the current epoch's
 */
static void
check_header_epoch(TempFileKey key)
{
	uint32		now = TempKeyEpoch(key.slot);

	CheckTempKeyEpoch(key.slot, (now & ~(uint32) 0xFFFF) | key.epoch,
					  "a logical decoding spill file");
}

/* The magic string of a new file under the slot new files use now */
static void
new_header_magic(unsigned char *header)
{
	int			slot = TempWriteSlot();
	uint32		epoch = TempKeyEpoch(slot);

	if (epoch == 0)
		memcpy(header, slot == PAGE_SLOT_B ? SPILL_MAGIC_B : SPILL_MAGIC, 8);
	else
	{
		memcpy(header, SPILL_MAGIC_EPOCH, 5);
		header[5] = slot == PAGE_SLOT_B ? 'B' : 'A';
		header[6] = (unsigned char) (epoch >> 8);
		header[7] = (unsigned char) epoch;
	}
}

void
InitializeSpillFileEncryption(void)
{
	StartTempKeyCiphers(&spill_key, true);
}

static void
spill_crypt(const unsigned char *header, off_t offset, const char *in,
			char *out, size_t len)
{
	uint64		nonce;
	TempFileKey key;

	(void) header_key(header, &key);
	check_header_epoch(key);
	memcpy(&nonce, header + 8, sizeof(nonce));
	if (!ctr_crypt_at(TempKeyCipher(&spill_key, key.slot,
									"logical decoding spill files")->ctr, pg_ntoh64(nonce),
					  (uint64) offset,
					  (const unsigned char *) in, (unsigned char *) out, len))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not encrypt or decrypt a logical decoding spill file"),
				 errdetail("%s", data_encryption_error_reason())));
}

/*
 * write() of a change to a spill file opened with O_APPEND.  A new file
 * first gets its header.  Returns what write() returns for data.
 */
ssize_t
WriteSpillFileData(int fd, const char *data, size_t len)
{
	static char *buf = NULL;
	static size_t bufsize = 0;
	unsigned char header[SPILL_HEADER_LEN];
	off_t		offset;
	TempFileKey key;

	if (!DataKeysLoaded())
		return write(fd, data, len);

	offset = lseek(fd, 0, SEEK_END);
	if (offset < 0)
		return -1;
	if (offset == 0 && !NewWritesEncrypted())
		return write(fd, data, len);	/* a cluster being decrypted */
	if (offset == 0)
	{
		new_header_magic(header);
		if (!pg_strong_random(header + 8, 8))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random nonce for a spill file")));
		if (write(fd, header, SPILL_HEADER_LEN) != SPILL_HEADER_LEN)
			return -1;
		offset = SPILL_HEADER_LEN;
	}
	else if (pg_pread(fd, header, SPILL_HEADER_LEN, 0) != SPILL_HEADER_LEN)
		return -1;
	else if (!header_key(header, &key))
		return write(fd, data, len);	/* begun before the cluster was
										 * encrypted (design 9.7) */

	buf = GrowStaticBuffer(buf, &bufsize, len);
	spill_crypt(header, offset, data, buf, len);
	return write(fd, buf, len);
}

/*
 * Where the first change of the spill file vfd starts: after the header of
 * an encrypted one.  A file without one was begun in clear, before the
 * cluster was encrypted online (a change's first field, its length, can
 * never read as the magic string).
 */
off_t
SpillFileFirstOffset(File vfd)
{
	unsigned char magic[8];
	TempFileKey key;

	if (!DataKeysLoaded() || vfd < 0)
		return 0;
	if (FileRead(vfd, magic, sizeof(magic), 0,
				 WAIT_EVENT_REORDER_BUFFER_READ) == sizeof(magic) &&
		header_key(magic, &key))
		return SPILL_HEADER_LEN;
	return 0;
}

/* Decrypt, in place, len bytes read at offset from spill file vfd */
void
DecryptSpillFileData(File vfd, char *data, size_t len, off_t offset)
{
	static File cached_vfd = -1;
	static bool cached_encrypted = false;
	static unsigned char header[SPILL_HEADER_LEN];
	TempFileKey key;

	if (!DataKeysLoaded() || len == 0)
		return;
	/* files are read one at a time, in order: cache the open one's header */
	if (vfd != cached_vfd || offset <= SPILL_HEADER_LEN)
	{
		if (FileRead(vfd, header, SPILL_HEADER_LEN, 0,
					 WAIT_EVENT_REORDER_BUFFER_READ) != SPILL_HEADER_LEN)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("logical decoding spill file \"%s\" is too short",
							FilePathName(vfd))));
		/* begun in clear, before the cluster was encrypted (design 9.7) */
		cached_encrypted = header_key(header, &key);
		cached_vfd = vfd;
	}
	if (cached_encrypted)
		spill_crypt(header, offset, data, data, len);
}
