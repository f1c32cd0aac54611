/*-------------------------------------------------------------------------
 *
 * wal_encryption.h
 *	  pgcipher: encryption of WAL pages, shared by the server and the tools
 *	  that read WAL (pg_waldump, pg_rewind, pg_verifybackup via pg_waldump).
 *
 * A WAL page on disk keeps its header in clear (24 bytes, 40 on the first
 * page of a segment: magic, flags, timeline, address, continuation length,
 * system identifier, sizes; no user data) and has the rest, up to the end
 * of the WAL written so far, encrypted with AES-CTR under the WAL key.
 * What follows that end is written as zeros, never as keystream.  The IV
 * is the page's LSN and a 32-bit epoch kept in the header's alignment
 * padding; a new epoch is chosen each time the server starts WAL after
 * recovery, so WAL rewritten at an LSN after a crash or on a new timeline
 * never reuses keystream.  XLP_ENCRYPTED in the clear xlp_info marks an
 * encrypted page, and XLP_WAL_KEY_B the one under the WAL key of slot B
 * (an online rotation of the data keys moves WAL between the two slots);
 * both are set only on the copy that is written, never in the WAL
 * buffers.  See docs/design.md.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/include/common/wal_encryption.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef WAL_ENCRYPTION_H
#define WAL_ENCRYPTION_H

#include "access/xlogdefs.h"
#include "common/data_encryption.h"

/* xlp_info bit of an encrypted page; outside XLP_ALL_FLAGS on purpose */
#define XLP_ENCRYPTED			0x0010
/* ... under the WAL key of slot B (KEY_WAL_B); without it, slot A (KEY_WAL) */
#define XLP_WAL_KEY_B			0x0020

/* where the epoch sits: the padding after xlp_rem_len (bytes 20..23) */
#define WAL_PAGE_EPOCH_OFFSET	20

extern void wal_encryption_set_cipher(int slot, CtrCipher *ctr);
extern CtrCipher *wal_encryption_cipher(int slot);
extern bool wal_encryption_set_key(int slot, int cipher,
								   const unsigned char *key);
extern bool wal_encryption_enabled(void);
extern int	wal_page_key_slot(const char *page);

/*
 * The server's: called before each encryption or decryption, so that a
 * process re-keys its ciphers when an online rotation changed the keys
 */
extern void (*wal_encryption_refresh_hook) (void);
extern bool wal_page_is_encrypted(const char *page);
extern uint32 wal_page_epoch(const char *page);
extern void wal_page_set_epoch(char *page, uint32 epoch);
extern void wal_encrypt_page(const char *src, char *dst, XLogRecPtr pageptr,
							 uint32 epoch, int valid);

/* The last page a process wrote in part (wal_encrypt_page_cached()) */
typedef struct WALPartialPage
{
	XLogRecPtr	pageptr;
	uint32		epoch;
	int			slot;			/* of the WAL key */
	int			valid;			/* bytes of plain and cipher; 0: none */
	char		plain[XLOG_BLCKSZ];
	char		cipher[XLOG_BLCKSZ];
} WALPartialPage;

extern void wal_encrypt_page_cached(WALPartialPage *last, const char *src,
									char *dst, XLogRecPtr pageptr,
									uint32 epoch, int slot, int valid);
extern bool wal_decrypt_page(char *page, XLogRecPtr pageptr, int len);

#ifdef FRONTEND
struct KeyringError;			/* common/keyring.h */
extern bool wal_encryption_load_keys(const char *datadir, const char *argv0,
									 const char *command,
									 struct KeyringError *err);
extern bool wal_encryption_load_keys_for_waldir(const char *waldir,
												const char *argv0,
												const char *command,
												struct KeyringError *err);
#endif

#endif							/* WAL_ENCRYPTION_H */
