/*-------------------------------------------------------------------------
 *
 * datarotation.c
 *	  pgcipher: rotate the page key of a running cluster, online.
 *
 * SELECT pg_rotate_data_keys() draws a new page key and a new WAL key into
 * the slots the current ones do not use, makes every process write new
 * pages under the first and new WAL (from the next segment: walkeys.c)
 * under the second, and returns; a launcher (a background worker started with the server)
 * then has one worker per database (template0 included) dirty every block
 * of every fork of every relation, through shared buffers and with a
 * full-page image in the WAL, throttled as VACUUM is, and write it: a
 * block written after the switch is written under the new key, and the
 * page's mark (pagecrypt.c) says so, so a relation holds pages of both
 * keys while the workers run.  When every database is done and older
 * temporary tables are gone, the rotation ends and the old key leaves the
 * key ring.  Design 9.6 has the state machine:
 *
 *	1. run the key command, write the key ring with the new key
 *	   (crash: the ring holds a key nothing uses; the launcher drops it)
 *	2. write pg_encryption/pages: the new generation, "rotate"; every
 *	   process writes new pages under it from its next page on
 *	2'. new WAL under the new WAL key from the next segment on
 *	   (walkeys.c; crash: the launcher switches after the restart)
 *	3. per database: dirty every block with its full-page image, write
 *	   it, and record the database done in pg_encryption/pages (crash:
 *	   the database is done again)
 *	4. wait for temporary tables older than the generation
 *	5. pg_encryption/pages: no operation, every page marked
 *	6. run the key command, write the key ring without the old key
 *	   (crash between 5 and 6: the launcher drops it when it starts,
 *	   after a checkpoint, since it cannot know what reached the disk)
 *
 * pg_encryption_pause() and pg_encryption_resume() stop and restart the
 * workers and change their throttle; a restart or a crash resumes where
 * pg_encryption/pages says.  Tests stop the rotation at each step with
 * PGCIPHER_TEST_DATA_ROTATION_CRASH_AT, as keyrotation.c's tests do.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/datarotation.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "commands/vacuum.h"
#include "common/keyring.h"
#include "common/page_keys.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/bgwriter.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/bufmgr.h"
#include "storage/encryption.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/smgr.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/* Blocks a worker handles under one lock and transaction */
#define BLOCKS_PER_CHUNK	1024
/* Blocks a worker dirties before it writes them, under one WAL flush */
#define BLOCKS_PER_FLUSH	32

/* What a worker tells the launcher, through the progress */
#define WORKER_RUNNING		0
#define WORKER_DONE			1
#define WORKER_STOPPED		2	/* paused, or the operation changed */

/* The test hook: kill -9 of the server at the named step */
#define crash_point(step) \
	EncryptionTestCrashPoint("PGCIPHER_TEST_DATA_ROTATION_CRASH_AT", step)

/*
 * What every operation on the data keys (a rotation here, an encryption
 * or a decryption in enabling.c) checks and takes first
 */

/* The key ring directory's lock, which a rotation of the KEK takes too */
int
LockDataKeysChange(bool wait)
{
	int			fd = LockKeyringDirectory(wait);

	if (fd < 0)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("another change of the key ring is in progress")));
	return fd;
}

/* Throttle arguments, checked before anything is written */
void
CheckDataKeysThrottle(int cost_delay, int cost_limit)
{
	if (cost_delay < 0 || cost_delay > PAGE_KEYS_MAX_COST_DELAY)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost_delay must be between 0 and %d milliseconds", PAGE_KEYS_MAX_COST_DELAY)));
	if (cost_limit < 1 || cost_limit > PAGE_KEYS_MAX_COST_LIMIT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cost_limit must be between 1 and %d", PAGE_KEYS_MAX_COST_LIMIT)));
}

/* A superuser, on a primary: standbys follow through the WAL */
void
CheckDataKeysOperator(const char *what)
{
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s", what),
				 errdetail("Only superusers may %s.", what)));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot %s during recovery", what),
				 errhint("Run it on the primary; standbys follow.")));
}

/*
 * The switch point of an operation: the OID counter and the next XID now
 * (older transactions may write pages under the old rule, older temporary
 * tables keep them)
 */
void
SetDataKeysSwitchPoint(PageKeysState *state)
{
	LWLockAcquire(OidGenLock, LW_SHARED);
	state->switch_oid = TransamVariables->nextOid;
	LWLockRelease(OidGenLock);
	state->switch_xid = XidFromFullTransactionId(ReadNextFullTransactionId());
}

static void
check_superuser_on_primary(const char *what)
{
	CheckDataKeysOperator(what);
	if (!DataEncryptionEnabled())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this cluster is not encrypted, so it has no data keys to rotate")));
}

/*
 * pg_rotate_data_keys(cost_delay int, cost_limit int) returns a line that
 * says what started.  Steps 1 and 2 of the header; the launcher does the
 * rest.
 */
Datum
pg_rotate_data_keys(PG_FUNCTION_ARGS)
{
	int			cost_delay = PG_GETARG_INT32(0);
	int			cost_limit = PG_GETARG_INT32(1);
	PageKeysState state;
	Keyring    *ring;
	int			lockfd;
	uint32		generation;
	int			new_slot;
	int			old_slot;
	uint32		old_wal_id;
	bool		rotate_temp;
	uint32		new_ids[3];
	char		why[256];
	char		line[128];

	check_superuser_on_primary("rotate the data keys");
	CheckDataKeysThrottle(cost_delay, cost_limit);

	lockfd = LockDataKeysChange(false);
	GetPageKeysState(&state);
	if (state.operation != PAGE_KEYS_OP_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(state.operation == PAGE_KEYS_OP_ENABLE ?
						"the cluster is being encrypted" :
						"a rotation of the data keys is already running"),
				 errhint("Watch it in pg_stat_progress_encryption; pg_encryption_pause() and pg_encryption_resume() stop and restart it.")));

	generation = state.generation + 1;
	new_slot = page_keys_slot(generation);
	old_slot = page_keys_slot(state.generation);

	ring = palloc(sizeof(Keyring));
	CopyDataEncryptionKeyring(ring);
	if (keyring_get_key(ring, page_keys_slot_key_id(new_slot)) != NULL &&
		keyring_get_key(ring, page_keys_slot_key_id(old_slot)) != NULL)
	{
		/* a key drawn by a rotation that stopped before step 2 is unused */
		ereport(LOG,
				(errmsg("replacing the unused page key in slot %c", new_slot == PAGE_SLOT_A ? 'A' : 'B')));
	}

	/*
	 * The WAL key's slot: the old WAL key there leaves the ring (replaced by
	 * the new one) only if nothing needs it any more (walkeys.c)
	 */
	old_wal_id = OldWALKeyId(&state);
	if (old_wal_id != 0 && OldWALKeyNeeded(&state, true, why, sizeof(why)))
	{
		data_encryption_wipe(ring, sizeof(Keyring));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot rotate the data keys while the WAL key of generation %u is still needed",
						state.wal_generation - 1),
				 errdetail("%s", why),
				 errhint("The rotation draws the next WAL key into its slot.  Drop or advance the replication slot, let the archiver catch up, or wait for the backup to end; then try again.")));
	}

	/*
	 * The transaction files stay under the key initdb drew: once slot A is to
	 * be freed, keep that key as KEY_SLRU
	 */
	if (keyring_get_key(ring, KEY_SLRU) == NULL)
	{
		KeyringKey	slru = *keyring_get_key(ring, KEY_RELATION);

		slru.id = KEY_SLRU;
		keyring_put_key(ring, &slru);
		data_encryption_wipe(&slru, sizeof(slru));
	}

	/*
	 * The temporary-file key too, into the slot not in use, unless it changed
	 * already since the server started: files under the other slot may still
	 * be open then (TempKeySwitchedSinceStart())
	 */
	rotate_temp = !TempKeySwitchedSinceStart();
	if (!rotate_temp)
		ereport(NOTICE,
				(errmsg("the temporary-file key stays as it is in this rotation"),
				 errdetail("It changed already since the server started, and temporary files under the previous one may still be open."),
				 errhint("A rotation after the next restart of the server changes it.")));

	/* the new page, WAL and temporary-file keys, into the slots not in use */
	new_ids[0] = page_keys_slot_key_id(new_slot);
	new_ids[1] = wal_keys_slot_key_id(page_keys_slot(state.wal_generation + 1));
	new_ids[2] = temp_keys_slot_key_id(page_keys_slot(state.temp_generation + 1));
	for (int i = 0; i < (rotate_temp ? 3 : 2); i++)
	{
		KeyringKey	key;
		bool		drawn = keyring_draw_key(&key, new_ids[i], ring->cipher);

		if (drawn)
			keyring_put_key(ring, &key);
		data_encryption_wipe(&key, sizeof(key));
		if (!drawn)
		{
			data_encryption_wipe(ring, sizeof(Keyring));
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random data key")));
		}
	}

	/* 1: the key ring, with the new key nothing uses yet */
	PG_TRY();
	{
		InstallDataKeyring(ring);
	}
	PG_FINALLY();
	{
		data_encryption_wipe(ring, sizeof(Keyring));
		pfree(ring);
	}
	PG_END_TRY();
	crash_point("keyring-written");

	/* 2: new pages under the new generation from now on */
	{
		DataRotationProgress p = {0};

		p.generation = generation;
		SetDataRotationProgress(&p);
	}
	state.generation = generation;
	state.operation = PAGE_KEYS_OP_ROTATE;
	state.paused = false;
	state.cost_delay = cost_delay;
	state.cost_limit = cost_limit;
	SetDataKeysSwitchPoint(&state);
	state.ndone = 0;
	state.wal_generation++;
	state.wal_switch_lsn = InvalidXLogRecPtr;	/* the next step says where */
	if (rotate_temp)
		state.temp_generation++;	/* new temporary files: at once */
	WritePageKeysState(&state);
	crash_point("switched");

	/* 2': new WAL under the new WAL key from the next segment on */
	SwitchWALKey();
	CloseTransientFile(lockfd);
	if (old_wal_id != 0)
		ereport(LOG,
				(errmsg("the WAL key of generation %u left the key ring",
						state.wal_generation - 2)));

	ereport(LOG,
			(errmsg("rotation of the data keys started: new pages are written under generation %u",
					generation),
			 errdetail("Background workers rewrite every block with cost_delay %d ms and cost_limit %d.",
					   cost_delay, cost_limit)));
	snprintf(line, sizeof(line), "rotating to generation %u", generation);
	PG_RETURN_TEXT_P(cstring_to_text(line));
}

/*
 * pg_encryption_pause() and pg_encryption_resume(cost_delay, cost_limit):
 * the workers stop after their current chunk, and start again where they
 * were, with the throttle given (NULL: as it was)
 */
static Datum
set_paused(FunctionCallInfo fcinfo, bool paused)
{
	PageKeysState state;
	int			lockfd;

	check_superuser_on_primary(paused ? "pause the rotation of the data keys" :
							   "resume the rotation of the data keys");
	lockfd = LockDataKeysChange(true);
	GetPageKeysState(&state);
	if (state.operation == PAGE_KEYS_OP_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no rotation of the data keys is running")));
	if (!paused)
	{
		int			cost_delay = PG_ARGISNULL(0) ? state.cost_delay : PG_GETARG_INT32(0);
		int			cost_limit = PG_ARGISNULL(1) ? state.cost_limit : PG_GETARG_INT32(1);

		CheckDataKeysThrottle(cost_delay, cost_limit);
		state.cost_delay = cost_delay;
		state.cost_limit = cost_limit;
	}
	state.paused = paused;
	WritePageKeysState(&state);
	CloseTransientFile(lockfd);
	PG_RETURN_VOID();
}

Datum
pg_encryption_pause(PG_FUNCTION_ARGS)
{
	return set_paused(fcinfo, true);
}

Datum
pg_encryption_resume(PG_FUNCTION_ARGS)
{
	return set_paused(fcinfo, false);
}

/*
 * The key id of a page key left in the slot the current generation does
 * not use, which step 7 drops; 0 if there is none.  Before the first
 * rotation, slot A's key also encrypts the transaction files: never
 * unused then.
 */
static uint32
unused_page_key(const PageKeysState *state)
{
	uint32		id = page_keys_slot_key_id(1 - page_keys_slot(state->generation));
	unsigned char key[DATA_ENCRYPTION_MAX_XTS_KEY_LEN];
	bool		held;

	if (state->operation != PAGE_KEYS_OP_NONE ||
		(id == KEY_RELATION && !state->marked))
		return 0;
	held = CopyDataKey(id, key);
	data_encryption_wipe(key, sizeof(key));
	return held ? id : 0;
}

/* pg_stat_get_encryption_progress(): one row, the view's */
Datum
pg_stat_get_encryption_progress(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[14];
	bool		nulls[14] = {0};
	PageKeysState state;
	DataRotationProgress p;
	static const char *const phases[] = {
		"idle", "rewriting", "waiting for temporary tables", "checkpoint",
		"dropping old key", "paused", "waiting for older transactions",
		"waiting for the encrypted WAL", "waiting for disk space"
	};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (!DataEncryptionEnabled())
	{
		page_keys_initial(&state);
		memset(&p, 0, sizeof(p));
	}
	else
	{
		GetPageKeysState(&state);
		GetDataRotationProgress(&p);
	}
	if (state.operation == PAGE_KEYS_OP_NONE)
		p.phase = unused_page_key(&state) ? DATA_ROTATION_DROPPING_KEY : DATA_ROTATION_IDLE;
	else if (state.paused)
		p.phase = DATA_ROTATION_PAUSED;
	else if (p.phase == DATA_ROTATION_IDLE)
		p.phase = DATA_ROTATION_REWRITING;	/* the launcher starts within a
											 * second */

	values[0] = p.pid ? Int32GetDatum(p.pid) : (Datum) 0;
	nulls[0] = (p.pid == 0);
	values[1] = CStringGetTextDatum(page_keys_operation_name(state.operation));
	values[2] = CStringGetTextDatum(phases[p.phase]);
	values[3] = Int64GetDatum(state.generation);
	values[4] = ObjectIdGetDatum(p.dbid);
	nulls[4] = (p.dbid == InvalidOid || p.phase == DATA_ROTATION_IDLE);
	values[5] = ObjectIdGetDatum(p.relid);
	nulls[5] = (p.relid == InvalidOid || p.phase != DATA_ROTATION_REWRITING);
	values[6] = CStringGetTextDatum(forkNames[p.forknum]);
	nulls[6] = nulls[5];
	values[7] = Int64GetDatum(p.blocks_done);
	values[8] = Int64GetDatum(p.blocks_total);
	nulls[7] = nulls[8] = nulls[5];
	values[9] = Int32GetDatum(state.operation == PAGE_KEYS_OP_NONE ? 0 : state.ndone);
	values[10] = Int32GetDatum(p.databases_total);
	nulls[10] = (p.phase == DATA_ROTATION_IDLE);
	values[11] = Int64GetDatum(p.blocks_rewritten);
	values[12] = Int32GetDatum(state.cost_delay);
	values[13] = Int32GetDatum(state.cost_limit);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* ---- the workers ---- */

static void
publish(void (*change) (DataRotationProgress *p, const void *arg), const void *arg)
{
	DataRotationProgress p;

	GetDataRotationProgress(&p);
	change(&p, arg);
	SetDataRotationProgress(&p);
}

static void
set_phase(DataRotationProgress *p, const void *arg)
{
	p->phase = *(const int *) arg;
	p->pid = MyProcPid;
}

static void
phase(int ph)
{
	publish(set_phase, &ph);
}

/* Whether the worker should go on: the operation runs and is not paused */
static bool
should_continue(PageKeysState *state)
{
	GetPageKeysState(state);
	return state->operation != PAGE_KEYS_OP_NONE && !state->paused;
}

/*
 * Call visit(tuple, arg) for each tuple of a catalog (pg_class of this
 * database, or the shared pg_database), in a transaction of its own,
 * until it returns false.  What it keeps must live in a memory context
 * that outlives the transaction: the caller's, which scan_catalog() makes
 * current around each call.
 */
static void
scan_catalog(Oid catalog, bool (*visit) (HeapTuple tup, void *arg), void *arg)
{
	MemoryContext caller = CurrentMemoryContext;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	bool		more = true;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(catalog, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (more && HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		MemoryContext txn = MemoryContextSwitchTo(caller);

		more = visit(tup, arg);
		MemoryContextSwitchTo(txn);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

typedef struct RelationList
{
	bool		shared;			/* the shared catalogs, or this database's */
	List	   *rels;
} RelationList;

static bool
add_relation_with_storage(HeapTuple tup, void *arg)
{
	Form_pg_class c = (Form_pg_class) GETSTRUCT(tup);
	RelationList *list = arg;

	if (RELKIND_HAS_STORAGE(c->relkind) &&
		c->relpersistence != RELPERSISTENCE_TEMP &&
		c->relisshared == list->shared)
		list->rels = lappend_oid(list->rels, c->oid);
	return true;
}

/* The relations of this database with storage, shared ones if asked */
static List *
relations_with_storage(bool shared)
{
	RelationList list = {.shared = shared,.rels = NIL};

	scan_catalog(RelationRelationId, add_relation_with_storage, &list);
	return list.rels;
}

typedef struct RelationPosition
{
	Oid			relid;
	int			forknum;
	BlockNumber block;
	BlockNumber nblocks;
	int64		rewritten;
} RelationPosition;

static void
set_position(DataRotationProgress *p, const void *arg)
{
	const RelationPosition *pos = arg;

	p->pid = MyProcPid;
	p->phase = DATA_ROTATION_REWRITING;
	p->dbid = MyDatabaseId;
	p->relid = pos->relid;
	p->forknum = pos->forknum;
	p->blocks_done = pos->block;
	p->blocks_total = pos->nblocks;
	p->blocks_rewritten += pos->rewritten;
}

/* The end of the latest full-page image this worker logged */
static XLogRecPtr last_image_end = InvalidXLogRecPtr;

/*
 * Write the blocks a worker just dirtied, under the new key: the WAL first
 * (one flush for them all, so that writing each needs none), then each
 * block that is still dirty.  The worker writes them itself, at its
 * throttled pace, rather than leaving them to a checkpoint's burst.
 */
static void
write_dirtied(Buffer *held, int *nheld)
{
	if (*nheld == 0)
		return;
	if (!XLogRecPtrIsInvalid(last_image_end))
		XLogFlush(last_image_end);
	for (int i = 0; i < *nheld; i++)
	{
		LockBuffer(held[i], BUFFER_LOCK_SHARE);
		FlushOneBuffer(held[i]);	/* a no-op if someone wrote it meanwhile */
		UnlockReleaseBuffer(held[i]);
	}
	*nheld = 0;
}

/*
 * Rewrite up to BLOCKS_PER_CHUNK blocks of one fork from pos->block, under
 * one lock that keeps the relation from being truncated or dropped: each
 * block is dirtied with a full-page image in the WAL (for standbys and
 * restores), then written; false when the relation or the fork is gone
 */
static bool
rewrite_chunk(RelationPosition *pos, BufferAccessStrategy strategy)
{
	Relation	rel;
	BlockNumber end;
	bool		logged;
	Buffer		held[BLOCKS_PER_FLUSH];
	int			nheld = 0;

	StartTransactionCommand();
	rel = try_relation_open(pos->relid, AccessShareLock);
	if (rel == NULL)
	{
		CommitTransactionCommand();
		return false;
	}
	if (!smgrexists(RelationGetSmgr(rel), pos->forknum))
	{
		relation_close(rel, AccessShareLock);
		CommitTransactionCommand();
		return false;
	}
	pos->nblocks = RelationGetNumberOfBlocksInFork(rel, pos->forknum);
	end = Min(pos->nblocks, pos->block + BLOCKS_PER_CHUNK);
	logged = RelationNeedsWAL(rel) || pos->forknum == INIT_FORKNUM;
	pos->rewritten = 0;
	for (; pos->block < end; pos->block++)
	{
		Buffer		buf;

		CHECK_FOR_INTERRUPTS();
		buf = ReadBufferExtended(rel, pos->forknum, pos->block, RBM_NORMAL, strategy);
		LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
		if (!PageIsNew(BufferGetPage(buf)))
		{
			/* dirty: whoever writes it next writes it under the new key */
			START_CRIT_SECTION();
			MarkBufferDirty(buf);
			if (logged)
				last_image_end = log_newpage_buffer(buf, false);
			END_CRIT_SECTION();
			pos->rewritten++;
		}
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
		held[nheld++] = buf;	/* pinned until written */
		if (nheld == BLOCKS_PER_FLUSH)
			write_dirtied(held, &nheld);
#if PG_VERSION_NUM >= 180000
		vacuum_delay_point(false);
#else
		vacuum_delay_point();
#endif
	}
	write_dirtied(held, &nheld);
	relation_close(rel, AccessShareLock);
	CommitTransactionCommand();
	publish(set_position, pos);
	return pos->block < pos->nblocks;
}

/* What an operation is called in messages */
static const char *
operation_title(int operation)
{
	switch (operation)
	{
		case PAGE_KEYS_OP_ENABLE:
			return "encryption";
		case PAGE_KEYS_OP_DISABLE:
			return "decryption";
		default:
			return "rotation of the data keys";
	}
}

/*
 * The free space, in MB, of the fullest of the file systems the workers
 * fill: pg_wal's (each rewritten block is a full-page image in the WAL)
 * and the data directory's (a copy-on-write file system allocates for a
 * block rewritten in place).  -1 when it cannot be read.
 */
static int64
free_space_mb(void)
{
	const char *const dirs[] = {XLOGDIR, "."};
	int64		least = -1;

	for (int i = 0; i < lengthof(dirs); i++)
	{
		struct statvfs fs;
		int64		mb;

		if (statvfs(dirs[i], &fs) != 0)
			continue;
		mb = (int64) ((uint64) fs.f_bavail * fs.f_frsize / (1024 * 1024));
		if (least < 0 || mb < least)
			least = mb;
	}
	return least;
}

/*
 * Wait while less than encryption_min_free_space is free: the work stops
 * before it fills the disk (a full pg_wal stops PostgreSQL with a PANIC),
 * and goes on by itself once space returns or the setting is lowered.
 * False when the operation stopped or was paused meanwhile.
 */
static bool
wait_for_disk_space(PageKeysState *state)
{
	bool		said = false;

	for (;;)
	{
		int64		mb;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		mb = free_space_mb();
		if (encryption_min_free_space == 0 || mb < 0 ||
			mb >= encryption_min_free_space)
			break;
		if (!said)
			ereport(LOG,
					(errmsg("the online %s waits for disk space",
							operation_title(state->operation)),
					 errdetail("%lld MB are free in the file system of pg_wal or of the data directory, less than \"encryption_min_free_space\" (%d MB).",
							   (long long) mb, encryption_min_free_space),
					 errhint("Free space, or lower \"encryption_min_free_space\" and reload: the work goes on by itself.")));
		said = true;
		phase(DATA_ROTATION_WAITING_SPACE);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (!should_continue(state))
			return false;
	}
	if (said)
	{
		ereport(LOG,
				(errmsg("the online %s goes on: disk space is free again",
						operation_title(state->operation))));
		phase(DATA_ROTATION_REWRITING);
	}
	return true;
}

/* Set vacuum's throttle from the state (re-read per chunk: re-throttling) */
static void
throttle(const PageKeysState *state)
{
	/* the values vacuum_delay_point() uses (VACUUM's VacuumUpdateCosts()) */
	vacuum_cost_delay = state->cost_delay;
	vacuum_cost_limit = state->cost_limit;
	VacuumCostActive = (state->cost_delay > 0);
	if (!VacuumCostActive)
		VacuumCostBalance = 0;
}

/*
 * Temporary tables of other sessions are out of the workers' reach (their
 * blocks live in those sessions' memory): wait until the ones older than
 * the generation are gone.  Their file numbers come from the OID counter,
 * so a file numbered below switch_oid is older (after a wraparound of the
 * counter a newer one may be waited for too).
 */
typedef struct OlderTemporaryTables
{
	uint32		switch_oid;
	bool		found;
} OlderTemporaryTables;

static bool
find_older_temporary_table(HeapTuple tup, void *arg)
{
	Form_pg_class c = (Form_pg_class) GETSTRUCT(tup);
	OlderTemporaryTables *older = arg;

	/*
	 * an orphan (its session gone, in a crash or before a restore) has no
	 * file any more: start-up removed it
	 */
	older->found = (c->relpersistence == RELPERSISTENCE_TEMP &&
					RELKIND_HAS_STORAGE(c->relkind) &&
					c->relfilenode != InvalidOid &&
					c->relfilenode < older->switch_oid &&
					checkTempNamespaceStatus(c->relnamespace) == TEMP_NAMESPACE_IN_USE);
	return !older->found;
}

static bool
older_temporary_tables_remain(uint32 switch_oid)
{
	OlderTemporaryTables older = {.switch_oid = switch_oid,.found = false};

	scan_catalog(RelationRelationId, find_older_temporary_table, &older);
	return older.found;
}

static void
set_worker_result(DataRotationProgress *p, const void *arg)
{
	p->worker_result = *(const int *) arg;
}

/*
 * The full-page images this worker logs, compressed: each rewritten block
 * is one, so the WAL of a conversion would otherwise be as large as the
 * cluster (lz4 writes a fifth of it for pgbench's tables, in half the
 * time).  A method the DBA chose stays; standbys, pg_waldump and
 * pg_rewind read what the build they share with this server writes.
 */
static void
compress_images(void)
{
	if (wal_compression != WAL_COMPRESSION_NONE)
		return;
#if defined(USE_LZ4)
	SetConfigOption("wal_compression", "lz4", PGC_SUSET, PGC_S_OVERRIDE);
#elif defined(USE_ZSTD)
	SetConfigOption("wal_compression", "zstd", PGC_SUSET, PGC_S_OVERRIDE);
#else
	SetConfigOption("wal_compression", "pglz", PGC_SUSET, PGC_S_OVERRIDE);
#endif
}

/*
 * One database: every fork of every relation (the shared catalogs too when
 * bgw_extra says so), then the wait for older temporary tables, then the
 * WAL flushed, so that recording the database done is durable.
 */
void
DataRotationWorkerMain(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	bool		shared = MyBgworkerEntry->bgw_extra[0] != 0;
	PageKeysState state;
	BufferAccessStrategy strategy;
	List	   *rels;
	ListCell   *lc;
	int			result = WORKER_STOPPED;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid,
											  BGWORKER_BYPASS_ALLOWCONN);
	strategy = GetAccessStrategy(BAS_VACUUM);
	compress_images();

	rels = relations_with_storage(false);
	if (shared)
		rels = list_concat(rels, relations_with_storage(true));

	foreach(lc, rels)
	{
		RelationPosition pos = {.relid = lfirst_oid(lc)};

		for (pos.forknum = 0; pos.forknum <= MAX_FORKNUM; pos.forknum++)
		{
			pos.block = 0;
			do
			{
				if (!should_continue(&state) || !wait_for_disk_space(&state))
					goto out;
				throttle(&state);
			} while (rewrite_chunk(&pos, strategy));
		}
	}
	crash_point("database-rewritten");

	while (older_temporary_tables_remain(state.switch_oid))
	{
		phase(DATA_ROTATION_WAITING_TEMP);
		if (!should_continue(&state))
			goto out;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (!XLogRecPtrIsInvalid(last_image_end))
		XLogFlush(last_image_end);
	result = WORKER_DONE;
out:
	publish(set_worker_result, &result);
	proc_exit(0);
}

/* ---- the launcher ---- */

typedef struct DatabaseEntry
{
	Oid			oid;
	char		name[NAMEDATALEN];
} DatabaseEntry;

static bool
add_database(HeapTuple tup, void *arg)
{
	Form_pg_database d = (Form_pg_database) GETSTRUCT(tup);
	List	  **dbs = arg;
	DatabaseEntry *e;

	if (database_is_invalid_form(d))
		return true;			/* partly dropped: nothing to read there */
	e = palloc(sizeof(DatabaseEntry));
	e->oid = d->oid;
	strlcpy(e->name, NameStr(d->datname), NAMEDATALEN);
	*dbs = lappend(*dbs, e);
	return true;
}

static List *
database_list(void)
{
	List	   *dbs = NIL;

	scan_catalog(DatabaseRelationId, add_database, &dbs);
	return dbs;
}

/* The launcher's workers rewrote and wrote every block since it started */
static bool completed_here = false;

static bool
database_done(const PageKeysState *state, Oid oid)
{
	for (int i = 0; i < state->ndone; i++)
		if (state->done[i] == oid)
			return true;
	return false;
}

static void
set_database(DataRotationProgress *p, const void *arg)
{
	const int  *counts = arg;

	p->pid = MyProcPid;
	p->phase = DATA_ROTATION_REWRITING;
	p->dbid = (Oid) counts[0];
	p->relid = InvalidOid;
	p->databases_total = counts[1];
	p->worker_result = WORKER_RUNNING;
}

/* Run one database's worker and wait for it; its result */
static int
run_worker(const DatabaseEntry *db, bool shared, int ndatabases)
{
	BackgroundWorker worker = {0};
	BackgroundWorkerHandle *handle;
	DataRotationProgress p;
	int			counts[2] = {(int) db->oid, ndatabases};
	pid_t		pid;

	publish(set_database, counts);
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "postgres", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "DataRotationWorkerMain", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "pgcipher data key rotation worker for \"%s\"", db->name);
	strlcpy(worker.bgw_type, "pgcipher data key rotation worker", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(db->oid);
	worker.bgw_extra[0] = shared ? 1 : 0;
	worker.bgw_notify_pid = MyProcPid;

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		ereport(WARNING,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a data key rotation worker for database \"%s\"", db->name),
				 errhint("Raise max_worker_processes; the rotation tries again.")));
		return WORKER_STOPPED;
	}
	if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
		return WORKER_STOPPED;
	(void) WaitForBackgroundWorkerShutdown(handle);
	GetDataRotationProgress(&p);
	return p.worker_result;
}

/* Steps 3 to 5 of the header; false if stopped before the end */
static bool
rewrite_every_database(void)
{
	PageKeysState state;
	bool		shared_done = false;
	bool		enabling;

	completed_here = false;

	/*
	 * A transaction older than the switch may have written pages under the
	 * old key into a file no catalog snapshot shows yet (CREATE TABLE AS,
	 * REINDEX, VACUUM FULL, COPY into a new table: files written outside
	 * shared buffers before it commits): the workers list relations once no
	 * such transaction runs.  Later transactions write the new key only.
	 */
	GetPageKeysState(&state);
	if (state.operation == PAGE_KEYS_OP_ENABLE)
	{
		/*
		 * An encryption: pages an older transaction wrote are in clear, which
		 * stays readable, so a transaction prepared before (it writes nothing
		 * more) is not waited for; the ones running now are (design 9.7)
		 */
		phase(DATA_ROTATION_WAITING_XACTS);
		for (uint32 i = 0; i < ProcGlobal->allProcCount; i++)
		{
			PGPROC	   *proc = &ProcGlobal->allProcs[i];
			VirtualTransactionId vxid;

			/* a prepared transaction's proc has no process */
			if (proc == MyProc || proc->pid == 0)
				continue;
			GET_VXID_FROM_PGPROC(vxid, *proc);
			if (VirtualTransactionIdIsValid(vxid) &&
				!VirtualTransactionIdIsRecoveredPreparedXact(vxid))
				(void) VirtualXactLock(vxid, true);
		}
	}
	while (state.operation != PAGE_KEYS_OP_ENABLE &&
		   TransactionIdPrecedes(GetOldestActiveTransactionId(), state.switch_xid))
	{
		phase(DATA_ROTATION_WAITING_XACTS);
		if (!should_continue(&state))
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}

	for (;;)
	{
		List	   *dbs = database_list();
		ListCell   *lc;
		bool		any = false;

		foreach(lc, dbs)
		{
			DatabaseEntry *db = lfirst(lc);
			int			result;
			int			lockfd;

			if (!should_continue(&state))
				return false;
			if (database_done(&state, db->oid))
				continue;
			any = true;
			/* the shared catalogs go with the first database of a (re)start */
			result = run_worker(db, !shared_done, list_length(dbs));
			if (result != WORKER_DONE)
			{
				if (result == WORKER_RUNNING)
					ereport(WARNING,
							(errmsg("the data key rotation worker for database \"%s\" failed; trying again in 10 seconds",
									db->name)));
				return false;
			}
			shared_done = true;
			lockfd = LockDataKeysChange(true);
			GetPageKeysState(&state);
			if (state.ndone < PAGE_KEYS_MAX_DONE)
				state.done[state.ndone++] = db->oid;
			WritePageKeysState(&state);
			CloseTransientFile(lockfd);
			crash_point("database-done");
		}
		list_free_deep(dbs);
		/* databases created meanwhile are done on the next pass */
		if (!any)
			break;
	}

	/* every block is on disk under the new key: the workers wrote them */
	GetPageKeysState(&state);
	if (state.operation == PAGE_KEYS_OP_DISABLE)
	{
		/* in clear: FinishDecryption() ends it */
		ereport(LOG,
				(errmsg("decryption of the cluster rewrote every block in clear")));
		completed_here = true;
		return true;
	}
	{
		int			lockfd = LockDataKeysChange(true);

		GetPageKeysState(&state);
		enabling = (state.operation == PAGE_KEYS_OP_ENABLE);
		state.operation = PAGE_KEYS_OP_NONE;
		state.marked = true;
		state.paused = false;
		state.ndone = 0;
		WritePageKeysState(&state);
		CloseTransientFile(lockfd);
	}
	if (enabling)
		ereport(LOG,
				(errmsg("encryption of the cluster is complete: every page is under generation %u",
						state.generation),
				 errdetail("WAL written before %X/%X stays in clear, and so do backups and archives taken before.",
						   LSN_FORMAT_ARGS(state.wal_switch_lsn))));
	else
		ereport(LOG,
				(errmsg("rotation of the data keys rewrote every block: every page is under generation %u",
						state.generation)));
	completed_here = true;
	crash_point("completed");
	return true;
}

/*
 * Step 6: with no operation running, a page key in the slot the current
 * generation does not use is unused (the old generation's, or one drawn by
 * a rotation that stopped before it switched): it leaves the key ring.
 */
static void
drop_unused_page_key(void)
{
	PageKeysState state;
	uint32		unused_id;
	int			lockfd;

	GetPageKeysState(&state);
	if ((unused_id = unused_page_key(&state)) == 0)
		return;

	/*
	 * Every page must be on disk under the current generation first.  Where
	 * this launcher's workers completed the rotation they wrote every block;
	 * otherwise (a restart, a promoted standby, a restored backup: replayed
	 * pages may be only in shared buffers) a checkpoint writes them.
	 */
	if (!completed_here)
	{
		phase(DATA_ROTATION_CHECKPOINT);
		RequestCheckpoint(CHECKPOINT_FORCE | CHECKPOINT_WAIT | CHECKPOINT_FLUSH_ALL |
						  CHECKPOINT_IMMEDIATE);
		crash_point("checkpointed");
	}
	phase(DATA_ROTATION_DROPPING_KEY);
	lockfd = LockDataKeysChange(true);
	GetPageKeysState(&state);
	if (state.operation != PAGE_KEYS_OP_NONE)
		ereport(ERROR,
				(errmsg("a rotation of the data keys started while the old key was being dropped")));
	DropDataKey(unused_id, &state);
	CloseTransientFile(lockfd);
	phase(DATA_ROTATION_IDLE);
	ereport(LOG,
			(errmsg("the page key of generation %u left the key ring", state.generation - 1),
			 errdetail("Every page is under generation %u.  Backups taken before the rotation still hold the old key in their own key ring.",
					   state.generation)));
	crash_point("old-key-dropped");
}

/*
 * The launcher: started with the server (after recovery), it waits for a
 * rotation to run, resumes one a restart interrupted, and drops an unused
 * key.  An error (a failed key command, a full disk) ends it, and the
 * postmaster starts it again 5 seconds later, which resumes: the cluster
 * stays readable meanwhile, every page under a key the ring holds.
 */
void
DataRotationLauncherMain(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	phase(DATA_ROTATION_IDLE);

	/*
	 * A cluster being encrypted: log its key ring and state again, for a
	 * standby that a crash kept from the first record (redo skips it if not)
	 */
	{
		PageKeysState state;

		GetPageKeysState(&state);
		if (state.operation == PAGE_KEYS_OP_ENABLE && !RecoveryInProgress())
			LogPageKeysChange(&state);
	}

	for (;;)
	{
		PageKeysState state;
		long		wait_ms = 1000L;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		GetPageKeysState(&state);
		if (wal_switch_pending(&state))
		{
			/* a restart interrupted step 2' */
			int			lockfd = LockDataKeysChange(true);

			SwitchWALKey();
			CloseTransientFile(lockfd);
		}
		if (state.operation != PAGE_KEYS_OP_NONE &&
			state.operation != PAGE_KEYS_OP_DISABLED && !state.paused &&
			(!ConvertSlrusForOperation() || !rewrite_every_database()))
			wait_ms = 10000L;
		else if ((state.operation == PAGE_KEYS_OP_DISABLE && !state.paused) ||
				 state.operation == PAGE_KEYS_OP_DISABLED)
		{
			/* a decryption: every block in clear, the end */
			phase(DATA_ROTATION_WAITING_WAL);
			if (!FinishDecryption(completed_here))
				wait_ms = 10000L;
			phase(DATA_ROTATION_IDLE);
		}
		if (DataEncryptionEnabled())	/* not once decrypted: no key files */
			drop_unused_page_key();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wait_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* The postmaster registers the launcher when the cluster is encrypted */
void
RegisterDataRotationLauncher(void)
{
	BackgroundWorker worker = {0};

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	strlcpy(worker.bgw_library_name, "postgres", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "DataRotationLauncherMain", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pgcipher data key rotation launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pgcipher data key rotation launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}
