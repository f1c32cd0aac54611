/*-------------------------------------------------------------------------
 *
 * encryption.c
 *	  pgcipher: load the data keys at start-up, before anything is written.
 *
 * InitializeDataEncryption() runs right after the process has moved into
 * the data directory and created postmaster.pid, before it reads
 * pg_control through xlog.c or touches any other file there (holding the
 * lock, it may complete an interrupted key rotation: keyrotation.c).
 * pg_control says whether the cluster is encrypted; if
 * so the key ring is read and checked, encryption_key_command is run, and
 * the data keys are unwrapped.  Any failure is FATAL with a message that
 * says what is wrong, so a wrong or missing key never gets as far as
 * writing a byte.  In bootstrap mode (initdb) there is no pg_control yet:
 * a key ring written by initdb is what asks for encryption, and
 * BootStrapXLOG() records the cipher in the new pg_control.
 *
 * This is the one place that loads the key ring: once it is loaded,
 * InitializeDataEncryption() gives each module its cipher, in the order
 * start_modules() shows, and no module asks for keys later.  The keys live
 * in a page of their own, excluded from core dumps and locked in memory
 * where the kernel allows it (state.c, beneath the modules: they never call
 * up into this file).  Child processes inherit keys, ciphers and buffers
 * through fork().
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/encryption.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog_internal.h"
#include "catalog/pg_control.h"
#include "common/control_cipher.h"
#include "common/controldata_utils.h"
#include "common/keyring.h"
#include "common/page_keys.h"
#include "miscadmin.h"
#include "storage/encryption.h"
#include "utils/guc.h"

/* The key ring, once loaded (its memory belongs to state.c) */
static Keyring *keyring = NULL;

/* pg_control does not record the cipher of a cluster being encrypted yet */
static bool control_unstamped = false;

static int	control_cipher_of_datadir(void);

static void
load_keyring(void)
{
	KeyringError err;

	keyring = DataEncryptionKeyringMemory();

	/*
	 * Not set (a configuration replaced by Debian's pg_upgradecluster, say):
	 * the command initdb or the latest rotation recorded, shown by SHOW and
	 * replaced by whatever sets the setting
	 */
	if (encryption_key_command == NULL || encryption_key_command[0] == '\0')
	{
		char		recorded[8192];

		if (keyring_recorded_command(".", recorded, sizeof(recorded)))
		{
			SetConfigOption("encryption_key_command", recorded,
							PGC_POSTMASTER, PGC_S_DYNAMIC_DEFAULT);
			ereport(LOG,
					(errmsg("encryption_key_command is not set: running the key command recorded in \"%s\"",
							KEYRING_COMMAND_FILE)));
		}
	}
	if (!keyring_load(".", encryption_key_command,
					  encryption_key_command_timeout, keyring, &err))
		ReportKeyringError(FATAL, &err);
}

/* One key of the ring; a ring without it is damaged */
static const unsigned char *
ring_key(uint32 id)
{
	const KeyringKey *key = keyring_get_key(keyring, id);

	if (key == NULL)
		ereport(FATAL,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("encryption key file \"%s\" lacks key %u", KEYRING_FILE, id),
				 errhint("A key ring written by initdb holds key 1 (relation files), 2 (WAL) and 3 (temporary files); one a rotation of the data keys wrote holds key 4 or 1 (pages), 2, 3 and 5 (transaction files).")));
	return key->key;
}

/*
 * The page key state (pg_encryption/pages): which generation new pages are
 * written under, and whether an online rotation runs.  The ring must hold
 * that generation's key, and the WAL key new WAL is written under.
 */
static void
load_page_keys_state(void)
{
	PageKeysState state;
	KeyringError err;
	int			slot;

	if (!page_keys_read(".", &state, &err))
		ReportKeyringError(FATAL, &err);
	slot = page_keys_slot(state.generation);
	if (keyring_get_key(keyring, page_keys_slot_key_id(slot)) == NULL)
		ereport(FATAL,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("encryption key file \"%s\" lacks the page key of generation %u, which \"%s\" says new pages are written under",
						KEYRING_FILE, state.generation, PAGE_KEYS_FILE),
				 errhint("The two files must come from the same backup of this cluster.")));
	/* new WAL's key, and the previous one's while the switch is ahead */
	slot = page_keys_slot(state.wal_generation);
	if (keyring_get_key(keyring, wal_keys_slot_key_id(slot)) == NULL ||
		(state.wal_generation > 1 && state.wal_switch_lsn == 0 &&
		 keyring_get_key(keyring, wal_keys_slot_key_id(1 - slot)) == NULL))
		ereport(FATAL,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("encryption key file \"%s\" lacks the WAL key of generation %u, which \"%s\" says new WAL is written under",
						KEYRING_FILE, state.wal_generation, PAGE_KEYS_FILE),
				 errhint("The two files must come from the same backup of this cluster.")));
	SetPageKeysState(&state);
}

/*
 * Every module that encrypts a kind of file, with its key: relation pages
 * under the page key slots (two generations while an online rotation runs:
 * pagecrypt.c keys them from the shared ring), the small transaction files
 * under the key initdb drew for relations (kept as KEY_SLRU once a
 * rotation frees slot A), WAL under the WAL key slots (walcrypt.c keys
 * them from the shared ring, like the page slots), the files that live only
 * until a restart (temporary files, spill files, statement texts) under
 * the temporary-file key.  See design §8.  One cipher per key and mode,
 * shared by the modules that use it: a process makes one cipher call at a
 * time, and each call sets its own tweak or IV.
 */
static void
start_modules(void)
{
	int			cipher = data_encryption_cipher;

	if (cipher != DATA_ENCRYPTION_OFF)
	{
		(void) ring_key(KEY_TEMPFILE);	/* a damaged ring stops us here */
		load_page_keys_state();
		CompleteSlruConversion();
	}
	InitializePageEncryption(cipher);
	InitializeSlruEncryption();
	InitializeWALEncryption(cipher);
	InitializeTempFileEncryption();
	InitializeSpillFileEncryption();
	InitializeStatementTextEncryption();
}

/*
 * A cluster not encrypted: its processes get the shared key ring's memory
 * (empty) and the modules their ciphers under placeholder keys, so that
 * pg_enable_encryption() can turn encryption on in every process while the
 * server runs (design 9.7).  A pg_encryption/pages that an enable wrote
 * before it could write the key ring is removed: nothing was encrypted.
 */
static void
start_dormant(void)
{
	PageKeysState state;
	KeyringError err;

	(void) DataEncryptionKeyringMemory();
	if (page_keys_read(".", &state, &err) && state.operation == PAGE_KEYS_OP_ENABLE)
	{
		ereport(LOG,
				(errmsg("removing \"%s\": the encryption of this cluster stopped before its key ring was written",
						PAGE_KEYS_FILE)));
		if (unlink(PAGE_KEYS_FILE) != 0)
			ereport(FATAL,
					(errcode_for_file_access(),
					 errmsg("could not remove file \"%s\": %m", PAGE_KEYS_FILE)));
	}
	start_modules();
}

/*
 * Whether pg_encryption/pages names the operation.  pg_control records no
 * cipher but the key ring is there (design 9.7): an online encryption
 * began and the server stopped before pg_control said so (the cipher is
 * the key ring's; the next update of pg_control records it), or a
 * decryption ended and the server stopped before it removed the key files.
 */
static bool
state_operation_is(int operation)
{
	PageKeysState state;
	KeyringError err;

	return page_keys_read(".", &state, &err) && state.operation == operation;
}

/*
 * Called with the data directory as working directory: in bootstrap before
 * the lock file is created, in the postmaster and a single-user backend
 * right after (so that an interrupted key rotation can be completed).
 */
void
InitializeDataEncryption(bool bootstrap)
{
	struct stat st;
	bool		have_keyring = (stat(KEYRING_FILE, &st) == 0);
	int			cipher;

	if (bootstrap)
	{
		if (!have_keyring)
			return;
		load_keyring();
		cipher = keyring->cipher;
	}
	else
	{
		ControlFileData *control;
		bool		crc_ok;

		control = get_controlfile(".", &crc_ok);
		pfree(control);
		if (!crc_ok)
			return;				/* ReadControlFile() will report this, before
								 * anything is written */
		cipher = control_cipher_of_datadir();

		if (cipher == DATA_ENCRYPTION_OFF && have_keyring &&
			state_operation_is(PAGE_KEYS_OP_DISABLED))
		{
			/* decrypted: pg_control says so, the key files are to go */
			RemoveKeyFilesOfDecryptedCluster();
			have_keyring = false;
		}
		if (cipher == DATA_ENCRYPTION_OFF && have_keyring &&
			state_operation_is(PAGE_KEYS_OP_ENABLE))
		{
			load_keyring();
			cipher = keyring->cipher;
			control_unstamped = true;
		}
		else if (cipher == DATA_ENCRYPTION_OFF)
		{
			if (have_keyring)
				ereport(FATAL,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("cluster is not encrypted, but it contains an encryption key file \"%s\"",
								KEYRING_FILE),
						 errhint("If a program without pgcipher rewrote pg_control, pgcipher's pg_resetwal restores its record of the cipher from the key file; otherwise remove the directory \"%s\" if it does not belong to this cluster.",
								 KEYRING_DIR)));
			if (IsPostmasterEnvironment && !IsUnderPostmaster)
			{
				start_dormant();
				if (!IsBinaryUpgrade)
					RegisterDataRotationLauncher();
			}
			return;
		}
		else
		{
			if (data_encryption_key_length(cipher) == 0)
				ereport(FATAL,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("pg_control records unknown encryption cipher %d", cipher),
						 errhint("This cluster may have been created by a newer version of pgcipher.")));
			load_keyring();
			CompleteKeyRotation(keyring->from_next);
			if (keyring->cipher != (uint32) cipher)
				ereport(FATAL,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("encryption key file is for %s, but pg_control records %s",
								data_encryption_cipher_name(keyring->cipher),
								data_encryption_cipher_name(cipher)),
						 errhint("The key file \"%s\" does not belong to this cluster.", KEYRING_FILE)));
		}
	}

	SetConfigOption("data_encryption", data_encryption_cipher_name(cipher),
					PGC_INTERNAL, PGC_S_DYNAMIC_DEFAULT);
	Assert(data_encryption_cipher == cipher);
	SetDataEncryptionCipher(cipher);
	start_modules();

	/*
	 * the postmaster: the online rotation's launcher, resuming a rotation;
	 * not under pg_upgrade, whose new cluster holds the old one's page keys
	 * before it holds its page key state (the launcher would take them for
	 * unused keys and drop them)
	 */
	if (!bootstrap && IsPostmasterEnvironment && !IsUnderPostmaster &&
		!IsBinaryUpgrade)
		RegisterDataRotationLauncher();
}

/*
 * The cipher that pg_control records after its struct (common/
 * control_cipher.c); a damaged record stops the server.
 */
static int
control_cipher_of_datadir(void)
{
	int			cipher;
	ControlCipherRecord rec = control_cipher_read(".", &cipher, NULL);

	if (rec == CONTROL_CIPHER_UNREADABLE)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not read the first %d bytes of \"%s\"",
						PG_CONTROL_MAX_SAFE_SIZE, XLOG_CONTROL_FILE)));
	if (rec == CONTROL_CIPHER_DAMAGED)
		ereport(FATAL,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("pg_control's record of the encryption cipher is damaged"),
				 errdetail("The %d bytes at offset %d of \"%s\" are neither zeros nor a valid record.",
						   CONTROL_CIPHER_RECORD_SIZE, CONTROL_CIPHER_RECORD_OFFSET,
						   XLOG_CONTROL_FILE),
				 errhint("Restore \"%s\" from a backup, or rebuild it with pg_resetwal, which takes the cipher from the key file.",
						 XLOG_CONTROL_FILE)));
	return cipher;
}

/*
 * ReadControlFile() calls this: a cluster whose pg_control says "encrypted"
 * must never be opened without its keys, whatever path led here.
 */
void
CheckDataEncryptionMatchesControlFile(void)
{
	int			control_cipher = control_cipher_of_datadir();

	if (control_cipher == DATA_ENCRYPTION_OFF && control_unstamped)
		return;					/* the next update of pg_control records it */
	if (control_cipher != data_encryption_cipher)
		ereport(FATAL,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("database files are encrypted with %s, but the server has loaded keys for %s",
						data_encryption_cipher_name(control_cipher),
						data_encryption_cipher_name(data_encryption_cipher)),
				 errhint("The encryption keys must be loaded at start-up.")));
}
