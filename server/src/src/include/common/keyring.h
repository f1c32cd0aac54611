/*-------------------------------------------------------------------------
 *
 * keyring.h
 *	  pgcipher: the key ring — data keys wrapped by a key-encryption key
 *	  (KEK) — and how the KEK is obtained from encryption_key_command.
 *
 * Shared by initdb (creates the key ring) and the server (loads it at
 * start-up); later the tools that need the key use it too.  Functions here
 * never ereport: they fill a KeyringError that the caller turns into its
 * own kind of message, so a failure is always explained and never crashes.
 * The file format is described in docs/design.md ("Key file").
 *
 * src/include/common/keyring.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef KEYRING_H
#define KEYRING_H

#include "common/data_encryption.h"

/* Where the key ring lives, relative to the data directory */
#define KEYRING_DIR			"pg_encryption"
#define KEYRING_FILE		"pg_encryption/keyring"
/* A key rotation's new key ring, until the rotation completes (design 9.1) */
#define KEYRING_NEXT_FILE	"pg_encryption/keyring.next"
/*
 * The key command initdb and the latest rotation used, for when
 * encryption_key_command is not set (design 8): Debian's pg_upgradecluster
 * replaces a new cluster's configuration with its old one's
 */
#define KEYRING_COMMAND_FILE	"pg_encryption/command"

#define KEYRING_MAGIC		"PGCIPHKR"
#define KEYRING_VERSION		2	/* 2 adds the KEK fingerprint and time */
#define KEYRING_VERSION_UNWRAP	3	/* the data keys wrapped by a command */

/* How the KEK is obtained from the key command's output */
#define KEK_SOURCE_HEX			1	/* 64 hex digits: the KEK itself */
#define KEK_SOURCE_PASSPHRASE	2	/* anything else printable: scrypt */
/* No KEK: the command wraps and unwraps the data keys (a KMS; design 9.4) */
#define KEK_SOURCE_UNWRAP		3

/*
 * The two ways a key command keys a cluster: it prints the KEK
 * (KEYRING_MODE_KEK), or it is given the data keys to wrap and the
 * wrapped form to unwrap, with "wrap" or "unwrap" appended
 * (KEYRING_MODE_UNWRAP), so that the KEK never leaves the KMS.
 */
#define KEYRING_MODE_KEK		0
#define KEYRING_MODE_UNWRAP		1

/* Longest wrapped form an unwrap command may print for the key ring */
#define KEYRING_MAX_WRAPPED		3072

#define KEK_LEN				32	/* AES-256 key wrap */
#define KEYRING_SALT_LEN	16

/* scrypt cost used by initdb for passphrases (stored in the file) */
#define KEYRING_SCRYPT_LOG2_N	16	/* N = 65536: 64 MB, ~0.2 s */
#define KEYRING_SCRYPT_R		8
#define KEYRING_SCRYPT_P		1

/* Purposes of the data keys; each is two AES keys long (XTS-sized) */
#define KEY_RELATION		1	/* relation files (all forks) */
#define KEY_WAL				2	/* write-ahead log */
#define KEY_TEMPFILE		3	/* temporary and spill files (design 7) */
/*
 * Page key slots (design 4.2, 9.6): slot A is KEY_RELATION, slot B this
 * one; an online rotation of the data keys writes the next generation's
 * key into the slot the current one does not use.  SLRU pages and
 * two-phase state files stay under the key initdb drew, kept as KEY_SLRU
 * once a rotation frees slot A (before, KEY_RELATION is that key).
 */
#define KEY_RELATION_B		4
#define KEY_SLRU			5
/*
 * WAL key slots (design 7, 9.6): slot A is KEY_WAL, slot B this one; each
 * rotation of the data keys moves new WAL to the other slot from a segment
 * boundary, and the old WAL key stays until the DBA drops it or the next
 * rotation replaces it.
 */
#define KEY_WAL_B			6
/*
 * Temporary-file key slots (design 7, 9.6): slot A is KEY_TEMPFILE, slot B
 * this one (without it, KEY_TEMPFILE); a rotation of the data keys moves
 * new temporary files, spill files and pg_stat_statements' texts of the
 * next start to the other slot, at most once per start of the server.
 */
#define KEY_TEMPFILE_B		7
#define KEYRING_MAX_KEYS	8

/* Longest output accepted from the key command */
#define KEY_COMMAND_MAX_OUTPUT	1024

/* encryption_key_command_timeout's default, seconds (initdb's too) */
#define KEY_COMMAND_TIMEOUT_DEFAULT	30

/* What went wrong; the server maps each to its own SQLSTATE */
typedef enum KeyringErrorKind
{
	KEYRING_OK = 0,
	KEYRING_ERR_COMMAND_FAILED, /* could not run, or non-zero exit */
	KEYRING_ERR_COMMAND_TIMEOUT,	/* did not finish in time */
	KEYRING_ERR_COMMAND_OUTPUT, /* printed something unusable */
	KEYRING_ERR_FILE_MISSING,	/* no key ring file */
	KEYRING_ERR_FILE_CORRUPT,	/* bad magic, version, size or CRC */
	KEYRING_ERR_WRONG_KEY,		/* KEK does not unwrap the data keys */
	KEYRING_ERR_IO,				/* reading or writing failed */
	KEYRING_ERR_CRYPTO			/* OpenSSL failed (should not happen) */
} KeyringErrorKind;

/*
 * Messages quote the key command, which a KMS client makes long (paths,
 * addresses, flags): room for it, so that "... failed" is not cut off.
 */
typedef struct KeyringError
{
	KeyringErrorKind kind;
	char		message[1024];
	char		detail[1024];
	char		hint[256];
} KeyringError;

typedef struct KeyringKey
{
	uint32		id;				/* KEY_RELATION, ... */
	uint32		len;			/* bytes of key */
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];
} KeyringKey;

/* The key ring in memory: header fields and unwrapped data keys */
typedef struct Keyring
{
	uint32		cipher;			/* DATA_ENCRYPTION_AES128/256 */
	uint32		kek_source;		/* KEK_SOURCE_* */
	uint32		scrypt_log2_n;
	uint32		scrypt_r;
	uint32		scrypt_p;
	unsigned char salt[KEYRING_SALT_LEN];
	uint32		version;		/* of the file it was read from */
	unsigned char kek_fingerprint[KEK_FINGERPRINT_LEN]; /* zeros in v1; the data
														 * keys' in v3 */
	int64		wrapped_at;		/* Unix time of wrapping; 0 in v1 */
	bool		from_next;		/* keyring_load() used KEYRING_NEXT_FILE */
	uint32		nkeys;
	KeyringKey	keys[KEYRING_MAX_KEYS];
} Keyring;

/* Filling a KeyringError (keyring.c and its frontend callers) */
extern void keyring_set_error(KeyringError *err, KeyringErrorKind kind,
							  const char *hint, const char *fmt,...) pg_attribute_printf(4, 5);
extern void keyring_set_detail(KeyringError *err, const char *fmt,...) pg_attribute_printf(2, 3);

/* encryption_key_command_timeout's default, in seconds */
#define KEY_COMMAND_DEFAULT_TIMEOUT_S	30

/* Running the key command and turning its output into a KEK */
extern bool run_key_command(const char *command, int timeout_s,
							char *out, size_t outsize, size_t *outlen,
							KeyringError *err);
extern int	keyring_mode_from_name(const char *name);
extern const char *keyring_mode_name(int mode);
extern bool kek_from_command_output(const char *out, size_t outlen,
									Keyring *ring, bool choose_source,
									unsigned char *kek, KeyringError *err);

/* The file format */
extern size_t keyring_serialize(const Keyring *ring, const unsigned char *kek,
								unsigned char *buf, size_t bufsize,
								KeyringError *err);
extern size_t keyring_serialize_unwrap(const Keyring *ring,
									   const char *wrapped, size_t wrappedlen,
									   unsigned char *buf, size_t bufsize,
									   KeyringError *err);
extern bool keyring_parse(const unsigned char *buf, size_t len,
						  const unsigned char *kek, Keyring *ring,
						  KeyringError *err);
extern bool keyring_read_file(const char *path, unsigned char *buf,
							  size_t bufsize, size_t *len, KeyringError *err);
extern bool keyring_write_file(const char *path, const unsigned char *buf,
							   size_t len, KeyringError *err);
extern bool keyring_write_temporary(const char *path, const unsigned char *buf,
									size_t len, KeyringError *err);
extern bool keyring_install_temporary(const char *path, KeyringError *err);
extern bool keyring_rename(const char *from, const char *to, KeyringError *err);
extern void keyring_format_fingerprint(const unsigned char *fp, char *out);

/* What initdb and the server call */
extern bool keyring_create(const char *datadir, int cipher,
						   const char *command, int timeout_s, int mode,
						   const Keyring *reuse, Keyring *ring,
						   KeyringError *err);
extern size_t keyring_wrap_under_command(Keyring *ring, const char *command,
										 int timeout_s, int mode,
										 unsigned char *file, size_t filesize,
										 KeyringError *err);
extern bool keyring_load(const char *datadir, const char *command,
						 int timeout_s, Keyring *ring, KeyringError *err);
extern bool keyring_open_bytes(const char *command, int timeout_s,
							   const unsigned char *file, size_t filelen,
							   Keyring *ring, KeyringError *err);
extern const KeyringKey *keyring_get_key(const Keyring *ring, uint32 id);
extern bool keyring_draw_key(KeyringKey *key, uint32 id, int cipher);
extern void keyring_put_key(Keyring *ring, const KeyringKey *key);
extern void keyring_remove_key(Keyring *ring, uint32 id);
extern bool keyring_record_command(const char *datadir, const char *command,
								   KeyringError *err);
extern bool keyring_recorded_command(const char *datadir, char *command,
									 size_t size);

#ifdef FRONTEND
/* The frontend programs' one way to report a key ring error */
extern void keyring_log_error(const KeyringError *err);

/* The cipher a data directory's key ring header names, OFF without one */
extern int	keyring_file_cipher(const char *datadir);

/*
 * A cluster's encryption_key_command and its timeout as its server runs
 * them, read with "postgres -C" (pg_upgrade, pg_waldump, pg_rewind)
 */
extern bool keyring_cluster_settings(const char *postgres, const char *configdir,
									 char **command, int *timeout_s,
									 KeyringError *err);
#endif

#endif							/* KEYRING_H */
