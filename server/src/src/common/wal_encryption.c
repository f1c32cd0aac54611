/*-------------------------------------------------------------------------
 *
 * wal_encryption.c
 *	  pgcipher: encrypt and decrypt WAL pages.
 *
 * The server encrypts in XLogWrite() (storage/encryption/walcrypt.c) and
 * decrypts in the WAL reader (xlogreader.c, xlogrecovery.c).  Frontend
 * programs that decode WAL load the WAL key with wal_encryption_load_keys(),
 * the way the server does: the key ring of a data directory and the key
 * command from its postgresql.conf (or an explicit command).
 *
 * Why CTR, and what keeps keystream from being reused (docs/design.md
 * has the long version): WAL is written, streamed, copied and read at any
 * byte boundary (a partial page is rewritten as it fills, walsender sends
 * up to the flush point, a new timeline copies a segment up to the switch
 * point), so each ciphertext byte must depend on its own plaintext byte
 * and position only.  A byte at a given LSN is encrypted under a given
 * epoch once with its final value: bytes past the valid end of a write
 * go to disk as zeros, never as keystream, and WAL that replaces other
 * WAL at the same LSN (after crash recovery, on a new timeline) is
 * written under a new epoch.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/common/wal_encryption.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FRONTEND
#include "postgres.h"
#else
#include "postgres_fe.h"
#endif

#include <sys/stat.h>

#include "access/xlog_internal.h"
#include "common/data_encryption.h"
#include "common/keyring.h"
#include "common/string.h"
#include "common/wal_encryption.h"

/* one cipher per WAL key slot (PAGE_SLOT_A, PAGE_SLOT_B); NULL: no key */
static CtrCipher *wal_ciphers[2] = {NULL, NULL};

void		(*wal_encryption_refresh_hook) (void) = NULL;

StaticAssertDecl(WAL_PAGE_EPOCH_OFFSET == offsetof(XLogPageHeaderData, xlp_rem_len) + sizeof(uint32) &&
				 WAL_PAGE_EPOCH_OFFSET + sizeof(uint32) <= SizeOfXLogShortPHD,
				 "the WAL encryption epoch must sit in the page header's padding");

/*
 * The counter block for the AES block holding byte offset of a page:
 * page LSN (8 bytes), epoch (4), block number in the page (4), big-endian.
 */
static void
wal_iv(XLogRecPtr pageptr, uint32 epoch, int offset, unsigned char *iv)
{
	uint32		block = offset / 16;

	for (int i = 0; i < 8; i++)
		iv[i] = (unsigned char) (pageptr >> (56 - 8 * i));
	for (int i = 0; i < 4; i++)
	{
		iv[8 + i] = (unsigned char) (epoch >> (24 - 8 * i));
		iv[12 + i] = (unsigned char) (block >> (24 - 8 * i));
	}
}

/* Encrypt or decrypt bytes [from, to) of a page; false if OpenSSL fails */
static bool
wal_crypt_range(CtrCipher *wal_cipher, const char *in, char *out,
				XLogRecPtr pageptr, uint32 epoch,
				int from, int to)
{
	unsigned char iv[16];

	if (to <= from)
		return true;
	wal_iv(pageptr, epoch, from, iv);
	return ctr_crypt(wal_cipher, iv, from % 16,
					 (const unsigned char *) in + from,
					 (unsigned char *) out + from, to - from);
}

/*
 * Install the cipher of a WAL key slot (NULL: the slot has no key).  The
 * caller keeps it: the server's walcrypt.c re-keys its two in place.
 */
void
wal_encryption_set_cipher(int slot, CtrCipher *ctr)
{
	Assert(slot == PAGE_SLOT_A || slot == PAGE_SLOT_B);
	wal_ciphers[slot] = ctr;
}

CtrCipher *
wal_encryption_cipher(int slot)
{
	return wal_ciphers[slot];
}

/*
 * Install the WAL key of a slot (the frontend tools': pg_waldump,
 * pg_rewind): the key ring holds 2 x AES key length bytes for every
 * purpose; CTR uses the first half.  False if OpenSSL fails.
 */
bool
wal_encryption_set_key(int slot, int cipher, const unsigned char *key)
{
	CtrCipher  *ctr = ctr_cipher_create(cipher, key);

	if (ctr == NULL)
		return false;
	if (wal_ciphers[slot] != NULL)
		ctr_cipher_free(wal_ciphers[slot]);
	wal_ciphers[slot] = ctr;
	return true;
}

bool
wal_encryption_enabled(void)
{
	if (wal_encryption_refresh_hook)
		wal_encryption_refresh_hook();
	return wal_ciphers[PAGE_SLOT_A] != NULL || wal_ciphers[PAGE_SLOT_B] != NULL;
}

/* The WAL key slot a page read from disk is under */
int
wal_page_key_slot(const char *page)
{
	return (((const XLogPageHeaderData *) page)->xlp_info & XLP_WAL_KEY_B) ?
		PAGE_SLOT_B : PAGE_SLOT_A;
}

bool
wal_page_is_encrypted(const char *page)
{
	return (((const XLogPageHeaderData *) page)->xlp_info & XLP_ENCRYPTED) != 0;
}

uint32
wal_page_epoch(const char *page)
{
	uint32		epoch;

	memcpy(&epoch, page + WAL_PAGE_EPOCH_OFFSET, sizeof(epoch));
	return epoch;
}

void
wal_page_set_epoch(char *page, uint32 epoch)
{
	memcpy(page + WAL_PAGE_EPOCH_OFFSET, &epoch, sizeof(epoch));
}

/*
 * Encrypt the page at LSN pageptr from src into dst (no overlap) under
 * epoch: the header is copied in clear with XLP_ENCRYPTED and the epoch
 * set, bytes from the header to valid are encrypted, and the rest of dst
 * is zeros.  valid is the page offset where the WAL written so far ends
 * (XLOG_BLCKSZ for a full page).
 */
void
wal_encrypt_page(const char *src, char *dst, XLogRecPtr pageptr,
				 uint32 epoch, int valid)
{
	wal_encrypt_page_cached(NULL, src, dst, pageptr, epoch, PAGE_SLOT_A, valid);
}

/*
 * wal_encrypt_page(), remembering in *last (if not NULL) the page's
 * plaintext and ciphertext when it is valid only in part.  XLogWrite()
 * writes such a page again, whole, at the next flush, usually a few
 * records longer; then only the new bytes are encrypted.  The bytes already
 * encrypted are reused only when the page, its epoch and their plaintext
 * are the same, so the result is exactly what wal_encrypt_page() gives
 * (CTR: one keystream byte per epoch and position).  slot is the WAL key
 * slot the page goes under (XLP_WAL_KEY_B for slot B).
 */
void
wal_encrypt_page_cached(WALPartialPage *last, const char *src, char *dst,
						XLogRecPtr pageptr, uint32 epoch, int slot, int valid)
{
	int			hdr = XLogPageHeaderSize((const XLogPageHeaderData *) src);
	int			from = hdr;
	CtrCipher  *wal_cipher;

	if (wal_encryption_refresh_hook)
		wal_encryption_refresh_hook();
	wal_cipher = wal_ciphers[slot];
	Assert(epoch != 0 && pageptr % XLOG_BLCKSZ == 0);
	if (wal_cipher == NULL)
	{
		/* the writer chose a slot whose key it holds; never write plaintext */
#ifndef FRONTEND
		elog(PANIC, "no WAL key in slot %c to encrypt the WAL page at %X/%X",
			 slot == PAGE_SLOT_A ? 'A' : 'B', LSN_FORMAT_ARGS(pageptr));
#else
		fprintf(stderr, "no WAL key to encrypt a WAL page\n");
		exit(1);
#endif
	}
	valid = Max(Min(valid, XLOG_BLCKSZ), hdr);
	if (last != NULL && last->pageptr == pageptr && last->epoch == epoch &&
		last->slot == slot &&
		last->valid > hdr && last->valid <= valid &&
		memcmp(src, last->plain, last->valid) == 0)
	{
		memcpy(dst, last->cipher, last->valid);
		from = last->valid;
	}
	else
	{
		memcpy(dst, src, hdr);
		((XLogPageHeaderData *) dst)->xlp_info |= XLP_ENCRYPTED;
		if (slot == PAGE_SLOT_B)
			((XLogPageHeaderData *) dst)->xlp_info |= XLP_WAL_KEY_B;
		wal_page_set_epoch(dst, epoch);
	}
	if (!wal_crypt_range(wal_cipher, src, dst, pageptr, epoch, from, valid))
	{
		/* cannot happen with a valid context; never write plaintext */
#ifndef FRONTEND
		elog(PANIC, "could not encrypt WAL page at %X/%X",
			 LSN_FORMAT_ARGS(pageptr));
#else
		fprintf(stderr, "could not encrypt WAL page\n");
		exit(1);
#endif
	}
	memset(dst + valid, 0, XLOG_BLCKSZ - valid);
	if (last != NULL)
	{
		if (valid < XLOG_BLCKSZ)
		{
			/* on a hit, the cache already holds everything before from */
			int			keep = (from > hdr) ? from : 0;

			last->pageptr = pageptr;
			last->epoch = epoch;
			last->slot = slot;
			last->valid = valid;
			memcpy(last->plain + keep, src + keep, valid - keep);
			memcpy(last->cipher + keep, dst + keep, valid - keep);
		}
		else if (last->pageptr == pageptr)
			last->valid = 0;	/* full now: never written again */
	}
}

/*
 * Decrypt in place the first len bytes of a page read from disk, if it
 * carries XLP_ENCRYPTED, under the key of the slot XLP_WAL_KEY_B names,
 * and clear both flags: the buffer now holds plaintext (and keystream
 * garbage past the end of the WAL, which readers reject as they reject any
 * invalid record), and a second call is a no-op.  Returns false if the
 * page is encrypted and the key of its slot is not loaded (the WAL is
 * older than the old WAL key a rotation dropped, or no key is loaded).
 */
bool
wal_decrypt_page(char *page, XLogRecPtr pageptr, int len)
{
	int			hdr;
	CtrCipher  *wal_cipher;

	if (len < SizeOfXLogShortPHD || !wal_page_is_encrypted(page))
		return true;
	if (wal_encryption_refresh_hook)
		wal_encryption_refresh_hook();
	wal_cipher = wal_ciphers[wal_page_key_slot(page)];
	if (wal_cipher == NULL)
		return false;
	hdr = XLogPageHeaderSize((XLogPageHeaderData *) page);
	if (!wal_crypt_range(wal_cipher, page, page, pageptr, wal_page_epoch(page),
						 hdr, Min(len, XLOG_BLCKSZ)))
		return false;
	((XLogPageHeaderData *) page)->xlp_info &= ~(XLP_ENCRYPTED | XLP_WAL_KEY_B);
	return true;
}

#ifdef FRONTEND

/*
 * Load the WAL key of the cluster in datadir for a frontend program.  No
 * key ring there: nothing to load (the WAL is not encrypted).  The key
 * command is the one given, or encryption_key_command from the cluster's
 * configuration; its timeout is the cluster's (both read with the
 * cluster's "postgres -C": keyring_cluster_settings()).  On failure, err
 * says why, for keyring_log_error().
 */
bool
wal_encryption_load_keys(const char *datadir, const char *argv0,
						 const char *command, KeyringError *err)
{
	char		path[MAXPGPATH];
	char		postgres[MAXPGPATH];
	char	   *cmd;
	int			timeout_s = KEY_COMMAND_DEFAULT_TIMEOUT_S;
	struct stat st;
	Keyring    *ring;
	const KeyringKey *key;
	bool		ok;

	snprintf(path, sizeof(path), "%s/%s", datadir, KEYRING_FILE);
	if (stat(path, &st) != 0)
		return true;

	cmd = command ? pg_strdup(command) : NULL;
	if (find_other_exec(argv0, "postgres", PG_BACKEND_VERSIONSTR, postgres) < 0)
	{
		if (cmd == NULL || cmd[0] == '\0')
		{
			keyring_set_error(err, KEYRING_ERR_COMMAND_FAILED, "Give --encryption-key-command.",
							  "the WAL in \"%s\" is encrypted, and program \"postgres\" was not found to read encryption_key_command",
							  datadir);
			free(cmd);
			return false;
		}
		/* the command given, with the setting's default timeout */
	}
	else if (!keyring_cluster_settings(postgres, datadir, &cmd, &timeout_s, err))
	{
		free(cmd);
		return false;
	}

	ring = pg_malloc0(sizeof(Keyring));
	ok = keyring_load(datadir, cmd, timeout_s, ring, err);
	if (ok && keyring_get_key(ring, KEY_WAL) == NULL &&
		keyring_get_key(ring, KEY_WAL_B) == NULL)
	{
		keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, NULL,
						  "key file \"%s\" has no WAL key", path);
		ok = false;
	}
	/* both slots: WAL from before and after an online rotation */
	for (int slot = PAGE_SLOT_A; ok && slot <= PAGE_SLOT_B; slot++)
	{
		key = keyring_get_key(ring, slot == PAGE_SLOT_A ? KEY_WAL : KEY_WAL_B);
		if (key != NULL && !wal_encryption_set_key(slot, ring->cipher, key->key))
		{
			keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "could not set up the WAL cipher");
			keyring_set_detail(err, "%s", data_encryption_error_reason());
			ok = false;
		}
	}
	data_encryption_wipe(ring, sizeof(Keyring));
	free(ring);
	free(cmd);
	return ok;
}

/*
 * The same for a directory of WAL (pg_waldump): its cluster's key ring is in
 * the parent directory (a data directory or a base backup), else in the
 * data directory $PGDATA names.
 */
bool
wal_encryption_load_keys_for_waldir(const char *waldir, const char *argv0,
									const char *command, KeyringError *err)
{
	char		datadir[MAXPGPATH];
	char		keyring[MAXPGPATH];
	struct stat st;
	const char *pgdata = getenv("PGDATA");

	snprintf(datadir, sizeof(datadir), "%s/..", waldir);
	snprintf(keyring, sizeof(keyring), "%s/%s", datadir, KEYRING_FILE);
	if (stat(keyring, &st) != 0 && pgdata != NULL)
		strlcpy(datadir, pgdata, sizeof(datadir));
	return wal_encryption_load_keys(datadir, argv0, command, err);
}

#endif							/* FRONTEND */
