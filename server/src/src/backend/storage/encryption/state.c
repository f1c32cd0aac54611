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
 * The key ring and the page key state are shared by every process of the
 * server: one mapping each, MAP_SHARED and anonymous, made by the
 * postmaster before it forks anything (outside the main shared memory, so
 * that the keys stay out of core dumps and the state survives a crash
 * restart, which re-reads it).  An online rotation of the data keys
 * (datarotation.c) changes both while the server runs: the key ring under
 * a sequence counter, so that a reader never copies half a key; the state
 * under a spinlock, with the generation new pages are written under and
 * whether every page is marked in atomics that the page code reads per
 * page.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/keyring.h"
#include "common/page_keys.h"
#include "port/atomics.h"
#include "postmaster/postmaster.h"
#include "storage/encryption.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

/* GUC variables */
char	   *encryption_key_command = NULL;
int			encryption_key_command_timeout = KEY_COMMAND_DEFAULT_TIMEOUT_S;
int			data_encryption_cipher = DATA_ENCRYPTION_OFF;
int			encryption_min_free_space = ENCRYPTION_MIN_FREE_SPACE_DEFAULT;

/* Values of the read-only data_encryption setting */
const struct config_enum_entry data_encryption_options[] = {
	{"off", DATA_ENCRYPTION_OFF, false},
	{"aes-128", DATA_ENCRYPTION_AES128, false},
	{"aes-256", DATA_ENCRYPTION_AES256, false},
	{NULL, 0, false}
};

/* What every process of the server shares, beside the key ring */
typedef struct EncryptionShared
{
	pg_atomic_uint32 cipher;	/* DATA_ENCRYPTION_*: what I/O does now */
	pg_atomic_uint32 key_version;	/* odd while the key ring changes */
	pg_atomic_uint32 write_generation;	/* PageKeysState.generation */
	pg_atomic_uint32 marked;	/* PageKeysState.marked */
	pg_atomic_uint32 wal_generation;	/* PageKeysState.wal_generation */
	pg_atomic_uint64 wal_switch_lsn;	/* PageKeysState.wal_switch_lsn */
	pg_atomic_uint32 wal_from_clear;	/* WAL before the switch is in clear */
	pg_atomic_uint32 writes_clear;	/* decrypting: new pages, WAL from the
									 * switch and new files in clear */
	pg_atomic_uint32 slru_done; /* SLRUs encrypted (slrucrypt.c) */
	pg_atomic_uint32 changing;	/* an online encryption runs */
	pg_atomic_uint32 temp_generation;	/* PageKeysState.temp_generation; 0
										 * until the state is loaded */
	pg_atomic_uint32 temp_switched; /* it changed since the postmaster started */
	pg_atomic_uint32 temp_epoch[2]; /* how often each temporary-file key
									 * slot's key was replaced since the
									 * postmaster started (design 9.6) */
	slock_t		mutex;			/* protects what follows */
	PageKeysState state;		/* pg_encryption/pages as last written */
	DataRotationProgress progress;
} EncryptionShared;

/* The unwrapped key ring, in memory kept out of core dumps */
static Keyring *keyring = NULL;
static EncryptionShared *shared = NULL;

/*
 * Shared memory of its own, made before the postmaster forks: excluded
 * from core dumps and locked where the kernel allows it
 */
static void *
map_shared(size_t len, const char *what)
{
	size_t		size = TYPEALIGN(sysconf(_SC_PAGESIZE), len);
	void	   *mem;

	mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		ereport(FATAL,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("could not allocate memory for %s: %m", what)));
#ifdef MADV_DONTDUMP
	(void) madvise(mem, size, MADV_DONTDUMP);
#endif
	(void) mlock(mem, size);	/* best effort: keep keys out of swap */
	return mem;
}

/*
 * The key ring's memory, shared by every process of the server.  Allocated
 * on first use, with the page key state beside it; encryption.c loads the
 * ring into it and SetPageKeysState() the state.
 */
Keyring *
DataEncryptionKeyringMemory(void)
{
	if (keyring != NULL)
		return keyring;
	keyring = map_shared(sizeof(Keyring), "encryption keys");
	shared = map_shared(sizeof(EncryptionShared), "the page key state");
	pg_atomic_init_u32(&shared->cipher, data_encryption_cipher);
	pg_atomic_init_u32(&shared->key_version, 0);
	pg_atomic_init_u32(&shared->write_generation, 1);
	pg_atomic_init_u32(&shared->marked, 0);
	pg_atomic_init_u32(&shared->wal_generation, 1);
	pg_atomic_init_u64(&shared->wal_switch_lsn, 0);
	pg_atomic_init_u32(&shared->wal_from_clear, 0);
	pg_atomic_init_u32(&shared->writes_clear, 0);
	pg_atomic_init_u32(&shared->slru_done, PAGE_KEYS_SLRU_ALL);
	pg_atomic_init_u32(&shared->changing, 0);
	pg_atomic_init_u32(&shared->temp_generation, 0);
	pg_atomic_init_u32(&shared->temp_switched, 0);
	pg_atomic_init_u32(&shared->temp_epoch[PAGE_SLOT_A], 0);
	pg_atomic_init_u32(&shared->temp_epoch[PAGE_SLOT_B], 0);
	SpinLockInit(&shared->mutex);
	page_keys_initial(&shared->state);
	return keyring;
}

/* The key ring as loaded at start-up, before any change: encryption.c's */
const Keyring *
DataEncryptionKeyring(void)
{
	Assert(keyring != NULL);
	return keyring;
}

/*
 * A consistent copy of the key ring now: what a rotation of the KEK
 * re-wraps and a rotation of the data keys starts from
 */
void
CopyDataEncryptionKeyring(Keyring *out)
{
	uint32		v;

	Assert(keyring != NULL);
	for (;;)
	{
		v = pg_atomic_read_u32(&shared->key_version);
		if (v % 2 == 1)
		{
			pg_spin_delay();
			continue;
		}
		pg_read_barrier();
		memcpy(out, keyring, sizeof(Keyring));
		pg_read_barrier();
		if (pg_atomic_read_u32(&shared->key_version) == v)
			return;
	}
}

/*
 * The cipher the server's I/O encrypts with now, the same in every process:
 * "off" in a cluster not encrypted, until pg_enable_encryption() turns it
 * on (design 9.7).  Before the shared memory exists (bootstrap), the
 * setting's.
 */
int
DataEncryptionCipher(void)
{
	return shared ? (int) pg_atomic_read_u32(&shared->cipher) : data_encryption_cipher;
}

/* Turn encryption on or off for every process, from its next I/O on */
void
SetDataEncryptionCipher(int cipher)
{
	pg_write_barrier();
	pg_atomic_write_u32(&shared->cipher, (uint32) cipher);
}

/* The cipher of the key ring's keys, which the modules re-key with */
int
DataKeysCipher(void)
{
	return keyring ? (int) keyring->cipher : data_encryption_cipher;
}

/* Changes whenever the keys change: the modules re-key when it does */
uint32
DataKeysVersion(void)
{
	return shared ? pg_atomic_read_u32(&shared->key_version) : 0;
}

/*
 * Copy the key id into key (DATA_ENCRYPTION_MAX_XTS_KEY_LEN bytes); false
 * if the ring does not hold it.  Allocates nothing and never throws (18's
 * read completion calls it in a critical section): the ring is copied onto
 * the stack, under the sequence counter, and wiped.
 */
bool
CopyDataKey(uint32 id, unsigned char *key)
{
	Keyring		ring;
	const KeyringKey *k;
	bool		found;

	if (keyring == NULL)
		return false;
	CopyDataEncryptionKeyring(&ring);
	k = keyring_get_key(&ring, id);
	found = (k != NULL);
	if (found)
		memcpy(key, k->key, Min(k->len, DATA_ENCRYPTION_MAX_XTS_KEY_LEN));
	data_encryption_wipe(&ring, sizeof(ring));
	return found;
}

/*
 * A cipher context made at start-up, or a FATAL error with OpenSSL's
 * reason: a cluster that cannot set up its ciphers must not start
 */
void *
StartupCipher(void *cipher)
{
	if (cipher == NULL)
		ereport(FATAL,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not set up the data encryption ciphers"),
				 errdetail("%s", data_encryption_error_reason())));
	return cipher;
}

/*
 * At start-up, a key of either slot of one purpose (id_a, id_b), to make a
 * module's two cipher contexts with (they are re-keyed in place later); a
 * key ring with neither is damaged.  A cluster not encrypted has no keys:
 * its processes get random placeholders, replaced when
 * pg_enable_encryption() brings keys (design 9.7).
 */
void
CopyStartupSlotKey(uint32 id_a, uint32 id_b, const char *what,
				   unsigned char *key)
{
	if (CopyDataKey(id_a, key) || CopyDataKey(id_b, key))
		return;
	if (DataEncryptionCipher() == DATA_ENCRYPTION_OFF &&
		pg_strong_random(key, DATA_ENCRYPTION_MAX_XTS_KEY_LEN))
		return;
	ereport(FATAL,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("encryption key file \"%s\" holds no %s", KEYRING_FILE, what)));
}

/*
 * A module's one cipher, keyed from the shared key ring (the transaction
 * files' and the temporary files' modules): re-keyed in place when the
 * ring changed since it was last keyed.  Allocates nothing, unless the
 * cipher changes, and never throws; false when the ring holds no key for
 * it (a cluster not encrypted) or the cipher refused the key.
 */
bool
RefreshModuleCipher(ModuleCipher *mc)
{
	uint32		version = DataKeysVersion();
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];
	int			cipher = DataKeysCipher();

	if (likely(version == mc->seen))
		return mc->have;
	mc->have = (CopyDataKey(mc->id, key) ||
				(mc->fallback != 0 && CopyDataKey(mc->fallback, key))) &&
		(mc->xts ? xts_cipher_rekey(mc->xts, cipher, key) :
		 ctr_cipher_rekey(mc->ctr, cipher, key));
	data_encryption_wipe(key, sizeof(key));
	/* a ring that changed while we copied differs from it next time */
	mc->seen = version;
	return mc->have;
}

/*
 * Set up a module's cipher at start-up (the postmaster, children inherit
 * it), keyed with key id (else fallback) or a placeholder
 */
void
StartModuleCipher(ModuleCipher *mc, bool ctr, uint32 id, uint32 fallback)
{
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];
	int			cipher = DataKeysCipher();

	mc->id = id;
	mc->fallback = fallback;
	CopyStartupSlotKey(id, fallback ? fallback : id, "key for a module", key);
	if (cipher == DATA_ENCRYPTION_OFF)
		cipher = DATA_ENCRYPTION_AES256;	/* a placeholder's */
	if (ctr)
		mc->ctr = StartupCipher(ctr_cipher_create(cipher, key));
	else
		mc->xts = StartupCipher(xts_cipher_create(cipher, key));
	data_encryption_wipe(key, sizeof(key));
	mc->seen = DataKeysVersion() + 1;	/* odd: keyed at the first use */
	mc->have = false;
}

/*
 * A module's ciphers of the temporary-file key's two slots, set up at
 * start-up: slot B is keyed with slot A's key in a ring no rotation gave a
 * key of its own (design 9.6)
 */
void
StartTempKeyCiphers(TempKeyCiphers *tc, bool ctr)
{
	StartModuleCipher(&tc->slot[PAGE_SLOT_A], ctr, KEY_TEMPFILE, 0);
	StartModuleCipher(&tc->slot[PAGE_SLOT_B], ctr, KEY_TEMPFILE_B, KEY_TEMPFILE);
}

/*
 * The cipher of a slot, re-keyed if the ring changed; an error naming what
 * it was for when the ring holds no key for it
 */
ModuleCipher *
TempKeyCipher(TempKeyCiphers *tc, int slot, const char *what)
{
	ModuleCipher *mc = &tc->slot[slot == PAGE_SLOT_B ? PAGE_SLOT_B : PAGE_SLOT_A];

	if (!RefreshModuleCipher(mc))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("no key for %s", what),
				 errdetail("%s", data_encryption_error_reason())));
	return mc;
}

/* The key a temporary-file key slot reads with in ring, or NULL */
static const KeyringKey *
temp_slot_key(const Keyring *ring, int slot)
{
	const KeyringKey *k = keyring_get_key(ring, temp_keys_slot_key_id(slot));

	return (k == NULL && slot == PAGE_SLOT_B) ?
		keyring_get_key(ring, KEY_TEMPFILE) : k;
}

/*
 * Whether ring replaces the key that files under a temporary-file key slot
 * were written with in old (a slot that had no key held no file under one)
 */
static bool
temp_slot_key_replaced(const Keyring *old, const Keyring *ring, int slot)
{
	const KeyringKey *a = temp_slot_key(old, slot);
	const KeyringKey *b = temp_slot_key(ring, slot);

	return a != NULL &&
		(b == NULL || a->len != b->len || memcmp(a->key, b->key, a->len) != 0);
}

/*
 * Replace the keys every process uses by ring's (one writer at a time: the
 * caller holds the key ring directory's lock).  The file is written first:
 * memory never holds a key the ring on disk lacks, but for a moment the
 * file may hold one memory lacks, which nothing has used yet.
 */
void
ChangeDataKeys(const Keyring *ring)
{
	bool		replaced[2];

	for (int slot = PAGE_SLOT_A; slot <= PAGE_SLOT_B; slot++)
		replaced[slot] = temp_slot_key_replaced(keyring, ring, slot);
	pg_atomic_fetch_add_u32(&shared->key_version, 1);	/* odd: changing */
	pg_write_barrier();
	memcpy(keyring, ring, sizeof(Keyring));
	pg_write_barrier();
	/* before anyone can key a cipher with the new key (even version) */
	for (int slot = PAGE_SLOT_A; slot <= PAGE_SLOT_B; slot++)
		if (replaced[slot])
			pg_atomic_fetch_add_u32(&shared->temp_epoch[slot], 1);
	pg_atomic_fetch_add_u32(&shared->key_version, 1);
}

/* The generation new pages are written under, and the marks rule */
uint32
PageWriteGeneration(void)
{
	return shared ? pg_atomic_read_u32(&shared->write_generation) : 1;
}

/* The SLRUs encrypted: all of them but while a cluster is encrypted online */
uint32
SlrusConverted(void)
{
	return shared ? pg_atomic_read_u32(&shared->slru_done) : PAGE_KEYS_SLRU_ALL;
}

/*
 * Whether new pages and new files are encrypted: the cluster is, and is not
 * being decrypted (design 9.7)
 */
bool
NewWritesEncrypted(void)
{
	return DataEncryptionEnabled() &&
		!(shared && pg_atomic_read_u32(&shared->writes_clear) != 0);
}

/*
 * Whether this server holds data keys in memory: what reads a file
 * written encrypted needs, even once the cluster was decrypted (until the
 * next start)
 */
bool
DataKeysLoaded(void)
{
	return DataKeysCipher() != DATA_ENCRYPTION_OFF;
}

/*
 * Whether the cluster is not encrypted or being encrypted or decrypted
 * online: what the rules that must not change under a file's readers look
 * at (tempcrypt.c)
 */
bool
DataEncryptionChanging(void)
{
	return !DataEncryptionEnabled() ||
		(shared && pg_atomic_read_u32(&shared->changing) != 0);
}

bool
PagesMarked(void)
{
	return shared && pg_atomic_read_u32(&shared->marked) != 0;
}

/* The page key state, as pg_encryption/pages says it */
void
GetPageKeysState(PageKeysState *out)
{
	SpinLockAcquire(&shared->mutex);
	memcpy(out, &shared->state, sizeof(PageKeysState));
	SpinLockRelease(&shared->mutex);
}

/*
 * After pg_encryption/pages was written: every process writes the new
 * generation's pages from its next page on
 */
void
SetPageKeysState(const PageKeysState *state)
{
	uint32		old_temp;

	SpinLockAcquire(&shared->mutex);
	memcpy(&shared->state, state, sizeof(PageKeysState));
	SpinLockRelease(&shared->mutex);
	pg_atomic_write_u32(&shared->marked, state->marked ? 1 : 0);
	pg_atomic_write_u32(&shared->changing,
						state->operation >= PAGE_KEYS_OP_ENABLE ? 1 : 0);
	pg_atomic_write_u32(&shared->slru_done,
						state->operation == PAGE_KEYS_OP_ENABLE ? state->slru_done :
						page_keys_writes_clear(state->operation) ?
						PAGE_KEYS_SLRU_ALL & ~state->slru_done : PAGE_KEYS_SLRU_ALL);
	pg_write_barrier();
	pg_atomic_write_u32(&shared->write_generation, state->generation);
	old_temp = pg_atomic_exchange_u32(&shared->temp_generation,
									  state->temp_generation);
	if (old_temp != 0 && old_temp != state->temp_generation)
		pg_atomic_write_u32(&shared->temp_switched, 1);
	SetWALKeySwitch(state->wal_generation, state->wal_switch_lsn);
}

/*
 * The temporary-file key slot new temporary files, spill files and file
 * sets are written under (PAGE_SLOT_A or _B): each file keeps the one it
 * began with (tempcrypt.c, spillcrypt.c)
 */
int
TempWriteSlot(void)
{
	uint32		gen = shared ? pg_atomic_read_u32(&shared->temp_generation) : 0;

	return page_keys_slot(gen == 0 ? 1 : gen);
}

/*
 * The key epoch of a temporary-file key slot: how often its key was
 * replaced since the postmaster started.  Each temporary file, file set,
 * spill file and scratch directory records the epoch of its slot when it
 * begins, and is read only while the epoch is the same (CheckTempKeyEpoch).
 * On a primary a slot's key is replaced only when no file can be under it
 * (TempKeySwitchedSinceStart); a standby replays its primary's rotations,
 * which may replace the key of a slot its own queries still use.
 */
uint32
TempKeyEpoch(int slot)
{
	if (shared == NULL)
		return 0;
	return pg_atomic_read_u32(&shared->temp_epoch[slot == PAGE_SLOT_B ?
												  PAGE_SLOT_B : PAGE_SLOT_A]);
}

/*
 * A file begun under slot at epoch cannot be read any more once its key was
 * replaced: XTS and CTR tell no wrong key from the right one, so it is an
 * error, never its bytes decrypted under the new key.  A conflict with
 * recovery, in effect: the statement may be run again.
 */
void
CheckTempKeyEpoch(int slot, uint32 epoch, const char *what)
{
	if (likely(epoch == TempKeyEpoch(slot)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("%s was written under a temporary-file key that has since been replaced",
					what),
			 errdetail("A rotation of the data keys replaced the key of temporary-file key slot %c while the file was in use; on a standby, replaying its primary's rotations does.",
					   slot == PAGE_SLOT_B ? 'B' : 'A'),
			 errhint("Run the statement again.")));
}

/*
 * Whether the temporary-file key changed since the postmaster started: then
 * files under the other slot may still be open, and a rotation must not
 * draw a new key into it (datarotation.c).  The postmaster's start removed
 * every temporary and spill file (the flag outlives a crash restart, which
 * may leave temporary files: remove_temp_files_after_crash).
 */
bool
TempKeySwitchedSinceStart(void)
{
	return shared && pg_atomic_read_u32(&shared->temp_switched) != 0;
}

/*
 * The WAL key slot XLogWrite() encrypts the page at pageptr under
 * (walcrypt.c).  Its inputs change only under WALWriteLock (walkeys.c), so
 * every page is written under one slot, whichever process writes it.
 */
int
WALWriteSlot(XLogRecPtr pageptr)
{
	if (shared == NULL)
		return PAGE_SLOT_A;
	return wal_keys_write_slot(pg_atomic_read_u32(&shared->wal_generation),
							   pg_atomic_read_u64(&shared->wal_switch_lsn),
							   pg_atomic_read_u32(&shared->wal_from_clear) != 0,
							   pg_atomic_read_u32(&shared->writes_clear) != 0,
							   pageptr);
}

/* Whether the WAL half of a state differs from the one in effect */
bool
WALKeySwitchDiffers(const PageKeysState *state)
{
	return pg_atomic_read_u32(&shared->wal_generation) != state->wal_generation ||
		pg_atomic_read_u64(&shared->wal_switch_lsn) != state->wal_switch_lsn ||
		(pg_atomic_read_u32(&shared->wal_from_clear) != 0) !=
		(state->operation == PAGE_KEYS_OP_ENABLE) ||
		(pg_atomic_read_u32(&shared->writes_clear) != 0) !=
		page_keys_writes_clear(state->operation);
}

/*
 * The WAL half of the state, and the shared copy's fields.  While a
 * cluster is encrypted online, WAL before the switch is in clear.
 */
void
SetWALKeySwitch(uint32 wal_generation, XLogRecPtr switch_lsn)
{
	bool		from_clear;
	bool		to_clear;

	SpinLockAcquire(&shared->mutex);
	shared->state.wal_generation = wal_generation;
	shared->state.wal_switch_lsn = switch_lsn;
	from_clear = (shared->state.operation == PAGE_KEYS_OP_ENABLE);
	to_clear = page_keys_writes_clear(shared->state.operation);
	SpinLockRelease(&shared->mutex);
	pg_atomic_write_u32(&shared->wal_from_clear, from_clear ? 1 : 0);
	pg_atomic_write_u32(&shared->writes_clear, to_clear ? 1 : 0);
	pg_atomic_write_u64(&shared->wal_switch_lsn, switch_lsn);
	pg_atomic_write_u32(&shared->wal_generation, wal_generation);
}

/* The workers' progress (datarotation.c) */
void
GetDataRotationProgress(DataRotationProgress *out)
{
	SpinLockAcquire(&shared->mutex);
	memcpy(out, &shared->progress, sizeof(DataRotationProgress));
	SpinLockRelease(&shared->mutex);
}

void
SetDataRotationProgress(const DataRotationProgress *progress)
{
	SpinLockAcquire(&shared->mutex);
	memcpy(&shared->progress, progress, sizeof(DataRotationProgress));
	SpinLockRelease(&shared->mutex);
}

/*
 * One change of the key ring at a time (a rotation of the KEK or of the
 * data keys, a replay of one): an exclusive lock on the key ring's
 * directory, released when the returned descriptor is closed
 * (CloseTransientFile(), or at the end of the transaction).  Without wait,
 * -1 when another process holds it.
 */
int
LockKeyringDirectory(bool wait)
{
	int			fd = OpenTransientFile(KEYRING_DIR, O_RDONLY);

	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open directory \"%s\": %m", KEYRING_DIR)));
	if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0)
	{
		CloseTransientFile(fd);
		return -1;
	}
	return fd;
}

/*
 * The key command the key ring is wrapped by now: the one initdb or the
 * latest rotation of the KEK recorded (a running server's setting changes
 * only at a reload), else the setting
 */
const char *
CurrentKeyCommand(void)
{
	static char recorded[8192];

	if (keyring_recorded_command(".", recorded, sizeof(recorded)))
		return recorded;
	return encryption_key_command;
}

/*
 * The tests' kill -9 of the server at a step of a key operation: when the
 * environment variable envvar names step, the process kills its
 * postmaster and itself (keyrotation.c, datarotation.c)
 */
void
EncryptionTestCrashPoint(const char *envvar, const char *step)
{
	const char *at = getenv(envvar);

	if (at == NULL || strcmp(at, step) != 0)
		return;
	ereport(LOG,
			(errmsg("%s: killing the server at step \"%s\"", envvar, step)));
	kill(PostmasterPid, SIGKILL);
	kill(MyProcPid, SIGKILL);
	for (;;)
		pg_usleep(1000000L);
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
