/*-------------------------------------------------------------------------
 *
 * key_wrapping.c
 *	  pgcipher: the unwrap mode (design 9.4), in which the key command
 *	  itself wraps and unwraps the data keys and no key-encryption key
 *	  reaches this process.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/common/key_wrapping.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FRONTEND
#include "postgres.h"
#else
#include "postgres_fe.h"
#endif

#include <time.h>

#include "common/data_encryption.h"
#include "common/keyring_int.h"
#include "port/pg_crc32c.h"

/*
 * The unwrap mode (design 9.4): no KEK reaches this process.  The data
 * keys, serialized as a bundle, are handed in hexadecimal to "COMMAND
 * wrap" (a KMS client that encrypts them under a key that never leaves the
 * KMS), which prints their wrapped form; the key ring stores that form,
 * and "COMMAND unwrap" is handed it at every start and prints the bundle.
 *
 * Bundle (big-endian, as the file):
 *
 *	 0	"PGCKEYS1"				 8 bytes
 *	 8	cipher					 4
 *	12	number of keys			 4
 *	16	per key: id (4), length (4), key bytes
 */
#define BUNDLE_MAGIC		"PGCKEYS1"
#define BUNDLE_MAX_LEN		(16 + KEYRING_MAX_KEYS * (8 + DATA_ENCRYPTION_MAX_XTS_KEY_LEN))
/* what "COMMAND unwrap" may print: the bundle in hex, a newline */
#define UNWRAP_MAX_OUTPUT	(2 * BUNDLE_MAX_LEN + 2)
#define UNWRAP_HINT			"The key command must print the data keys that its \"wrap\" was given, in hexadecimal on one line, when run with \"unwrap\" and the wrapped form on its standard input."

static size_t
bundle_serialize(const Keyring *ring, unsigned char *buf)
{
	size_t		off = 16;

	memcpy(buf, BUNDLE_MAGIC, 8);
	put32(buf + 8, ring->cipher);
	put32(buf + 12, ring->nkeys);
	for (uint32 i = 0; i < ring->nkeys; i++)
	{
		put32(buf + off, ring->keys[i].id);
		put32(buf + off + 4, ring->keys[i].len);
		memcpy(buf + off + 8, ring->keys[i].key, ring->keys[i].len);
		off += 8 + ring->keys[i].len;
	}
	return off;
}

/*
 * The keys of a bundle into ring, whose header (cipher, number of keys,
 * the data keys' fingerprint) the key ring file gave: everything must
 * match it.
 */
static bool
bundle_parse(const unsigned char *buf, size_t len, Keyring *ring,
			 const char *command, KeyringError *err)
{
	size_t		off = 16;
	uint32		keylen = 2 * data_encryption_key_length(ring->cipher);
	unsigned char fp[KEK_FINGERPRINT_LEN];

	if (len < 16 || memcmp(buf, BUNDLE_MAGIC, 8) != 0 ||
		get32(buf + 8) != ring->cipher || get32(buf + 12) != ring->nkeys)
		goto malformed;
	for (uint32 i = 0; i < ring->nkeys; i++)
	{
		KeyringKey *key = &ring->keys[i];

		if (off + 8 > len)
			goto malformed;
		key->id = get32(buf + off);
		key->len = get32(buf + off + 4);
		if (key->len != keylen || off + 8 + key->len > len)
			goto malformed;
		for (uint32 j = 0; j < i; j++)
			if (ring->keys[j].id == key->id)
				goto malformed;
		memcpy(key->key, buf + off + 8, key->len);
		off += 8 + key->len;
	}
	if (off != len)
		goto malformed;
	if (!data_keys_fingerprint(buf, (int) len, fp))
	{
		keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "could not compute the data keys' fingerprint");
		goto fail;
	}
	if (memcmp(fp, ring->kek_fingerprint, KEK_FINGERPRINT_LEN) != 0)
	{
		char		expected[2 * KEK_FINGERPRINT_LEN + 16];
		char		given[2 * KEK_FINGERPRINT_LEN + 16];

		keyring_format_fingerprint(ring->kek_fingerprint, expected);
		keyring_format_fingerprint(fp, given);
		keyring_set_error(err, KEYRING_ERR_WRONG_KEY, UNWRAP_HINT,
						  "encryption key command \"%s unwrap\" gave data keys that are not this key ring's", command);
		keyring_set_detail(err, "The key ring records data keys with fingerprint %s; the command gave keys with fingerprint %s.",
						   expected, given);
		goto fail;
	}
	return true;

malformed:
	keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, UNWRAP_HINT,
					  "encryption key command \"%s unwrap\" printed something that is not this key ring's data keys", command);
	keyring_set_detail(err, "It decodes to %zu bytes that do not hold the %u keys of %s the key ring records.",
					   len, ring->nkeys, data_encryption_cipher_name(ring->cipher));
fail:
	for (uint32 i = 0; i < KEYRING_MAX_KEYS; i++)
		data_encryption_wipe(&ring->keys[i], sizeof(KeyringKey));
	return false;
}

static void
hex_encode(const unsigned char *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++)
	{
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}

/*
 * Run "command unwrap" with wrapped on its stdin and decode what it prints
 * into bundle; false with err filled when it fails or prints anything but
 * an even number of hexadecimal digits that fits a bundle.
 */
static bool
run_unwrap(const char *command, int timeout_s, const char *wrapped,
		   size_t wrappedlen, unsigned char *bundle, size_t *bundlelen,
		   KeyringError *err)
{
	char		input[KEYRING_MAX_WRAPPED + 2];
	char		out[UNWRAP_MAX_OUTPUT];
	char		full[8192];
	size_t		outlen;
	bool		ok = false;

	memcpy(input, wrapped, wrappedlen);
	input[wrappedlen] = '\n';
	if (!keyring_run_command_io(command, "unwrap", input, wrappedlen + 1, timeout_s,
								out, sizeof(out), &outlen, err))
		return false;
	snprintf(full, sizeof(full), "%s unwrap", command);
	if (!keyring_output_line(out, &outlen, full, UNWRAP_HINT, err))
		goto done;
	if (outlen % 2 != 0 || outlen / 2 > BUNDLE_MAX_LEN)
	{
		keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, UNWRAP_HINT,
						  "encryption key command \"%s unwrap\" printed something that is not this key ring's data keys", command);
		keyring_set_detail(err, "It printed %zu characters, not an even number of hexadecimal digits up to %d.",
						   outlen, 2 * BUNDLE_MAX_LEN);
		goto done;
	}
	for (size_t i = 0; i < outlen; i++)
	{
		if (keyring_hexval(out[i]) < 0)
		{
			keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, UNWRAP_HINT,
							  "encryption key command \"%s unwrap\" printed a character that is not a hexadecimal digit", command);
			keyring_set_detail(err, "Character %zu of the %zu is not a hexadecimal digit (0-9, a-f, A-F).", i + 1, outlen);
			goto done;
		}
	}
	for (size_t i = 0; i < outlen / 2; i++)
		bundle[i] = (keyring_hexval(out[2 * i]) << 4) | keyring_hexval(out[2 * i + 1]);
	*bundlelen = outlen / 2;
	ok = true;
done:
	data_encryption_wipe(out, sizeof(out));
	return ok;
}

/*
 * Open a key ring kept by an unwrap command: its wrapped form (file, as
 * parsed into ring's header) to "command unwrap", the answer checked
 * against the header, the keys into ring.
 */
bool
keyring_unwrap_with_command(const char *command, int timeout_s,
							const unsigned char *file, Keyring *ring,
							KeyringError *err)
{
	unsigned char bundle[BUNDLE_MAX_LEN];
	size_t		bundlelen;
	bool		ok;

	ok = run_unwrap(command, timeout_s, (const char *) file + KEYRING_HEADER_LEN + 4,
					get32(file + KEYRING_HEADER_LEN), bundle, &bundlelen, err) &&
		bundle_parse(bundle, bundlelen, ring, command, err);
	data_encryption_wipe(bundle, sizeof(bundle));
	return ok;
}

/*
 * Serialize a key ring kept by an unwrap command (format 3): the header of
 * format 2 with the data keys' fingerprint in place of the KEK's, then the
 * length of the wrapped form and the form itself.  Returns the file's
 * length, or 0 on failure.
 */
size_t
keyring_serialize_unwrap(const Keyring *ring, const char *wrapped,
						 size_t wrappedlen, unsigned char *buf, size_t bufsize,
						 KeyringError *err)
{
	pg_crc32c	crc;
	size_t		off = KEYRING_HEADER_LEN;

	if (bufsize < KEYRING_MAX_FILE || ring->nkeys == 0 ||
		ring->nkeys > KEYRING_MAX_KEYS || wrappedlen == 0 ||
		wrappedlen > KEYRING_MAX_WRAPPED)
	{
		keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "key ring too large");
		return 0;
	}
	memset(buf, 0, bufsize);
	memcpy(buf, KEYRING_MAGIC, 8);
	put32(buf + 8, KEYRING_VERSION_UNWRAP);
	put32(buf + 12, ring->cipher);
	put32(buf + 16, KEK_SOURCE_UNWRAP);
	/* 20..47, the scrypt parameters and salt, stay zero */
	memcpy(buf + 48, ring->kek_fingerprint, KEK_FINGERPRINT_LEN);
	put64(buf + 56, (uint64) ring->wrapped_at);
	put32(buf + 64, ring->nkeys);
	put32(buf + off, (uint32) wrappedlen);
	memcpy(buf + off + 4, wrapped, wrappedlen);
	off += 4 + wrappedlen;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, off);
	FIN_CRC32C(crc);
	put32(buf + off, crc);
	return off + 4;
}

/*
 * The unwrap mode's half of keyring_wrap_under_command(): the data keys to
 * "command wrap", its answer to "command unwrap" at once (a command that
 * cannot give back what it wrapped is refused now, not at the next start),
 * and the key ring of format 3 into file.
 */
size_t
keyring_wrap_with_command(Keyring *ring, const char *command, int timeout_s,
						  unsigned char *file, size_t filesize, KeyringError *err)
{
	unsigned char bundle[BUNDLE_MAX_LEN];
	unsigned char back[BUNDLE_MAX_LEN];
	char		input[2 * BUNDLE_MAX_LEN + 2];
	char		wrapped[KEYRING_MAX_WRAPPED + 2];
	char		full[8192];
	size_t		bundlelen;
	size_t		backlen = 0;
	size_t		wrappedlen;
	size_t		filelen = 0;

	bundlelen = bundle_serialize(ring, bundle);
	hex_encode(bundle, bundlelen, input);
	input[2 * bundlelen] = '\n';
	if (!keyring_run_command_io(command, "wrap", input, 2 * bundlelen + 1, timeout_s,
								wrapped, sizeof(wrapped), &wrappedlen, err))
		goto done;
	snprintf(full, sizeof(full), "%s wrap", command);
	if (!keyring_output_line(wrapped, &wrappedlen, full, UNWRAP_HINT, err))
		goto done;
	if (wrappedlen > KEYRING_MAX_WRAPPED)
	{
		keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, UNWRAP_HINT,
						  "encryption key command \"%s wrap\" printed more than %d bytes", command, KEYRING_MAX_WRAPPED);
		goto done;
	}
	if (!run_unwrap(command, timeout_s, wrapped, wrappedlen, back, &backlen, err))
		goto done;
	if (backlen != bundlelen || memcmp(back, bundle, bundlelen) != 0)
	{
		keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, UNWRAP_HINT,
						  "encryption key command \"%s unwrap\" did not give back the data keys its \"wrap\" was given", command);
		goto done;
	}
	if (!data_keys_fingerprint(bundle, (int) bundlelen, ring->kek_fingerprint))
	{
		keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "could not compute the data keys' fingerprint");
		goto done;
	}
	ring->kek_source = KEK_SOURCE_UNWRAP;
	ring->scrypt_log2_n = ring->scrypt_r = ring->scrypt_p = 0;
	memset(ring->salt, 0, KEYRING_SALT_LEN);
	ring->wrapped_at = (int64) time(NULL);
	filelen = keyring_serialize_unwrap(ring, wrapped, wrappedlen, file, filesize, err);
done:
	data_encryption_wipe(bundle, sizeof(bundle));
	data_encryption_wipe(back, sizeof(back));
	data_encryption_wipe(input, sizeof(input));
	return filelen;
}
