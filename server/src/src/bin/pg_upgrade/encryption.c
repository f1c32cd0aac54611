/*-------------------------------------------------------------------------
 *
 * encryption.c
 *	  pgcipher: pg_upgrade into, out of and between encrypted clusters.
 *
 * pg_upgrade moves the old cluster's relation files and its pg_xact and
 * pg_multixact files into the new cluster.  When both clusters hold the
 * same relation key (the new one was made with initdb
 * --encryption-keys-from, or neither is encrypted) the files move as they
 * are, in every transfer mode.  Otherwise the blocks must change as they
 * are copied: encrypted (adopting pgcipher), decrypted (leaving it) or
 * re-encrypted under new data keys (the offline re-key).  That is only
 * possible in copy mode; link, clone, copy_file_range and (on 18) swap
 * are refused by check_data_encryption(), which pg_upgrade runs among its
 * checks, before it changes anything, and which --check reports.
 *
 * The transform uses the server's own tweaks and rules (common/
 * data_encryption.c): relation pages by location, all-zero pages left as
 * zeros, the first PAGE_ENCRYPTION_OFFSET bytes in clear, the checksum
 * recomputed over what is written (ciphertext in an encrypted cluster,
 * plaintext in an unencrypted one); SLRU pages by directory and page
 * number.  The keys come from each cluster's own key ring and key
 * command, which pg_upgrade reads with that cluster's "postgres -C".
 * A page of the old cluster is decrypted under the page key slot its mark
 * names (a cluster whose data keys were rotated online holds its pages
 * under slot B); pages written into the new cluster are marked with the
 * new cluster's slot.  When the files move as they are, the old cluster's
 * pg_encryption/pages comes with them.  See docs/design.md, section 9.2.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/bin/pg_upgrade/encryption.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_perm.h"
#include "common/keyring.h"
#include "common/page_keys.h"
#include "common/relpath.h"
#include "pg_upgrade.h"
#include "storage/bufpage.h"
/*
 * Our own copy of the page checksum, compiled like the server's
 * (storage/page/checksum.c: unrolled and vectorised, see the Makefile):
 * file.c's, built without those flags, took a quarter of the transform's
 * CPU time.  Renamed, since file.c defines pg_checksum_page() too.
 */
#define pg_checksum_page transform_checksum_page
#include "storage/checksum.h"
#include "storage/checksum_impl.h"

/*
 * Pages per read and write: 256 kB stays in the CPU's L2 cache between
 * read(), the cipher and write() (with 1 MB the kernel's copies took twice
 * the system time)
 */
#define TRANSFORM_PAGES			32
/* Threads transforming one file, each its own chunks (main thread included) */
#define TRANSFORM_THREADS		2

/*
 * What the transfer does to every block, set by check_data_encryption():
 * one per thread, since an OpenSSL cipher context serves one thread at a
 * time
 */
typedef struct Transformer
{
	bool		decrypting;		/* the old cluster is encrypted */
	XtsCipher  *decrypt[2];		/* old cluster's page key slots, or NULL */
	XtsCipher  *slru_decrypt;	/* old cluster's transaction-file key */
	XtsCipher  *encrypt;		/* new cluster's page key, or NULL */
	int			encrypt_slot;	/* ... its slot, for the mark */
	XtsCipher  *slru_encrypt;	/* new cluster's transaction-file key */
	char	   *pages;			/* TRANSFORM_PAGES pages */
} Transformer;

static Transformer transformers[TRANSFORM_THREADS];
static bool transform_blocks = false;
static bool old_pages_marked = false;	/* old cluster: unmarked is clear */
static bool carry_page_keys = false;	/* files move as they are */

/* "old" or "new", for messages */
#define CLUSTER_NAME(cluster)	((cluster) == &old_cluster ? "old" : "new")

/* The cipher that pg_controldata's "Data encryption:" line names */
int
data_encryption_from_controldata(const char *value)
{
	char		name[64];
	size_t		len;
	int			cipher;

	value += strspn(value, " \t");
	strlcpy(name, value, sizeof(name));
	len = strcspn(name, " \t\r\n");
	name[len] = '\0';
	cipher = data_encryption_cipher_from_name(name);
	if (cipher < 0)
		pg_fatal("pg_controldata reports an unknown data encryption cipher \"%s\"", name);
	return cipher;
}

/*
 * Load cluster's key ring with its own key command and timeout (read with
 * its own "postgres -C": keyring_cluster_settings()), run in its data
 * directory as the server runs it.
 */
static void
load_cluster_keyring(ClusterInfo *cluster, Keyring *ring)
{
	char		postgres[MAXPGPATH];
	char	   *command = NULL;
	int			timeout_s;
	char		cwd[MAXPGPATH];
	KeyringError err;
	bool		ok;

	snprintf(postgres, sizeof(postgres), "%s/postgres", cluster->bindir);
	if (!keyring_cluster_settings(postgres, cluster->pgconfig, &command, &timeout_s, &err))
	{
		keyring_log_error(&err);
		pg_fatal("could not read the key command of the %s cluster", CLUSTER_NAME(cluster));
	}
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		pg_fatal("could not determine current directory: %m");
	if (chdir(cluster->pgdata) != 0)
		pg_fatal("could not change directory to \"%s\": %m", cluster->pgdata);
	ok = keyring_load(".", command, timeout_s, ring, &err);
	if (chdir(cwd) != 0)
		pg_fatal("could not change directory to \"%s\": %m", cwd);
	if (!ok)
	{
		keyring_log_error(&err);
		pg_fatal("could not load the encryption keys of the %s cluster in \"%s\"",
				 CLUSTER_NAME(cluster), cluster->pgdata);
	}
	free(command);
}

/* The key the cluster's SLRU pages are under: KEY_SLRU once rotated */
static uint32
slru_key_id(const Keyring *ring)
{
	return keyring_get_key(ring, KEY_SLRU) ? KEY_SLRU : KEY_RELATION;
}

/* A cipher for the ring's key id; NULL if the ring lacks it */
static XtsCipher *
key_cipher(const Keyring *ring, uint32 id, ClusterInfo *cluster)
{
	const KeyringKey *key = keyring_get_key(ring, id);
	XtsCipher  *xts;

	if (key == NULL)
		return NULL;
	xts = xts_cipher_create(ring->cipher, key->key);
	if (xts == NULL)
		pg_fatal("could not set up the %s cluster's relation cipher: %s",
				 CLUSTER_NAME(cluster), data_encryption_error_reason());
	return xts;
}

/* Whether the two rings hold the same key under id (both lacking it too) */
static bool
same_key(const Keyring *a, uint32 ida, const Keyring *b, uint32 idb)
{
	const KeyringKey *ka = keyring_get_key(a, ida);
	const KeyringKey *kb = keyring_get_key(b, idb);

	if (ka == NULL || kb == NULL)
		return ka == kb;
	return ka->len == kb->len && memcmp(ka->key, kb->key, ka->len) == 0;
}

/* A cluster's page key state; a rotation still running is refused */
static void
read_page_keys(ClusterInfo *cluster, PageKeysState *state)
{
	KeyringError err;

	if (!page_keys_read(cluster->pgdata, state, &err))
	{
		keyring_log_error(&err);
		pg_fatal("could not read the page key state of the %s cluster", CLUSTER_NAME(cluster));
	}
	if (state->operation != PAGE_KEYS_OP_NONE)
		pg_fatal("An online rotation of the data keys is running in the %s cluster.\n"
				 "Start it, let the rotation finish (pg_stat_progress_encryption shows it), stop it and run pg_upgrade again.",
				 CLUSTER_NAME(cluster));
}

static const char *
transfer_mode_option(void)
{
	switch (user_opts.transfer_mode)
	{
		case TRANSFER_MODE_CLONE:
			return "--clone";
		case TRANSFER_MODE_COPY:
			return "--copy";
		case TRANSFER_MODE_COPY_FILE_RANGE:
			return "--copy-file-range";
		case TRANSFER_MODE_LINK:
			return "--link";
#if PG_VERSION_NUM >= 180000
		case TRANSFER_MODE_SWAP:
			return "--swap";
#endif
	}
	return "?";
}

/*
 * Decide what the transfer does to every block, and refuse, before
 * anything changes, every combination that would leave plaintext and
 * ciphertext files mixed or unreadable.
 */
void
check_data_encryption(void)
{
	int			old_cipher = old_cluster.controldata.data_encryption;
	int			new_cipher = new_cluster.controldata.data_encryption;
	bool		copying = (user_opts.transfer_mode == TRANSFER_MODE_COPY);
	Keyring		old_ring = {0};
	Keyring		new_ring = {0};
	PageKeysState *old_keys = pg_malloc(sizeof(PageKeysState));
	PageKeysState *new_keys = pg_malloc(sizeof(PageKeysState));
	const char *what;

	prep_status("Checking data encryption");
	if (old_cipher == DATA_ENCRYPTION_OFF && new_cipher == DATA_ENCRYPTION_OFF)
	{
		check_ok();
		return;
	}

	/*
	 * Before 9.6 the visibility map is rewritten by rewriteVisibilityMap(),
	 * not copied, and would reach the new cluster unencrypted
	 */
	if (GET_MAJOR_VERSION(old_cluster.major_version) < 906)
		pg_fatal("pg_upgrade can encrypt or decrypt clusters of PostgreSQL 9.6 and later only, and the old cluster is version %s.\n"
				 "Upgrade it to an unencrypted PostgreSQL 17 first, then into an encrypted one.",
				 old_cluster.major_version_str);
	page_keys_initial(old_keys);
	page_keys_initial(new_keys);
	if (old_cipher != DATA_ENCRYPTION_OFF)
	{
		load_cluster_keyring(&old_cluster, &old_ring);
		read_page_keys(&old_cluster, old_keys);
		old_pages_marked = old_keys->marked;
	}
	if (new_cipher != DATA_ENCRYPTION_OFF)
	{
		load_cluster_keyring(&new_cluster, &new_ring);
		read_page_keys(&new_cluster, new_keys);
	}

	if (old_cipher == new_cipher &&
		same_key(&old_ring, slru_key_id(&old_ring), &new_ring, slru_key_id(&new_ring)) &&
		same_key(&old_ring, page_keys_slot_key_id(page_keys_slot(old_keys->generation)),
				 &new_ring, page_keys_slot_key_id(page_keys_slot(old_keys->generation))))
	{
		/*
		 * initdb --encryption-keys-from: files move as they are, with the old
		 * cluster's page key state (which slot new pages use)
		 */
		what = "both clusters have the same relation key: files are transferred as they are";
		transform_blocks = false;
		carry_page_keys = true;
	}
	else if (old_cipher == DATA_ENCRYPTION_OFF)
	{
		if (!copying)
			pg_fatal("The old cluster is not encrypted and the new one is, so every block must be encrypted as it is copied: %s cannot be used.\n"
					 "Use --copy (the default) instead.",
					 transfer_mode_option());
		what = "copy mode encrypts every block of the old cluster";
		transform_blocks = true;
	}
	else if (new_cipher == DATA_ENCRYPTION_OFF)
	{
		if (!copying)
			pg_fatal("The old cluster is encrypted and the new one is not, so every block must be decrypted as it is copied: %s cannot be used.\n"
					 "Use --copy (the default) instead.",
					 transfer_mode_option());
		what = "copy mode decrypts every block of the old cluster";
		transform_blocks = true;
	}
	else
	{
		if (!copying)
			pg_fatal("The old and new clusters are encrypted with different data keys, so every block must be re-encrypted as it is copied: %s cannot be used.\n"
					 "Use --copy to re-encrypt every block under the new keys, or create the new cluster with initdb --encryption-keys-from=\"%s\" to keep the old relation key.",
					 transfer_mode_option(), old_cluster.pgdata);
		what = "copy mode re-encrypts every block under the new cluster's keys";
		transform_blocks = true;
	}
	for (int i = 0; transform_blocks && i < TRANSFORM_THREADS; i++)
	{
		Transformer *t = &transformers[i];

		if (old_cipher != DATA_ENCRYPTION_OFF)
		{
			t->decrypting = true;
			t->decrypt[PAGE_SLOT_A] = key_cipher(&old_ring, KEY_RELATION, &old_cluster);
			t->decrypt[PAGE_SLOT_B] = key_cipher(&old_ring, KEY_RELATION_B, &old_cluster);
			t->slru_decrypt = key_cipher(&old_ring, slru_key_id(&old_ring), &old_cluster);
		}
		if (new_cipher != DATA_ENCRYPTION_OFF)
		{
			t->encrypt_slot = page_keys_slot(new_keys->generation);
			t->encrypt = key_cipher(&new_ring, page_keys_slot_key_id(t->encrypt_slot), &new_cluster);
			t->slru_encrypt = key_cipher(&new_ring, slru_key_id(&new_ring), &new_cluster);
			if (t->encrypt == NULL || t->slru_encrypt == NULL)
				pg_fatal("the key ring of the new cluster lacks a page key");
		}
		transformers[i].pages = pg_malloc(TRANSFORM_PAGES * BLCKSZ);
	}
	if (old_cipher != DATA_ENCRYPTION_OFF)
		data_encryption_wipe(&old_ring, sizeof(old_ring));
	if (new_cipher != DATA_ENCRYPTION_OFF)
		data_encryption_wipe(&new_ring, sizeof(new_ring));
	pg_free(old_keys);
	pg_free(new_keys);
	check_ok();
	pg_log(PG_REPORT, "Data encryption: %s to %s; %s.",
		   data_encryption_cipher_name(old_cipher),
		   data_encryption_cipher_name(new_cipher), what);
}

bool
transfer_transforms_blocks(void)
{
	return transform_blocks;
}

/* One SLRU page, in place */
static void
crypt_unit(XtsCipher *xts, bool encrypt, const unsigned char *tweak,
		   char *buf, int len, const char *file)
{
	bool		ok = encrypt ?
		xts_encrypt(xts, tweak, (unsigned char *) buf, (unsigned char *) buf, len) :
		xts_decrypt(xts, tweak, (unsigned char *) buf, (unsigned char *) buf, len);

	if (!ok)
		pg_fatal(encrypt ? "could not encrypt a block of file \"%s\": %s" :
				 "could not decrypt a block of file \"%s\": %s",
				 file, data_encryption_error_reason());
}

/*
 * One relation page, in place: decrypted under the old key, encrypted under
 * the new one, checksum recomputed over what is written.  All-zero pages
 * stay zeros; a "new" page that is not all zeros is damaged and keeps its
 * checksum field, as in the server (pagecrypt.c).
 */
static void
transform_page(const Transformer *t, char *page, RelFileNumber relnumber,
			   int forknum, BlockNumber blocknum, const char *file)
{
	if (page_is_all_zeros(page))
		return;

	/*
	 * The checksum is recomputed below, which would hide a damaged page of
	 * the old cluster that stock copy mode would carry over detectably: check
	 * it first (over what the old cluster stores: its ciphertext, or its
	 * plaintext)
	 */
	if (old_cluster.controldata.data_checksum_version != 0 &&
		!PageIsNew((Page) page) &&
		((PageHeader) page)->pd_checksum != pg_checksum_page(page, blocknum))
		pg_fatal("block %u of file \"%s\" fails its checksum in the old cluster, and pg_upgrade would hide that by rewriting it\n"
				 "Check the old cluster with pg_checksums --check and restore the damaged relation before upgrading.",
				 blocknum, file);
	/* the server's own rules, common/data_encryption.c */
	if (t->decrypting)
	{
		int			slot = page_stored_slot(page, old_pages_marked);

		if (slot != PAGE_SLOT_CLEAR)
		{
			if (t->decrypt[slot] == NULL)
				pg_fatal("block %u of file \"%s\" is under page key slot %c, which the old cluster's key ring does not hold",
						 blocknum, file, slot == PAGE_SLOT_A ? 'A' : 'B');
			page_clear_mark(page);
			if (!page_crypt(t->decrypt[slot], false, relnumber, forknum, blocknum, page, page))
				pg_fatal("could not decrypt block %u of file \"%s\": %s",
						 blocknum, file, data_encryption_error_reason());
		}
	}
	if (t->encrypt)
	{
		if (!page_crypt(t->encrypt, true, relnumber, forknum, blocknum, page, page))
			pg_fatal("could not encrypt block %u of file \"%s\": %s",
					 blocknum, file, data_encryption_error_reason());
		page_set_stored_slot(page, t->encrypt_slot);
	}
	if (new_cluster.controldata.data_checksum_version != 0 &&
		!PageIsNew((Page) page))
		((PageHeader) page)->pd_checksum = pg_checksum_page(page, blocknum);
}

static int
fork_of_suffix(const char *type_suffix)
{
	if (type_suffix[0] == '\0')
		return MAIN_FORKNUM;
	if (strcmp(type_suffix, "_fsm") == 0)
		return FSM_FORKNUM;
	if (strcmp(type_suffix, "_vm") == 0)
		return VISIBILITYMAP_FORKNUM;
	if (strcmp(type_suffix, "_init") == 0)
		return INIT_FORKNUM;
	pg_fatal("unexpected relation file suffix \"%s\"", type_suffix);
}

/*
 * Copy mode's copyFile() when blocks change: src to dst, every page
 * transformed on the way.  The old file is only read.
 *
 * pg_upgrade transfers one tablespace in one process (--jobs parallelises
 * across tablespaces only), so the cipher would add its whole CPU time to
 * the elapsed time.  A file of more than one chunk is therefore shared by
 * TRANSFORM_THREADS threads: each takes the next chunk, reads it with
 * pread(), transforms it and writes it with pwrite() at its offset, so a
 * chunk stays in one core's cache from read to write.  The two writers of
 * one file spin on its inode lock in the kernel (perf: a fifth of the CPU
 * time), but the kernel's copy into the page cache, the largest cost, runs
 * on both cores: taking turns under a mutex saved that CPU time and lost
 * elapsed time, which is what an upgrade's downtime is made of (design
 * 9.2 has the measurements).
 */
typedef struct FileTransfer
{
	int			src_fd;
	int			dest_fd;
	off_t		size;
	BlockNumber first_block;	/* of the segment */
	RelFileNumber relnumber;
	int			forknum;
	const char *src;
	const char *dst;
	const char *schemaName;
	const char *relName;
	pthread_mutex_t lock;
	off_t		next;			/* offset of the next chunk to take */
} FileTransfer;

static void
transfer_chunks(FileTransfer *ft, const Transformer *t)
{
	for (;;)
	{
		off_t		off;
		ssize_t		len;
		ssize_t		nread;

		pthread_mutex_lock(&ft->lock);
		off = ft->next;
		ft->next += TRANSFORM_PAGES * BLCKSZ;
		pthread_mutex_unlock(&ft->lock);
		if (off >= ft->size)
			return;
		len = Min((off_t) TRANSFORM_PAGES * BLCKSZ, ft->size - off);
		nread = pg_pread(ft->src_fd, t->pages, len, off);
		if (nread != len)
			pg_fatal("error while copying relation \"%s.%s\": could not read file \"%s\": %s",
					 ft->schemaName, ft->relName, ft->src,
					 nread < 0 ? strerror(errno) : "file shortened while being copied");
		for (ssize_t p = 0; p < len; p += BLCKSZ)
			transform_page(t, t->pages + p, ft->relnumber, ft->forknum,
						   ft->first_block + (BlockNumber) ((off + p) / BLCKSZ),
						   ft->src);
		errno = 0;
		if (pg_pwrite(ft->dest_fd, t->pages, len, off) != len)
		{
			if (errno == 0)
				errno = ENOSPC;
			pg_fatal("error while copying relation \"%s.%s\": could not write file \"%s\": %m",
					 ft->schemaName, ft->relName, ft->dst);
		}
	}
}

static void *
transfer_thread(void *arg)
{
	transfer_chunks(arg, &transformers[1]);
	return NULL;
}

void
transform_relation_file(const char *src, const char *dst,
						RelFileNumber relfilenumber, const char *type_suffix,
						int segno, const char *schemaName, const char *relName)
{
	FileTransfer ft = {0};
	struct stat st;
	pthread_t	threads[TRANSFORM_THREADS];
	int			nthreads;

	ft.forknum = fork_of_suffix(type_suffix);
	ft.first_block = (BlockNumber) segno * RELSEG_SIZE;
	ft.relnumber = relfilenumber;
	ft.src = src;
	ft.dst = dst;
	ft.schemaName = schemaName;
	ft.relName = relName;
	if ((ft.src_fd = open(src, O_RDONLY | PG_BINARY, 0)) < 0 || fstat(ft.src_fd, &st) != 0)
		pg_fatal("error while copying relation \"%s.%s\": could not open file \"%s\": %m",
				 schemaName, relName, src);
	if (st.st_size % BLCKSZ != 0)
		pg_fatal("error while copying relation \"%s.%s\": file \"%s\" has a partial page at block %u",
				 schemaName, relName, src, ft.first_block + (BlockNumber) (st.st_size / BLCKSZ));
	ft.size = st.st_size;
	if ((ft.dest_fd = open(dst, O_RDWR | O_CREAT | O_EXCL | PG_BINARY,
						   pg_file_create_mode)) < 0)
		pg_fatal("error while copying relation \"%s.%s\": could not create file \"%s\": %m",
				 schemaName, relName, dst);
	pthread_mutex_init(&ft.lock, NULL);

	/* a file of one chunk: no second thread */
	nthreads = (ft.size > TRANSFORM_PAGES * BLCKSZ) ? TRANSFORM_THREADS : 1;
	for (int i = 1; i < nthreads; i++)
		if (pthread_create(&threads[i], NULL, transfer_thread, &ft) != 0)
			pg_fatal("could not create a thread to copy \"%s\": %m", src);
	transfer_chunks(&ft, &transformers[0]);
	for (int i = 1; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	pthread_mutex_destroy(&ft.lock);
	close(ft.dest_fd);
	close(ft.src_fd);
}

/*
 * The SLRU files just copied into path (pg_xact, pg_multixact/offsets or
 * pg_multixact/members of the new cluster), transformed in place.  The
 * server names an SLRU by the same subdirectory in its tweak.
 */
void
transform_slru_files(const char *path, const char *subdir)
{
	DIR		   *dir;
	struct dirent *de;
	PGAlignedBlock page;

	if (carry_page_keys)
	{
		/*
		 * Files that move as they are keep the old cluster's page key state:
		 * carried with the first SLRU directory, the transfer's first step
		 */
		PageKeysState *keys = pg_malloc(sizeof(PageKeysState));
		KeyringError err;

		if (!page_keys_read(old_cluster.pgdata, keys, &err))
		{
			keyring_log_error(&err);
			pg_fatal("could not carry the old cluster's page key state over");
		}

		/*
		 * The new cluster's WAL and temporary files are its own, under the
		 * keys initdb drew (slot A): the old cluster's generations of them
		 * stay behind
		 */
		keys->wal_generation = 1;
		keys->wal_switch_lsn = 0;
		keys->temp_generation = 1;
		if (!page_keys_write(new_cluster.pgdata, keys, &err))
		{
			keyring_log_error(&err);
			pg_fatal("could not carry the old cluster's page key state over");
		}
		pg_free(keys);
		carry_page_keys = false;
	}
	if (!transform_blocks)
		return;
	if ((dir = opendir(path)) == NULL)
		pg_fatal("could not open directory \"%s\": %m", path);
	while (errno = 0, (de = readdir(dir)) != NULL)
	{
		char		file[MAXPGPATH];
		char	   *end;
		long long	segno = strtoll(de->d_name, &end, 16);
		int			fd;
		ssize_t		nread;
		off_t		off = 0;

		if (de->d_name[0] == '.' || *end != '\0' || end == de->d_name)
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
		if ((fd = open(file, O_RDWR | PG_BINARY, 0)) < 0)
			pg_fatal("could not open file \"%s\": %m", file);
		while ((nread = pg_pread(fd, page.data, BLCKSZ, off)) > 0)
		{
			unsigned char tweak[XTS_TWEAK_LEN];
			int64		pageno = segno * ENCRYPTION_SLRU_PAGES_PER_SEGMENT + off / BLCKSZ;

			if (nread != BLCKSZ)
				pg_fatal("file \"%s\" has a partial page at offset %lld",
						 file, (long long) off);
			if (!data_encryption_is_zero(page.data, BLCKSZ))
			{
				slru_encryption_tweak(tweak, subdir, pageno);
				if (transformers[0].slru_decrypt)
					crypt_unit(transformers[0].slru_decrypt, false, tweak, page.data, BLCKSZ, file);
				if (transformers[0].slru_encrypt)
					crypt_unit(transformers[0].slru_encrypt, true, tweak, page.data, BLCKSZ, file);
				errno = 0;
				if (pg_pwrite(fd, page.data, BLCKSZ, off) != BLCKSZ)
				{
					if (errno == 0)
						errno = ENOSPC;
					pg_fatal("could not write file \"%s\": %m", file);
				}
			}
			off += BLCKSZ;
		}
		if (nread < 0)
			pg_fatal("could not read file \"%s\": %m", file);
		if (close(fd) != 0)
			pg_fatal("could not close file \"%s\": %m", file);
	}
	if (errno != 0)
		pg_fatal("could not read directory \"%s\": %m", path);
	closedir(dir);
}
