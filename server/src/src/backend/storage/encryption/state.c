/*-------------------------------------------------------------------------
 *
 * state.c
 *	  pgcipher: what the encryption modules read back, beneath all of them.
 *
 * encryption.c sits on top: it loads the keys at start-up and hands each
 * module its cipher.  The modules (keyrotation.c, pagecrypt.c, tempcrypt.c
 * and the others) never call up into it; what they share lives here: the
 * settings, the key ring's memory, the reporting of a key ring error, and
 * the growable buffers of the write paths.  So the files import only
 * downward: encryption.c -> modules -> state.c.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/mman.h>
#include <unistd.h>

#include "common/keyring.h"
#include "storage/encryption.h"
#include "utils/guc.h"
#include "utils/memutils.h"

/* GUC variables */
char	   *encryption_key_command = NULL;
int			encryption_key_command_timeout = KEY_COMMAND_DEFAULT_TIMEOUT_S;
int			data_encryption_cipher = DATA_ENCRYPTION_OFF;

/* Values of the read-only data_encryption setting */
const struct config_enum_entry data_encryption_options[] = {
	{"off", DATA_ENCRYPTION_OFF, false},
	{"aes-128", DATA_ENCRYPTION_AES128, false},
	{"aes-256", DATA_ENCRYPTION_AES256, false},
	{NULL, 0, false}
};

/* The unwrapped key ring, in memory kept out of core dumps */
static Keyring *keyring = NULL;

/*
 * The key ring's memory: a page of its own, excluded from core dumps and
 * locked where the kernel allows it.  Allocated on first use; encryption.c
 * loads the ring into it.
 */
Keyring *
DataEncryptionKeyringMemory(void)
{
	size_t		size = TYPEALIGN(sysconf(_SC_PAGESIZE), sizeof(Keyring));
	void	   *mem;

	if (keyring != NULL)
		return keyring;
	mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		ereport(FATAL,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not allocate memory for encryption keys: %m")));
#ifdef MADV_DONTDUMP
	(void) madvise(mem, size, MADV_DONTDUMP);
#endif
	(void) mlock(mem, size);	/* best effort: keep keys out of swap */
	keyring = (Keyring *) mem;
	return keyring;
}

/* The key ring loaded at start-up: what a key rotation re-wraps */
const Keyring *
DataEncryptionKeyring(void)
{
	Assert(keyring != NULL);
	return keyring;
}

/* The SQLSTATE of each KeyringErrorKind (design section 9) */
static int
keyring_error_code(KeyringErrorKind kind)
{
	switch (kind)
	{
		case KEYRING_ERR_COMMAND_FAILED:
		case KEYRING_ERR_COMMAND_TIMEOUT:
			return ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
		case KEYRING_ERR_COMMAND_OUTPUT:
			return ERRCODE_EXTERNAL_ROUTINE_INVOCATION_EXCEPTION;
		case KEYRING_ERR_FILE_MISSING:
			return ERRCODE_UNDEFINED_FILE;
		case KEYRING_ERR_FILE_CORRUPT:
			return ERRCODE_DATA_CORRUPTED;
		case KEYRING_ERR_WRONG_KEY:
			return ERRCODE_INVALID_PASSWORD;
		case KEYRING_ERR_IO:
			return ERRCODE_IO_ERROR;
		case KEYRING_OK:
		case KEYRING_ERR_CRYPTO:
			break;
	}
	return ERRCODE_INTERNAL_ERROR;
}

/*
 * The server's one way to report a key ring error (the frontend programs'
 * is keyring_report_error() in common/keyring.c): message, detail and hint
 * as keyring.c wrote them, with the SQLSTATE of their kind.
 */
void
ReportKeyringError(int elevel, const KeyringError *err)
{
	ereport(elevel,
			(errcode(keyring_error_code(err->kind)),
			 errmsg("%s", err->message),
			 err->detail[0] ? errdetail("%s", err->detail) : 0,
			 err->hint[0] ? errhint("%s", err->hint) : 0));
}

/*
 * A buffer kept for the life of the process, grown to at least len bytes
 * (its contents are not kept): the write paths reuse one instead of
 * allocating per I/O.  One over STATIC_BUFFER_KEEP (a huge row, an
 * extension's large write) is given back at the next call that needs no
 * more than that, so that a process does not keep its largest I/O's size.
 */
#define STATIC_BUFFER_KEEP	((size_t) 1024 * 1024)

void *
GrowStaticBuffer(void *buf, size_t *size, size_t len)
{
	size_t		newsize = Max(len, 2 * BLCKSZ + 64);
	void	   *grown;

	if (len <= *size && (*size <= STATIC_BUFFER_KEEP || len > STATIC_BUFFER_KEEP))
		return buf;
	/* allocate first: if that fails, the caller keeps a valid buffer */
	grown = MemoryContextAlloc(TopMemoryContext, newsize);
	if (buf != NULL)
		pfree(buf);
	*size = newsize;
	return grown;
}
