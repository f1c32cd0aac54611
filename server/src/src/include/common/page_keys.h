/*-------------------------------------------------------------------------
 *
 * page_keys.h
 *	  pgcipher: which page key new pages are written under, and the state
 *	  of an online rotation of the data keys (design 9.6).
 *
 * The file pg_encryption/pages says it; the server keeps a copy in memory
 * (storage/encryption/state.c), pg_controldata shows it, pg_upgrade
 * carries it.  No file means what pgcipher wrote before it had one:
 * generation 1, pages unmarked under slot A, no operation.
 *
 * src/include/common/page_keys.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAGE_KEYS_H
#define PAGE_KEYS_H

#include "common/data_encryption.h"
#include "common/keyring.h"

#define PAGE_KEYS_FILE		"pg_encryption/pages"

/* What the workers are doing */
#define PAGE_KEYS_OP_NONE		0
#define PAGE_KEYS_OP_ROTATE		1	/* rewriting every block under the new key */
#define PAGE_KEYS_OP_ENABLE		2	/* encrypting a cluster that was not */
#define PAGE_KEYS_OP_DISABLE	3	/* decrypting it: every block in clear */
#define PAGE_KEYS_OP_DISABLED	4	/* decrypted: the key files are to go */

/* Whether new pages, WAL from the switch and new files are written in clear */
#define page_keys_writes_clear(op) \
	((op) == PAGE_KEYS_OP_DISABLE || (op) == PAGE_KEYS_OP_DISABLED)

/* slru_done when every SLRU is encrypted (storage/encryption/slrucrypt.c) */
#define PAGE_KEYS_SLRU_ALL		0xFFU

/* Throttle defaults: vacuum's, which a DBA already knows how to read */
#define PAGE_KEYS_DEFAULT_COST_DELAY	2	/* ms */
#define PAGE_KEYS_DEFAULT_COST_LIMIT	200
#define PAGE_KEYS_MAX_COST_DELAY		100
#define PAGE_KEYS_MAX_COST_LIMIT		10000

/* Databases a rotation has finished, kept so that a restart resumes after them */
#define PAGE_KEYS_MAX_DONE		4096

typedef struct PageKeysState
{
	uint32		serial;			/* one more at every change: WAL replay's
								 * order */
	uint32		generation;		/* new pages: its slot, page_keys_slot() */
	int			operation;		/* PAGE_KEYS_OP_* */
	bool		marked;			/* every non-zero page carries its mark */
	bool		paused;
	int			cost_delay;		/* ms; 0: unthrottled */
	int			cost_limit;
	uint32		switch_oid;		/* the OID counter when the generation began */
	uint32		switch_xid;		/* the next XID then: older ones may write old
								 * pages */
	uint32		wal_generation; /* new WAL: its slot, page_keys_slot() */
	uint64		wal_switch_lsn; /* WAL pages from here on are under it; 0: the
								 * switch has not happened yet, all WAL is
								 * under the previous one */
	uint32		slru_done;		/* enable: SLRUs converted, a bit each
								 * (slrucrypt.c) */
	uint32		temp_generation;	/* new temporary files: its slot,
									 * page_keys_slot() */
	int			ndone;
	uint32		done[PAGE_KEYS_MAX_DONE];	/* database OIDs finished */
} PageKeysState;

/* Generation 1 (initdb) is slot A, 2 is B, 3 is A again, ... */
static inline int
page_keys_slot(uint32 generation)
{
	return (generation % 2 == 1) ? PAGE_SLOT_A : PAGE_SLOT_B;
}

static inline uint32
page_keys_slot_key_id(int slot)
{
	return slot == PAGE_SLOT_B ? KEY_RELATION_B : KEY_RELATION;
}

/* Temporary-file key slot A is KEY_TEMPFILE, B is KEY_TEMPFILE_B */
static inline uint32
temp_keys_slot_key_id(int slot)
{
	return slot == PAGE_SLOT_B ? KEY_TEMPFILE_B : KEY_TEMPFILE;
}

/* WAL key slot A is KEY_WAL, B is KEY_WAL_B */
static inline uint32
wal_keys_slot_key_id(int slot)
{
	return slot == PAGE_SLOT_B ? KEY_WAL_B : KEY_WAL;
}

/*
 * The slot a WAL page at pageptr is written under: the current WAL
 * generation's from the switch on, the previous one's before it
 */
static inline int
wal_keys_write_slot(uint32 wal_generation, uint64 wal_switch_lsn,
					bool from_clear, bool to_clear, uint64 pageptr)
{
	int			slot = page_keys_slot(wal_generation);

	if (to_clear)
		return (wal_switch_lsn != 0 && pageptr >= wal_switch_lsn) ?
			PAGE_SLOT_CLEAR : slot;

	if (from_clear || wal_generation > 1)
	{
		if (wal_switch_lsn == 0 || pageptr < wal_switch_lsn)
			return from_clear ? PAGE_SLOT_CLEAR : 1 - slot;
	}
	return slot;
}

/*
 * Whether new WAL is still to switch to the state's WAL generation: after
 * a rotation drew a new WAL key, or while a cluster is encrypted online
 * (WAL before the switch is in clear), or decrypted (in clear after it)
 */
static inline bool
wal_switch_pending(const PageKeysState *state)
{
	return state->wal_switch_lsn == 0 &&
		(state->wal_generation > 1 || state->operation == PAGE_KEYS_OP_ENABLE ||
		 state->operation == PAGE_KEYS_OP_DISABLE);
}

/*
 * The WAL record of a change (XLOG_ENCRYPTION_KEYS, storage/encryption/
 * keylog.c): the key ring file and pg_encryption/pages as written, so that
 * a standby, a restored base backup or a point-in-time recovery follows
 */
typedef struct xl_encryption_keys
{
	uint32		serial;
	uint32		generation;
	uint32		keyring_len;	/* bytes of the key ring file that follow */
	uint32		state_len;		/* then bytes of pg_encryption/pages */
} xl_encryption_keys;

/* Longest pg_encryption/pages */
#define PAGE_KEYS_MAX_FILE	(512 + PAGE_KEYS_MAX_DONE * 11)

extern void page_keys_initial(PageKeysState *state);
extern bool page_keys_parse(const char *text, size_t len, const char *path,
							PageKeysState *state, KeyringError *err);
extern size_t page_keys_format(const PageKeysState *state, char *text,
							   size_t size);
extern bool page_keys_read(const char *datadir, PageKeysState *state,
						   KeyringError *err);
extern bool page_keys_write(const char *datadir, const PageKeysState *state,
							KeyringError *err);
extern bool page_keys_new_cluster(const char *datadir, KeyringError *err);
extern bool page_keys_adopt(const char *olddir, const char *newdir,
							KeyringError *err);

/*
 * pg_checksums --check: every stored block of the cluster by the key its
 * mark names, against what pg_encryption/pages allows (design 9.6)
 */
typedef struct PageKeysTally
{
	bool		encrypted;		/* else nothing is counted */
	PageKeysState state;
	int64		blocks[3];		/* PAGE_SLOT_A, PAGE_SLOT_B, under no key */
} PageKeysTally;

#ifdef FRONTEND
extern bool page_keys_tally_start(PageKeysTally *tally, const char *datadir,
								  KeyringError *err);
extern void page_keys_tally_block(PageKeysTally *tally, const char *page);
extern bool page_keys_tally_report(const PageKeysTally *tally);
#endif
extern const char *page_keys_operation_name(int operation);
extern void page_keys_describe(const PageKeysState *state, char *buf,
							   size_t size);

#endif							/* PAGE_KEYS_H */
