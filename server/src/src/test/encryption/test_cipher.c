/*-------------------------------------------------------------------------
 *
 * test_cipher.c
 *	  pgcipher: unit tests of the data encryption ciphers and the key ring.
 *
 * Checks AES-XTS against the IEEE 1619 vectors and AES key wrap with
 * padding against the RFC 5649 / NIST vectors (files in vectors/), then
 * the key ring: round trip, a wrong KEK, every single-bit flip and every
 * truncation of the file, the KEK rules for the key command's output, and
 * the key command runner (exit status, garbage, timeout).
 *
 * Prints one TAP line per check; exits non-zero if any check failed.
 *
 * Usage: test_cipher VECTOR_DIR
 *
 * src/test/encryption/test_cipher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <sys/stat.h>
#include <time.h>

#include "common/data_encryption.h"
#include "common/keyring.h"
#include "port/pg_crc32c.h"

static int	tests_run = 0;
static int	tests_failed = 0;

static void
check(bool ok, const char *fmt,...) pg_attribute_printf(2, 3);

static void
check(bool ok, const char *fmt,...)
{
	va_list		ap;

	tests_run++;
	if (!ok)
		tests_failed++;
	printf("%s %d - ", ok ? "ok" : "not ok", tests_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static int
unhex(const char *hex, unsigned char *out, int max)
{
	int			n = strlen(hex) / 2;

	if (n > max)
		return -1;
	for (int i = 0; i < n; i++)
	{
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		out[i] = b;
	}
	return n;
}

/* One "name = value" record at a time from a vector file */
typedef struct Record
{
	char		comment[256];
	char		cipher[32];
	unsigned char key[64], tweak[16], kek[32];
	unsigned char plaintext[1024], ciphertext[1032];
	int			keylen, tweaklen, keklen, ptlen, ctlen;
} Record;

static bool
read_record(FILE *f, Record *r)
{
	char		line[8192];
	bool		any = false;

	memset(r, 0, sizeof(Record));
	while (fgets(line, sizeof(line), f))
	{
		char	   *eq;
		char	   *val;

		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '#')
		{
			if (!any)
				strlcpy(r->comment, line + 1, sizeof(r->comment));
			continue;
		}
		if (line[0] == '\0')
		{
			if (any)
				return true;
			continue;
		}
		eq = strstr(line, " = ");
		if (!eq)
			continue;
		*eq = '\0';
		val = eq + 3;
		any = true;
		if (strcmp(line, "cipher") == 0)
			strlcpy(r->cipher, val, sizeof(r->cipher));
		else if (strcmp(line, "key") == 0)
			r->keylen = unhex(val, r->key, sizeof(r->key));
		else if (strcmp(line, "tweak") == 0)
			r->tweaklen = unhex(val, r->tweak, sizeof(r->tweak));
		else if (strcmp(line, "kek") == 0)
			r->keklen = unhex(val, r->kek, sizeof(r->kek));
		else if (strcmp(line, "plaintext") == 0)
			r->ptlen = unhex(val, r->plaintext, sizeof(r->plaintext));
		else if (strcmp(line, "ciphertext") == 0)
			r->ctlen = unhex(val, r->ciphertext, sizeof(r->ciphertext));
	}
	return any;
}

static FILE *
open_vectors(const char *dir, const char *name)
{
	char		path[MAXPGPATH];
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (f == NULL)
	{
		fprintf(stderr, "could not open %s: %m\n", path);
		exit(2);
	}
	return f;
}

static void
test_xts_vectors(const char *dir)
{
	FILE	   *f = open_vectors(dir, "xts.txt");
	Record		r;
	int			count = 0;

	while (read_record(f, &r))
	{
		int			cipher = strcmp(r.cipher, "aes-128-xts") == 0 ? DATA_ENCRYPTION_AES128 :
			strcmp(r.cipher, "aes-256-xts") == 0 ? DATA_ENCRYPTION_AES256 : -1;
		XtsCipher  *xts;
		unsigned char out[1024];

		if (cipher < 0 || r.keylen != 2 * data_encryption_key_length(cipher) ||
			r.tweaklen != 16 || r.ptlen <= 0 || r.ptlen != r.ctlen)
		{
			check(false, "malformed XTS vector:%s", r.comment);
			continue;
		}
		xts = xts_cipher_create(cipher, r.key);
		check(xts != NULL, "XTS context for%s", r.comment);
		if (xts == NULL)
			continue;
		/* twice each way: the context is reused, only the tweak is reset */
		for (int round = 0; round < 2; round++)
		{
			check(xts_encrypt(xts, r.tweak, r.plaintext, out, r.ptlen) &&
				  memcmp(out, r.ciphertext, r.ctlen) == 0,
				  "XTS encrypt (round %d)%s", round + 1, r.comment);
			check(xts_decrypt(xts, r.tweak, r.ciphertext, out, r.ctlen) &&
				  memcmp(out, r.plaintext, r.ptlen) == 0,
				  "XTS decrypt (round %d)%s", round + 1, r.comment);
		}
		xts_cipher_free(xts);
		count++;
	}
	fclose(f);
	check(count >= 10, "read %d XTS vectors", count);
}

static void
test_kwp_vectors(const char *dir)
{
	FILE	   *f = open_vectors(dir, "kwp.txt");
	Record		r;
	int			count = 0;

	while (read_record(f, &r))
	{
		unsigned char out[1032];
		int			outlen;

		check(aes_key_wrap_pad(r.kek, r.keklen, r.plaintext, r.ptlen, out, &outlen) &&
			  outlen == r.ctlen && memcmp(out, r.ciphertext, r.ctlen) == 0,
			  "KWP wrap%s", r.comment);
		check(aes_key_unwrap_pad(r.kek, r.keklen, r.ciphertext, r.ctlen, out, &outlen) &&
			  outlen == r.ptlen && memcmp(out, r.plaintext, r.ptlen) == 0,
			  "KWP unwrap%s", r.comment);
		r.ciphertext[r.ctlen / 2] ^= 1;
		check(!aes_key_unwrap_pad(r.kek, r.keklen, r.ciphertext, r.ctlen, out, &outlen),
			  "KWP unwrap rejects a flipped bit%s", r.comment);
		count++;
	}
	fclose(f);
	check(count >= 2, "read %d KWP vectors", count);
}

static void
test_xts_properties(void)
{
	unsigned char key[64], tweak[16] = {0}, page[8176], enc[8176], dec[8176];
	XtsCipher  *xts;

	for (int i = 0; i < 64; i++)
		key[i] = i * 7 + 1;
	for (int i = 0; i < (int) sizeof(page); i++)
		page[i] = i % 251;
	xts = xts_cipher_create(DATA_ENCRYPTION_AES256, key);
	check(xts_encrypt(xts, tweak, page, enc, sizeof(page)) &&
		  xts_decrypt(xts, tweak, enc, dec, sizeof(dec)) &&
		  memcmp(dec, page, sizeof(page)) == 0, "XTS page round trip");
	memcpy(dec, page, sizeof(page));
	check(xts_encrypt(xts, tweak, dec, dec, sizeof(dec)) &&
		  memcmp(dec, enc, sizeof(enc)) == 0, "XTS in-place encryption equals out-of-place");
	tweak[4] = 1;
	check(xts_encrypt(xts, tweak, page, dec, sizeof(page)) &&
		  memcmp(dec, enc, 16) != 0, "another tweak gives another ciphertext");
	xts_cipher_free(xts);
	memcpy(key + 32, key, 32);
	check(xts_cipher_create(DATA_ENCRYPTION_AES256, key) == NULL,
		  "XTS key with two equal halves is refused");
}

static void
make_ring(Keyring *ring, int cipher)
{
	memset(ring, 0, sizeof(Keyring));
	ring->cipher = cipher;
	ring->kek_source = KEK_SOURCE_HEX;
	ring->nkeys = 3;
	for (int i = 0; i < 3; i++)
	{
		ring->keys[i].id = i + 1;
		ring->keys[i].len = 2 * data_encryption_key_length(cipher);
		for (uint32 j = 0; j < ring->keys[i].len; j++)
			ring->keys[i].key[j] = (unsigned char) (i * 31 + j * 13 + 5);
	}
}

static void
test_keyring_format(void)
{
	Keyring		ring,
				back;
	KeyringError err;
	unsigned char kek[KEK_LEN], wrong[KEK_LEN];
	unsigned char file[4096], copy[4096];
	size_t		len;
	int			undetected = 0,
				misreported = 0;

	for (int i = 0; i < KEK_LEN; i++)
	{
		kek[i] = i;
		wrong[i] = i ^ 0x80;
	}
	for (int cipher = DATA_ENCRYPTION_AES128; cipher <= DATA_ENCRYPTION_AES256; cipher++)
	{
		make_ring(&ring, cipher);
		len = keyring_serialize(&ring, kek, file, sizeof(file), &err);
		check(len > 0, "serialize %s key ring (%zu bytes)", data_encryption_cipher_name(cipher), len);
		check(keyring_parse(file, len, kek, &back, &err) &&
			  back.cipher == ring.cipher && back.nkeys == 3 &&
			  memcmp(back.keys, ring.keys, sizeof(ring.keys)) == 0,
			  "parse %s key ring: same keys back", data_encryption_cipher_name(cipher));
		check(!keyring_parse(file, len, wrong, &back, &err) && err.kind == KEYRING_ERR_WRONG_KEY,
			  "wrong KEK is reported as a wrong key: %s", err.message);
		check(keyring_parse(file, len, NULL, &back, &err) && back.keys[0].len == 0,
			  "header-only parse needs no KEK and unwraps nothing");
	}

	/* every single-bit flip is detected as corruption, never as a wrong key */
	for (size_t bit = 0; bit < len * 8; bit++)
	{
		memcpy(copy, file, len);
		copy[bit / 8] ^= 1 << (bit % 8);
		if (keyring_parse(copy, len, kek, &back, &err))
			undetected++;
		else if (err.kind != KEYRING_ERR_FILE_CORRUPT)
			misreported++;
	}
	check(undetected == 0 && misreported == 0,
		  "all %zu single-bit flips detected as corruption (%d undetected, %d misreported)",
		  len * 8, undetected, misreported);

	undetected = misreported = 0;
	for (size_t cut = 0; cut < len; cut++)
	{
		if (keyring_parse(file, cut, kek, &back, &err))
			undetected++;
		else if (err.kind != KEYRING_ERR_FILE_CORRUPT)
			misreported++;
	}
	check(undetected == 0 && misreported == 0,
		  "all %zu truncations detected (%d undetected, %d misreported)",
		  len, undetected, misreported);

	/* a wrapped key moved to another slot fails to unwrap */
	make_ring(&ring, DATA_ENCRYPTION_AES256);
	len = keyring_serialize(&ring, kek, file, sizeof(file), &err);
	{
		/* swap the ids of the first two entries and fix the CRC */
		size_t		second = 52 + 12 + ((file[52 + 8] << 24) | (file[52 + 9] << 16) | (file[52 + 10] << 8) | file[52 + 11]);
		unsigned char id0[4];
		pg_crc32c	crc;

		memcpy(id0, file + 52, 4);
		memcpy(file + 52, file + second, 4);
		memcpy(file + second, id0, 4);
		INIT_CRC32C(crc);
		COMP_CRC32C(crc, file, len - 4);
		FIN_CRC32C(crc);
		file[len - 4] = crc >> 24;
		file[len - 3] = crc >> 16;
		file[len - 2] = crc >> 8;
		file[len - 1] = crc;
		check(!keyring_parse(file, len, kek, &back, &err),
			  "a wrapped key moved to another slot is refused: %s", err.message);
	}
}

static void
test_kek_from_output(void)
{
	Keyring		ring;
	KeyringError err;
	unsigned char kek[KEK_LEN], kek2[KEK_LEN];
	const char *hex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n";

	memset(&ring, 0, sizeof(ring));
	check(kek_from_command_output(hex, strlen(hex), &ring, true, kek, &err) &&
		  ring.kek_source == KEK_SOURCE_HEX && kek[0] == 0 && kek[31] == 0x1f,
		  "64 hex digits are the KEK itself");
	memset(&ring, 0, sizeof(ring));
	check(kek_from_command_output("correct horse battery\n", 22, &ring, true, kek, &err) &&
		  ring.kek_source == KEK_SOURCE_PASSPHRASE && ring.scrypt_log2_n == KEYRING_SCRYPT_LOG2_N,
		  "anything else printable is a passphrase for scrypt");
	check(kek_from_command_output("correct horse battery", 21, &ring, false, kek2, &err) &&
		  memcmp(kek, kek2, KEK_LEN) == 0, "same passphrase and salt give the same KEK");
	check(kek_from_command_output("correct horse batterY", 21, &ring, false, kek2, &err) &&
		  memcmp(kek, kek2, KEK_LEN) != 0, "another passphrase gives another KEK");
	check(!kek_from_command_output("", 0, &ring, true, kek, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_OUTPUT, "empty output is refused: %s", err.message);
	check(!kek_from_command_output("\x01\x02\xff garbage", 11, &ring, true, kek, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_OUTPUT, "binary output is refused: %s", err.message);
	check(!kek_from_command_output("two\nlines", 9, &ring, true, kek, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_OUTPUT, "two lines are refused");
	check(!kek_from_command_output("short", 5, &ring, true, kek, &err),
		  "a passphrase under 8 characters is refused at initdb");
	ring.kek_source = KEK_SOURCE_HEX;
	check(!kek_from_command_output("not hex at all", 14, &ring, false, kek, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_OUTPUT,
		  "a hex-key cluster refuses a non-hex output: %s", err.detail);
}

static void
test_key_command(void)
{
	char		out[KEY_COMMAND_MAX_OUTPUT];
	size_t		len;
	KeyringError err;
	time_t		start;

	check(run_key_command("echo hello", 5, out, sizeof(out), &len, &err) &&
		  len == 6 && memcmp(out, "hello\n", 6) == 0, "key command output is captured");
	check(!run_key_command("echo partial; exit 3", 5, out, sizeof(out), &len, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_FAILED && strstr(err.detail, "status 3"),
		  "non-zero exit is a failure: %s", err.detail);
	check(!run_key_command("", 5, out, sizeof(out), &len, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_FAILED, "empty command is refused");
	check(!run_key_command("head -c 5000 /dev/zero", 5, out, sizeof(out), &len, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_OUTPUT, "too much output is refused");
	start = time(NULL);
	check(!run_key_command("sleep 60", 1, out, sizeof(out), &len, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_TIMEOUT && time(NULL) - start < 10,
		  "a hanging command is killed after the timeout: %s", err.message);
	start = time(NULL);
	check(!run_key_command("echo early; exec sleep 60", 1, out, sizeof(out), &len, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_TIMEOUT && time(NULL) - start < 10,
		  "a command that prints and then hangs is killed too");
}

int
main(int argc, char **argv)
{
	if (argc != 2)
	{
		fprintf(stderr, "usage: %s VECTOR_DIR\n", argv[0]);
		return 2;
	}
	test_xts_vectors(argv[1]);
	test_kwp_vectors(argv[1]);
	test_xts_properties();
	test_keyring_format();
	test_kek_from_output();
	test_key_command();
	printf("1..%d\n", tests_run);
	printf("# %d passed, %d failed\n", tests_run - tests_failed, tests_failed);
	return tests_failed == 0 ? 0 : 1;
}
