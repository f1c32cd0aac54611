/*-------------------------------------------------------------------------
 *
 * test_cipher.c
 *	  pgcipher: unit tests of the data encryption ciphers and the key ring.
 *
 * Checks AES-XTS against the IEEE 1619 vectors and AES key wrap with
 * padding against the RFC 5649 / NIST vectors (files in vectors/), then
 * the key ring: round trip, a wrong KEK, every single-bit flip and every
 * truncation of the file, the KEK rules for the key command's output, and
 * the key command runner (exit status, garbage, timeout).  AES-CTR is
 * checked against NIST SP 800-38A F.5.1 and F.5.5, bulk XTS with one-block
 * data units (temporary files) against EVP's XTS, and the WAL page format
 * for its rules: header in clear, zeros after the valid end, decryption of
 * any prefix, a new epoch giving new keystream.
 *
 * Known outputs (vectors/outputs.txt): SHA-256 digests of what every
 * cipher use produces on a fixed corpus — relation pages, odd XTS lengths
 * (ciphertext stealing), WAL pages and CTR at unaligned offsets, temporary
 * file blocks — recorded with the OpenSSL the server linked before (Debian
 * 12's 3.0), so a change of library that changed one byte of any file
 * format fails here.  `test_cipher --known-outputs` prints them.
 *
 * Prints one TAP line per check; exits non-zero if any check failed.
 *
 * Usage: test_cipher VECTOR_DIR
 *        test_cipher --known-outputs
 *
 * src/test/encryption/test_cipher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <sys/stat.h>
#include <time.h>

#include "access/xlog_internal.h"
#include "common/data_encryption.h"
#include "common/keyring.h"
#include "common/page_keys.h"
#include "common/wal_encryption.h"
#include "port/pg_crc32c.h"
#include "common/cryptohash.h"
#include "common/sha2.h"

#include <openssl/crypto.h>

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
	unsigned char key[64],
				tweak[16],
				kek[32];
	unsigned char plaintext[1024],
				ciphertext[1032];
	int			keylen,
				tweaklen,
				keklen,
				ptlen,
				ctlen;
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

/* NIST SP 800-38A, F.5.1 (CTR-AES128) and F.5.5 (CTR-AES256) */
static void
test_ctr_vectors(void)
{
	static const struct
	{
		int			cipher;
		const char *key;
		const char *ct;
	}			v[] = {
		{DATA_ENCRYPTION_AES128, "2b7e151628aed2a6abf7158809cf4f3c",
			"874d6191b620e3261bef6864990db6ce9806f66b7970fdff8617187bb9fffdff"
		"5ae4df3edbd5d35e5b4f09020db03eab1e031dda2fbe03d1792170a0f3009cee"},
		{DATA_ENCRYPTION_AES256,
			"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
			"601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
		"2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6"},
	};
	const char *pt_hex =
		"6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
		"30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710";
	unsigned char iv[16],
				pt[64],
				ct[64],
				key[32],
				out[64];

	unhex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff", iv, sizeof(iv));
	unhex(pt_hex, pt, sizeof(pt));
	for (int i = 0; i < lengthof(v); i++)
	{
		CtrCipher  *ctr;

		unhex(v[i].key, key, sizeof(key));
		unhex(v[i].ct, ct, sizeof(ct));
		ctr = ctr_cipher_create(v[i].cipher, key);
		check(ctr != NULL && ctr_crypt(ctr, iv, 0, pt, out, 64) &&
			  memcmp(out, ct, 64) == 0,
			  "CTR %s: SP 800-38A vector", data_encryption_cipher_name(v[i].cipher));
		/* starting 21 bytes in (block 1, skip 5) gives the same bytes */
		{
			unsigned char iv1[16];

			/* counter + 1: ...feff becomes ...ff00 */
			memcpy(iv1, iv, 16);
			iv1[15] = 0x00;
			iv1[14] = 0xff;
			check(ctr_crypt(ctr, iv1, 5, pt + 21, out, 43) &&
				  memcmp(out, ct + 21, 43) == 0,
				  "CTR %s: a range starting inside a block",
				  data_encryption_cipher_name(v[i].cipher));
		}
		ctr_cipher_free(ctr);
	}
}

/* A WAL page of records after a short header, as XLogWrite would see it */
static void
make_wal_page(char *page, XLogRecPtr pageptr)
{
	XLogPageHeaderData *hdr = (XLogPageHeaderData *) page;

	memset(page, 0, XLOG_BLCKSZ);
	hdr->xlp_magic = XLOG_PAGE_MAGIC;
	hdr->xlp_info = 0;
	hdr->xlp_tli = 1;
	hdr->xlp_pageaddr = pageptr;
	for (int i = SizeOfXLogShortPHD; i < XLOG_BLCKSZ; i++)
		page[i] = (char) ('a' + i % 26);
}

static void
test_wal_pages(void)
{
	unsigned char key[64];
	char		page[XLOG_BLCKSZ],
				enc[XLOG_BLCKSZ],
				enc2[XLOG_BLCKSZ],
				dec[XLOG_BLCKSZ];
	XLogRecPtr	lsn = UINT64CONST(0x123456789A000);
	int			valid = 5000;
	bool		tail_zero = true;

	memset(key, 0x5a, sizeof(key));
	check(wal_encryption_set_key(PAGE_SLOT_A, DATA_ENCRYPTION_AES256, key), "WAL key set");
	make_wal_page(page, lsn);
	wal_encrypt_page(page, enc, lsn, 7, valid);
	check(wal_page_is_encrypted(enc) && !wal_page_is_encrypted(page) &&
		  wal_page_epoch(enc) == 7,
		  "WAL: written copy carries XLP_ENCRYPTED and the epoch, the source does not");
	check(memcmp(enc + 4, page + 4, 16) == 0 &&
		  ((XLogPageHeaderData *) enc)->xlp_magic == XLOG_PAGE_MAGIC,
		  "WAL: header in clear");
	check(memcmp(enc + SizeOfXLogShortPHD, page + SizeOfXLogShortPHD, 64) != 0,
		  "WAL: records encrypted");
	for (int i = valid; i < XLOG_BLCKSZ; i++)
		tail_zero &= enc[i] == 0;
	check(tail_zero, "WAL: zeros, not keystream, after the valid end");

	/* the page grows: bytes written before keep their ciphertext */
	wal_encrypt_page(page, enc2, lsn, 7, XLOG_BLCKSZ);
	check(memcmp(enc, enc2, valid) == 0,
		  "WAL: rewriting a growing page repeats the bytes already written");

	/* any prefix decrypts, whatever its length */
	memcpy(dec, enc2, XLOG_BLCKSZ);
	check(wal_decrypt_page(dec, lsn, 4099) &&
		  memcmp(dec + SizeOfXLogShortPHD, page + SizeOfXLogShortPHD, 4099 - SizeOfXLogShortPHD) == 0 &&
		  !wal_page_is_encrypted(dec),
		  "WAL: a prefix of 4099 bytes decrypts, flag cleared");
	check(wal_decrypt_page(dec, lsn, XLOG_BLCKSZ) &&
		  memcmp(dec + SizeOfXLogShortPHD, page + SizeOfXLogShortPHD, 4099 - SizeOfXLogShortPHD) == 0,
		  "WAL: decrypting a page twice is a no-op");

	/* a torn page: first half from one write, second half from the next */
	memcpy(dec, enc, 3001);
	memcpy(dec + 3001, enc2 + 3001, XLOG_BLCKSZ - 3001);
	check(wal_decrypt_page(dec, lsn, XLOG_BLCKSZ) &&
		  memcmp(dec + SizeOfXLogShortPHD, page + SizeOfXLogShortPHD,
				 XLOG_BLCKSZ - SizeOfXLogShortPHD) == 0,
		  "WAL: a page stitched from two writes at any byte decrypts");

	/* another epoch, another keystream */
	wal_encrypt_page(page, enc2, lsn, 8, XLOG_BLCKSZ);
	check(memcmp(enc + 100, enc2 + 100, 64) != 0,
		  "WAL: a new epoch gives new ciphertext for the same bytes");
	/* another LSN, another keystream */
	make_wal_page(page, lsn + XLOG_BLCKSZ);
	wal_encrypt_page(page, enc2, lsn + XLOG_BLCKSZ, 7, XLOG_BLCKSZ);
	check(memcmp(enc + 100, enc2 + 100, 64) != 0,
		  "WAL: the next page gets other keystream");
	/* unencrypted pages pass */
	make_wal_page(page, lsn);
	memcpy(dec, page, XLOG_BLCKSZ);
	check(wal_decrypt_page(dec, lsn, XLOG_BLCKSZ) && memcmp(dec, page, XLOG_BLCKSZ) == 0,
		  "WAL: a page without the flag is taken as it is");
}

/*
 * A page written again and again as it fills (XLogWrite's partial page):
 * with the partial-page cache, every write is byte for byte what
 * wal_encrypt_page() gives, also when the cache must not apply.
 */
static void
test_wal_partial_page_cache(void)
{
	static WALPartialPage last;
	unsigned char key[64];
	char		page[XLOG_BLCKSZ],
				cached[XLOG_BLCKSZ],
				plain[XLOG_BLCKSZ];
	XLogRecPtr	lsn = UINT64CONST(0x5000000);
	bool		same = true;
	int			steps = 0;

	memset(key, 0x3c, sizeof(key));
	wal_encryption_set_key(PAGE_SLOT_A, DATA_ENCRYPTION_AES256, key);
	make_wal_page(page, lsn);
	for (int valid = SizeOfXLogLongPHD + 1; valid <= XLOG_BLCKSZ; valid += 37 + valid % 101)
	{
		wal_encrypt_page_cached(&last, page, cached, lsn, 9, PAGE_SLOT_A, valid);
		wal_encrypt_page(page, plain, lsn, 9, valid);
		same &= memcmp(cached, plain, XLOG_BLCKSZ) == 0;
		steps++;
	}
	check(same && steps > 50, "WAL cache: %d growing writes of one page equal uncached encryption", steps);

	wal_encrypt_page_cached(&last, page, cached, lsn + XLOG_BLCKSZ, 9, PAGE_SLOT_A, 3000);
	wal_encrypt_page_cached(&last, page, cached, lsn + XLOG_BLCKSZ, 10, PAGE_SLOT_A, 4000);
	wal_encrypt_page(page, plain, lsn + XLOG_BLCKSZ, 10, 4000);
	check(memcmp(cached, plain, XLOG_BLCKSZ) == 0, "WAL cache: another epoch re-encrypts the page");

	page[100] ^= 1;				/* the prefix differs from what was cached */
	wal_encrypt_page_cached(&last, page, cached, lsn + XLOG_BLCKSZ, 10, PAGE_SLOT_A, 5000);
	wal_encrypt_page(page, plain, lsn + XLOG_BLCKSZ, 10, 5000);
	check(memcmp(cached, plain, XLOG_BLCKSZ) == 0, "WAL cache: another plaintext re-encrypts the page");

	wal_encrypt_page_cached(&last, page, cached, lsn + XLOG_BLCKSZ, 10, PAGE_SLOT_A, 2000);
	wal_encrypt_page(page, plain, lsn + XLOG_BLCKSZ, 10, 2000);
	check(memcmp(cached, plain, XLOG_BLCKSZ) == 0, "WAL cache: a shorter write than cached is encrypted afresh");
}

/*
 * The two WAL key slots of an online rotation: a page under slot B says so
 * in its clear header and decrypts only with slot B's key; the partial-page
 * cache never hands one slot's ciphertext to the other.
 */
/*
 * An online encryption (design 9.7): WAL before the switch in clear, the
 * state file's "enable" and slru_done round-trip, and a cipher context
 * made for one cipher re-keyed for the other (the dormant placeholders)
 */
static void
test_online_encryption(void)
{
	PageKeysState state,
				back;
	char text[	PAGE_KEYS_MAX_FILE];
	size_t		len;
	KeyringError err;
	unsigned char key[64],
				other[64],
				tweak[16] = {0},
				page[512],
				out1[512],
				out2[512];
	XtsCipher  *placeholder,
			   *fresh;

	check(wal_keys_write_slot(1, 0, true, false, UINT64CONST(0x5000000)) == PAGE_SLOT_CLEAR &&
		  wal_keys_write_slot(1, UINT64CONST(0x6000000), true, false, UINT64CONST(0x5FFE000)) == PAGE_SLOT_CLEAR &&
		  wal_keys_write_slot(1, UINT64CONST(0x6000000), true, false, UINT64CONST(0x6000000)) == PAGE_SLOT_A &&
		  wal_keys_write_slot(1, UINT64CONST(0x6000000), false, false, UINT64CONST(0x5FFE000)) == PAGE_SLOT_A &&
		  wal_keys_write_slot(2, 0, false, false, UINT64CONST(0x5000000)) == PAGE_SLOT_A,
		  "enable: WAL in clear before the switch, slot A from it; a rotation as before");
	check(wal_keys_write_slot(2, 0, false, true, UINT64CONST(0x5000000)) == PAGE_SLOT_B &&
		  wal_keys_write_slot(2, UINT64CONST(0x6000000), false, true, UINT64CONST(0x5FFE000)) == PAGE_SLOT_B &&
		  wal_keys_write_slot(2, UINT64CONST(0x6000000), false, true, UINT64CONST(0x6000000)) == PAGE_SLOT_CLEAR,
		  "disable: WAL under the current slot before the switch, in clear from it");

	page_keys_initial(&state);
	state.serial = 3;
	state.operation = PAGE_KEYS_OP_ENABLE;
	state.marked = true;
	state.slru_done = 5;
	len = page_keys_format(&state, text, sizeof(text));
	check(page_keys_parse(text, len, "test", &back, &err) &&
		  back.operation == PAGE_KEYS_OP_ENABLE && back.slru_done == 5 && back.marked &&
		  wal_switch_pending(&back),
		  "enable: the state file keeps the operation and the SLRUs done");
	state.operation = PAGE_KEYS_OP_NONE;
	len = page_keys_format(&state, text, sizeof(text));
	check(strstr(text, "slru_done") == NULL && page_keys_parse(text, len, "test", &back, &err) &&
		  !wal_switch_pending(&back),
		  "enable: no slru_done line once done (files of older versions stay valid)");

	for (int i = 0; i < 64; i++)
	{
		key[i] = (unsigned char) i;
		other[i] = (unsigned char) (200 - i);
	}
	memset(page, 0x33, sizeof(page));
	placeholder = xts_cipher_create(DATA_ENCRYPTION_AES256, other);
	fresh = xts_cipher_create(DATA_ENCRYPTION_AES128, key);
	check(placeholder && fresh && xts_cipher_rekey(placeholder, DATA_ENCRYPTION_AES128, key) &&
		  xts_encrypt(placeholder, tweak, page, out1, sizeof(page)) &&
		  xts_encrypt(fresh, tweak, page, out2, sizeof(page)) &&
		  memcmp(out1, out2, sizeof(page)) == 0,
		  "enable: an aes-256 placeholder re-keyed for aes-128 encrypts as a fresh aes-128 context");
	xts_cipher_free(placeholder);
	xts_cipher_free(fresh);
}

static void
test_wal_key_slots(void)
{
	static WALPartialPage last;
	unsigned char key_a[64],
				key_b[64];
	char		page[XLOG_BLCKSZ],
				enc_a[XLOG_BLCKSZ],
				enc_b[XLOG_BLCKSZ],
				dec[XLOG_BLCKSZ];
	XLogRecPtr	lsn = UINT64CONST(0x7000000);

	memset(key_a, 0x11, sizeof(key_a));
	memset(key_b, 0x22, sizeof(key_b));
	wal_encryption_set_key(PAGE_SLOT_A, DATA_ENCRYPTION_AES256, key_a);
	wal_encryption_set_key(PAGE_SLOT_B, DATA_ENCRYPTION_AES256, key_b);
	make_wal_page(page, lsn);
	wal_encrypt_page_cached(NULL, page, enc_a, lsn, 5, PAGE_SLOT_A, XLOG_BLCKSZ);
	wal_encrypt_page_cached(NULL, page, enc_b, lsn, 5, PAGE_SLOT_B, XLOG_BLCKSZ);
	check(wal_page_key_slot(enc_a) == PAGE_SLOT_A && wal_page_key_slot(enc_b) == PAGE_SLOT_B &&
		  (((XLogPageHeaderData *) enc_b)->xlp_info & (XLP_ENCRYPTED | XLP_WAL_KEY_B)) ==
		  (XLP_ENCRYPTED | XLP_WAL_KEY_B),
		  "WAL slots: a page under slot B carries XLP_WAL_KEY_B in clear");
	check(memcmp(enc_a + 100, enc_b + 100, 64) != 0,
		  "WAL slots: the two keys give other ciphertext");
	memcpy(dec, enc_b, XLOG_BLCKSZ);
	check(wal_decrypt_page(dec, lsn, XLOG_BLCKSZ) &&
		  memcmp(dec + SizeOfXLogShortPHD, page + SizeOfXLogShortPHD,
				 XLOG_BLCKSZ - SizeOfXLogShortPHD) == 0 &&
		  ((XLogPageHeaderData *) dec)->xlp_info == ((XLogPageHeaderData *) page)->xlp_info,
		  "WAL slots: slot B's page decrypts with its key, both flags cleared");
	memcpy(dec, enc_a, XLOG_BLCKSZ);
	check(wal_decrypt_page(dec, lsn, XLOG_BLCKSZ) &&
		  memcmp(dec + SizeOfXLogShortPHD, page + SizeOfXLogShortPHD,
				 XLOG_BLCKSZ - SizeOfXLogShortPHD) == 0,
		  "WAL slots: slot A's page beside it decrypts with slot A's key");

	/* the cache: the same page, epoch and plaintext under the other slot */
	wal_encrypt_page_cached(&last, page, dec, lsn, 5, PAGE_SLOT_A, 3000);
	wal_encrypt_page_cached(&last, page, dec, lsn, 5, PAGE_SLOT_B, XLOG_BLCKSZ);
	check(memcmp(dec, enc_b, XLOG_BLCKSZ) == 0,
		  "WAL slots: the partial-page cache is not reused across slots");

	/* slot B's key gone (dropped): its pages do not decrypt, A's still do */
	ctr_cipher_free(wal_encryption_cipher(PAGE_SLOT_B));
	wal_encryption_set_cipher(PAGE_SLOT_B, NULL);
	memcpy(dec, enc_b, XLOG_BLCKSZ);
	check(!wal_decrypt_page(dec, lsn, XLOG_BLCKSZ) &&
		  memcmp(dec, enc_b, XLOG_BLCKSZ) == 0,
		  "WAL slots: without slot B's key its page is refused, left as it was");
	memcpy(dec, enc_a, XLOG_BLCKSZ);
	check(wal_decrypt_page(dec, lsn, XLOG_BLCKSZ), "WAL slots: slot A still decrypts");
}

/* the temporary files' tweak layout, byte by byte as it was first written */
static void
test_xts_sequential_tweaks(void)
{
	unsigned char tweaks[16 * 37],
				expected[16 * 37];
	uint64		nonce = UINT64CONST(0x0123456789ABCDEF),
				first = UINT64CONST(0xFEDCBA9876543210) - 5;

	for (int i = 0; i < 37; i++)
		for (int j = 0; j < 8; j++)
		{
			expected[16 * i + j] = (unsigned char) (nonce >> (8 * j));
			expected[16 * i + 8 + j] = (unsigned char) ((first + i) >> (8 * j));
		}
	xts_sequential_tweaks(tweaks, nonce, first, 37);
	check(memcmp(tweaks, expected, sizeof(tweaks)) == 0,
		  "temporary files: sequential tweaks are (nonce, unit), both little-endian");
}

static void
test_xts_properties(void)
{
	unsigned char key[64],
				tweak[16] = {0}, page[8176], enc[8176], dec[8176];
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
	unsigned char kek[KEK_LEN],
				wrong[KEK_LEN];
	unsigned char file[4096],
				copy[4096];
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
		const size_t first = 68;	/* format 2's header */
		size_t		second = first + 12 + ((file[first + 8] << 24) | (file[first + 9] << 16) | (file[first + 10] << 8) | file[first + 11]);
		unsigned char id0[4];
		pg_crc32c	crc;

		memcpy(id0, file + first, 4);
		memcpy(file + first, file + second, 4);
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

/*
 * Format 2's KEK fingerprint against a vector computed independently
 * (Python: hmac.new(bytes(range(32)), b"pgcipher KEK fingerprint",
 * hashlib.sha256).hexdigest()[:16]), and format 1 key rings still read
 */
static void
test_keyring_fingerprint_and_format_1(void)
{
	Keyring		ring,
				back;
	KeyringError err;
	unsigned char kek[KEK_LEN];
	unsigned char fp[KEK_FINGERPRINT_LEN];
	unsigned char file[4096],
				v1[4096];
	char		hex[2 * KEK_FINGERPRINT_LEN + 16];
	size_t		len;
	pg_crc32c	crc;

	for (int i = 0; i < KEK_LEN; i++)
		kek[i] = i;
	check(kek_fingerprint(kek, KEK_LEN, fp), "KEK fingerprint computed");
	keyring_format_fingerprint(fp, hex);
	check(strcmp(hex, "7be136a4a62b7fb2") == 0, "KEK fingerprint matches the vector: %s", hex);

	make_ring(&ring, DATA_ENCRYPTION_AES256);
	ring.wrapped_at = 1795000000;
	len = keyring_serialize(&ring, kek, file, sizeof(file), &err);
	check(len == 348, "an aes-256 key ring of format 2 is 348 bytes (%zu)", len);
	check(keyring_parse(file, len, kek, &back, &err) && back.version == 2 &&
		  memcmp(back.kek_fingerprint, fp, KEK_FINGERPRINT_LEN) == 0 &&
		  back.wrapped_at == 1795000000,
		  "format 2 records the fingerprint and the time of wrapping");

	/* format 1: the same without bytes 48..63, version 1, its own CRC */
	memcpy(v1, file, 48);
	memcpy(v1 + 48, file + 64, len - 64 - 4);
	v1[8] = 0;
	v1[9] = 0;
	v1[10] = 0;
	v1[11] = 1;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, v1, len - 16 - 4);
	FIN_CRC32C(crc);
	v1[len - 20] = crc >> 24;
	v1[len - 19] = crc >> 16;
	v1[len - 18] = crc >> 8;
	v1[len - 17] = crc;
	check(keyring_parse(v1, len - 16, kek, &back, &err) && back.version == 1 &&
		  memcmp(back.keys, ring.keys, sizeof(ring.keys)) == 0 && back.wrapped_at == 0,
		  "a format 1 key ring (332 bytes) still reads, with the same keys");
}

static void
test_kek_from_output(void)
{
	Keyring		ring;
	KeyringError err;
	unsigned char kek[KEK_LEN],
				kek2[KEK_LEN];
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
		  err.kind == KEYRING_ERR_COMMAND_OUTPUT &&
		  strcmp(err.message, "encryption key command printed a control character") == 0 &&
		  strcmp(err.detail, "Byte 1 of the output is a control character.") == 0,
		  "a control character is named with its position: %s", err.detail);
	check(!kek_from_command_output("caf\xc3\xa9 au lait", 14, &ring, true, kek, &err) &&
		  strcmp(err.message, "encryption key command printed a byte that is not ASCII") == 0 &&
		  strcmp(err.detail, "Byte 4 of the output is not an ASCII character.") == 0,
		  "a byte that is not ASCII is named with its position: %s", err.detail);
	check(!kek_from_command_output("two\nlines", 9, &ring, true, kek, &err) &&
		  strcmp(err.message, "encryption key command printed more than one line") == 0 &&
		  strcmp(err.detail, "Byte 4 of the output ends a line, and more follows.") == 0,
		  "two lines are refused as such: %s", err.detail);
	check(!kek_from_command_output("short", 5, &ring, true, kek, &err),
		  "a passphrase under 8 characters is refused at initdb");
	ring.kek_source = KEK_SOURCE_HEX;
	check(!kek_from_command_output("not hex at all", 14, &ring, false, kek, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_OUTPUT &&
		  strcmp(err.message, "encryption key command printed a key that is too short") == 0 &&
		  strcmp(err.detail, "The cluster was initialized with a hexadecimal key of 64 digits; the command printed 14 characters.") == 0,
		  "a hex-key cluster: too short: %s", err.detail);
	{
		char		long_hex[66];
		char		not_hex[65];

		memset(long_hex, 'a', 65);
		long_hex[65] = '\0';
		check(!kek_from_command_output(long_hex, 65, &ring, false, kek, &err) &&
			  strcmp(err.message, "encryption key command printed a key that is too long") == 0,
			  "a hex-key cluster: too long: %s", err.detail);
		memset(not_hex, 'a', 64);
		not_hex[63] = 'g';
		not_hex[64] = '\0';
		check(!kek_from_command_output(not_hex, 64, &ring, false, kek, &err) &&
			  strcmp(err.message, "encryption key command printed a key with a character that is not a hexadecimal digit") == 0 &&
			  strcmp(err.detail, "Character 64 of the 64 is not a hexadecimal digit (0-9, a-f, A-F).") == 0,
			  "a hex-key cluster: 64 characters, one not hexadecimal: %s", err.detail);
		check(strstr(err.detail, "aaaa") == NULL && strstr(err.message, "aaaa") == NULL &&
			  strstr(err.hint, "aaaa") == NULL,
			  "no message quotes the output");
	}
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


/*
 * The unwrap mode (design 9.4) with a stand-in for a KMS: a shell script
 * whose "wrap" maps the hexadecimal digits to other letters and whose
 * "unwrap" maps them back.  It is no cipher: it exercises the protocol
 * (action appended, stdin, one line out), the key ring of format 3 and the
 * checks made on what comes back; the kms suite runs the same code against
 * OpenBao's Transit and a KMIP server.
 */
static void
write_script(const char *path, const char *body)
{
	FILE	   *f = fopen(path, "w");

	if (f == NULL)
	{
		perror(path);
		exit(2);
	}
	fprintf(f, "#!/bin/sh\n%s", body);
	fclose(f);
	chmod(path, 0700);
}

static void
test_unwrap_mode(void)
{
	char		dir[] = "/tmp/pgcipher_unwrap_XXXXXX";
	char		kms[MAXPGPATH],
				liar[MAXPGPATH],
				path[MAXPGPATH],
				cmd[MAXPGPATH + 64];
	Keyring		ring,
				back;
	KeyringError err;
	unsigned char file[4096];
	size_t		len;

	if (mkdtemp(dir) == NULL)
	{
		perror("mkdtemp");
		exit(2);
	}
	snprintf(kms, sizeof(kms), "%s/kms.sh", dir);
	write_script(kms,
				 "read l\n"
				 "case \"$1\" in\n"
				 "wrap) echo \"w1:$(echo \"$l\" | tr 0-9a-f g-v)\" ;;\n"
				 "unwrap) echo \"${l#w1:}\" | tr g-v 0-9a-f ;;\n"
				 "*) echo \"no action\" >&2; exit 2 ;;\n"
				 "esac\n");
	/* unwraps to other keys: a digit of the first key changed */
	snprintf(liar, sizeof(liar), "%s/liar.sh", dir);
	write_script(liar,
				 "read l\n"
				 "case \"$1\" in\n"
				 "wrap) echo \"w1:$(echo \"$l\" | tr 0-9a-f g-v)\" ;;\n"
				 "unwrap) echo \"${l#w1:}\" | tr g-v 0-9a-f | sed -e 's/^\\(.\\{60\\}\\)f/\\10/; t' -e 's/^\\(.\\{60\\}\\)./\\1f/' ;;\n"
				 "esac\n");

	check(keyring_create(dir, DATA_ENCRYPTION_AES256, kms, 5, KEYRING_MODE_UNWRAP,
						 NULL, &ring, &err),
		  "unwrap mode: initdb's key ring made through \"wrap\": %s", err.message);
	snprintf(path, sizeof(path), "%s/%s", dir, KEYRING_FILE);
	check(keyring_read_file(path, file, sizeof(file), &len, &err) &&
		  file[11] == KEYRING_VERSION_UNWRAP && file[19] == KEK_SOURCE_UNWRAP &&
		  memcmp(file + 72, "w1:", 3) == 0,
		  "unwrap mode: format 3, key source 3, the wrapped form as the command printed it");
	check(keyring_parse(file, len, NULL, &back, &err) && back.nkeys == 3 &&
		  back.kek_source == KEK_SOURCE_UNWRAP &&
		  memcmp(back.kek_fingerprint, ring.kek_fingerprint, KEK_FINGERPRINT_LEN) == 0,
		  "unwrap mode: the header parses without any key, the data keys' fingerprint in it");
	check(!keyring_parse(file, len, (const unsigned char *) "0123456789abcdef0123456789abcdef", &back, &err),
		  "unwrap mode: no KEK opens a key ring of format 3");
	check(keyring_load(dir, kms, 5, &back, &err) && !back.from_next &&
		  memcmp(back.keys, ring.keys, sizeof(ring.keys)) == 0,
		  "unwrap mode: \"unwrap\" gives back the data keys: %s", err.message);

	check(!keyring_load(dir, liar, 5, &back, &err) && err.kind == KEYRING_ERR_WRONG_KEY &&
		  strstr(err.message, "unwrap\" gave data keys that are not this key ring's") &&
		  strstr(err.detail, "The key ring records data keys with fingerprint "),
		  "unwrap mode: other keys are refused by their fingerprint: %s", err.detail);
	check(!keyring_load(dir, "echo zz; :", 5, &back, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_OUTPUT &&
		  strstr(err.message, "printed a character that is not a hexadecimal digit"),
		  "unwrap mode: output that is not hexadecimal keys is refused: %s", err.message);
	check(!keyring_load(dir, "exit 1; :", 5, &back, &err) &&
		  err.kind == KEYRING_ERR_COMMAND_FAILED &&
		  strcmp(err.message, "encryption key command \"exit 1; : unwrap\" failed") == 0,
		  "unwrap mode: a failing command names the action: %s", err.message);

	/* a wrap whose unwrap does not give back what it was given */
	snprintf(cmd, sizeof(cmd), "%s/other", dir);
	mkdir(cmd, 0700);
	check(!keyring_create(cmd, DATA_ENCRYPTION_AES256, liar, 5, KEYRING_MODE_UNWRAP,
						  NULL, &back, &err) &&
		  strstr(err.message, "did not give back the data keys"),
		  "unwrap mode: a command whose unwrap does not undo its wrap is refused at once: %s",
		  err.message);

	/* keyring.next of the other mode: a rotation that changed the mode */
	{
		const char *hexcmd = "echo 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
		unsigned char next[4096];
		size_t		nextlen;

		back = ring;
		nextlen = keyring_wrap_under_command(&back, hexcmd, 5, KEYRING_MODE_KEK,
											 next, sizeof(next), &err);
		snprintf(path, sizeof(path), "%s/%s", dir, KEYRING_NEXT_FILE);
		check(nextlen > 0 && keyring_write_file(path, next, nextlen, &err),
			  "rotation from unwrap to kek: keyring.next written");
		check(keyring_load(dir, hexcmd, 5, &back, &err) && back.from_next &&
			  memcmp(back.keys, ring.keys, sizeof(ring.keys)) == 0,
			  "the KEK command opens keyring.next of the other mode: %s", err.message);
		check(keyring_load(dir, kms, 5, &back, &err) && !back.from_next,
			  "the unwrap command still opens the key ring");
		/* and the other way round */
		snprintf(cmd, sizeof(cmd), "%s/%s", dir, KEYRING_FILE);
		check(keyring_rename(path, cmd, &err), "keyring.next installed");
		back = ring;
		nextlen = keyring_wrap_under_command(&back, kms, 5, KEYRING_MODE_UNWRAP,
											 next, sizeof(next), &err);
		check(nextlen > 0 && keyring_write_file(path, next, nextlen, &err),
			  "rotation from kek to unwrap: keyring.next written");
		check(keyring_load(dir, kms, 5, &back, &err) && back.from_next &&
			  memcmp(back.keys, ring.keys, sizeof(ring.keys)) == 0,
			  "the unwrap command opens keyring.next of the other mode: %s", err.message);
	}

	/* the file's own checks */
	snprintf(path, sizeof(path), "%s/%s", dir, KEYRING_NEXT_FILE);
	check(keyring_read_file(path, file, sizeof(file), &len, &err), "read format 3");
	file[80] ^= 1;
	check(!keyring_parse(file, len, NULL, &back, &err) && err.kind == KEYRING_ERR_FILE_CORRUPT,
		  "format 3: a changed byte of the wrapped form fails the CRC");
	file[80] ^= 1;
	file[19] = KEK_SOURCE_HEX;
	check(!keyring_parse(file, len, NULL, &back, &err) && err.kind == KEYRING_ERR_FILE_CORRUPT,
		  "format 3 with another key source is corrupt");
	file[19] = KEK_SOURCE_UNWRAP;
	check(!keyring_parse(file, len - 1, NULL, &back, &err) && err.kind == KEYRING_ERR_FILE_CORRUPT,
		  "format 3 truncated is corrupt");

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/*
 * The known-output corpus.  The data is a fixed pseudo-random stream
 * (xorshift64, test data only); keys are fixed patterns per cipher.
 */
static uint64 corpus_state;

static void
corpus_fill(unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
	{
		corpus_state ^= corpus_state << 13;
		corpus_state ^= corpus_state >> 7;
		corpus_state ^= corpus_state << 17;
		buf[i] = (unsigned char) (corpus_state >> 24);
	}
}

#define KNOWN_OUTPUT_KINDS 5
static const char *const known_output_kinds[KNOWN_OUTPUT_KINDS] = {
	"xts-pages", "xts-lengths", "ctr-offsets", "wal-pages", "xts16-temp"
};

/* SHA-256 (hex) of what the cipher use `kind` produces on the corpus */
static void
known_output(int cipher, const char *kind, char *hex)
{
	static unsigned char buf[XLOG_BLCKSZ * 2],
				out[XLOG_BLCKSZ * 2];
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN],
				tweak[XTS_TWEAK_LEN],
				digest[PG_SHA256_DIGEST_LENGTH];
	pg_cryptohash_ctx *sha = pg_cryptohash_create(PG_SHA256);
	XtsCipher  *xts;

	corpus_state = UINT64CONST(0x9E3779B97F4A7C15) + cipher;
	for (int i = 0; i < (int) sizeof(key); i++)
		key[i] = (unsigned char) (i * 29 + cipher * 101 + 3);
	xts = xts_cipher_create(cipher, key);
	if (sha == NULL || pg_cryptohash_init(sha) < 0 || xts == NULL)
	{
		fprintf(stderr, "could not set up the known-output corpus\n");
		exit(2);
	}

	if (strcmp(kind, "xts-pages") == 0)
	{
		/*
		 * relation pages as pagecrypt.c encrypts them, and the same corpus
		 * run through decryption (the read path's transform on arbitrary
		 * bytes; the round trip is checked elsewhere)
		 */
		for (int i = 0; i < 64; i++)
		{
			int			len = 8192 - 16;

			corpus_fill(buf, len);
			page_encryption_tweak(tweak, 16384 + i * 7, i % 4, i * 1000 + i);
			xts_encrypt(xts, tweak, buf, out, len);
			pg_cryptohash_update(sha, out, len);
			xts_decrypt(xts, tweak, buf, out, len);
			pg_cryptohash_update(sha, out, len);
		}
	}
	else if (strcmp(kind, "xts-lengths") == 0)
	{
		/* every length class, incl. ciphertext stealing (len % 16 != 0) */
		for (int len = 16; len <= 1200; len += 7)
		{
			corpus_fill(buf, len);
			domain_encryption_tweak(tweak, len, len * 3, 's');
			xts_encrypt(xts, tweak, buf, out, len);
			pg_cryptohash_update(sha, out, len);
		}
	}
	else if (strcmp(kind, "ctr-offsets") == 0)
	{
		CtrCipher  *ctr = ctr_cipher_create(cipher, key);

		for (int i = 0; i < 200; i++)
		{
			int			len = 1 + (i * 97) % 9000;
			uint64		offset = (uint64) i * 12345 + i % 16;

			corpus_fill(buf, len);
			ctr_crypt_at(ctr, UINT64CONST(0xABCDEF) * i, offset, buf, out, len);
			pg_cryptohash_update(sha, out, len);
		}
		ctr_cipher_free(ctr);
	}
	else if (strcmp(kind, "wal-pages") == 0)
	{
		XLogRecPtr	lsn = UINT64CONST(0x42000000);

		wal_encryption_set_key(PAGE_SLOT_A, cipher, key);
		for (int i = 0; i < 16; i++, lsn += XLOG_BLCKSZ)
		{
			/* records of a fixed pattern; the epoch and length vary */
			make_wal_page((char *) buf, lsn);
			/* the digests were recorded on 17; 18's WAL has another magic */
			((XLogPageHeaderData *) buf)->xlp_magic = 0xD116;
			wal_encrypt_page((char *) buf, (char *) out, lsn, 3 + i,
							 SizeOfXLogLongPHD + (i * 613) % (XLOG_BLCKSZ - SizeOfXLogLongPHD));
			pg_cryptohash_update(sha, out, XLOG_BLCKSZ);
		}
	}
	else if (strcmp(kind, "xts16-temp") == 0)
	{
		/*
		 * XTS with 16-byte data units (what temporary files used until
		 * 2026-11, and their short form still does), block by block
		 */
		int			nblocks = sizeof(buf) / 16;
		bool		ok = true;

		for (int round = 0; round < 2; round++)
		{
			corpus_fill(buf, sizeof(buf));
			for (int b = 0; b < nblocks && ok; b++)
			{
				domain_encryption_tweak(tweak, 77, b + round * nblocks, 't');
				ok = round == 0 ?
					xts_encrypt(xts, tweak, buf + b * 16, buf + b * 16, 16) :
					xts_decrypt(xts, tweak, buf + b * 16, buf + b * 16, 16);
			}
			pg_cryptohash_update(sha, buf, sizeof(buf));
		}
		if (!ok)
		{
			fprintf(stderr, "could not compute the known output xts16-temp\n");
			exit(2);
		}
	}
	pg_cryptohash_final(sha, digest, sizeof(digest));
	pg_cryptohash_free(sha);
	xts_cipher_free(xts);
	for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		sprintf(hex + 2 * i, "%02x", digest[i]);
}

static void
print_known_outputs(void)
{
	char		hex[2 * PG_SHA256_DIGEST_LENGTH + 1];

	printf("# SHA-256 of each cipher use on test_cipher's fixed corpus, written by\n"
		   "# `test_cipher --known-outputs` linked with %s\n",
		   OpenSSL_version(OPENSSL_VERSION));
	for (int c = DATA_ENCRYPTION_AES128; c <= DATA_ENCRYPTION_AES256; c++)
		for (int k = 0; k < KNOWN_OUTPUT_KINDS; k++)
		{
			known_output(c, known_output_kinds[k], hex);
			printf("%s %s = %s\n", data_encryption_cipher_name(c), known_output_kinds[k], hex);
		}
}

static void
test_known_outputs(const char *dir)
{
	FILE	   *f = open_vectors(dir, "outputs.txt");
	char		line[256],
				name[32],
				kind[32],
				expected[80],
				hex[2 * PG_SHA256_DIGEST_LENGTH + 1];
	int			n = 0;

	while (fgets(line, sizeof(line), f))
	{
		int			c;

		if (line[0] == '#' || sscanf(line, "%31s %31s = %79s", name, kind, expected) != 3)
			continue;
		c = data_encryption_cipher_from_name(name);
		known_output(c, kind, hex);
		check(strcmp(hex, expected) == 0, "known output %s %s unchanged", name, kind);
		n++;
	}
	fclose(f);
	check(n == 2 * KNOWN_OUTPUT_KINDS, "%d known outputs checked", n);
}

int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--known-outputs") == 0)
	{
		print_known_outputs();
		return 0;
	}
	if (argc != 2)
	{
		fprintf(stderr, "usage: %s VECTOR_DIR | --known-outputs\n", argv[0]);
		return 2;
	}
	printf("# linked with %s\n", OpenSSL_version(OPENSSL_VERSION));
	test_xts_vectors(argv[1]);
	test_kwp_vectors(argv[1]);
	test_xts_properties();
	test_ctr_vectors();
	test_xts_sequential_tweaks();
	test_wal_pages();
	test_wal_partial_page_cache();
	test_wal_key_slots();
	test_online_encryption();
	test_known_outputs(argv[1]);
	test_keyring_format();
	test_keyring_fingerprint_and_format_1();
	test_kek_from_output();
	test_key_command();
	test_unwrap_mode();
	printf("1..%d\n", tests_run);
	printf("# %d passed, %d failed\n", tests_run - tests_failed, tests_failed);
	return tests_failed == 0 ? 0 : 1;
}
