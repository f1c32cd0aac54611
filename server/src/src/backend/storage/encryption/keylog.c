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
	wal_changes = WALKeySwitchDiffers(state->wal_generation, state->wal_switch_lsn);
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

	if (!DataEncryptionEnabled())
		ereport(FATAL,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("WAL holds a change of the page keys, but this cluster is not encrypted")));
	GetPageKeysState(current);
	if (xlrec.serial <= current->serial)
		goto done;				/* our files say this already, or more */
	if (!page_keys_parse(text, xlrec.state_len, "WAL", next, &err))
		ReportKeyringError(FATAL, &err);

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
	next->marked = current->marked;
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
