/*-------------------------------------------------------------------------
 *
 * walkeys.c
 *	  pgcipher: the WAL key's generations — where new WAL switches to the
 *	  WAL key a rotation of the data keys drew, and when the old WAL key
 *	  may leave the key ring.
 *
 * pg_rotate_data_keys() draws a new WAL key into the WAL key slot the
 * current one does not use (KEY_WAL is slot A, KEY_WAL_B slot B), logs the
 * key ring with it, and calls SwitchWALKey():
 *
 *	1. under WALWriteLock, the switch point is the start of the segment
 *	   being filled if none of it is written, else of the next one, and
 *	   every page from it on is written under the new slot
 *	   (WALWriteSlot(): XLogWrite() reads the rule under the same lock, so
 *	   each page is under one slot, and none past the point is written
 *	   yet);
 *	2. XLOG_SWITCH ends the segment, so the switch comes now rather than
 *	   when WAL fills it;
 *	3. pg_encryption/pages records the point, and logs it.
 *
 * The record that brings a standby the new key precedes every page under
 * it.  Each page says its slot in the clear header (XLP_WAL_KEY_B), so a
 * reader never needs the switch point.  A crash between 1 and 3 leaves
 * "at the next segment" in the file: WAL written after the point is
 * readable by its flag, new WAL goes on under the old slot, and the
 * launcher switches again after the restart.
 *
 * The old WAL key stays in the key ring as long as this server may read
 * WAL written under it: crash recovery (the last checkpoint's redo point
 * lies before the switch), a replication slot (its restart_lsn), the
 * archiver (a segment before the switch not yet archived), a base backup
 * in progress (it may copy the key ring after the drop, while its WAL
 * starts before the switch).  pg_encryption_drop_old_wal_key() drops it
 * when none of these holds it (checkpointing first if the redo point is
 * before the switch); the next rotation replaces it under the
 * same conditions and refuses to start otherwise.  Backups and WAL
 * archives taken before the drop keep their own copy of the key ring,
 * which holds it.  Design 9.6.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/walkeys.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "common/keyring.h"
#include "common/page_keys.h"
#include "miscadmin.h"
#include "postmaster/bgwriter.h"
#include "replication/slot.h"
#include "storage/encryption.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"

#define crash_point(step) \
	EncryptionTestCrashPoint("PGCIPHER_TEST_DATA_ROTATION_CRASH_AT", step)

/*
 * The key id of the WAL key of the generation before the current one, if
 * the key ring still holds it; 0 if not.  Before the first rotation of
 * the WAL key, slot B can hold only a key an interrupted rotation drew,
 * which nothing was written under: 0 too.
 */
uint32
OldWALKeyId(const PageKeysState *state)
{
	uint32		id = wal_keys_slot_key_id(1 - page_keys_slot(state->wal_generation));
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];
	bool		held;

	if (state->wal_generation <= 1)
		return 0;
	held = CopyDataKey(id, key);
	data_encryption_wipe(key, sizeof(key));
	return held ? id : 0;
}

/* Where crash recovery would start: pg_control's last checkpoint's redo */
static XLogRecPtr
crash_recovery_start(void)
{
	XLogRecPtr	redo;
	TimeLineID	tli;

	GetOldestRestartPoint(&redo, &tli);
	return redo;
}

/* The first segment before the switch that the archiver has not archived */
static bool
unarchived_segment_before(XLogRecPtr switch_lsn, char *name)
{
	DIR		   *dir;
	struct dirent *de;
	XLogSegNo	switch_segno;
	bool		found = false;

	XLByteToSeg(switch_lsn, switch_segno, wal_segment_size);
	dir = AllocateDir(XLOGDIR "/archive_status");
	while (!found && (de = ReadDir(dir, XLOGDIR "/archive_status")) != NULL)
	{
		size_t		len = strlen(de->d_name);
		TimeLineID	tli;
		XLogSegNo	segno;

		if (len != XLOG_FNAME_LEN + strlen(".ready") ||
			strcmp(de->d_name + XLOG_FNAME_LEN, ".ready") != 0)
			continue;
		memcpy(name, de->d_name, XLOG_FNAME_LEN);
		name[XLOG_FNAME_LEN] = '\0';
		if (!IsXLogFileName(name))
			continue;
		XLogFromFileName(name, &tli, &segno, wal_segment_size);
		found = (segno < switch_segno);
	}
	FreeDir(dir);
	return found;
}

/* A replication slot that keeps WAL from before the switch: its name */
static bool
slot_before(XLogRecPtr switch_lsn, char *name, XLogRecPtr *restart_lsn)
{
	bool		found = false;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (int i = 0; i < max_replication_slots && !found; i++)
	{
		ReplicationSlot *s = &ReplicationSlotCtl->replication_slots[i];

		SpinLockAcquire(&s->mutex);
		if (s->in_use && !XLogRecPtrIsInvalid(s->data.restart_lsn) &&
			s->data.restart_lsn < switch_lsn)
		{
			strlcpy(name, NameStr(s->data.name), NAMEDATALEN);
			*restart_lsn = s->data.restart_lsn;
			found = true;
		}
		SpinLockRelease(&s->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	return found;
}

/*
 * Whether this server may still read WAL under the old WAL key; if so,
 * why, in a sentence for an errdetail.  Call it on a primary.  When crash
 * recovery would start before the switch, a checkpoint is what the DBA
 * would run: with checkpoint, it runs one (immediate) and looks on.
 */
bool
OldWALKeyNeeded(const PageKeysState *state, bool checkpoint, char *why,
				size_t size)
{
	if (state->wal_generation <= 1)
		return false;
	if (state->wal_switch_lsn == InvalidXLogRecPtr)
	{
		snprintf(why, size, "New WAL has not switched to the WAL key of generation %u yet.",
				 state->wal_generation);
		return true;
	}
	return WALBeforeSwitchNeeded(state->wal_switch_lsn, checkpoint, why, size);
}

/*
 * Whether this server may still read WAL written before switch_lsn (under
 * the old WAL key, or encrypted at all once a cluster is decrypted); if
 * so, why.  With checkpoint, a redo point before it is moved past it.
 */
bool
WALBeforeSwitchNeeded(XLogRecPtr switch_lsn, bool checkpoint, char *why,
					  size_t size)
{
	XLogRecPtr	lsn;
	char		name[MAXPGPATH];

	if (checkpoint && crash_recovery_start() < switch_lsn)
		RequestCheckpoint(CHECKPOINT_FORCE | CHECKPOINT_WAIT | CHECKPOINT_IMMEDIATE);
	if ((lsn = crash_recovery_start()) < switch_lsn)
	{
		snprintf(why, size, "Crash recovery would start at %X/%X, before the WAL switch at %X/%X.",
				 LSN_FORMAT_ARGS(lsn), LSN_FORMAT_ARGS(switch_lsn));
		return true;
	}
	if (slot_before(switch_lsn, name, &lsn))
	{
		snprintf(why, size, "Replication slot \"%s\" keeps WAL from %X/%X, before the WAL switch at %X/%X.",
				 name, LSN_FORMAT_ARGS(lsn), LSN_FORMAT_ARGS(switch_lsn));
		return true;
	}
	if (XLogArchivingActive() && unarchived_segment_before(switch_lsn, name))
	{
		snprintf(why, size, "WAL segment %s, before the WAL switch, is not archived yet.",
				 name);
		return true;
	}
	if (XLogBackupsRunning())
	{
		snprintf(why, size, "A base backup is running; its WAL may start before the WAL switch at %X/%X.",
				 LSN_FORMAT_ARGS(switch_lsn));
		return true;
	}
	return false;
}

/*
 * A cluster being encrypted online: segments from the switch point on that
 * exist already were recycled from WAL written in clear, and keep its
 * bytes until WAL overwrites them; remove them, so that the switch starts
 * in new files.  On a primary the caller holds WALWriteLock, so no process
 * writes WAL there (none is written yet); a standby's redo passes a point
 * two segments past what its WAL receiver writes.  ControlFileLock keeps
 * the checkpointer from installing a recycled segment meanwhile.  Later,
 * walcrypt.c keeps segments in clear from being recycled.
 */
void
RemoveRecycledWALSegments(XLogRecPtr switch_lsn)
{
	DIR		   *dir;
	struct dirent *de;
	XLogSegNo	switch_segno;

	XLByteToSeg(switch_lsn, switch_segno, wal_segment_size);
	LWLockAcquire(ControlFileLock, LW_EXCLUSIVE);
	dir = AllocateDir(XLOGDIR);
	while ((de = ReadDir(dir, XLOGDIR)) != NULL)
	{
		TimeLineID	tli;
		XLogSegNo	segno;
		char		path[MAXPGPATH];

		if (!IsXLogFileName(de->d_name))
			continue;
		XLogFromFileName(de->d_name, &tli, &segno, wal_segment_size);
		if (segno < switch_segno)
			continue;
		snprintf(path, sizeof(path), XLOGDIR "/%s", de->d_name);
		(void) durable_unlink(path, LOG);
	}
	FreeDir(dir);
	LWLockRelease(ControlFileLock);
}

/*
 * Steps 1 to 3 of the header, once the state with the new WAL generation
 * is written and logged.  The caller holds the key ring directory's lock.
 */
void
SwitchWALKey(void)
{
	PageKeysState *state = palloc(sizeof(PageKeysState));
	XLogRecPtr	insert;
	XLogRecPtr	switch_lsn;
	XLogSegNo	segno;

	GetPageKeysState(state);
	if (!wal_switch_pending(state))
	{
		pfree(state);
		return;
	}

	/*
	 * 1: the start of the segment being filled if nothing of it is written
	 * yet, else of the next one.  XLogWrite() writes under WALWriteLock, so
	 * no page at or after that point is written while we hold it.
	 */
	LWLockAcquire(WALWriteLock, LW_EXCLUSIVE);
	insert = GetXLogInsertRecPtr();
	XLByteToSeg(insert, segno, wal_segment_size);
	XLogSegNoOffsetToRecPtr(segno, 0, wal_segment_size, switch_lsn);
	if (GetXLogWriteRecPtr() > switch_lsn)
		XLogSegNoOffsetToRecPtr(segno + 1, 0, wal_segment_size, switch_lsn);
	if (state->operation == PAGE_KEYS_OP_ENABLE)
		RemoveRecycledWALSegments(switch_lsn);
	SetWALKeySwitch(state->wal_generation, switch_lsn);
	LWLockRelease(WALWriteLock);
	crash_point("wal-switched");

	/* 2: end the segment now, rather than when WAL fills it */
	(void) RequestXLogSwitch(false);

	/* 3 */
	state->wal_switch_lsn = switch_lsn;
	WritePageKeysState(state);
	ereport(LOG,
			(errmsg("WAL from %X/%X on is written under the WAL key of generation %u",
					LSN_FORMAT_ARGS(switch_lsn), state->wal_generation)));
	pfree(state);
}

/*
 * pg_encryption_drop_old_wal_key() returns a line that says what it did;
 * an error says what still needs the old key.
 */
Datum
pg_encryption_drop_old_wal_key(PG_FUNCTION_ARGS)
{
	PageKeysState *state = palloc(sizeof(PageKeysState));
	uint32		old_id;
	int			lockfd;
	char		why[256];
	char		line[128];

	CheckDataKeysOperator("drop the old WAL key");
	if (!DataEncryptionEnabled())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this cluster is not encrypted, so it has no WAL key to drop")));

	lockfd = LockDataKeysChange(true);
	GetPageKeysState(state);
	if ((old_id = OldWALKeyId(state)) == 0)
	{
		CloseTransientFile(lockfd);
		snprintf(line, sizeof(line), "no old WAL key: WAL generation %u is the only one",
				 state->wal_generation);
		PG_RETURN_TEXT_P(cstring_to_text(line));
	}
	if (OldWALKeyNeeded(state, true, why, sizeof(why)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("the WAL key of generation %u is still needed", state->wal_generation - 1),
				 errdetail("%s", why),
				 errhint("Drop or advance the replication slot, let the archiver catch up, or wait for the backup to end; then try again.")));

	DropDataKey(old_id, state);
	CloseTransientFile(lockfd);
	ereport(LOG,
			(errmsg("the WAL key of generation %u left the key ring", state->wal_generation - 1),
			 errdetail("WAL from before %X/%X can be read only with the key ring of a backup taken before.",
					   LSN_FORMAT_ARGS(state->wal_switch_lsn))));
	snprintf(line, sizeof(line), "dropped the WAL key of generation %u", state->wal_generation - 1);
	PG_RETURN_TEXT_P(cstring_to_text(line));
}
