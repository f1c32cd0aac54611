/*-------------------------------------------------------------------------
 *
 * enabling.c
 *	  pgcipher: encrypt a running cluster that was not encrypted, online.
 *
 * A cluster that pgcipher's server runs but that is not encrypted starts
 * "dormant" (encryption.c): every process has the shared key ring's memory,
 * empty, and each module its cipher under a placeholder key.
 * SELECT pg_enable_encryption('aes-256', 'key command') then:
 *
 *	1. writes pg_encryption/pages: operation "enable", page generation 1,
 *	   every page marked (an unmarked page is in clear), WAL in clear until
 *	   the switch, no SLRU encrypted (crash: the next start finds no key
 *	   ring and removes the file: nothing was encrypted)
 *	2. runs the key command and writes the key ring as initdb does, with
 *	   the command recorded (crash: the next start resumes from here on,
 *	   with the key ring's cipher, although pg_control does not record it
 *	   yet)
 *	3. puts the keys in every process's reach and turns encryption on:
 *	   every page written from now on is encrypted under generation 1 and
 *	   marked, and so is every new temporary file, spill file and two-phase
 *	   state file; logs the key ring and the state (standbys follow);
 *	   pg_control records the cipher
 *	4. switches new WAL to the WAL key at a segment boundary (walkeys.c);
 *	   older WAL stays in clear, and is never recycled (walcrypt.c)
 *	5. returns
 *
 * The launcher (datarotation.c) then encrypts the SLRUs one at a time
 * (slrucrypt.c), has its workers rewrite every block of every database,
 * as a rotation does, and ends the operation: SHOW data_encryption then
 * says the cipher.  Design 9.7 has the state machine and what stays in
 * clear (WAL before the switch, pg_stat_statements' texts until the next
 * start, two-phase files of transactions prepared before).
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/enabling.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/transam.h"
#include "access/xlog.h"
#include "common/keyring.h"
#include "common/page_keys.h"
#include "miscadmin.h"
#include "postmaster/bgwriter.h"
#include "storage/encryption.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#define crash_point(step) \
	EncryptionTestCrashPoint("PGCIPHER_TEST_DATA_ROTATION_CRASH_AT", step)

/*
 * pg_enable_encryption(cipher text, key_command text, cost_delay int,
 * cost_limit int, key_mode text) returns a line that says what started
 */
Datum
pg_enable_encryption(PG_FUNCTION_ARGS)
{
	char	   *cipher_name = PG_ARGISNULL(0) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *command = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			cost_delay = PG_ARGISNULL(2) ? PAGE_KEYS_DEFAULT_COST_DELAY : PG_GETARG_INT32(2);
	int			cost_limit = PG_ARGISNULL(3) ? PAGE_KEYS_DEFAULT_COST_LIMIT : PG_GETARG_INT32(3);
	char	   *mode_name = PG_ARGISNULL(4) ? "kek" : text_to_cstring(PG_GETARG_TEXT_PP(4));
	int			cipher = data_encryption_cipher_from_name(cipher_name);
	int			mode = keyring_mode_from_name(mode_name);
	PageKeysState state;
	Keyring    *ring;
	KeyringError err;
	int			lockfd;
	char		line[128];
	bool		ok;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to encrypt the cluster"),
				 errdetail("Only superusers may encrypt the cluster.")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot encrypt the cluster during recovery"),
				 errhint("Run it on the primary; standbys follow, with their own encryption_key_command.")));
	if (DataEncryptionEnabled())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this cluster is already encrypted with %s",
						data_encryption_cipher_name(DataEncryptionCipher())),
				 errhint("pg_rotate_data_keys() draws new data keys; pg_rotate_encryption_key() changes the key-encryption key.")));
	if (cipher <= DATA_ENCRYPTION_OFF)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown cipher \"%s\"", cipher_name),
				 errhint("Use aes-128 or aes-256.")));
	if (mode < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown key mode \"%s\"", mode_name),
				 errhint("Use kek (the command prints the key-encryption key or a passphrase) or unwrap (it wraps and unwraps the data keys itself).")));
	if (command == NULL || command[0] == '\0')
		command = encryption_key_command;
	if (command == NULL || command[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no key command"),
				 errhint("Give the command as the second argument, or set encryption_key_command.")));
	if (cost_delay < 0 || cost_delay > PAGE_KEYS_MAX_COST_DELAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost_delay must be between 0 and %d milliseconds", PAGE_KEYS_MAX_COST_DELAY)));
	if (cost_limit < 1 || cost_limit > PAGE_KEYS_MAX_COST_LIMIT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost_limit must be between 1 and %d", PAGE_KEYS_MAX_COST_LIMIT)));

	if (MakePGDirectory(KEYRING_DIR) != 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", KEYRING_DIR)));
	lockfd = LockKeyringDirectory(false);
	if (lockfd < 0)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("another change of the key ring is in progress")));
	if (DataEncryptionEnabled())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this cluster is already encrypted")));

	/* 1 */
	page_keys_initial(&state);
	state.serial = 1;
	state.generation = 1;
	state.operation = PAGE_KEYS_OP_ENABLE;
	state.marked = true;
	state.cost_delay = cost_delay;
	state.cost_limit = cost_limit;
	LWLockAcquire(OidGenLock, LW_SHARED);
	state.switch_oid = TransamVariables->nextOid;
	LWLockRelease(OidGenLock);
	state.switch_xid = XidFromFullTransactionId(ReadNextFullTransactionId());
	state.wal_generation = 1;
	state.wal_switch_lsn = InvalidXLogRecPtr;
	state.slru_done = 0;
	if (!page_keys_write(".", &state, &err))
		ReportKeyringError(ERROR, &err);
	crash_point("enable-begun");

	/* 2: as initdb writes it */
	ring = palloc(sizeof(Keyring));
	ok = keyring_create(".", cipher, command, encryption_key_command_timeout,
						mode, NULL, ring, &err);
	if (!ok)
	{
		data_encryption_wipe(ring, sizeof(Keyring));
		(void) unlink(PAGE_KEYS_FILE);
		ReportKeyringError(ERROR, &err);
	}
	crash_point("keyring-written");

	/* 3: every process encrypts from its next write on */
	ChangeDataKeys(ring);
	data_encryption_wipe(ring, sizeof(Keyring));
	pfree(ring);
	LWLockAcquire(WALWriteLock, LW_EXCLUSIVE);
	SetPageKeysState(&state);
	SetDataEncryptionCipher(cipher);
	LWLockRelease(WALWriteLock);
	LogPageKeysChange(&state);
	WriteControlFileNow();
	crash_point("enabled");

	/* 4 */
	SwitchWALKey();
	CloseTransientFile(lockfd);

	ereport(LOG,
			(errmsg("encryption of the cluster with %s started: new pages, WAL and files are encrypted",
					data_encryption_cipher_name(cipher)),
			 errdetail("Background workers encrypt every block with cost_delay %d ms and cost_limit %d.",
					   cost_delay, cost_limit)));
	snprintf(line, sizeof(line), "encrypting with %s", data_encryption_cipher_name(cipher));
	PG_RETURN_TEXT_P(cstring_to_text(line));
}

/* ConvertSlrusOnline()'s commit on the primary: the bit, written and logged */
static void
commit_slru(uint32 bit)
{
	PageKeysState state;
	int			lockfd = LockKeyringDirectory(true);

	GetPageKeysState(&state);
	state.slru_done |= 1U << bit;
	WritePageKeysState(&state);
	CloseTransientFile(lockfd);
}

/*
 * The launcher, while a cluster is being encrypted: the SLRUs first.
 * False if it must try again later (a base backup runs).
 */
bool
EncryptSlrusOnline(void)
{
	PageKeysState state;

	GetPageKeysState(&state);
	if (state.operation != PAGE_KEYS_OP_ENABLE ||
		state.slru_done == PAGE_KEYS_SLRU_ALL)
		return true;
	if (!ConvertSlrusOnline(state.slru_done, commit_slru))
		return false;
	ereport(LOG,
			(errmsg("the SLRUs of the cluster are encrypted")));
	return true;
}

/* SHOW data_encryption: the cipher once the cluster is encrypted */
const char *
show_data_encryption(void)
{
	if (DataEncryptionChanging())
		return "off";
	return data_encryption_cipher_name(DataEncryptionCipher());
}
