/*-------------------------------------------------------------------------
 *
 * data_encryption.c
 *	  pgcipher: AES-XTS, AES-CTR, AES key wrap with padding and scrypt via
 *	  OpenSSL EVP, and the tweaks and page rule built on them.
 *
 * Used by the server (pages, SLRUs, WAL, temporary files, key ring) and by
 * frontend programs (initdb, pg_upgrade, pg_waldump, pg_rewind).  The page
 * rule (page_crypt(): which bytes of a page are encrypted, with which
 * tweak, and that zero pages stay zeros) is here so that the server
 * (storage/encryption/pagecrypt.c) and pg_upgrade share one
 * implementation; when pages are written and checksummed is theirs.  The
 * key file format lives in keyring.c.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/common/data_encryption.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FRONTEND
#include "postgres.h"
#else
#include "postgres_fe.h"
#endif

#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/hmac.h>

#include "common/data_encryption.h"
#include "common/hashfn.h"
#include "port/pg_bswap.h"

struct XtsCipher
{
	EVP_CIPHER_CTX *enc;		/* key schedule for encryption */
	EVP_CIPHER_CTX *dec;		/* key schedule for decryption */
	int			cipher;			/* DATA_ENCRYPTION_* it is set up for */
};

const char *
data_encryption_cipher_name(int cipher)
{
	switch (cipher)
	{
		case DATA_ENCRYPTION_OFF:
			return "off";
		case DATA_ENCRYPTION_AES128:
			return "aes-128";
		case DATA_ENCRYPTION_AES256:
			return "aes-256";
	}
	return "unknown";
}

/* Returns -1 for a name we do not know */
int
data_encryption_cipher_from_name(const char *name)
{
	if (pg_strcasecmp(name, "aes-128") == 0 || pg_strcasecmp(name, "aes128") == 0)
		return DATA_ENCRYPTION_AES128;
	if (pg_strcasecmp(name, "aes-256") == 0 || pg_strcasecmp(name, "aes256") == 0)
		return DATA_ENCRYPTION_AES256;
	if (pg_strcasecmp(name, "off") == 0)
		return DATA_ENCRYPTION_OFF;
	return -1;
}

/* Length of one AES key for the cipher; 0 when not encrypted */
int
data_encryption_key_length(int cipher)
{
	switch (cipher)
	{
		case DATA_ENCRYPTION_AES128:
			return 16;
		case DATA_ENCRYPTION_AES256:
			return 32;
	}
	return 0;
}

static const EVP_CIPHER *
xts_evp_cipher(int cipher)
{
	switch (cipher)
	{
		case DATA_ENCRYPTION_AES128:
			return EVP_aes_128_xts();
		case DATA_ENCRYPTION_AES256:
			return EVP_aes_256_xts();
	}
	return NULL;
}

/*
 * Set up an XTS cipher for the given key (two AES keys, 2 * key length
 * bytes).  Returns NULL if OpenSSL refuses, e.g. for two identical halves.
 * Allocated with malloc so the caller's memory context does not matter.
 */
XtsCipher *
xts_cipher_create(int cipher, const unsigned char *key)
{
	const EVP_CIPHER *evp = xts_evp_cipher(cipher);
	XtsCipher  *xts;

	if (evp == NULL)
		return NULL;
	xts = malloc(sizeof(XtsCipher));
	if (xts == NULL)
		return NULL;
	xts->cipher = cipher;
	xts->enc = EVP_CIPHER_CTX_new();
	xts->dec = EVP_CIPHER_CTX_new();
	if (xts->enc == NULL || xts->dec == NULL ||
		EVP_EncryptInit_ex(xts->enc, evp, NULL, key, NULL) != 1 ||
		EVP_DecryptInit_ex(xts->dec, evp, NULL, key, NULL) != 1)
	{
		xts_cipher_free(xts);
		return NULL;
	}
	return xts;
}

/*
 * Replace the key of a cipher set up by xts_cipher_create(), keeping its
 * contexts: the page code re-keys a slot when a rotation brings it a key,
 * possibly inside a critical section (18's read completion), where it must
 * not allocate.  Only a change of cipher (a cluster encrypted online, whose
 * processes started with a placeholder: design 9.7) makes OpenSSL allocate
 * (with malloc), once per process.
 */
bool
xts_cipher_rekey(XtsCipher *xts, int cipher, const unsigned char *key)
{
	const EVP_CIPHER *evp = NULL;

	if (cipher != xts->cipher)
	{
		if ((evp = xts_evp_cipher(cipher)) == NULL)
			return false;
		xts->cipher = cipher;
	}
	return EVP_EncryptInit_ex(xts->enc, evp, NULL, key, NULL) == 1 &&
		EVP_DecryptInit_ex(xts->dec, evp, NULL, key, NULL) == 1;
}

void
xts_cipher_free(XtsCipher *xts)
{
	if (xts == NULL)
		return;
	EVP_CIPHER_CTX_free(xts->enc);	/* clears the key schedule */
	EVP_CIPHER_CTX_free(xts->dec);
	free(xts);
}

/*
 * Encrypt or decrypt one data unit of len bytes (at least 16) under tweak.
 * in and out may be the same buffer.  Only the tweak is reset per call.
 */
static bool
xts_crypt(EVP_CIPHER_CTX *ctx, int enc, const unsigned char *tweak,
		  const unsigned char *in, unsigned char *out, int len)
{
	int			outl;

	if (EVP_CipherInit_ex(ctx, NULL, NULL, NULL, tweak, enc) != 1)
		return false;
	if (EVP_CipherUpdate(ctx, out, &outl, in, len) != 1 || outl != len)
		return false;
	return true;
}

bool
xts_encrypt(XtsCipher *xts, const unsigned char *tweak,
			const unsigned char *in, unsigned char *out, int len)
{
	return xts_crypt(xts->enc, 1, tweak, in, out, len);
}

bool
xts_decrypt(XtsCipher *xts, const unsigned char *tweak,
			const unsigned char *in, unsigned char *out, int len)
{
	return xts_crypt(xts->dec, 0, tweak, in, out, len);
}

/*
 * AES-CTR, for the WAL.  One context, key schedule set once; every call
 * sets the IV (a 128-bit big-endian counter block) and may start skip
 * bytes (0..15) into the first block, so any byte range can be handled.
 */
struct CtrCipher
{
	EVP_CIPHER_CTX *ctx;
	int			cipher;			/* DATA_ENCRYPTION_* it is set up for */
};

static const EVP_CIPHER *
ctr_evp_cipher(int cipher)
{
	switch (cipher)
	{
		case DATA_ENCRYPTION_AES128:
			return EVP_aes_128_ctr();
		case DATA_ENCRYPTION_AES256:
			return EVP_aes_256_ctr();
	}
	return NULL;
}

CtrCipher *
ctr_cipher_create(int cipher, const unsigned char *key)
{
	const EVP_CIPHER *evp = ctr_evp_cipher(cipher);
	CtrCipher  *ctr;

	if (evp == NULL)
		return NULL;
	ctr = malloc(sizeof(CtrCipher));
	if (ctr == NULL)
		return NULL;
	ctr->cipher = cipher;
	ctr->ctx = EVP_CIPHER_CTX_new();
	if (ctr->ctx == NULL ||
		EVP_EncryptInit_ex(ctr->ctx, evp, NULL, key, NULL) != 1)
	{
		ctr_cipher_free(ctr);
		return NULL;
	}
	return ctr;
}

/*
 * A new key for a CTR context, in place (the WAL key slots: walcrypt.c);
 * as xts_cipher_rekey(), only a change of cipher allocates
 */
bool
ctr_cipher_rekey(CtrCipher *ctr, int cipher, const unsigned char *key)
{
	const EVP_CIPHER *evp = NULL;

	if (cipher != ctr->cipher)
	{
		if ((evp = ctr_evp_cipher(cipher)) == NULL)
			return false;
		ctr->cipher = cipher;
	}
	return EVP_EncryptInit_ex(ctr->ctx, evp, NULL, key, NULL) == 1;
}

void
ctr_cipher_free(CtrCipher *ctr)
{
	if (ctr == NULL)
		return;
	EVP_CIPHER_CTX_free(ctr->ctx);
	free(ctr);
}

/* Encryption and decryption are the same operation; in may equal out */
bool
ctr_crypt(CtrCipher *ctr, const unsigned char *iv, int skip,
		  const unsigned char *in, unsigned char *out, int len)
{
	static const unsigned char zeros[16];
	unsigned char discard[16];
	int			outl;

	Assert(skip >= 0 && skip < 16);
	/* a new IV does not reset the position inside the keystream block */
	if (EVP_EncryptInit_ex(ctr->ctx, NULL, NULL, NULL, iv) != 1 ||
		EVP_CIPHER_CTX_set_num(ctr->ctx, 0) != 1)
		return false;
	if (skip > 0 &&
		EVP_EncryptUpdate(ctr->ctx, discard, &outl, zeros, skip) != 1)
		return false;
	if (EVP_EncryptUpdate(ctr->ctx, out, &outl, in, len) != 1 || outl != len)
		return false;
	return true;
}

/*
 * The byte stream of a file: len bytes at byte offset under counter block
 * (nonce, offset / 16), both big-endian.  Each (nonce, offset) must be
 * written once only; callers draw a nonce per file or file generation.
 */
bool
ctr_crypt_at(CtrCipher *ctr, uint64 nonce, uint64 offset,
			 const unsigned char *in, unsigned char *out, int len)
{
	uint64		iv[2];

	iv[0] = pg_hton64(nonce);
	iv[1] = pg_hton64(offset / 16);
	return ctr_crypt(ctr, (const unsigned char *) iv, offset % 16, in, out, len);
}

/*
 * The XTS tweaks of n consecutive data units of a file: unit first + i
 * gets (nonce, first + i), both little-endian (temporary files).
 */
void
xts_sequential_tweaks(unsigned char *tweaks, uint64 nonce, uint64 first, int n)
{
#ifdef WORDS_BIGENDIAN
	nonce = pg_bswap64(nonce);
#endif
	for (int i = 0; i < n; i++)
	{
		uint64		k = first + i;

#ifdef WORDS_BIGENDIAN
		k = pg_bswap64(k);
#endif
		memcpy(tweaks + 16 * i, &nonce, 8);
		memcpy(tweaks + 16 * i + 8, &k, 8);
	}
}

static const EVP_CIPHER *
kwp_evp_cipher(int keklen)
{
	switch (keklen)
	{
		case 16:
			return EVP_aes_128_wrap_pad();
		case 24:
			return EVP_aes_192_wrap_pad();
		case 32:
			return EVP_aes_256_wrap_pad();
	}
	return NULL;
}

static bool
kwp_crypt(int enc, const unsigned char *kek, int keklen,
		  const unsigned char *in, int inlen,
		  unsigned char *out, int *outlen)
{
	const EVP_CIPHER *evp = kwp_evp_cipher(keklen);
	EVP_CIPHER_CTX *ctx;
	int			len1 = 0,
				len2 = 0;
	bool		ok = false;

	if (evp == NULL || inlen <= 0)
		return false;
	ctx = EVP_CIPHER_CTX_new();
	if (ctx == NULL)
		return false;
	EVP_CIPHER_CTX_set_flags(ctx, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
	if (EVP_CipherInit_ex(ctx, evp, NULL, kek, NULL, enc) == 1 &&
		EVP_CipherUpdate(ctx, out, &len1, in, inlen) == 1 &&
		EVP_CipherFinal_ex(ctx, out + len1, &len2) == 1)
	{
		*outlen = len1 + len2;
		ok = true;
	}
	EVP_CIPHER_CTX_free(ctx);
	return ok;
}

/* out must have room for KWP_WRAPPED_LEN(inlen) bytes */
bool
aes_key_wrap_pad(const unsigned char *kek, int keklen,
				 const unsigned char *in, int inlen,
				 unsigned char *out, int *outlen)
{
	return kwp_crypt(1, kek, keklen, in, inlen, out, outlen);
}

/*
 * Returns false when the integrity check fails: wrong key-encryption key or
 * damaged input.  out must have room for inlen bytes.
 */
bool
aes_key_unwrap_pad(const unsigned char *kek, int keklen,
				   const unsigned char *in, int inlen,
				   unsigned char *out, int *outlen)
{
	if (inlen < 16 || inlen % 8 != 0)
		return false;
	return kwp_crypt(0, kek, keklen, in, inlen, out, outlen);
}

bool
derive_key_scrypt(const char *passphrase, size_t passlen,
				  const unsigned char *salt, size_t saltlen,
				  uint32 log2_n, uint32 r, uint32 p,
				  unsigned char *key, size_t keylen)
{
	uint64		n;
	uint64		maxmem;

	if (log2_n < 10 || log2_n > 24 || r == 0 || r > 64 || p == 0 || p > 16)
		return false;
	n = UINT64CONST(1) << log2_n;
	/* scrypt needs 128 * r * (n + p + 2) bytes; allow that much */
	maxmem = 128 * (uint64) r * (n + p + 2) + 1024 * 1024;
	return EVP_PBE_scrypt(passphrase, passlen, salt, saltlen,
						  n, r, p, maxmem, key, keylen) == 1;
}

void
data_encryption_wipe(void *ptr, size_t len)
{
	OPENSSL_cleanse(ptr, len);
}

/*
 * OpenSSL's reason for the latest failure, as a sentence for an error
 * detail; the error queue is cleared.
 */
const char *
data_encryption_error_reason(void)
{
	static char detail[256];
	unsigned long code = ERR_peek_last_error();
	const char *reason = code ? ERR_reason_error_string(code) : NULL;

	ERR_clear_error();
	if (code == 0)
		return "OpenSSL reported no error.";
	snprintf(detail, sizeof(detail), "OpenSSL reported: %s.",
			 reason ? reason : "an unknown error");
	return detail;
}

/* The first 8 bytes of HMAC-SHA256(key, label) */
static bool
hmac_fingerprint(const unsigned char *key, int keylen, const char *label,
				 unsigned char *fp)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;

	if (HMAC(EVP_sha256(), key, keylen, (const unsigned char *) label,
			 strlen(label), mac, &maclen) == NULL || maclen < KEK_FINGERPRINT_LEN)
		return false;
	memcpy(fp, mac, KEK_FINGERPRINT_LEN);
	OPENSSL_cleanse(mac, sizeof(mac));
	return true;
}

/*
 * A key-encryption key's fingerprint: the first 8 bytes of
 * HMAC-SHA256(KEK, "pgcipher KEK fingerprint"), so that messages can say
 * which KEK a key ring expects without revealing anything about it.
 */
bool
kek_fingerprint(const unsigned char *kek, int keklen, unsigned char *fp)
{
	return hmac_fingerprint(kek, keklen, "pgcipher KEK fingerprint", fp);
}

/*
 * The data keys' fingerprint, for a key ring kept by an unwrap command
 * (design 9.4): HMAC-SHA256 keyed by the serialized data keys over "pgcipher
 * data keys fingerprint", cut to 8 bytes.  The key ring records it, so that
 * whatever the command gives back is checked before it is used.
 */
bool
data_keys_fingerprint(const unsigned char *keys, int keyslen, unsigned char *fp)
{
	return hmac_fingerprint(keys, keyslen, "pgcipher data keys fingerprint", fp);
}

/*
 * The XTS tweak of a relation page: where the page lives (block number,
 * relation file number, fork), never the database or the tablespace, so
 * that files copied as they are stay readable.  An init fork is encrypted
 * as the main fork it is copied over at the end of recovery.  Shared by
 * the server (pagecrypt.c) and pg_upgrade, which must agree byte for byte.
 */
void
page_encryption_tweak(unsigned char *tweak, uint32 relnumber, int forknum,
					  uint32 blocknum)
{
	if (forknum == 3)			/* INIT_FORKNUM */
		forknum = 0;			/* MAIN_FORKNUM */

	memset(tweak, 0, XTS_TWEAK_LEN);
	tweak[0] = blocknum;
	tweak[1] = blocknum >> 8;
	tweak[2] = blocknum >> 16;
	tweak[3] = blocknum >> 24;
	tweak[4] = relnumber;
	tweak[5] = relnumber >> 8;
	tweak[6] = relnumber >> 16;
	tweak[7] = relnumber >> 24;
	tweak[8] = (unsigned char) forknum;
}

/*
 * The XTS tweak of units that are not relation pages: (a, b, domain),
 * little-endian; relation tweaks have 0 in the last byte, so no other
 * domain can meet them.
 */
void
domain_encryption_tweak(unsigned char *tweak, uint64 a, uint32 b, char domain)
{
	memset(tweak, 0, XTS_TWEAK_LEN);
	for (int i = 0; i < 8; i++)
		tweak[i] = (unsigned char) (a >> (8 * i));
	for (int i = 0; i < 4; i++)
		tweak[8 + i] = (unsigned char) (b >> (8 * i));
	tweak[15] = (unsigned char) domain;
}

/* An SLRU page's tweak: its page number and a hash of the SLRU's directory */
void
slru_encryption_tweak(unsigned char *tweak, const char *dir, int64 pageno)
{
	domain_encryption_tweak(tweak, (uint64) pageno,
							hash_bytes((const unsigned char *) dir, strlen(dir)),
							'S');
}

/*
 * Whether a relation page is all zeros, as a page that was never written
 * is: pd_upper (bytes 14-15) is zero on such a page, so a written page
 * fails at once
 */
bool
page_is_all_zeros(const char *page)
{
	if (page[14] != 0 || page[15] != 0)
		return false;
	return data_encryption_is_zero(page, BLCKSZ);
}

/*
 * The page rule (design section 4), the one implementation the server
 * (pagecrypt.c) and pg_upgrade share: a page of all zeros stays zeros in
 * clear; any other keeps its first PAGE_ENCRYPTION_OFFSET bytes in clear
 * and has the rest encrypted (or decrypted) with AES-XTS under its
 * location's tweak.  in and out may be the same buffer.  Checksums are the
 * caller's.  Returns false if OpenSSL fails.
 */
bool
page_crypt(XtsCipher *xts, bool encrypt, uint32 relnumber, int forknum,
		   uint32 blocknum, const char *in, char *out)
{
	unsigned char tweak[XTS_TWEAK_LEN];
	const unsigned char *from = (const unsigned char *) in + PAGE_ENCRYPTION_OFFSET;
	unsigned char *to = (unsigned char *) out + PAGE_ENCRYPTION_OFFSET;

	if (page_is_all_zeros(in))
	{
		if (out != in)
			memcpy(out, in, BLCKSZ);
		return true;
	}
	if (out != in)
		memcpy(out, in, PAGE_ENCRYPTION_OFFSET);
	page_encryption_tweak(tweak, relnumber, forknum, blocknum);
	return encrypt ?
		xts_encrypt(xts, tweak, from, to, BLCKSZ - PAGE_ENCRYPTION_OFFSET) :
		xts_decrypt(xts, tweak, from, to, BLCKSZ - PAGE_ENCRYPTION_OFFSET);
}

static uint16
stored_flags(const char *page)
{
	uint16		flags;

	memcpy(&flags, page + PAGE_FLAGS_OFFSET, sizeof(flags));
	return flags;
}

static void
store_flags(char *page, uint16 flags)
{
	memcpy(page + PAGE_FLAGS_OFFSET, &flags, sizeof(flags));
}

/*
 * The key slot a page read from disk is under (design 4.2): its mark, or,
 * unmarked, clear once the cluster's pages are all marked and slot A
 * before (pages pgcipher wrote before it marked them).  All-zero pages are
 * the caller's: they are never decrypted.
 */
int
page_stored_slot(const char *page, bool unmarked_is_clear)
{
	uint16		flags = stored_flags(page);

	if (flags & PAGE_MARK_ENCRYPTED)
		return (flags & PAGE_MARK_SLOT_B) ? PAGE_SLOT_B : PAGE_SLOT_A;
	return unmarked_is_clear ? PAGE_SLOT_CLEAR : PAGE_SLOT_A;
}

/* Mark a page about to be written as under slot (after page_crypt()) */
void
page_set_stored_slot(char *page, int slot)
{
	uint16		flags = stored_flags(page) & ~PAGE_MARK_BITS;

	if (slot != PAGE_SLOT_CLEAR)
		flags |= PAGE_MARK_ENCRYPTED | (slot == PAGE_SLOT_B ? PAGE_MARK_SLOT_B : 0);
	store_flags(page, flags);
}

/* The page as PostgreSQL knows it in memory: no mark */
void
page_clear_mark(char *page)
{
	store_flags(page, stored_flags(page) & ~PAGE_MARK_BITS);
}

/*
 * Whether a unit is all zeros: what mdzeroextend(), holes in files and the
 * pg_resetwal recipes leave, which every module stores as zeros in clear.
 * Shared by the SLRU code and pg_upgrade, which must agree.
 */
bool
data_encryption_is_zero(const char *buf, size_t len)
{
	/* the first byte zero, and every byte equal to the next: memcmp's speed */
	return len == 0 || (buf[0] == 0 && memcmp(buf, buf + 1, len - 1) == 0);
}
