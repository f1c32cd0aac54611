/*-------------------------------------------------------------------------
 *
 * enabling.c
 *	  pgcipher: encrypt a running cluster that was not encrypted, online,
 *	  and decrypt one, the way back.
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
 * SELECT pg_disable_encryption() goes the other way: operation "disable"
 * makes every process write new pages and files in clear, WAL from the
 * next segment; the launcher decrypts the SLRUs and rewrites every block,
 * and FinishDecryption() ends it once no encrypted WAL is needed: the
 * state "disabled", encryption off, pg_control, the key files removed.
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

	CheckDataKeysOperator("encrypt the cluster");
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
	CheckDataKeysThrottle(cost_delay, cost_limit);

	if (MakePGDirectory(KEYRING_DIR) != 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", KEYRING_DIR)));
	lockfd = LockDataKeysChange(false);
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
	SetDataKeysSwitchPoint(&state);
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
	int			lockfd = LockDataKeysChange(true);

	GetPageKeysState(&state);
	state.slru_done |= 1U << bit;
	WritePageKeysState(&state);
	CloseTransientFile(lockfd);
}

/*
 * The launcher, while a cluster is being encrypted or decrypted: the SLRUs
 * first.  False if it must try again later (a base backup runs).
 */
bool
ConvertSlrusForOperation(void)
{
	PageKeysState state;
	bool		decrypt;

	GetPageKeysState(&state);
	if ((state.operation != PAGE_KEYS_OP_ENABLE &&
		 state.operation != PAGE_KEYS_OP_DISABLE) ||
		state.slru_done == PAGE_KEYS_SLRU_ALL)
		return true;
	decrypt = (state.operation == PAGE_KEYS_OP_DISABLE);
	if (!ConvertSlrusOnline(state.slru_done, decrypt, commit_slru))
		return false;
	ereport(LOG,
			(errmsg(decrypt ? "the SLRUs of the cluster are decrypted" :
					"the SLRUs of the cluster are encrypted")));
	return true;
}

/*
 * SHOW data_encryption: the cipher once the cluster is encrypted, until a
 * decryption is done
 */
const char *
show_data_encryption(void)
{
	PageKeysState state;

	if (!DataEncryptionEnabled())
		return "off";
	GetPageKeysState(&state);
	if (state.operation == PAGE_KEYS_OP_ENABLE ||
		state.operation == PAGE_KEYS_OP_DISABLED)
		return "off";
	return data_encryption_cipher_name(DataEncryptionCipher());
}

/*
 * pg_disable_encryption(cost_delay int, cost_limit int) returns a line that
 * says what started: the way back (design 9.7).  New pages and files are
 * written in clear from now on, new WAL from the next segment; the
 * launcher decrypts the SLRUs, its workers rewrite every block, and
 * FinishDecryption() ends it.
 */
Datum
pg_disable_encryption(PG_FUNCTION_ARGS)
{
	int			cost_delay = PG_ARGISNULL(0) ? PAGE_KEYS_DEFAULT_COST_DELAY : PG_GETARG_INT32(0);
	int			cost_limit = PG_ARGISNULL(1) ? PAGE_KEYS_DEFAULT_COST_LIMIT : PG_GETARG_INT32(1);
	PageKeysState state;
	int			lockfd;

	CheckDataKeysOperator("decrypt the cluster");
	if (!DataEncryptionEnabled())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this cluster is not encrypted")));
	CheckDataKeysThrottle(cost_delay, cost_limit);

	lockfd = LockDataKeysChange(false);
	GetPageKeysState(&state);
	if (state.operation != PAGE_KEYS_OP_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the cluster is being %s",
						state.operation == PAGE_KEYS_OP_ROTATE ? "re-keyed" :
						state.operation == PAGE_KEYS_OP_ENABLE ? "encrypted" : "decrypted"),
				 errhint("Watch it in pg_stat_progress_encryption; try again once it is done.")));
	if (!state.marked)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this cluster may hold pages encrypted without a mark"),
				 errdetail("It was made by a pgcipher that did not mark every page with its key, so a page in clear could not be told from one of those."),
				 errhint("Run pg_rotate_data_keys() first: it marks every page; then decrypt.")));

	/* 1: new pages and files in clear; new WAL from the next segment */
	state.operation = PAGE_KEYS_OP_DISABLE;
	state.paused = false;
	state.cost_delay = cost_delay;
	state.cost_limit = cost_limit;
	SetDataKeysSwitchPoint(&state);
	state.wal_switch_lsn = InvalidXLogRecPtr;
	state.slru_done = 0;
	state.ndone = 0;
	WritePageKeysState(&state);
	crash_point("disable-begun");

	/* 2 */
	SwitchWALKey();
	CloseTransientFile(lockfd);

	ereport(LOG,
			(errmsg("decryption of the cluster started: new pages, WAL and files are written in clear"),
			 errdetail("Background workers decrypt every block with cost_delay %d ms and cost_limit %d.",
					   cost_delay, cost_limit)));
	PG_RETURN_TEXT_P(cstring_to_text("decrypting"));
}

/* The key files of a decrypted cluster, removed for good */
static void
remove_key_files(void)
{
	const char *files[] = {KEYRING_FILE, KEYRING_COMMAND_FILE, PAGE_KEYS_FILE};

	for (int i = 0; i < lengthof(files); i++)
		if (unlink(files[i]) != 0 && errno != ENOENT)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not remove file \"%s\": %m", files[i])));
	fsync_fname(KEYRING_DIR, true);
}

/*
 * Start-up of a cluster whose decryption finished but whose key files were
 * still there (a crash after pg_control stopped recording the cipher)
 */
void
RemoveKeyFilesOfDecryptedCluster(void)
{
	ereport(LOG,
			(errmsg("removing the key files of this cluster, which was decrypted")));
	remove_key_files();
}

/*
 * The launcher, once every block of a cluster being decrypted is in clear
 * (or a restart found it "disabled"): wait until no WAL written before the
 * switch (encrypted) is needed, rewrite the two-phase files written
 * encrypted, turn encryption off, record it in pg_control, remove the key
 * files.  This server keeps the keys in memory until it stops, for files
 * written encrypted that are still open.  False if it must wait.
 */
bool
FinishDecryption(bool completed_here)
{
	static bool flushed = false;
	PageKeysState state;
	char		why[256];
	int			lockfd;
	XLogRecPtr	switch_lsn;

	GetPageKeysState(&state);
	if (!page_keys_writes_clear(state.operation))
		return true;

	/*
	 * Where this launcher's workers did not write every block (a restart, a
	 * promoted standby), replayed pages may be in buffers only: on disk, in
	 * clear, first
	 */
	if (!completed_here && !flushed)
	{
		RequestCheckpoint(CHECKPOINT_FORCE | CHECKPOINT_WAIT |
						  CHECKPOINT_FLUSH_ALL | CHECKPOINT_IMMEDIATE);
		flushed = true;
	}
	if (WALBeforeSwitchNeeded(state.wal_switch_lsn, true, why, sizeof(why)))
	{
		ereport(LOG,
				(errmsg("the decryption waits for the encrypted WAL to be no longer needed"),
				 errdetail("%s", why)));
		return false;
	}
	DecryptTwoPhaseFiles();
	if (state.operation == PAGE_KEYS_OP_DISABLE)
	{
		lockfd = LockDataKeysChange(true);
		GetPageKeysState(&state);
		state.operation = PAGE_KEYS_OP_DISABLED;
		state.marked = true;
		WritePageKeysState(&state);
		CloseTransientFile(lockfd);
		crash_point("decrypted");
	}
	switch_lsn = state.wal_switch_lsn;

	/* every byte in clear: I/O as a cluster not encrypted, for good */
	LWLockAcquire(WALWriteLock, LW_EXCLUSIVE);
	SetDataEncryptionCipher(DATA_ENCRYPTION_OFF);
	LWLockRelease(WALWriteLock);
	WriteControlFileNow();
	crash_point("control-off");
	remove_key_files();
	page_keys_initial(&state);
	SetPageKeysState(&state);
	ereport(LOG,
			(errmsg("decryption of the cluster is complete: it is not encrypted any more"),
			 errdetail("WAL written before %X/%X stays encrypted, and so do backups and archives taken before; their key ring opens them.",
					   LSN_FORMAT_ARGS(switch_lsn))));
	return true;
}
