/*-------------------------------------------------------------------------
 *
 * data_encryption.h
 *	  pgcipher: the ciphers of transparent data encryption, shared by the
 *	  server and the frontend programs (initdb, pg_upgrade, pg_waldump,
 *	  pg_rewind, pg_resetwal).
 *
 * Everything here is a thin wrapper around OpenSSL's EVP interface: AES-XTS
 * for data pages, AES key wrap with padding (RFC 5649) for the data keys,
 * and scrypt for turning a passphrase into a key-encryption key.  No
 * primitive is implemented here.  See docs/design.md for why each was chosen.
 *
 * src/include/common/data_encryption.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DATA_ENCRYPTION_H
#define DATA_ENCRYPTION_H

/*
 * Cipher of a cluster, as stored in pg_control and in the key ring.  Zero
 * means "not encrypted", so a zeroed field reads as the stock behaviour.
 */
#define DATA_ENCRYPTION_OFF		0
#define DATA_ENCRYPTION_AES128	1
#define DATA_ENCRYPTION_AES256	2

/* Longest AES key we use, and the XTS key (two AES keys) built from it */
#define DATA_ENCRYPTION_MAX_KEY_LEN		32
#define DATA_ENCRYPTION_MAX_XTS_KEY_LEN	(2 * DATA_ENCRYPTION_MAX_KEY_LEN)

/* XTS tweaks are one AES block */
#define XTS_TWEAK_LEN	16

/* AES key wrap with padding adds one 8-byte integrity block, rounded up */
#define KWP_WRAPPED_LEN(len)	((((len) + 7) / 8) * 8 + 8)

extern const char *data_encryption_cipher_name(int cipher);
extern int	data_encryption_cipher_from_name(const char *name);
extern int	data_encryption_key_length(int cipher);

/*
 * An AES-XTS cipher with its key schedule set up once.  Encrypting a data
 * unit only resets the tweak: no allocation, no key expansion per call.
 */
typedef struct XtsCipher XtsCipher;

extern XtsCipher *xts_cipher_create(int cipher, const unsigned char *key);
extern void xts_cipher_free(XtsCipher *xts);
extern bool xts_encrypt(XtsCipher *xts, const unsigned char *tweak,
						const unsigned char *in, unsigned char *out, int len);
extern bool xts_decrypt(XtsCipher *xts, const unsigned char *tweak,
						const unsigned char *in, unsigned char *out, int len);

/*
 * Pages per SLRU segment file: access/slru.h's SLRU_PAGES_PER_SEGMENT, a
 * backend header, for pg_upgrade's transform of SLRU files (slrucrypt.c
 * checks at compile time that the two agree)
 */
#define ENCRYPTION_SLRU_PAGES_PER_SEGMENT	32

/* AES-CTR (WAL): a context with its key schedule, reused for every call */
typedef struct CtrCipher CtrCipher;

extern CtrCipher *ctr_cipher_create(int cipher, const unsigned char *key);
extern bool ctr_cipher_rekey(CtrCipher *ctr, int cipher,
							 const unsigned char *key);
extern void ctr_cipher_free(CtrCipher *ctr);
extern bool ctr_crypt(CtrCipher *ctr, const unsigned char *iv, int skip,
					  const unsigned char *in, unsigned char *out, int len);
extern bool ctr_crypt_at(CtrCipher *ctr, uint64 nonce, uint64 offset,
						 const unsigned char *in, unsigned char *out, int len);

/* The XTS tweaks of consecutive data units of a file (temporary files) */
extern void xts_sequential_tweaks(unsigned char *tweaks, uint64 nonce,
								  uint64 first, int n);

/* AES key wrap with padding (RFC 5649); keklen is 16, 24 or 32 */
extern bool aes_key_wrap_pad(const unsigned char *kek, int keklen,
							 const unsigned char *in, int inlen,
							 unsigned char *out, int *outlen);
extern bool aes_key_unwrap_pad(const unsigned char *kek, int keklen,
							   const unsigned char *in, int inlen,
							   unsigned char *out, int *outlen);

/* scrypt (RFC 7914) from OpenSSL: passphrase -> key-encryption key */
extern bool derive_key_scrypt(const char *passphrase, size_t passlen,
							  const unsigned char *salt, size_t saltlen,
							  uint32 log2_n, uint32 r, uint32 p,
							  unsigned char *key, size_t keylen);

/* Fingerprint of a key-encryption key, for messages (HMAC-SHA256, cut) */
#define KEK_FINGERPRINT_LEN	8
extern bool kek_fingerprint(const unsigned char *kek, int keklen,
							unsigned char *fp);

/* Fingerprint of the serialized data keys (a key ring kept by a KMS) */
extern bool data_keys_fingerprint(const unsigned char *keys, int keyslen,
								  unsigned char *fp);

/*
 * XTS tweaks, shared by the server and pg_upgrade: a relation page's
 * location, an SLRU page's, and other domains' (see design section 8)
 */
extern void page_encryption_tweak(unsigned char *tweak, uint32 relnumber,
								  int forknum, uint32 blocknum);
extern void domain_encryption_tweak(unsigned char *tweak, uint64 a, uint32 b,
									char domain);
extern void slru_encryption_tweak(unsigned char *tweak, const char *dir,
								  int64 pageno);

/* A unit of all zeros stays zeros in clear (see design section 4) */
extern bool data_encryption_is_zero(const char *buf, size_t len);

/*
 * Bytes at the start of every encrypted page that stay in clear: pd_lsn,
 * pd_checksum, pd_flags, pd_lower and pd_upper.  Tools that work without the
 * key (pg_checksums, base backup checksum checks, pg_rewind) need the LSN,
 * the checksum and PageIsNew(); see docs/design.md for what this leaks.
 */
#define PAGE_ENCRYPTION_OFFSET	16

/* The page rule, shared by the server and pg_upgrade (design section 4) */
extern bool page_is_all_zeros(const char *page);
extern bool page_crypt(XtsCipher *xts, bool encrypt, uint32 relnumber,
					   int forknum, uint32 blocknum, const char *in, char *out);

/*
 * The key a stored page is under, said in its clear pd_flags before it is
 * decrypted (design 4.2): two bits no PostgreSQL page in memory carries.
 * PAGE_MARK_ENCRYPTED says "encrypted", PAGE_MARK_SLOT_B which of the two
 * page key slots; a page without the mark is in clear once every page of
 * the cluster has been written marked, and under slot A before that (what
 * pgcipher wrote before marks).  The marks are set on the copy written and
 * cleared on the page read, so shared buffers never hold them.
 */
#define PAGE_MARK_ENCRYPTED		0x8000
#define PAGE_MARK_SLOT_B		0x4000
#define PAGE_MARK_BITS			(PAGE_MARK_ENCRYPTED | PAGE_MARK_SLOT_B)
#define PAGE_FLAGS_OFFSET		10	/* offsetof(PageHeaderData, pd_flags) */

#define PAGE_SLOT_CLEAR			(-1)	/* a stored page under no key */
#define PAGE_SLOT_A				0
#define PAGE_SLOT_B				1

extern int	page_stored_slot(const char *page, bool unmarked_is_clear);
extern void page_set_stored_slot(char *page, int slot);
extern void page_clear_mark(char *page);

/* Give an XTS cipher another key of its length, allocating nothing */
extern bool xts_cipher_rekey(XtsCipher *xts, int cipher,
							 const unsigned char *key);

/* Overwrite secret memory in a way the compiler cannot optimise away */
extern void data_encryption_wipe(void *ptr, size_t len);

/* OpenSSL's reason for the latest failure, for error details */
extern const char *data_encryption_error_reason(void);

#endif							/* DATA_ENCRYPTION_H */
