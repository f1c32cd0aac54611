/*-------------------------------------------------------------------------
 *
 * control_cipher.c
 *	  pgcipher: the record of a cluster's cipher in pg_control.
 *
 * pg_control stays byte for byte what stock PostgreSQL 17 writes:
 * PG_CONTROL_VERSION 1700, the same ControlFileData, its CRC in place, so
 * that pg_controldata, pgBackRest and every other tool that reads it (and
 * checks its CRC at the stock layout) accept an encrypted cluster.  The
 * cipher is recorded in the zero padding after the struct, inside the
 * first 512 bytes that PostgreSQL writes in one go:
 *
 *	 0	magic "PGCIPHER"	8 bytes
 *	 8	record version		2	big-endian, 1
 *	10	cipher				2	big-endian, DATA_ENCRYPTION_AES128/256
 *	12	CRC-32C of 0..11	4	big-endian
 *
 * All zeros means an unencrypted cluster, so a stock pg_control reads as
 * one.  The record is written once, at bootstrap (xlog.c's
 * WriteControlFile()), and every later rewrite of pg_control carries it
 * over (update_controlfile()).  A server checks at start-up that the record
 * and the key ring agree (storage/encryption/encryption.c).  What keeps a stock server off an
 * encrypted cluster is not this record, which it never reads, but the
 * configuration file and the WAL: see design section 10.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/common/control_cipher.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FRONTEND
#include "postgres.h"
#else
#include "postgres_fe.h"
#endif

#include <fcntl.h>
#include <unistd.h>

#include "access/xlog_internal.h"
#include "catalog/pg_control.h"
#include "common/control_cipher.h"
#include "common/data_encryption.h"
#include "common/keyring.h"
#include "port/pg_bswap.h"
#include "port/pg_crc32c.h"
#ifndef FRONTEND
#include "storage/encryption.h"
#endif

#define CONTROL_CIPHER_MAGIC	"PGCIPHER"
#define CONTROL_CIPHER_VERSION	1

StaticAssertDecl(sizeof(ControlFileData) <= CONTROL_CIPHER_RECORD_OFFSET,
				 "pgcipher's record must follow ControlFileData");
StaticAssertDecl(CONTROL_CIPHER_RECORD_OFFSET + CONTROL_CIPHER_RECORD_SIZE <= PG_CONTROL_MAX_SAFE_SIZE,
				 "pgcipher's record must be written with ControlFileData");

static pg_crc32c
record_crc(const unsigned char *rec)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, rec, 12);
	FIN_CRC32C(crc);
	return crc;
}

/* Write the record for cipher into a pg_control image (zeros for "off") */
void
control_cipher_stamp(char *image, int cipher)
{
	unsigned char *rec = (unsigned char *) image + CONTROL_CIPHER_RECORD_OFFSET;
	uint16		v;
	uint32		crc;

	memset(rec, 0, CONTROL_CIPHER_RECORD_SIZE);
	if (cipher == DATA_ENCRYPTION_OFF)
		return;
	memcpy(rec, CONTROL_CIPHER_MAGIC, 8);
	v = pg_hton16(CONTROL_CIPHER_VERSION);
	memcpy(rec + 8, &v, 2);
	v = pg_hton16((uint16) cipher);
	memcpy(rec + 10, &v, 2);
	crc = pg_hton32(record_crc(rec));
	memcpy(rec + 12, &crc, 4);
}

/* Read the record of a pg_control image (at least 512 bytes) */
ControlCipherRecord
control_cipher_parse(const char *image, int *cipher)
{
	const unsigned char *rec = (const unsigned char *) image + CONTROL_CIPHER_RECORD_OFFSET;
	uint16		v;
	uint32		crc;

	*cipher = DATA_ENCRYPTION_OFF;
	if (data_encryption_is_zero((const char *) rec, CONTROL_CIPHER_RECORD_SIZE))
		return CONTROL_CIPHER_NONE;
	memcpy(&crc, rec + 12, 4);
	if (memcmp(rec, CONTROL_CIPHER_MAGIC, 8) != 0 || pg_ntoh32(crc) != record_crc(rec))
		return CONTROL_CIPHER_DAMAGED;
	memcpy(&v, rec + 8, 2);
	if (pg_ntoh16(v) != CONTROL_CIPHER_VERSION)
		return CONTROL_CIPHER_DAMAGED;
	memcpy(&v, rec + 10, 2);
	*cipher = pg_ntoh16(v);		/* unknown to this version: the caller says */
	return CONTROL_CIPHER_VALID;
}

/*
 * The record of datadir's pg_control, and its 16 bytes as they are into raw
 * if raw is not NULL.  PostgreSQL always writes 8 kB: a missing or shorter
 * file is "unreadable".
 */
ControlCipherRecord
control_cipher_read(const char *datadir, int *cipher, char *raw)
{
	char		path[MAXPGPATH];
	char		image[PG_CONTROL_MAX_SAFE_SIZE];
	int			fd;
	ssize_t		r;

	*cipher = DATA_ENCRYPTION_OFF;
	snprintf(path, sizeof(path), "%s/%s", datadir, XLOG_CONTROL_FILE);
	if ((fd = open(path, O_RDONLY | PG_BINARY, 0)) < 0)
		return CONTROL_CIPHER_UNREADABLE;
	r = pg_pread(fd, image, sizeof(image), 0);
	close(fd);
	if (r != sizeof(image))
		return CONTROL_CIPHER_UNREADABLE;
	if (raw != NULL)
		memcpy(raw, image + CONTROL_CIPHER_RECORD_OFFSET, CONTROL_CIPHER_RECORD_SIZE);
	return control_cipher_parse(image, cipher);
}

#ifdef FRONTEND
/*
 * What the next pg_control a frontend program writes records, and raw: the
 * record datadir's pg_control has or, where it has none (pg_resetwal
 * rebuilding a lost pg_control, or a stock tool dropped it), the cipher the
 * key ring's header names, readable without the key.  Returns -1 when the
 * record is damaged and no key ring says what it was: nothing may guess
 * "unencrypted" then, and raw holds the damaged bytes, to be kept for the
 * server to refuse.
 */
static int
next_record(const char *datadir, char *raw)
{
	int			cipher;
	int			from_keyring;

	switch (control_cipher_read(datadir, &cipher, raw))
	{
		case CONTROL_CIPHER_VALID:
			return cipher;
		case CONTROL_CIPHER_NONE:
		case CONTROL_CIPHER_UNREADABLE:
			return keyring_file_cipher(datadir);
		case CONTROL_CIPHER_DAMAGED:
			break;
	}
	from_keyring = keyring_file_cipher(datadir);
	return from_keyring != DATA_ENCRYPTION_OFF ? from_keyring : -1;
}

/* The cipher pg_resetwal's rewritten pg_control records; -1: damaged */
int
control_cipher_of_cluster(const char *datadir)
{
	char		raw[CONTROL_CIPHER_RECORD_SIZE];

	return next_record(datadir, raw);
}
#endif

/*
 * update_controlfile() calls this on the image it is about to write.  A
 * server stamps the cipher it encrypts with (it checked at start-up that
 * pg_control records the same; pg_enable_encryption() changes it); a frontend program (pg_resetwal,
 * pg_rewind, pg_checksums, pg_createsubscriber) carries the record over.
 */
void
control_cipher_carry(const char *datadir, char *image)
{
#ifdef FRONTEND
	char		raw[CONTROL_CIPHER_RECORD_SIZE];
	int			cipher = next_record(datadir, raw);

	if (cipher >= 0)
		control_cipher_stamp(image, cipher);
	else
		memcpy(image + CONTROL_CIPHER_RECORD_OFFSET, raw, CONTROL_CIPHER_RECORD_SIZE);
#else
	(void) datadir;				/* the server knows what it encrypts with */
	control_cipher_stamp(image, DataEncryptionCipher());
#endif
}

/* "off", "aes-128", "aes-256", or why not (pg_controldata) */
const char *
control_cipher_describe(const char *datadir)
{
	int			cipher;

	switch (control_cipher_read(datadir, &cipher, NULL))
	{
		case CONTROL_CIPHER_NONE:
		case CONTROL_CIPHER_VALID:
			return data_encryption_cipher_name(cipher);
		case CONTROL_CIPHER_DAMAGED:
			return "damaged record";
		case CONTROL_CIPHER_UNREADABLE:
			break;
	}
	return "unreadable";
}
