/*-------------------------------------------------------------------------
 *
 * keyring.c
 *	  pgcipher: the key ring file and the key-encryption key (KEK).
 *
 * The key command's running and output are key_command.c's, the unwrap
 * mode's wrapping by the command key_wrapping.c's (keyring_int.h holds
 * what the three share).
 *
 * The key ring holds the cluster's data keys, each wrapped with AES key
 * wrap with padding (RFC 5649) under the KEK.  The KEK never touches disk:
 * it comes from encryption_key_command, either as 64 hex digits (the key
 * itself, e.g. from a KMS) or as a passphrase stretched with scrypt using
 * the salt and cost stored in the file.
 *
 * File layout (all integers big-endian, so the file is portable):
 *
 *	 0	magic "PGCIPHKR"		 8 bytes
 *	 8	format version			 4
 *	12	cipher					 4	 DATA_ENCRYPTION_AES128/256
 *	16	KEK source				 4	 KEK_SOURCE_HEX / _PASSPHRASE
 *	20	scrypt log2(N), r, p	12
 *	32	scrypt salt				16
 *	48	KEK fingerprint			 8	 (format 2 only)
 *	56	time of wrapping		 8	 Unix seconds (format 2 only)
 *	64	number of keys			 4	 (at 48 in format 1)
 *	68	per key: id (4), length (4), wrapped length (4), wrapped bytes
 *	..	CRC-32C of everything above (4)
 *
 * Format 1 (without fingerprint and time) is still read; format 2 is
 * written.  Format 3 is the unwrap mode's (design 9.4): no KEK, the data
 * keys wrapped by the key command itself (a KMS), their fingerprint at 48
 * and, after the number of keys, the length of the wrapped form (4) and
 * the form as the command printed it.
 *
 * What is wrapped is id || cipher || key, so a wrapped key cannot be moved
 * to another slot or reinterpreted under another cipher without the unwrap
 * failing.  The CRC tells a damaged file from a wrong key: a bad CRC means
 * "corrupt", a good CRC with a failing unwrap means "wrong KEK".
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/common/keyring.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FRONTEND
#include "postgres.h"
#else
#include "postgres_fe.h"
#endif

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/file_perm.h"
#include "common/keyring_int.h"
#ifdef FRONTEND
#include "common/logging.h"
#include "common/string.h"
#endif
#include "port/pg_crc32c.h"

/* Fill err: what went wrong, why (keyring_set_detail()) and what to do */
void
keyring_set_error(KeyringError *err, KeyringErrorKind kind, const char *hint,
				  const char *fmt,...)
{
	va_list		ap;

	err->kind = kind;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	err->detail[0] = '\0';
	strlcpy(err->hint, hint ? hint : "", sizeof(err->hint));
}

void
keyring_set_detail(KeyringError *err, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(err->detail, sizeof(err->detail), fmt, ap);
	va_end(ap);
}

/* initdb's --encryption-key-mode and the rotation's mode argument */
int
keyring_mode_from_name(const char *name)
{
	if (strcmp(name, "kek") == 0)
		return KEYRING_MODE_KEK;
	if (strcmp(name, "unwrap") == 0)
		return KEYRING_MODE_UNWRAP;
	return -1;
}

const char *
keyring_mode_name(int mode)
{
	return mode == KEYRING_MODE_UNWRAP ? "unwrap" : "kek";
}

/* Plaintext of a wrapped key: id || cipher || key */
static int
wrap_input(const Keyring *ring, const KeyringKey *key, unsigned char *buf)
{
	put32(buf, key->id);
	put32(buf + 4, ring->cipher);
	memcpy(buf + 8, key->key, key->len);
	return 8 + key->len;
}

/* Returns the file's length, or 0 on failure */
size_t
keyring_serialize(const Keyring *ring, const unsigned char *kek,
				  unsigned char *buf, size_t bufsize, KeyringError *err)
{
	size_t		off;
	pg_crc32c	crc;

	if (bufsize < KEYRING_MAX_FILE || ring->nkeys > KEYRING_MAX_KEYS)
	{
		keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "key ring too large");
		return 0;
	}
	memset(buf, 0, bufsize);
	memcpy(buf, KEYRING_MAGIC, 8);
	put32(buf + 8, KEYRING_VERSION);
	put32(buf + 12, ring->cipher);
	put32(buf + 16, ring->kek_source);
	put32(buf + 20, ring->scrypt_log2_n);
	put32(buf + 24, ring->scrypt_r);
	put32(buf + 28, ring->scrypt_p);
	memcpy(buf + 32, ring->salt, KEYRING_SALT_LEN);
	if (!kek_fingerprint(kek, KEK_LEN, buf + 48))
	{
		keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "could not compute the key-encryption key's fingerprint");
		return 0;
	}
	put64(buf + 56, (uint64) ring->wrapped_at);
	put32(buf + 64, ring->nkeys);
	off = KEYRING_HEADER_LEN;
	for (uint32 i = 0; i < ring->nkeys; i++)
	{
		unsigned char plain[8 + DATA_ENCRYPTION_MAX_XTS_KEY_LEN];
		int			plainlen = wrap_input(ring, &ring->keys[i], plain);
		int			wrappedlen;

		put32(buf + off, ring->keys[i].id);
		put32(buf + off + 4, ring->keys[i].len);
		if (!aes_key_wrap_pad(kek, KEK_LEN, plain, plainlen, buf + off + 12, &wrappedlen))
		{
			data_encryption_wipe(plain, sizeof(plain));
			keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "could not wrap data key");
			return 0;
		}
		data_encryption_wipe(plain, sizeof(plain));
		put32(buf + off + 8, wrappedlen);
		off += 12 + wrappedlen;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, off);
	FIN_CRC32C(crc);
	put32(buf + off, crc);
	return off + 4;
}

/*
 * Check the file's structure and CRC and fill ring's header fields; with a
 * KEK also unwrap every data key.  Without one (kek == NULL) this is what
 * tells a corrupt file from a wrong key before the key command runs.
 */
bool
keyring_parse(const unsigned char *buf, size_t len, const unsigned char *kek,
			  Keyring *ring, KeyringError *err)
{
	const char *hint = "Restore the file " KEYRING_FILE " from a backup of this cluster.";
	pg_crc32c	crc;
	size_t		off;
	size_t		header_len;

	memset(ring, 0, sizeof(Keyring));
	if (len < KEYRING_HEADER_LEN_V1 + 4)
	{
		keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, hint,
						  "encryption key file \"%s\" is truncated", KEYRING_FILE);
		keyring_set_detail(err, "The file has %zu bytes.", len);
		return false;
	}
	if (memcmp(buf, KEYRING_MAGIC, 8) != 0)
	{
		keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, hint,
						  "encryption key file \"%s\" is corrupt", KEYRING_FILE);
		keyring_set_detail(err, "The file does not start with the key ring's magic number.");
		return false;
	}
	ring->version = get32(buf + 8);
	if (ring->version != 1 && ring->version != KEYRING_VERSION &&
		ring->version != KEYRING_VERSION_UNWRAP)
	{
		keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT,
						  "The key ring was written by a different version of pgcipher.",
						  "encryption key file \"%s\" has unsupported format version %u",
						  KEYRING_FILE, ring->version);
		return false;
	}
	header_len = (ring->version == 1) ? KEYRING_HEADER_LEN_V1 : KEYRING_HEADER_LEN;
	if (len < header_len + 4)
		goto truncated_or_corrupt;

	/* Walk the key entries to find where the CRC must be */
	off = header_len;
	ring->nkeys = get32(buf + header_len - 4);
	if (ring->nkeys == 0 || ring->nkeys > KEYRING_MAX_KEYS)
		goto truncated_or_corrupt;
	if (ring->version == KEYRING_VERSION_UNWRAP)
	{
		/* one wrapped form of all the keys, printable, as the command gave it */
		uint32		wrappedlen;

		if (off + 4 > len)
			goto truncated_or_corrupt;
		wrappedlen = get32(buf + off);
		if (wrappedlen == 0 || wrappedlen > KEYRING_MAX_WRAPPED ||
			off + 4 + wrappedlen > len)
			goto truncated_or_corrupt;
		off += 4 + wrappedlen;
	}
	else
		for (uint32 i = 0; i < ring->nkeys; i++)
		{
			uint32		wrappedlen;

			if (off + 12 > len)
				goto truncated_or_corrupt;
			wrappedlen = get32(buf + off + 8);
			if (wrappedlen > KWP_WRAPPED_LEN(8 + DATA_ENCRYPTION_MAX_XTS_KEY_LEN) ||
				off + 12 + wrappedlen > len)
				goto truncated_or_corrupt;
			off += 12 + wrappedlen;
		}
	if (off + 4 != len)
		goto truncated_or_corrupt;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, off);
	FIN_CRC32C(crc);
	if (crc != get32(buf + off))
	{
		keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, hint,
						  "encryption key file \"%s\" is corrupt", KEYRING_FILE);
		keyring_set_detail(err, "Its CRC-32C is %08x, but the file records %08x.", crc, get32(buf + off));
		return false;
	}

	ring->cipher = get32(buf + 12);
	ring->kek_source = get32(buf + 16);
	ring->scrypt_log2_n = get32(buf + 20);
	ring->scrypt_r = get32(buf + 24);
	ring->scrypt_p = get32(buf + 28);
	memcpy(ring->salt, buf + 32, KEYRING_SALT_LEN);
	if (ring->version >= 2)
	{
		memcpy(ring->kek_fingerprint, buf + 48, KEK_FINGERPRINT_LEN);
		ring->wrapped_at = (int64) get64(buf + 56);
	}
	if (data_encryption_key_length(ring->cipher) == 0 ||
		(ring->version == KEYRING_VERSION_UNWRAP) != (ring->kek_source == KEK_SOURCE_UNWRAP) ||
		(ring->kek_source != KEK_SOURCE_HEX && ring->kek_source != KEK_SOURCE_PASSPHRASE &&
		 ring->kek_source != KEK_SOURCE_UNWRAP))
	{
		keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, hint,
						  "encryption key file \"%s\" is corrupt", KEYRING_FILE);
		keyring_set_detail(err, "Unknown cipher %u or key source %u.", ring->cipher, ring->kek_source);
		return false;
	}
	if (kek == NULL)
		return true;
	if (ring->kek_source == KEK_SOURCE_UNWRAP)
	{
		keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL,
						  "a key ring kept by an unwrap command has no key-encryption key");
		return false;
	}

	off = header_len;
	for (uint32 i = 0; i < ring->nkeys; i++)
	{
		KeyringKey *key = &ring->keys[i];
		uint32		wrappedlen = get32(buf + off + 8);
		unsigned char plain[KWP_WRAPPED_LEN(8 + DATA_ENCRYPTION_MAX_XTS_KEY_LEN)];
		int			plainlen;

		key->id = get32(buf + off);
		key->len = get32(buf + off + 4);
		if (!aes_key_unwrap_pad(kek, KEK_LEN, buf + off + 12, wrappedlen, plain, &plainlen))
		{
			keyring_set_error(err, KEYRING_ERR_WRONG_KEY,
							  "encryption_key_command must print the key or passphrase given to initdb or to the latest pg_rotate_encryption_key().",
							  "could not unwrap the data encryption keys: wrong key-encryption key");
			keyring_set_detail(err, "The integrity check of the AES key wrap of key %u failed.", key->id);
			data_encryption_wipe(ring, sizeof(Keyring));
			return false;
		}
		if (key->len > DATA_ENCRYPTION_MAX_XTS_KEY_LEN || plainlen != 8 + (int) key->len ||
			get32(plain) != key->id || get32(plain + 4) != ring->cipher)
		{
			data_encryption_wipe(plain, sizeof(plain));
			data_encryption_wipe(ring, sizeof(Keyring));
			keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, hint,
							  "encryption key file \"%s\" is corrupt", KEYRING_FILE);
			keyring_set_detail(err, "A wrapped key does not match its slot or the cipher.");
			return false;
		}
		memcpy(key->key, plain + 8, key->len);
		data_encryption_wipe(plain, sizeof(plain));
		off += 12 + wrappedlen;
	}
	return true;

truncated_or_corrupt:
	keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, hint,
					  "encryption key file \"%s\" is truncated or corrupt", KEYRING_FILE);
	keyring_set_detail(err, "The key entries do not fit the file's %zu bytes.", len);
	return false;
}

bool
keyring_read_file(const char *path, unsigned char *buf, size_t bufsize,
				  size_t *len, KeyringError *err)
{
	int			fd;
	ssize_t		n;
	size_t		total = 0;

	fd = open(path, O_RDONLY | PG_BINARY, 0);
	if (fd < 0)
	{
		if (errno == ENOENT)
			keyring_set_error(err, KEYRING_ERR_FILE_MISSING,
							  "The cluster was initialized with encryption; restore " KEYRING_FILE " from a backup of this cluster.",
							  "encryption key file \"%s\" is missing", path);
		else
			keyring_set_error(err, KEYRING_ERR_IO, NULL,
							  "could not open encryption key file \"%s\": %s", path, strerror(errno));
		return false;
	}
	while ((n = read(fd, buf + total, bufsize - total)) > 0)
	{
		total += n;
		if (total == bufsize)
			break;
	}
	if (n < 0)
	{
		keyring_set_error(err, KEYRING_ERR_IO, NULL,
						  "could not read encryption key file \"%s\": %s", path, strerror(errno));
		close(fd);
		return false;
	}
	close(fd);
	if (total == bufsize)
	{
		keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, NULL,
						  "encryption key file \"%s\" is too large", path);
		return false;
	}
	*len = total;
	return true;
}

/* The directory part of path, "." without one */
static void
directory_of(const char *path, char *dir)
{
	char	   *slash;

	strlcpy(dir, path, MAXPGPATH);
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		strlcpy(dir, ".", MAXPGPATH);
}

static bool
fsync_directory_of(const char *path)
{
	char		dir[MAXPGPATH];
	int			fd;
	int			rc;

	directory_of(path, dir);
	fd = open(dir, O_RDONLY, 0);
	if (fd < 0)
		return false;
	rc = fsync(fd);
	close(fd);
	return rc == 0;
}

/*
 * First half of a crash-safe write: path.tmp written and fsynced.  A crash
 * now leaves path as it was and a path.tmp that nothing reads.
 */
bool
keyring_write_temporary(const char *path, const unsigned char *buf, size_t len,
						KeyringError *err)
{
	char		tmppath[MAXPGPATH];
	int			fd;

	snprintf(tmppath, sizeof(tmppath), "%s.tmp", path);
	fd = open(tmppath, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, pg_file_create_mode);
	if (fd < 0)
		goto fail;
	errno = 0;
	if (write(fd, buf, len) != (ssize_t) len)
	{
		if (errno == 0)
			errno = ENOSPC;
		close(fd);
		goto fail;
	}
	if (fsync(fd) != 0 || close(fd) != 0)
		goto fail;
	return true;

fail:
	keyring_set_error(err, KEYRING_ERR_IO, NULL,
					  "could not write encryption key file \"%s\": %s", tmppath, strerror(errno));
	unlink(tmppath);
	return false;
}

/* Rename from over to and make the rename durable */
bool
keyring_rename(const char *from, const char *to, KeyringError *err)
{
	if (rename(from, to) != 0 || !fsync_directory_of(to))
	{
		keyring_set_error(err, KEYRING_ERR_IO, NULL,
						  "could not rename encryption key file \"%s\" to \"%s\": %s",
						  from, to, strerror(errno));
		return false;
	}
	return true;
}

/* Second half: path.tmp renamed over path, and the rename made durable */
bool
keyring_install_temporary(const char *path, KeyringError *err)
{
	char		tmppath[MAXPGPATH];

	snprintf(tmppath, sizeof(tmppath), "%s.tmp", path);
	if (keyring_rename(tmppath, path, err))
		return true;
	unlink(tmppath);
	return false;
}

/*
 * Write the key ring crash-safely: a temporary file, fsync, rename over the
 * target, fsync of the directory.  A crash leaves the old or the new file.
 */
bool
keyring_write_file(const char *path, const unsigned char *buf, size_t len,
				   KeyringError *err)
{
	return keyring_write_temporary(path, buf, len, err) &&
		keyring_install_temporary(path, err);
}

/* 16 hexadecimal digits, or "none recorded" for a format 1 key ring */
void
keyring_format_fingerprint(const unsigned char *fp, char *out)
{
	bool		recorded = false;

	for (int i = 0; i < KEK_FINGERPRINT_LEN; i++)
	{
		sprintf(out + 2 * i, "%02x", fp[i]);
		recorded |= (fp[i] != 0);
	}
	if (!recorded)
		strcpy(out, "none recorded");
}

/*
 * file (KEYRING_FILE, ...) in datadir; in the server (datadir ".") the
 * relative name alone, as its messages quote it
 */
static void
datadir_file(const char *datadir, const char *file, char *path)
{
	if (strcmp(datadir, ".") == 0)
		strlcpy(path, file, MAXPGPATH);
	else
		snprintf(path, MAXPGPATH, "%s/%s", datadir, file);
}

/*
 * Record command in datadir's pg_encryption/command, crash-safely: the key
 * command to run when encryption_key_command is not set (design 8).
 */
bool
keyring_record_command(const char *datadir, const char *command,
					   KeyringError *err)
{
	char		path[MAXPGPATH];
	char	   *line;
	size_t		len = strlen(command);
	bool		ok;

	datadir_file(datadir, KEYRING_COMMAND_FILE, path);
	line = malloc(len + 2);
	if (line == NULL)
	{
		keyring_set_error(err, KEYRING_ERR_IO, NULL, "out of memory");
		return false;
	}
	memcpy(line, command, len);
	line[len] = '\n';
	ok = keyring_write_file(path, (const unsigned char *) line, len + 1, err);
	free(line);
	return ok;
}

/*
 * The command recorded in datadir's pg_encryption/command, without its
 * newline; false when there is none (or it is unusable: empty, too long).
 */
bool
keyring_recorded_command(const char *datadir, char *command, size_t size)
{
	char		path[MAXPGPATH];
	unsigned char buf[8192];
	size_t		len;
	KeyringError err;

	datadir_file(datadir, KEYRING_COMMAND_FILE, path);
	if (!keyring_read_file(path, buf, sizeof(buf), &len, &err))
		return false;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	if (len == 0 || len >= size || memchr(buf, '\n', len) != NULL)
		return false;
	memcpy(command, buf, len);
	command[len] = '\0';
	return true;
}

const KeyringKey *
keyring_get_key(const Keyring *ring, uint32 id)
{
	for (uint32 i = 0; i < ring->nkeys; i++)
		if (ring->keys[i].id == id)
			return &ring->keys[i];
	return NULL;
}

/*
 * A fresh data key of the cipher's size under id, as initdb and a rotation
 * of the data keys draw them; false if no random bytes could be had.  XTS
 * refuses a key whose two halves are equal: such a draw is drawn again.
 */
bool
keyring_draw_key(KeyringKey *key, uint32 id, int cipher)
{
	int			keylen = data_encryption_key_length(cipher);

	key->id = id;
	key->len = 2 * keylen;
	do
	{
		if (!pg_strong_random(key->key, key->len))
			return false;
	} while (memcmp(key->key, key->key + keylen, keylen) == 0);
	return true;
}

/* Put key into ring, replacing the key of its id (the ring has room) */
void
keyring_put_key(Keyring *ring, const KeyringKey *key)
{
	for (uint32 i = 0; i < ring->nkeys; i++)
		if (ring->keys[i].id == key->id)
		{
			ring->keys[i] = *key;
			return;
		}
	Assert(ring->nkeys < KEYRING_MAX_KEYS);
	ring->keys[ring->nkeys++] = *key;
}

/* Take the key of id out of ring, wiping it; nothing if it has none */
void
keyring_remove_key(Keyring *ring, uint32 id)
{
	for (uint32 i = 0; i < ring->nkeys; i++)
		if (ring->keys[i].id == id)
		{
			ring->keys[i] = ring->keys[--ring->nkeys];
			data_encryption_wipe(&ring->keys[ring->nkeys], sizeof(KeyringKey));
			return;
		}
}

/*
 * Run command, turn its output into a new KEK (a passphrase gets a fresh
 * salt) and serialize ring under it into file, stamped with the time; in
 * the unwrap mode, have the command wrap the data keys instead.  Returns
 * the file's length, or 0 on failure.  What initdb and a key rotation
 * write.
 */
size_t
keyring_wrap_under_command(Keyring *ring, const char *command, int timeout_s,
						   int mode, unsigned char *file, size_t filesize,
						   KeyringError *err)
{
	char		out[KEY_COMMAND_MAX_OUTPUT];
	size_t		outlen;
	unsigned char kek[KEK_LEN];
	size_t		filelen;
	bool		ok;

	if (mode == KEYRING_MODE_UNWRAP)
		return keyring_wrap_with_command(ring, command, timeout_s, file, filesize, err);
	if (!run_key_command(command, timeout_s, out, sizeof(out), &outlen, err))
		return 0;
	ok = kek_from_command_output(out, outlen, ring, true, kek, err);
	data_encryption_wipe(out, sizeof(out));
	if (!ok)
		return 0;
	ring->wrapped_at = (int64) time(NULL);
	filelen = keyring_serialize(ring, kek, file, filesize, err);
	data_encryption_wipe(kek, sizeof(kek));
	/* the fingerprint serialize computed, for the caller's messages */
	if (filelen > 0)
		memcpy(ring->kek_fingerprint, file + 48, KEK_FINGERPRINT_LEN);
	return filelen;
}

/*
 * initdb: run the key command, draw fresh data keys and write the key ring
 * into datadir.  With reuse (initdb --encryption-keys-from), the page keys
 * (both slots, when an online rotation left the old cluster's current key
 * in slot B) and the transaction-file key are taken from that key ring, so
 * that pg_upgrade can link or clone the old cluster's files (it carries
 * pg_encryption/pages over too); the WAL and temporary-file keys are
 * always new.  On success ring holds the unwrapped keys.
 */
bool
keyring_create(const char *datadir, int cipher, const char *command,
			   int timeout_s, int mode, const Keyring *reuse, Keyring *ring,
			   KeyringError *err)
{
	uint32		ids[KEYRING_MAX_KEYS] = {KEY_RELATION, KEY_WAL, KEY_TEMPFILE};
	int			nids = 3;
	unsigned char file[KEYRING_MAX_FILE];
	size_t		filelen;
	char		path[MAXPGPATH];
	int			keylen = data_encryption_key_length(cipher);

	memset(ring, 0, sizeof(Keyring));
	ring->cipher = cipher;
	if (keylen == 0)
	{
		keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "invalid cipher %d", cipher);
		return false;
	}
	if (reuse != NULL && reuse->cipher != (uint32) cipher)
	{
		keyring_set_error(err, KEYRING_ERR_CRYPTO,
						  "Give initdb the old cluster's cipher with --encryption, or leave out --encryption-keys-from.",
						  "the old cluster's key ring is for %s, not %s",
						  data_encryption_cipher_name(reuse->cipher),
						  data_encryption_cipher_name(cipher));
		return false;
	}

	/* a reused ring's second page key slot and transaction-file key too */
	if (reuse != NULL && keyring_get_key(reuse, KEY_RELATION_B) != NULL)
		ids[nids++] = KEY_RELATION_B;
	if (reuse != NULL && keyring_get_key(reuse, KEY_SLRU) != NULL)
		ids[nids++] = KEY_SLRU;

	for (int i = 0; i < nids; i++)
	{
		KeyringKey *key = &ring->keys[i];
		const KeyringKey *old = reuse ? keyring_get_key(reuse, ids[i]) : NULL;

		if (ids[i] != KEY_WAL && ids[i] != KEY_TEMPFILE && old != NULL)
		{
			*key = *old;
			continue;
		}
		if (!keyring_draw_key(key, ids[i], cipher))
		{
			data_encryption_wipe(ring, sizeof(Keyring));
			keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "could not generate random data key");
			return false;
		}
	}
	ring->nkeys = nids;

	filelen = keyring_wrap_under_command(ring, command, timeout_s, mode, file,
										 sizeof(file), err);
	if (filelen == 0)
		return false;

	snprintf(path, sizeof(path), "%s/%s", datadir, KEYRING_DIR);
	if (mkdir(path, pg_dir_create_mode) != 0 && errno != EEXIST)
	{
		keyring_set_error(err, KEYRING_ERR_IO, NULL,
						  "could not create directory \"%s\": %s", path, strerror(errno));
		return false;
	}
	snprintf(path, sizeof(path), "%s/%s", datadir, KEYRING_FILE);
	return keyring_write_file(path, file, filelen, err) &&
		keyring_record_command(datadir, command, err);
}

/* Read and check a key ring file's structure; false if absent or unusable */
static bool
read_keyring_header(const char *path, unsigned char *file, size_t *filelen,
					Keyring *ring, KeyringError *err)
{
	return keyring_read_file(path, file, KEYRING_MAX_FILE, filelen, err) &&
		keyring_parse(file, *filelen, NULL, ring, err);
}

/* Unwrap file's keys with the KEK that out gives under ring's header */
static bool
unwrap_with_output(const char *out, size_t outlen, const unsigned char *file,
				   size_t filelen, Keyring *ring, unsigned char *fp,
				   KeyringError *err)
{
	unsigned char kek[KEK_LEN];
	bool		ok;

	ok = kek_from_command_output(out, outlen, ring, false, kek, err);
	if (ok)
	{
		(void) kek_fingerprint(kek, KEK_LEN, fp);
		ok = keyring_parse(file, filelen, kek, ring, err);
	}
	data_encryption_wipe(kek, sizeof(kek));
	return ok;
}

/* "on 2026-11-23 15:04:05 UTC" or "" when the key ring records no time */
static void
format_wrapped_at(int64 t, char *buf, size_t size)
{
	time_t		tt = (time_t) t;
	struct tm  *tm = (t > 0) ? gmtime(&tt) : NULL;

	buf[0] = '\0';
	if (tm != NULL)
		strftime(buf, size, " on %Y-%m-%d %H:%M:%S UTC", tm);
}

/*
 * Open the key ring in file (its header parsed into ring) with command, in
 * the mode its header records.  A KEK-mode command runs once however many
 * key rings it is tried on: its output is kept in *out (*outlen, *ran).
 */
static bool
open_keyring(const char *command, int timeout_s, const unsigned char *file,
			 size_t filelen, Keyring *ring, char *out, size_t *outlen,
			 bool *ran, unsigned char *fp, KeyringError *err)
{
	if (ring->kek_source == KEK_SOURCE_UNWRAP)
	{
		memcpy(fp, ring->kek_fingerprint, KEK_FINGERPRINT_LEN);
		return keyring_unwrap_with_command(command, timeout_s, file, ring, err);
	}
	if (!*ran)
	{
		if (!run_key_command(command, timeout_s, out, KEY_COMMAND_MAX_OUTPUT, outlen, err))
			return false;
		*ran = true;
	}
	return unwrap_with_output(out, *outlen, file, filelen, ring, fp, err);
}

/*
 * Open a key ring file's bytes (one that WAL carried to a standby, say)
 * with command, in the mode its header records.  The bytes are checked
 * first.  On success ring holds the unwrapped keys.
 */
bool
keyring_open_bytes(const char *command, int timeout_s,
				   const unsigned char *file, size_t filelen, Keyring *ring,
				   KeyringError *err)
{
	char		out[KEY_COMMAND_MAX_OUTPUT];
	size_t		outlen = 0;
	bool		ran = false;
	unsigned char fp[KEK_FINGERPRINT_LEN];
	bool		ok;

	if (filelen > KEYRING_MAX_FILE || !keyring_parse(file, filelen, NULL, ring, err))
	{
		if (filelen > KEYRING_MAX_FILE)
			keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, NULL,
							  "a key ring of %zu bytes is too large", filelen);
		return false;
	}
	ok = open_keyring(command, timeout_s, file, filelen, ring, out, &outlen,
					  &ran, fp, err);
	data_encryption_wipe(out, sizeof(out));
	return ok;
}

/*
 * Server start-up: read and check the key ring, then run the key command
 * and unwrap the data keys (or, in the unwrap mode, have the command unwrap
 * them).  The file is checked first, so a corrupt or missing file is
 * reported as such whatever the command prints.  When the key ring does
 * not open and an interrupted rotation left keyring.next, that is tried
 * with the same command, each in the mode its header records.
 */
bool
keyring_load(const char *datadir, const char *command, int timeout_s,
			 Keyring *ring, KeyringError *err)
{
	char		out[KEY_COMMAND_MAX_OUTPUT];
	size_t		outlen = 0;
	bool		ran = false;
	unsigned char file[KEYRING_MAX_FILE];
	unsigned char next_file[KEYRING_MAX_FILE];
	size_t		filelen;
	size_t		next_filelen = 0;
	char		path[MAXPGPATH];
	Keyring		header;
	Keyring		next_header;
	bool		have_next;
	KeyringError next_err;
	unsigned char used_fp[KEK_FINGERPRINT_LEN];
	unsigned char next_fp[KEK_FINGERPRINT_LEN];
	char		recorded[8192];
	bool		ok;

	datadir_file(datadir, KEYRING_FILE, path);
	if (!read_keyring_header(path, file, &filelen, &header, err))
		return false;

	/* A rotation that did not complete leaves its new key ring beside */
	datadir_file(datadir, KEYRING_NEXT_FILE, path);
	have_next = read_keyring_header(path, next_file, &next_filelen,
									&next_header, &next_err);

	/*
	 * encryption_key_command not set: the command initdb or a rotation
	 * recorded
	 */
	if ((command == NULL || command[0] == '\0') &&
		keyring_recorded_command(datadir, recorded, sizeof(recorded)))
		command = recorded;
	if (command == NULL || command[0] == '\0')
		return run_key_command(command, timeout_s, out, sizeof(out), &outlen, err);

	*ring = header;
	ok = open_keyring(command, timeout_s, file, filelen, ring, out, &outlen,
					  &ran, used_fp, err);

	/*
	 * Try keyring.next when the command does not open the key ring, whatever
	 * it said (a KMS refuses to unwrap what another key wrapped; a rotation
	 * may have changed the mode); not after a timeout, which would only
	 * double the wait, nor when the file itself is the problem.
	 */
	if (!ok && have_next && err->kind != KEYRING_ERR_COMMAND_TIMEOUT &&
		err->kind != KEYRING_ERR_IO && err->kind != KEYRING_ERR_CRYPTO)
	{
		*ring = next_header;
		if (open_keyring(command, timeout_s, next_file, next_filelen, ring,
						 out, &outlen, &ran, next_fp, &next_err))
		{
			ring->from_next = true;
			ok = true;
		}
	}
	data_encryption_wipe(out, sizeof(out));

	if (!ok && err->kind == KEYRING_ERR_WRONG_KEY &&
		header.kek_source != KEK_SOURCE_UNWRAP)
	{
		char		expected[2 * KEK_FINGERPRINT_LEN + 16];
		char		given[2 * KEK_FINGERPRINT_LEN + 16];
		char		when[64];

		/* say which KEK the key ring expects and which one the command gave */
		keyring_format_fingerprint(header.kek_fingerprint, expected);
		keyring_format_fingerprint(used_fp, given);
		format_wrapped_at(header.wrapped_at, when, sizeof(when));
		if (have_next && next_header.kek_source != KEK_SOURCE_UNWRAP)
		{
			char		pending[2 * KEK_FINGERPRINT_LEN + 16];

			keyring_format_fingerprint(next_header.kek_fingerprint, pending);
			keyring_set_detail(err, "The key ring was wrapped%s under the key-encryption key with fingerprint %s, and the interrupted rotation's key ring (" KEYRING_NEXT_FILE ") under fingerprint %s; the key command's key has fingerprint %s.",
							   when, expected, pending, given);
		}
		else
			keyring_set_detail(err, "The key ring was wrapped%s under the key-encryption key with fingerprint %s; the key command's key has fingerprint %s.",
							   when, expected, given);
	}
	return ok;
}

#ifdef FRONTEND
/*
 * Report err as message, detail and hint through the frontend logging
 * functions, as the server reports it through ereport().
 */
void
keyring_log_error(const KeyringError *err)
{
	pg_log_error("%s", err->message);
	if (err->detail[0])
		pg_log_error_detail("%s", err->detail);
	if (err->hint[0])
		pg_log_error_hint("%s", err->hint);
}

/*
 * The cipher recorded in the header of datadir's key ring, which is
 * readable without the key; DATA_ENCRYPTION_OFF when there is no key ring.
 * A damaged key ring is reported and ends the program: a tool must not
 * guess that an encrypted cluster is unencrypted.
 */
int
keyring_file_cipher(const char *datadir)
{
	char		path[MAXPGPATH];
	unsigned char buf[4096];
	size_t		len;
	Keyring		ring;
	KeyringError err;

	snprintf(path, sizeof(path), "%s/%s", datadir, KEYRING_FILE);
	if (keyring_read_file(path, buf, sizeof(buf), &len, &err) &&
		keyring_parse(buf, len, NULL, &ring, &err))
		return ring.cipher;
	if (err.kind == KEYRING_ERR_FILE_MISSING)
		return DATA_ENCRYPTION_OFF;
	keyring_log_error(&err);
	exit(1);
}

/*
 * encryption_key_command_timeout as "postgres -C" prints it: a whole number
 * of seconds, the setting's unit; -1 if it is not one in the setting's range
 */
static int
parse_timeout(const char *value)
{
	char	   *end;
	long		n;

	errno = 0;
	n = strtol(value, &end, 10);
	if (errno != 0 || end == value || *end != '\0' || n < 1 || n > 3600)
		return -1;
	return (int) n;
}

/* One setting of a cluster, read with "postgres -C"; NULL on failure */
static char *
cluster_setting(const char *postgres, const char *configdir, const char *name,
				KeyringError *err)
{
	char		cmd[MAXPGPATH * 2 + 64];
	char	   *value;

	snprintf(cmd, sizeof(cmd), "\"%s\" -D \"%s\" -C %s", postgres, configdir, name);
	fflush(NULL);
	value = pipe_read_line(cmd);
	if (value == NULL)
	{
		keyring_set_error(err, KEYRING_ERR_COMMAND_FAILED,
						  "Give the key command on the command line, where the program takes one.",
						  "could not read the setting \"%s\" of the cluster in \"%s\"", name, configdir);
		keyring_set_detail(err, "The command \"%s\" printed nothing.", cmd);
		return NULL;
	}
	(void) pg_strip_crlf(value);
	return value;
}

/*
 * A cluster's encryption_key_command and encryption_key_command_timeout, as
 * its own server would take them from its configuration in configdir, read
 * with that server's "postgres -C" (postgres: the path of the program).
 * With *command already set (given on a command line), only the timeout is
 * read.  The one way every frontend program finds a cluster's key command.
 */
bool
keyring_cluster_settings(const char *postgres, const char *configdir,
						 char **command, int *timeout_s, KeyringError *err)
{
	char	   *timeout;
	bool		given = *command != NULL && (*command)[0] != '\0';

	if (!given)
	{
		char	   *setting = cluster_setting(postgres, configdir, "encryption_key_command", err);

		if (setting == NULL)
			return false;

		/*
		 * Not set: keyring_load() runs the command recorded in the data
		 * directory (pg_encryption/command), or says that none is set
		 */
		free(*command);			/* an empty string given */
		*command = setting;
	}
	if ((timeout = cluster_setting(postgres, configdir, "encryption_key_command_timeout", err)) == NULL)
	{
		/*
		 * A command given on the command line needs no configuration (a WAL
		 * archive, a base backup without postgresql.conf): the default
		 * timeout then
		 */
		if (!given)
			return false;
		*timeout_s = KEY_COMMAND_DEFAULT_TIMEOUT_S;
		return true;
	}
	*timeout_s = parse_timeout(timeout);
	if (*timeout_s < 0)
	{
		keyring_set_error(err, KEYRING_ERR_COMMAND_FAILED, NULL,
						  "invalid encryption_key_command_timeout of the cluster in \"%s\"", configdir);
		keyring_set_detail(err, "\"postgres -C\" printed \"%s\".", timeout);
		free(timeout);
		return false;
	}
	free(timeout);
	return true;
}
#endif							/* FRONTEND */
