/*-------------------------------------------------------------------------
 *
 * keyrotation.c
 *	  pgcipher: online rotation of the key-encryption key (KEK).
 *
 * SELECT pg_rotate_encryption_key('new command') re-wraps the data keys
 * the server holds in memory under the KEK that the new command prints
 * (or, in the unwrap mode, has the new command wrap them: design 9.4),
 * and makes the new command the setting that start-up uses.  The data
 * keys stay, nothing is re-encrypted, and the old key command is never
 * run: a KEK that a KMS has already rolled can be replaced while the
 * server still runs with the keys it loaded.
 *
 * Every step leaves a data directory that starts, with the old KEK or
 * with the new one (docs/design.md, section 9.1):
 *
 *	1. run the new command; nothing written yet
 *	2. write pg_encryption/keyring.next.tmp, fsync
 *	3. rename it to keyring.next, fsync the directory
 *	   (start-up: the key ring opens with the old command; keyring.next
 *	   opens with the new one)
 *	4. ALTER SYSTEM SET encryption_key_command = the new command
 *	   (postgresql.auto.conf, written by PostgreSQL the same crash-safe way)
 *	5. rename keyring.next over keyring, fsync the directory: the old
 *	   KEK no longer opens anything and can be destroyed
 *
 * At start-up, holding the data directory lock, CompleteKeyRotation()
 * finishes a rotation interrupted after step 4 (the configured command
 * opened keyring.next) and removes one interrupted before it.  Recovery
 * and replay never run a key command and never write a key ring; each
 * server rotates its own (design 9.1 says what that means for standbys,
 * base backups and pg_rewind).
 *
 * Tests stop a rotation at each step, as a kill -9 of the server would:
 * the environment variable PGCIPHER_TEST_KEY_ROTATION_CRASH_AT names a
 * step ("command", "next-written", "next-installed", "command-saved",
 * "completed"), and the backend kills its postmaster and itself with
 * SIGKILL when it gets there.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/keyrotation.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "common/keyring.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "postmaster/postmaster.h"
#include "storage/encryption.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

/* The test hook: kill -9 of the server at the named step */
#define crash_point(step) \
	EncryptionTestCrashPoint("PGCIPHER_TEST_KEY_ROTATION_CRASH_AT", step)

/* ALTER SYSTEM SET encryption_key_command = command */
static void
save_key_command(const char *command)
{
	AlterSystemStmt *stmt = makeNode(AlterSystemStmt);
	VariableSetStmt *set = makeNode(VariableSetStmt);
	A_Const    *value = makeNode(A_Const);

	value->val.sval.type = T_String;
	value->val.sval.sval = pstrdup(command);
	value->location = -1;
	set->kind = VAR_SET_VALUE;
	set->name = "encryption_key_command";
	set->args = list_make1(value);
	stmt->setstmt = set;
	AlterSystemSetConfigFile(stmt);
}

/* Refuse, before anything is written, what would not survive a restart */
static void
check_rotation_possible(const char *command)
{
	struct config_generic *setting;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to rotate the key-encryption key"),
				 errdetail("Only superusers may rotate the key-encryption key.")));
	if (!DataEncryptionEnabled())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this cluster is not encrypted, so it has no key-encryption key to rotate")));
	if (command == NULL || command[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the new key command must not be empty")));
	if (!AllowAlterSystem)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the key-encryption key cannot be rotated while allow_alter_system is off"),
				 errdetail("The rotation saves the new key command with ALTER SYSTEM.")));
	setting = find_option("encryption_key_command", false, false, ERROR);
	if (setting->source == PGC_S_ARGV || setting->source == PGC_S_CLIENT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("encryption_key_command is set on the server's command line, which overrides the setting a rotation saves"),
				 errhint("Move encryption_key_command from the command line (pg_ctl -o) into postgresql.conf, restart, and rotate again.")));
}

/*
 * The mode the rotation is to: its argument, else the mode the cluster is
 * in now
 */
static int
rotation_mode(FunctionCallInfo fcinfo)
{
	char	   *name;
	int			mode;

	if (PG_NARGS() < 2)
		return DataEncryptionKeyring()->kek_source == KEK_SOURCE_UNWRAP ?
			KEYRING_MODE_UNWRAP : KEYRING_MODE_KEK;
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	mode = keyring_mode_from_name(name);
	if (mode < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid key mode \"%s\"", name),
				 errhint("Use \"kek\" (the command prints the key-encryption key) or \"unwrap\" (the command wraps and unwraps the data keys in a KMS).")));
	return mode;
}

/*
 * pg_rotate_encryption_key(new_command text [, mode text]) returns the new
 * KEK's fingerprint; in the unwrap mode, the data keys' (design 9.4).  The
 * two-argument form has its own entry point: built-in aliases of one C
 * function must agree in their number of arguments (opr_sanity checks it).
 */
Datum
pg_rotate_encryption_key_mode(PG_FUNCTION_ARGS)
{
	return pg_rotate_encryption_key(fcinfo);
}

Datum
pg_rotate_encryption_key(PG_FUNCTION_ARGS)
{
	char	   *command = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int			mode;
	Keyring    *ring;
	unsigned char file[4096];
	size_t		filelen;
	KeyringError err;
	int			lockfd;
	char		fingerprint[2 * KEK_FINGERPRINT_LEN + 16];

	check_rotation_possible(command);
	mode = rotation_mode(fcinfo);

	/* one change of the key ring at a time; the lock goes with the process */
	if ((lockfd = LockKeyringDirectory(false)) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("another rotation of the key-encryption key is in progress")));

	/*
	 * A key ring left by a rotation that stopped after it saved its command
	 * (its last rename failed, or its backend was killed while the server ran
	 * on) may be the only one the saved command opens: never overwrite it.
	 * Start-up completes or removes it.
	 */
	if (access(KEYRING_NEXT_FILE, F_OK) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("an earlier rotation of the key-encryption key did not complete"),
				 errdetail("\"%s\" exists.", KEYRING_NEXT_FILE),
				 errhint("Restart the server: start-up completes the earlier rotation or removes it, and says which.  Then rotate again.")));

	ring = palloc(sizeof(Keyring));
	CopyDataEncryptionKeyring(ring);	/* with any data key rotated since */
	ring->from_next = false;
	filelen = keyring_wrap_under_command(ring, command,
										 encryption_key_command_timeout, mode,
										 file, sizeof(file), &err);
	keyring_format_fingerprint(ring->kek_fingerprint, fingerprint);
	data_encryption_wipe(ring, sizeof(Keyring));
	pfree(ring);
	if (filelen == 0)
		ReportKeyringError(ERROR, &err);
	crash_point("command");

	PG_TRY();
	{
		if (!keyring_write_temporary(KEYRING_NEXT_FILE, file, filelen, &err))
			ReportKeyringError(ERROR, &err);
		crash_point("next-written");
		if (!keyring_install_temporary(KEYRING_NEXT_FILE, &err))
			ReportKeyringError(ERROR, &err);
		crash_point("next-installed");
	}
	PG_CATCH();
	{
		/* the old key ring and command still hold: nothing to undo but this */
		(void) unlink(KEYRING_NEXT_FILE);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/*
	 * ALTER SYSTEM can fail after it renamed postgresql.auto.conf (its
	 * fsync): keyring.next stays whatever happens, for start-up to decide by
	 * the command it finds
	 */
	save_key_command(command);
	crash_point("command-saved");

	/* from here on only the new command opens the key ring */
	if (!keyring_rename(KEYRING_NEXT_FILE, KEYRING_FILE, &err))
		ereport(ERROR,
				(errcode(ERRCODE_IO_ERROR),
				 errmsg("%s", err.message),
				 errdetail("The new key command is saved and \"%s\" holds the key ring wrapped under it.",
						   KEYRING_NEXT_FILE),
				 errhint("The server completes the rotation when it next starts.")));
	crash_point("completed");
	/* the mode the key ring is in now, for a rotation of the data keys */
	ring = palloc(sizeof(Keyring));
	CopyDataEncryptionKeyring(ring);
	ring->kek_source = (mode == KEYRING_MODE_UNWRAP) ? KEK_SOURCE_UNWRAP : KEK_SOURCE_HEX;
	ChangeDataKeys(ring);
	data_encryption_wipe(ring, sizeof(Keyring));
	pfree(ring);
	/* the fallback for a configuration that loses the setting (design 8) */
	if (!keyring_record_command(".", command, &err))
		ReportKeyringError(WARNING, &err);
	CloseTransientFile(lockfd);

	ereport(LOG,
			(mode == KEYRING_MODE_UNWRAP ?
			 errmsg("key-encryption key rotated: the key ring is now wrapped by the command's KMS key (unwrap mode; data keys fingerprint %s)",
					fingerprint) :
			 errmsg("key-encryption key rotated: the key ring is now wrapped under the key with fingerprint %s",
					fingerprint),
			 errdetail("The data keys are unchanged.  The previous key-encryption key opens no file in this data directory any more; backups taken before the rotation still need it.")));
	PG_RETURN_TEXT_P(cstring_to_text(fingerprint));
}

/*
 * Start-up, holding the data directory lock, after the key ring was loaded:
 * finish or remove an interrupted rotation, and remove temporary files a
 * crash left behind (nothing reads them).
 */
void
CompleteKeyRotation(bool loaded_from_next)
{
	KeyringError err;

	if (loaded_from_next)
	{
		if (!keyring_rename(KEYRING_NEXT_FILE, KEYRING_FILE, &err))
			ReportKeyringError(FATAL, &err);
		if (!keyring_record_command(".", encryption_key_command, &err))
			ReportKeyringError(WARNING, &err);
		ereport(LOG,
				(errmsg("completed an interrupted rotation of the key-encryption key"),
				 errdetail("encryption_key_command opened \"%s\", which now replaces \"%s\".",
						   KEYRING_NEXT_FILE, KEYRING_FILE)));
	}
	else if (unlink(KEYRING_NEXT_FILE) == 0)
		ereport(LOG,
				(errmsg("removed the key ring of an interrupted rotation of the key-encryption key"),
				 errdetail("The rotation stopped before it saved the new encryption_key_command, so the cluster keeps its previous key-encryption key.")));
	(void) unlink(KEYRING_FILE ".tmp");
	(void) unlink(KEYRING_NEXT_FILE ".tmp");
	(void) unlink(KEYRING_COMMAND_FILE ".tmp");
}
