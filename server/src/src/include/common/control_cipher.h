/*-------------------------------------------------------------------------
 *
 * control_cipher.h
 *	  pgcipher: the record of a cluster's cipher in pg_control, outside
 *	  ControlFileData (design section 10).
 *
 * src/include/common/control_cipher.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CONTROL_CIPHER_H
#define CONTROL_CIPHER_H

/*
 * 16 bytes at the end of the first 512 bytes of pg_control: PostgreSQL
 * writes those atomically, and ControlFileData (which stock PostgreSQL 17
 * and every backup tool read, and whose CRC covers only the struct) ends
 * well before them.
 */
#define CONTROL_CIPHER_RECORD_SIZE		16
#define CONTROL_CIPHER_RECORD_OFFSET	(512 - CONTROL_CIPHER_RECORD_SIZE)

/* What a pg_control image holds at the record's place */
typedef enum ControlCipherRecord
{
	CONTROL_CIPHER_NONE,		/* all zeros: an unencrypted cluster */
	CONTROL_CIPHER_VALID,		/* a record, cipher set */
	CONTROL_CIPHER_DAMAGED,		/* anything else: refuse */
	CONTROL_CIPHER_UNREADABLE,	/* no pg_control, or shorter than 512 bytes */
} ControlCipherRecord;

extern void control_cipher_stamp(char *image, int cipher);
extern ControlCipherRecord control_cipher_parse(const char *image, int *cipher);
extern ControlCipherRecord control_cipher_read(const char *datadir, int *cipher,
											   char *raw);
#ifdef FRONTEND
extern int	control_cipher_of_cluster(const char *datadir);
#endif
extern void control_cipher_carry(const char *datadir, char *image);
extern const char *control_cipher_describe(const char *datadir);

#endif							/* CONTROL_CIPHER_H */
