/*-------------------------------------------------------------------------
 *
 * keylog.c
 *	  pgcipher: a change of the data keys — written, WAL-logged, in effect —
 *	  and its redo.
 *
 * InstallDataKeyring() and WritePageKeysState() are how the online
 * rotation (datarotation.c) and the WAL key's switch and drop (walkeys.c)
 * change the key ring and pg_encryption/pages.  Every change to
 * pg_encryption/pages is logged as one XLOG_ENCRYPTION_KEYS
 * record carrying that file and the key ring file as they are now: the
 * key ring wrapped under the KEK, never a key in clear.  A physical
 * standby, a restored base backup or a point-in-time recovery replays the
 * records in order and so holds, at every point of the WAL, the keys and
 * the state its primary had there: a standby writes the pages it replays
 * under the primary's new generation, and a standby promoted, or a backup
 * restored, half-way through a rotation resumes it.
 *
 * Redo skips a record no newer than the node's own file (the serial line:
 * a primary's crash recovery replays what its files already say).  It
 * opens the record's key ring with the node's own key command; a standby
 * whose KEK differs from its primary's (it rotated its own, design 9.1)
 * cannot, says so, and keeps its own generation, under which it stays
 * readable: replayed full-page images are plaintext, written under
 * whatever generation the standby writes.  Whether every page is marked is
 * the node's own business (its pages reach disk when its own checkpoints
 * say), so redo keeps the node's own value.  So is the old WAL key while
 * the node's own crash recovery would start before the WAL switched away
 * from it (a standby's restartpoints lag its primary's checkpoints): redo
 * keeps it in the node's key ring until a later rotation replaces it.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/keylog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "access/xlogreader.h"
#include "catalog/pg_control.h"
#include "common/keyring.h"
#include "common/keyring_int.h"
#include "common/page_keys.h"
#include "replication/walreceiver.h"
#include "storage/encryption.h"
#include "storage/lwlock.h"

/*
 * Write ring as the key ring (wrapped under the current command, in the
 * current mode) and make it the keys every process uses.  The caller holds
 * the key ring directory's lock.
 */
void
InstallDataKeyring(Keyring *ring)
{
	unsigned char file[KEYRING_MAX_FILE];
	size_t		filelen;
	KeyringError err;
	int			mode = ring->kek_source == KEK_SOURCE_UNWRAP ?
		KEYRING_MODE_UNWRAP : KEYRING_MODE_KEK;

	ring->from_next = false;
	filelen = keyring_wrap_under_command(ring, CurrentKeyCommand(),
										 encryption_key_command_timeout, mode,
										 file, sizeof(file), &err);
	if (filelen == 0)
		ReportKeyringError(ERROR, &err);
	if (!keyring_write_file(KEYRING_FILE, file, filelen, &err))
		ReportKeyringError(ERROR, &err);
	ChangeDataKeys(ring);
}

/*
 * A change of the page key state: written to pg_encryption/pages, logged
 * with the key ring so that standbys and restores follow, then in effect
 * for every process.  The caller holds the key ring directory's lock.
 * WALWriteLock is held while it takes effect: XLogWrite() reads the WAL
 * half of the state (WALWriteSlot()) under it, and must never see half of
 * a change.
 */
void
WritePageKeysState(PageKeysState *state)
{
	KeyringError err;

	bool		wal_changes;

	state->serial++;
	if (!page_keys_write(".", state, &err))
		ReportKeyringError(ERROR, &err);
	LogPageKeysChange(state);
	/* most changes leave the WAL half alone: no need to stop WAL writes */
	wal_changes = WALKeySwitchDiffers(state);
	if (wal_changes)
		LWLockAcquire(WALWriteLock, LW_EXCLUSIVE);
	SetPageKeysState(state);
	if (wal_changes)
		LWLockRelease(WALWriteLock);
}

/*
 * Remove the key id from the key ring, on disk and in memory, and log the
 * state with the ring without it (state as it is now), so that standbys
 * and restores drop it too.  The caller holds the key ring directory's
 * lock and has made sure nothing needs the key.
 */
void
DropDataKey(uint32 id, PageKeysState *state)
{
	Keyring    *ring = palloc(sizeof(Keyring));

	PG_TRY();
	{
		/* the ring as it is now, under the lock */
		CopyDataEncryptionKeyring(ring);
		keyring_remove_key(ring, id);
		InstallDataKeyring(ring);
		WritePageKeysState(state);
	}
	PG_FINALLY();
	{
		data_encryption_wipe(ring, sizeof(Keyring));
		pfree(ring);
	}
	PG_END_TRY();
}

/*
 * A key ring replayed without the old WAL key (its drop, logged by the
 * primary) while this node's own crash recovery would start before the
 * switch away from it: put the node's copy of the key back in.  True if
 * it did.
 */
static bool
keep_old_wal_key(Keyring *ring, const PageKeysState *next)
{
	uint32		old_id = wal_keys_slot_key_id(1 - page_keys_slot(next->wal_generation));
	Keyring    *local;
	const KeyringKey *key;
	XLogRecPtr	redo;
	TimeLineID	tli;

	GetOldestRestartPoint(&redo, &tli);
	if (next->wal_generation <= 1 || keyring_get_key(ring, old_id) != NULL ||
		(next->wal_switch_lsn != InvalidXLogRecPtr && redo >= next->wal_switch_lsn))
		return false;
	local = palloc(sizeof(Keyring));
	CopyDataEncryptionKeyring(local);
	key = keyring_get_key(local, old_id);
	if (key != NULL)
		keyring_put_key(ring, key);
	data_encryption_wipe(local, sizeof(Keyring));
	pfree(local);
	return key != NULL;
}

/*
 * Redo of a primary's pg_enable_encryption() on a node not encrypted: its
 * steps 1 to 3 (enabling.c), with the key ring the primary wrote, opened
 * with this node's own key command (encryption_key_command: a standby of a
 * cluster to be encrypted needs it set first).  Pages this node writes
 * from now on are encrypted; WAL it receives says per page.
 */
static void
enable_in_redo(XLogReaderState *record, const unsigned char *ring_bytes,
			   size_t ringlen, PageKeysState *next)
{
	Keyring    *ring = palloc(sizeof(Keyring));
	KeyringError err;

	if (!keyring_open_bytes(CurrentKeyCommand(), encryption_key_command_timeout,
							ring_bytes, ringlen, ring, &err))
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_PASSWORD),
				 errmsg("cannot follow the primary, which is being encrypted: its key ring does not open with this server's key command"),
				 errdetail("%s", err.message),
				 errhint("Set encryption_key_command to a command that prints the primary's key-encryption key, and start the server again.")));
	if (MakePGDirectory(KEYRING_DIR) != 0 && errno != EEXIST)
		ereport(FATAL,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", KEYRING_DIR)));
	next->marked = true;
	next->slru_done = 0;		/* this node's own SLRUs: at the next records */
	if (!page_keys_write(".", next, &err) ||
		!keyring_write_file(KEYRING_FILE, ring_bytes, ringlen, &err))
		ReportKeyringError(FATAL, &err);
	if (encryption_key_command != NULL && encryption_key_command[0] != '\0' &&
		!keyring_record_command(".", encryption_key_command, &err))
		ReportKeyringError(FATAL, &err);
	ChangeDataKeys(ring);
	data_encryption_wipe(ring, sizeof(Keyring));
	pfree(ring);
	LWLockAcquire(WALWriteLock, LW_EXCLUSIVE);
	SetPageKeysState(next);
	SetDataEncryptionCipher(DataKeysCipher());
	LWLockRelease(WALWriteLock);
	WriteControlFileNow();
	/* recycled segments ahead of the WAL receiver hold WAL in clear */
	{
		XLogRecPtr	received = GetWalRcvFlushRecPtr(NULL, NULL);
		XLogSegNo	segno;
		XLogRecPtr	from;

		XLByteToSeg(Max(received, record->EndRecPtr), segno, wal_segment_size);
		XLogSegNoOffsetToRecPtr(segno + 2, 0, wal_segment_size, from);
		RemoveRecycledWALSegments(from);
	}
	ereport(LOG,
			(errmsg("following the primary: this server is encrypted with %s from now on",
					data_encryption_cipher_name(DataEncryptionCipher()))));
}

/*
 * Log the state just written to pg_encryption/pages with the key ring as
 * it is on disk, and flush: a change is durable in the WAL before anyone
 * acts on it.  Never during recovery (the functions are refused there).
 */
void
LogPageKeysChange(const PageKeysState *state)
{
	xl_encryption_keys xlrec;
	unsigned char *ring = palloc(KEYRING_MAX_FILE);
	char	   *text = palloc(PAGE_KEYS_MAX_FILE);
	size_t		ringlen;
	KeyringError err;
	XLogRecPtr	lsn;

	if (!keyring_read_file(KEYRING_FILE, ring, KEYRING_MAX_FILE, &ringlen, &err))
		ReportKeyringError(ERROR, &err);
	xlrec.serial = state->serial;
	xlrec.generation = state->generation;
	xlrec.keyring_len = (uint32) ringlen;
	xlrec.state_len = (uint32) page_keys_format(state, text, PAGE_KEYS_MAX_FILE);

	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	XLogRegisterData((char *) ring, xlrec.keyring_len);
	XLogRegisterData(text, xlrec.state_len);
	lsn = XLogInsert(RM_XLOG_ID, XLOG_ENCRYPTION_KEYS);
	XLogFlush(lsn);
	pfree(ring);
	pfree(text);
}

/* Redo's commit of an SLRU it encrypted: the bit in this node's state */
static PageKeysState *redo_state = NULL;

static void
commit_slru_in_redo(uint32 bit)
{
	KeyringError err;

	redo_state->slru_done |= 1U << bit;
	if (!page_keys_write(".", redo_state, &err))
		ReportKeyringError(FATAL, &err);
	SetPageKeysState(redo_state);
}

/* xlog_redo() of XLOG_ENCRYPTION_KEYS */
void
RedoPageKeysChange(XLogReaderState *record)
{
	const char *data = XLogRecGetData(record);
	xl_encryption_keys xlrec;
	const unsigned char *ring_bytes;
	const char *text;
	PageKeysState *current = palloc(sizeof(PageKeysState));
	PageKeysState *next = palloc(sizeof(PageKeysState));
	unsigned char *local = palloc(KEYRING_MAX_FILE);
	size_t		locallen = 0;
	KeyringError err;

	memcpy(&xlrec, data, sizeof(xlrec));
	ring_bytes = (const unsigned char *) data + sizeof(xlrec);
	text = (const char *) ring_bytes + xlrec.keyring_len;

	GetPageKeysState(current);
	if (!page_keys_parse(text, xlrec.state_len, "WAL", next, &err))
		ReportKeyringError(FATAL, &err);
	if (!DataEncryptionEnabled())
	{
		/*
		 * A cluster decrypted online replaying its own decryption (crash
		 * recovery after pg_control stopped recording the cipher): done
		 */
		if (page_keys_writes_clear(next->operation))
			goto done;
		/* the primary was encrypted online: so is this node (enabling.c) */
		if (next->operation != PAGE_KEYS_OP_ENABLE)
			ereport(FATAL,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("WAL holds a change of the page keys, but this cluster is not encrypted")));
		enable_in_redo(record, ring_bytes, xlrec.keyring_len, next);
		goto done;
	}
	if (xlrec.serial <= current->serial)
		goto done;				/* our files say this already, or more */

	/* a new key ring: open it with our own key command */
	if (!keyring_read_file(KEYRING_FILE, local, KEYRING_MAX_FILE, &locallen, &err))
		ReportKeyringError(FATAL, &err);
	if (locallen != xlrec.keyring_len || memcmp(local, ring_bytes, locallen) != 0)
	{
		Keyring    *ring = palloc(sizeof(Keyring));

		if (!keyring_open_bytes(CurrentKeyCommand(), encryption_key_command_timeout,
								ring_bytes, xlrec.keyring_len, ring, &err))
		{
			ereport(WARNING,
					(errcode(ERRCODE_INVALID_PASSWORD),
					 errmsg("cannot follow the primary's page key generation %u: its key ring does not open with this server's key command",
							xlrec.generation),
					 errdetail("%s", err.message),
					 errhint("This server keeps page key generation %u, under which it stays readable; give it the primary's key-encryption key to follow.",
							 current->generation)));
			data_encryption_wipe(ring, sizeof(Keyring));
			goto done;
		}
		if (keep_old_wal_key(ring, next))
		{
			ereport(LOG,
					(errmsg("keeping the WAL key of generation %u: crash recovery of this server starts before %X/%X",
							next->wal_generation - 1, LSN_FORMAT_ARGS(next->wal_switch_lsn)),
					 errdetail("The primary dropped it; this server keeps it until the next rotation replaces it.")));
			InstallDataKeyring(ring);
		}
		else
		{
			if (!keyring_write_file(KEYRING_FILE, ring_bytes, xlrec.keyring_len, &err))
				ReportKeyringError(FATAL, &err);
			ChangeDataKeys(ring);
		}
		data_encryption_wipe(ring, sizeof(Keyring));
		pfree(ring);
	}
	next->marked = current->marked || next->operation == PAGE_KEYS_OP_ENABLE;
	/* SLRUs the primary encrypted or decrypted since: this node's own, first */
	if (next->operation >= PAGE_KEYS_OP_ENABLE &&
		current->operation == next->operation &&
		(next->slru_done & ~current->slru_done) != 0)
	{
		redo_state = current;
		(void) ConvertSlrusOnline(~(next->slru_done & ~current->slru_done),
								  next->operation != PAGE_KEYS_OP_ENABLE,
								  commit_slru_in_redo);
		redo_state = NULL;
	}
	if (!page_keys_write(".", next, &err))
		ReportKeyringError(FATAL, &err);
	SetPageKeysState(next);
	ereport(DEBUG1,
			(errmsg_internal("replayed page key state %u: generation %u, %s",
							 next->serial, next->generation,
							 page_keys_operation_name(next->operation))));
done:
	pfree(current);
	pfree(next);
	pfree(local);
}
