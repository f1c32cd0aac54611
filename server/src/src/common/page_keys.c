/*-------------------------------------------------------------------------
 *
 * page_keys.c
 *	  pgcipher: the file pg_encryption/pages — the generation of the page
 *	  key new pages are written under, and the online rotation's state.
 *
 * A few lines of text, so that a DBA can read it, ending in a CRC-32C of
 * the lines before it:
 *
 *	 serial 7
 *	 generation 2
 *	 operation rotate
 *	 marked no
 *	 paused no
 *	 cost_delay 2
 *	 cost_limit 200
 *	 switch_oid 16410
 *	 switch_xid 771
 *	 wal_generation 2
 *	 wal_switch_lsn 0/5000000
 *	 done 1 5 16384
 *	 crc 8c2f55e1
 *
 * Written like the key ring (keyring_write_file(): a temporary file, fsync,
 * rename, fsync of the directory), so a crash leaves the old state or the
 * new.  No file is the state of every cluster before online rotation
 * existed: generation 1, unmarked pages, nothing running; no wal_ lines
 * (a file written before the WAL key rotated) is WAL generation 1.  Shared by the
 * server (storage/encryption/), pg_controldata and pg_upgrade.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/common/page_keys.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FRONTEND
#include "postgres.h"
#else
#include "postgres_fe.h"
#endif

#include <errno.h>
#include <sys/stat.h>

#include "common/page_keys.h"
#include "port/pg_crc32c.h"

void
page_keys_initial(PageKeysState *state)
{
	memset(state, 0, sizeof(PageKeysState));
	state->generation = 1;
	state->wal_generation = 1;
	state->temp_generation = 1;
	state->operation = PAGE_KEYS_OP_NONE;
	state->cost_delay = PAGE_KEYS_DEFAULT_COST_DELAY;
	state->cost_limit = PAGE_KEYS_DEFAULT_COST_LIMIT;
}

const char *
page_keys_operation_name(int operation)
{
	switch (operation)
	{
		case PAGE_KEYS_OP_NONE:
			return "none";
		case PAGE_KEYS_OP_ROTATE:
			return "rotate";
		case PAGE_KEYS_OP_ENABLE:
			return "enable";
		case PAGE_KEYS_OP_DISABLE:
			return "disable";
		case PAGE_KEYS_OP_DISABLED:
			return "disabled";
	}
	return "unknown";
}

static pg_crc32c
text_crc(const char *text, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, text, len);
	FIN_CRC32C(crc);
	return crc;
}

static void
corrupt(KeyringError *err, const char *path, const char *what)
{
	keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT,
					  "Restore it from a backup of this cluster, taken with its key ring.",
					  "page key state file \"%s\" is damaged: %s", path, what);
}

static bool
yes_no(const char *value, bool *out)
{
	if (strcmp(value, "yes") == 0)
		*out = true;
	else if (strcmp(value, "no") == 0)
		*out = false;
	else
		return false;
	return true;
}

/* One "name value" line into state; false if it makes no sense */
static bool
parse_line(char *line, PageKeysState *state)
{
	char	   *value = strchr(line, ' ');
	char	   *end;
	unsigned long n;

	if (value == NULL)
	{
		if (strcmp(line, "done") != 0)
			return false;
		state->ndone = 0;		/* no database finished */
		return true;
	}
	*value++ = '\0';
	if (strcmp(line, "operation") == 0)
	{
		if (strcmp(value, "none") == 0)
			state->operation = PAGE_KEYS_OP_NONE;
		else if (strcmp(value, "rotate") == 0)
			state->operation = PAGE_KEYS_OP_ROTATE;
		else if (strcmp(value, "enable") == 0)
			state->operation = PAGE_KEYS_OP_ENABLE;
		else if (strcmp(value, "disable") == 0)
			state->operation = PAGE_KEYS_OP_DISABLE;
		else if (strcmp(value, "disabled") == 0)
			state->operation = PAGE_KEYS_OP_DISABLED;
		else
			return false;
		return true;
	}
	if (strcmp(line, "marked") == 0)
		return yes_no(value, &state->marked);
	if (strcmp(line, "paused") == 0)
		return yes_no(value, &state->paused);
	if (strcmp(line, "wal_switch_lsn") == 0)
	{
		unsigned int hi,
					lo;
		char		extra;

		if (sscanf(value, "%X/%X%c", &hi, &lo, &extra) != 2)
			return false;
		state->wal_switch_lsn = ((uint64) hi << 32) | lo;
		return true;
	}
	if (strcmp(line, "done") == 0)
	{
		state->ndone = 0;
		while (*value != '\0')
		{
			errno = 0;
			n = strtoul(value, &end, 10);
			if (end == value || errno != 0 || n > UINT32_MAX ||
				state->ndone >= PAGE_KEYS_MAX_DONE)
				return false;
			state->done[state->ndone++] = (uint32) n;
			value = end;
			while (*value == ' ')
				value++;
		}
		return true;
	}
	errno = 0;
	n = strtoul(value, &end, 10);
	if (end == value || *end != '\0' || errno != 0 || n > UINT32_MAX)
		return false;
	if (strcmp(line, "generation") == 0 && n >= 1)
		state->generation = (uint32) n;
	else if (strcmp(line, "serial") == 0)
		state->serial = (uint32) n;
	else if (strcmp(line, "cost_delay") == 0 && n <= PAGE_KEYS_MAX_COST_DELAY)
		state->cost_delay = (int) n;
	else if (strcmp(line, "cost_limit") == 0 && n >= 1 && n <= PAGE_KEYS_MAX_COST_LIMIT)
		state->cost_limit = (int) n;
	else if (strcmp(line, "switch_oid") == 0)
		state->switch_oid = (uint32) n;
	else if (strcmp(line, "switch_xid") == 0)
		state->switch_xid = (uint32) n;
	else if (strcmp(line, "wal_generation") == 0 && n >= 1)
		state->wal_generation = (uint32) n;
	else if (strcmp(line, "slru_done") == 0)
		state->slru_done = (uint32) n;
	else if (strcmp(line, "temp_generation") == 0 && n >= 1)
		state->temp_generation = (uint32) n;
	else
		return false;
	return true;
}

/*
 * Parse the text of a pg_encryption/pages (len bytes, path for messages)
 * into state; false, with err filled, if it is damaged
 */
bool
page_keys_parse(const char *text, size_t len, const char *path,
				PageKeysState *state, KeyringError *err)
{
	char	   *copy;
	char	   *crcline;
	unsigned int crc;
	char	   *line;
	char	   *next;
	bool		ok = false;

	page_keys_initial(state);
	copy = malloc(len + 1);
	if (copy == NULL)
	{
		keyring_set_error(err, KEYRING_ERR_IO, NULL, "out of memory");
		return false;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';

	/* the last line is the CRC of everything before it */
	crcline = strstr(copy, "crc ");
	if (crcline == NULL || (crcline != copy && crcline[-1] != '\n') ||
		sscanf(crcline, "crc %8x\n", &crc) != 1 ||
		crc != text_crc(copy, crcline - copy))
	{
		corrupt(err, path, "its CRC does not match");
		goto done;
	}
	*crcline = '\0';
	for (line = copy; *line != '\0'; line = next)
	{
		next = strchr(line, '\n');
		if (next == NULL)
		{
			corrupt(err, path, "a line is not terminated");
			goto done;
		}
		*next++ = '\0';
		if (!parse_line(line, state))
		{
			corrupt(err, path, "a line is not understood");
			goto done;
		}
	}
	ok = true;
done:
	free(copy);
	return ok;
}

/*
 * Read datadir's page key state; without the file, the initial state.
 * False, with err filled, if the file cannot be read or is damaged.
 */
bool
page_keys_read(const char *datadir, PageKeysState *state, KeyringError *err)
{
	char		path[MAXPGPATH];
	char	   *text;
	size_t		len;
	bool		ok;

	page_keys_initial(state);
	snprintf(path, sizeof(path), "%s/%s", datadir, PAGE_KEYS_FILE);
	text = malloc(PAGE_KEYS_MAX_FILE);

	if (text == NULL)
	{
		keyring_set_error(err, KEYRING_ERR_IO, NULL, "out of memory");
		return false;
	}
	if (!keyring_read_file(path, (unsigned char *) text, PAGE_KEYS_MAX_FILE - 1,
						   &len, err))
	{
		free(text);
		/* before online rotation: the initial state */
		return err->kind == KEYRING_ERR_FILE_MISSING;
	}
	ok = page_keys_parse(text, len, path, state, err);
	free(text);
	return ok;
}

/* The text of state, with its CRC line, into text; its length */
size_t
page_keys_format(const PageKeysState *state, char *text, size_t size)
{
	size_t		len = 0;

#define ADD(...) (len += snprintf(text + len, size - len, __VA_ARGS__))
	ADD("serial %u\n", state->serial);
	ADD("generation %u\n", state->generation);
	ADD("operation %s\n", page_keys_operation_name(state->operation));
	ADD("marked %s\n", state->marked ? "yes" : "no");
	ADD("paused %s\n", state->paused ? "yes" : "no");
	ADD("cost_delay %d\n", state->cost_delay);
	ADD("cost_limit %d\n", state->cost_limit);
	ADD("switch_oid %u\n", state->switch_oid);
	ADD("switch_xid %u\n", state->switch_xid);
	ADD("wal_generation %u\n", state->wal_generation);
	ADD("wal_switch_lsn %X/%X\n", (unsigned int) (state->wal_switch_lsn >> 32),
		(unsigned int) state->wal_switch_lsn);
	if (state->operation >= PAGE_KEYS_OP_ENABLE)
		ADD("slru_done %u\n", state->slru_done);	/* only then: old files
													 * stay valid */
	if (state->temp_generation > 1)
		ADD("temp_generation %u\n", state->temp_generation);	/* likewise */
	ADD("done");
	for (int i = 0; i < state->ndone; i++)
		ADD(" %u", state->done[i]);
	ADD("\n");
	ADD("crc %08x\n", (unsigned int) text_crc(text, len));
#undef ADD
	return len;
}

/* Write state into datadir crash-safely (the key ring's way) */
bool
page_keys_write(const char *datadir, const PageKeysState *state,
				KeyringError *err)
{
	char		path[MAXPGPATH];
	char	   *text = malloc(PAGE_KEYS_MAX_FILE);
	size_t		len;
	bool		ok;

	if (text == NULL)
	{
		keyring_set_error(err, KEYRING_ERR_IO, NULL, "out of memory");
		return false;
	}
	len = page_keys_format(state, text, PAGE_KEYS_MAX_FILE);
	snprintf(path, sizeof(path), "%s/%s", datadir, PAGE_KEYS_FILE);
	ok = keyring_write_file(path, (unsigned char *) text, len, err);
	free(text);
	return ok;
}

/*
 * initdb --encryption-keys-from: the new cluster writes its pages, from
 * bootstrap on, under the old cluster's page key generation, whose key
 * keyring_create() copied, so that pg_upgrade can move the old files as
 * they are into a cluster whose every page is under that one generation
 * (its own catalogs included).  Its WAL is its own: WAL generation 1.  An
 * old cluster whose rotation has not finished is refused.
 */
bool
page_keys_adopt(const char *olddir, const char *newdir, KeyringError *err)
{
	PageKeysState *old = malloc(sizeof(PageKeysState));
	PageKeysState *state = malloc(sizeof(PageKeysState));
	bool		ok = false;

	if (old == NULL || state == NULL)
		keyring_set_error(err, KEYRING_ERR_IO, NULL, "out of memory");
	else if (page_keys_read(olddir, old, err))
	{
		if (old->operation != PAGE_KEYS_OP_NONE)
			keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT,
							  "Start the old cluster and let the rotation finish (pg_stat_progress_encryption), then try again.",
							  "the rotation of the data keys of the cluster in \"%s\" has not finished",
							  olddir);
		else if (old->generation == 1)
			ok = true;			/* the initial state: no file to write */
		else
		{
			page_keys_initial(state);
			state->generation = old->generation;
			state->marked = true;	/* every page written carries its mark */
			ok = page_keys_write(newdir, state, err);
		}
	}
	free(old);
	free(state);
	return ok;
}

/*
 * initdb of a new encrypted cluster (not adopting another's keys): every
 * page it will hold carries its mark, so a page without one is in clear,
 * which a decryption online writes (design 9.7).  Clusters made before
 * pgcipher wrote this file may hold unmarked pages under slot A.
 */
bool
page_keys_new_cluster(const char *datadir, KeyringError *err)
{
	PageKeysState *state = malloc(sizeof(PageKeysState));
	bool		ok;

	if (state == NULL)
	{
		keyring_set_error(err, KEYRING_ERR_IO, NULL, "out of memory");
		return false;
	}
	page_keys_initial(state);
	state->marked = true;
	ok = page_keys_write(datadir, state, err);
	free(state);
	return ok;
}

#ifdef FRONTEND

/*
 * pg_checksums --check on the cluster in datadir: count its blocks by key
 * if it is encrypted (it holds a key ring).  False, with err filled, if
 * pg_encryption/pages cannot be read.
 */
bool
page_keys_tally_start(PageKeysTally *tally, const char *datadir,
					  KeyringError *err)
{
	char		path[MAXPGPATH];
	struct stat st;

	memset(tally, 0, sizeof(PageKeysTally));
	snprintf(path, sizeof(path), "%s/%s", datadir, KEYRING_FILE);
	if (stat(path, &st) != 0)
		return true;
	tally->encrypted = true;
	return page_keys_read(datadir, &tally->state, err);
}

/* One stored block that is not all zeros */
void
page_keys_tally_block(PageKeysTally *tally, const char *page)
{
	int			slot;

	if (!tally->encrypted)
		return;
	slot = page_stored_slot(page, tally->state.marked);
	tally->blocks[slot == PAGE_SLOT_CLEAR ? 2 : slot]++;
}

/*
 * Print the counts; false if, with no rotation running, a block is under
 * another key than the generation pg_encryption/pages names (a file
 * restored from a backup of another generation, a damaged mark)
 */
bool
page_keys_tally_report(const PageKeysTally *tally)
{
	int			slot = page_keys_slot(tally->state.generation);
	int64		others = tally->blocks[1 - slot] + tally->blocks[2];

	if (!tally->encrypted)
		return true;
	printf("Blocks under page key generation %u (slot %c): %lld\n",
		   tally->state.generation, slot == PAGE_SLOT_A ? 'A' : 'B',
		   (long long) tally->blocks[slot]);
	printf("Blocks under another page key or none: %lld\n", (long long) others);
	if (tally->state.operation != PAGE_KEYS_OP_NONE)
	{
		printf(tally->state.operation == PAGE_KEYS_OP_ENABLE ?
			   "The cluster is being encrypted: blocks under no key are expected.\n" :
			   page_keys_writes_clear(tally->state.operation) ?
			   "The cluster is being decrypted: blocks under no key are expected.\n" :
			   "A rotation of the data keys is running: blocks of two generations are expected.\n");
		return true;
	}
	return others == 0;
}

#endif							/* FRONTEND */

/* One line for pg_controldata and the server's messages */
void
page_keys_describe(const PageKeysState *state, char *buf, size_t size)
{
	char		wal[64];
	char		temp[64];

	if (state->operation == PAGE_KEYS_OP_ENABLE && state->wal_switch_lsn == 0)
		snprintf(wal, sizeof(wal), "WAL in clear until the next segment");
	else if (page_keys_writes_clear(state->operation) && state->wal_switch_lsn == 0)
		snprintf(wal, sizeof(wal), "WAL in clear from the next segment");
	else if (page_keys_writes_clear(state->operation))
		snprintf(wal, sizeof(wal), "WAL in clear from %X/%X",
				 (unsigned int) (state->wal_switch_lsn >> 32),
				 (unsigned int) state->wal_switch_lsn);
	else if (state->wal_generation <= 1 && state->wal_switch_lsn != 0)
		snprintf(wal, sizeof(wal), "WAL generation 1 (slot A) from %X/%X",
				 (unsigned int) (state->wal_switch_lsn >> 32),
				 (unsigned int) state->wal_switch_lsn);
	else if (state->wal_generation <= 1)
		snprintf(wal, sizeof(wal), "WAL generation 1 (slot A)");
	else if (state->wal_switch_lsn == 0)
		snprintf(wal, sizeof(wal), "WAL generation %u (slot %c) at the next segment",
				 state->wal_generation,
				 page_keys_slot(state->wal_generation) == PAGE_SLOT_A ? 'A' : 'B');
	else
		snprintf(wal, sizeof(wal), "WAL generation %u (slot %c) from %X/%X",
				 state->wal_generation,
				 page_keys_slot(state->wal_generation) == PAGE_SLOT_A ? 'A' : 'B',
				 (unsigned int) (state->wal_switch_lsn >> 32),
				 (unsigned int) state->wal_switch_lsn);
	temp[0] = '\0';
	if (state->temp_generation > 1)
		snprintf(temp, sizeof(temp), "; temporary files generation %u (slot %c)",
				 state->temp_generation,
				 page_keys_slot(state->temp_generation) == PAGE_SLOT_A ? 'A' : 'B');
	snprintf(buf, size, "generation %u (slot %c), %s%s%s; %s%s",
			 state->generation,
			 page_keys_slot(state->generation) == PAGE_SLOT_A ? 'A' : 'B',
			 state->operation == PAGE_KEYS_OP_NONE ? "no operation" :
			 state->operation == PAGE_KEYS_OP_ENABLE ? "encrypting" :
			 state->operation == PAGE_KEYS_OP_DISABLE ? "decrypting" :
			 state->operation == PAGE_KEYS_OP_DISABLED ? "decrypted" : "rotating",
			 state->paused ? " (paused)" : "",
			 state->marked ? ", every page marked" : "", wal, temp);
}
