/*-------------------------------------------------------------------------
 *
 * tempcrypt.c
 *	  pgcipher: encrypt temporary files (sorts, hashes, tuplestores, the
 *	  shared files of parallel queries, logical replication stream files).
 *
 * Every temporary file goes through fd.c's RegisterTemporaryFile(); from
 * then on FileReadV(), FileWriteV(), FileSize() and FileTruncate() on it
 * come here.  Temporary files are written and read at any byte offset and
 * rewritten in place (logical tapes reuse blocks), and parallel workers
 * read files other processes wrote, so the encryption must be
 * length-preserving, have no keystream to reuse, and depend on nothing but
 * the file's name and the position.  It is AES-XTS under the temporary-file
 * key with data units of one BufFile block (BLCKSZ bytes at multiples of
 * BLCKSZ), tweak = (hash of the file's path, unit number): the shape
 * OpenSSL's VAES path runs fastest.  A rewrite reveals at most which
 * 16-byte blocks of the file did not change (XTS encrypts each block of a
 * unit on its own).
 *
 * The last unit is shorter when the length is not a multiple of BLCKSZ:
 * XTS with ciphertext stealing keeps the length, and a remainder shorter
 * than one AES block joins the unit before it (BLCKSZ + r bytes).  A file
 * shorter than 16 bytes cannot be one AES block: it is stored as 32 bytes,
 * the data padded with zeros and a second block holding a magic string and
 * the length, each under its own tweak.  A reader that finds a 32-byte file
 * decrypts the second block: the magic identifies the short form (a real
 * 32-byte file decrypts to random bytes there, matching with probability
 * 2^-64).
 *
 * Writes re-encrypt the units they touch: a unit covered in part is read,
 * decrypted, merged and encrypted again, and so is the last unit when the
 * file grows.  BufFile writes and reads whole blocks, mostly at multiples of
 * BLCKSZ (logical tapes always), so most writes read nothing back; such a
 * write is encrypted straight from the caller's buffer into the scratch
 * buffer, and such a read decrypted in the caller's buffer, with no copy.
 *
 * Extensions keep temporary files of their own where fd.c does not know
 * them as such (Citus's intermediate results): scratchfile.c recognises
 * them and registers them here, as temporary files held back at their
 * end ("write-behind"), and opens stdio streams over them.
 *
 * Citus appends its results a row at a time, and an append that ends inside
 * a unit re-encrypts that unit: a read, a decryption, an encryption and a
 * write per row.  A scratch file opened through PathNameOpenFilePerm()
 * therefore holds its last unit back ("write-behind"): appends at its end
 * stay in memory (one unit per file; a last unit already on disk is read
 * back into it first) until they fill the unit, which is then encrypted and
 * written whole.  Anything else done to the file (a read, a write elsewhere, a
 * truncation, closing it, another open of it in the same process) writes the
 * held bytes first, so another process must not read a scratch file while
 * its writer holds it open: Citus closes a result before anyone reads it.
 * A file closed while its transaction ends drops the held bytes, since
 * Citus removes a transaction's job cache with it (and a write then could
 * throw inside abort processing).
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/tempcrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/xact.h"
#include "common/file_perm.h"
#include "common/hashfn.h"
#include "common/page_keys.h"
#include "miscadmin.h"
#include "storage/encryption.h"
#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#define TWEAK_TINY		UINT64CONST(0xFFFFFFFFFFFFFFFF)
#define TWEAK_TINY_LEN	UINT64CONST(0xFFFFFFFFFFFFFFFE)
#define TINY_MAGIC		"PGCTINY1"
#define TINY_PHYSICAL	32
#define UNIT			((off_t) BLCKSZ)	/* the XTS data unit */

typedef struct EncryptedTempFile
{
	bool		in_use;
	uint64		nonce;			/* from the path: the same in every process */
	bool		shared;			/* in a file set: others may write it too */
	off_t		size;			/* logical size (private files), or what is
								 * written of it (write-behind) */
	TempFileKey key;			/* the temporary-file key's slot and epoch */
	bool		write_behind;	/* a scratch file: its last unit held back */
	int			pending;		/* bytes held, logically at [size, size +
								 * pending); then size % UNIT == 0 */
	unsigned char *tail;		/* UNIT bytes for them, or NULL */
} EncryptedTempFile;

static EncryptedTempFile *files = NULL;
static int	nfiles = 0;
static bool raw_io = false;		/* our own I/O on the file: no hooks
								 * (raw_call) */
static TempKeyCiphers temp_key; /* the temporary-file key's slots */

static off_t logical_size_on_disk(File file);

/*
 * The cipher of a file's key slot, keyed from the current key ring; an
 * error if the slot's key was replaced since the file began (design 9.6)
 */
static XtsCipher *
unit_cipher(const EncryptedTempFile *f)
{
	CheckTempKeyEpoch(f->key.slot, f->key.epoch, "a temporary file");
	return TempKeyCipher(&temp_key, f->key.slot, "temporary files")->xts;
}

static void flush_tail(File file, uint32 wait_event_info);

/* One buffer for every read and write, grown when needed: no per-I/O palloc */
static unsigned char *
scratch(size_t len)
{
	static void *buf = NULL;
	static size_t size = 0;

	buf = GrowStaticBuffer(buf, &size, len);
	return buf;
}

void
InitializeTempFileEncryption(void)
{
	StartTempKeyCiphers(&temp_key, false);
}

bool
TempFileIsEncrypted(File file)
{
	return !raw_io && file < nfiles && files[file].in_use;
}

/*
 * Start serving "file" under the temporary-file key "key" (a slot at an
 * epoch): its nonce from "path" (the same in every process that opens it by
 * that name), shared when other processes may write it.
 */
void
RegisterEncryptedTempFileNamed(File file, const char *path, bool shared,
							   TempFileKey key)
{
	if (file >= nfiles)
	{
		int			n = Max(file + 1, Max(nfiles * 2, 32));

		if (files == NULL)
			files = MemoryContextAllocZero(TopMemoryContext, n * sizeof(EncryptedTempFile));
		else
		{
			files = repalloc(files, n * sizeof(EncryptedTempFile));
			memset(files + nfiles, 0, (n - nfiles) * sizeof(EncryptedTempFile));
		}
		nfiles = n;
	}
	files[file].nonce = hash_bytes_extended((const unsigned char *) path,
											strlen(path), 0);
	/* another open of the same file must see what an open one holds back */
	for (int i = 0; i < nfiles; i++)
		if (i != file && files[i].in_use && files[i].pending > 0 &&
			files[i].nonce == files[file].nonce)
			flush_tail(i, 0);
	files[file].key = key;
	files[file].shared = shared;
	files[file].write_behind = false;
	files[file].pending = 0;
	files[file].tail = NULL;
	files[file].size = logical_size_on_disk(file);
	files[file].in_use = true;
}

/*
 * The rule of the files of a directory that other processes open by name
 * (a file set's; an extension's scratch directory): in clear, or under the
 * temporary-file key of slot A or B at the slot's key epoch.  The rule must
 * not change under them when the cluster is encrypted or decrypted online
 * or its temporary-file key rotated (design 9.6, 9.7): while new files are
 * not written under slot A of an encrypted cluster at epoch 0, or
 * encryption is changing, the first process to register a file of the
 * directory records the rule in a marker file there (link(): one decides)
 * and the others read it: a letter, then the epoch in decimal unless it is
 * 0.  Without a marker, slot A at epoch 0: the usual case, one stat().  The
 * marker goes with the directory.
 */
#define FILESET_RULE_FILE	"pgcipher-rule"
#define RULE_CLEAR			'c'
#define RULE_SLOT_A			'e' /* what markers said before key slots */
#define RULE_SLOT_B			'f'

typedef struct DirRule
{
	char		rule;			/* RULE_* */
	uint32		epoch;			/* the slot's key epoch */
} DirRule;

/* The rule of a file created now */
static DirRule
new_files_rule(void)
{
	DirRule		r = {RULE_CLEAR, 0};

	if (!NewWritesEncrypted())
		return r;
	r.rule = TempWriteSlot() == PAGE_SLOT_B ? RULE_SLOT_B : RULE_SLOT_A;
	r.epoch = TempKeyEpoch(r.rule == RULE_SLOT_B ? PAGE_SLOT_B : PAGE_SLOT_A);
	return r;
}

/* Whether a rule is the one a directory without a marker has */
static bool
rule_is_default(DirRule r)
{
	return r.rule == RULE_SLOT_A && r.epoch == 0;
}

/* The rule a marker file holds; false if there is none */
static bool
read_rule(const char *marker, DirRule *r)
{
	char		buf[16];
	int			fd = open(marker, O_RDONLY | PG_BINARY, 0);
	ssize_t		n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 1)
		return false;
	buf[n] = '\0';
	r->rule = buf[0];
	r->epoch = (uint32) strtoul(buf + 1, NULL, 10);
	return true;
}

/*
 * Whether the directory of "path" holds files other than it and the
 * markers: written, without a marker, under slot A at epoch 0
 */
static bool
others_without_marker(const char *dir, const char *path)
{
	const char *self = strrchr(path, '/') + 1;
	DIR		   *d = AllocateDir(dir);
	struct dirent *de;
	bool		found = false;

	while (!found && (de = ReadDirExtended(d, dir, LOG)) != NULL)
		found = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
			strcmp(de->d_name, self) != 0 &&
			strncmp(de->d_name, FILESET_RULE_FILE, strlen(FILESET_RULE_FILE)) != 0;
	FreeDir(d);
	return found;
}

static DirRule
directory_rule(const char *path)
{
	char		marker[MAXPGPATH];
	char		tmp[MAXPGPATH + 16];
	char text[	16];
	char	   *slash;
	DirRule		r = new_files_rule();
	DirRule		usual = {RULE_SLOT_A, 0};
	int			fd;

	strlcpy(marker, path, sizeof(marker));
	if ((slash = strrchr(marker, '/')) == NULL)
		return r;
	strlcpy(slash + 1, FILESET_RULE_FILE, sizeof(marker) - (slash + 1 - marker));
	if (!DataEncryptionChanging() && rule_is_default(r))
	{
		struct stat st;

		/* a rotation that moved new files to slot B meanwhile decides below */
		if (stat(marker, &st) != 0 && rule_is_default(new_files_rule()))
			return usual;
	}
	/* another process decided already: the usual case */
	if (read_rule(marker, &r))
		return r;

	/*
	 * Files there without a marker were written under slot A at epoch 0 (the
	 * usual case above), or their writers are about to read or link one (no
	 * file holds data before its marker is read): that rule is right for
	 * both.  Not where the server holds no data keys (a cluster not
	 * encrypted, where there is no usual case): only the second.
	 */
	*slash = '\0';
	r = (DataKeysLoaded() && others_without_marker(marker, path)) ?
		usual : new_files_rule();
	*slash = '/';
	if (r.epoch == 0)
		snprintf(text, sizeof(text), "%c", r.rule);
	else
		snprintf(text, sizeof(text), "%c%u", r.rule, r.epoch);
	/* written whole under a name of our own, then linked: one decides */
	snprintf(tmp, sizeof(tmp), "%s.%d", marker, MyProcPid);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, pg_file_create_mode);
	if (fd >= 0)
	{
		bool		ok = write(fd, text, strlen(text)) == (ssize_t) strlen(text);

		close(fd);
		ok = ok && link(tmp, marker) == 0;
		(void) unlink(tmp);
		if (ok)
			return r;
	}
	if (!read_rule(marker, &r))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", marker)));
	return r;
}

/* The key of a rule that is not RULE_CLEAR */
static TempFileKey
rule_key(DirRule r)
{
	TempFileKey key;

	key.slot = r.rule == RULE_SLOT_B ? PAGE_SLOT_B : PAGE_SLOT_A;
	key.epoch = r.epoch;
	return key;
}

void
RegisterEncryptedTempFile(File file, const char *path)
{
	bool		shared = strstr(path, ".fileset/") != NULL;
	DirRule		r = shared ? directory_rule(path) : new_files_rule();

	if (r.rule == RULE_CLEAR)
		return;
	RegisterEncryptedTempFileNamed(file, path, shared, rule_key(r));
}

/*
 * scratchfile.c: the key of a scratch file, by its directory's rule (the
 * cluster is encrypted: scratchfile.c asks only then)
 */
TempFileKey
ScratchFileKey(const char *path)
{
	DirRule		r = directory_rule(path);

	if (r.rule == RULE_CLEAR)
		r.rule = RULE_SLOT_A;	/* as before: never clear once asked */
	return rule_key(r);
}

/* scratchfile.c: hold a scratch file's last unit back, or not (a stream) */
void
SetEncryptedTempFileWriteBehind(File file, bool on)
{
	Assert(file < nfiles && files[file].in_use);
	files[file].write_behind = on;
}

void
ForgetEncryptedTempFile(File file)
{
	EncryptedTempFile *f;

	if (file >= nfiles || !files[file].in_use)
		return;
	f = &files[file];
	/* held bytes: written, unless the transaction is ending (file header) */
	if (f->pending > 0 &&
		!(IsTransactionOrTransactionBlock() && !IsTransactionState()))
		flush_tail(file, 0);
	f->pending = 0;
	if (f->tail != NULL)
		pfree(f->tail);
	f->tail = NULL;
	f->in_use = false;
}

/*
 * The logical size.  A private file's is kept here (it may be shorter than
 * the padded file); a shared file's is its size on disk, which another
 * process may have changed since we opened it.
 */
static off_t
current_size(File file)
{
	EncryptedTempFile *f = &files[file];

	/* held bytes mean that this process is the file's writer */
	if (f->shared && f->pending == 0)
		f->size = logical_size_on_disk(file);
	return f->size;
}

off_t
EncryptedTempFileSize(File file)
{
	return current_size(file) + files[file].pending;
}

/* Where the last unit of a file of size s >= 16 starts */
static off_t
last_unit_start(off_t s)
{
	off_t		whole = s - s % UNIT;

	if (whole == s)
		return s - UNIT;
	if (s - whole < 16 && whole > 0)
		return whole - UNIT;	/* a remainder under 16 bytes joins it */
	return whole;
}

/* The length of the unit at u (a unit start) of a file of size s >= 16 */
static off_t
unit_length(off_t s, off_t u)
{
	return (s - u < UNIT + 16) ? s - u : UNIT;
}

/* [a, e) grown to whole units of a file of size s (e <= s) */
static void
unit_region(off_t s, off_t *a, off_t *e)
{
	off_t		last;

	if (s < 16)
	{
		*a = 0;
		*e = s;
		return;
	}
	*a -= *a % UNIT;
	*e = Min(*e + (UNIT - 1) - (*e + (UNIT - 1)) % UNIT, s);
	last = last_unit_start(s);
	if (*e > last)
	{
		*a = Min(*a, last);
		*e = s;
	}
}

/*
 * Encrypt or decrypt bytes [a, e) of a file of size s, a region from
 * unit_region(), from in to out (the same buffer or two that do not
 * overlap); for a file shorter than 16 bytes they hold 16 bytes (padding).
 */
static void
crypt_region(bool encrypt, const EncryptedTempFile *f, off_t s, off_t a,
			 off_t e, const unsigned char *in, unsigned char *out)
{
	unsigned char tweak[16];
	bool		ok = true;
	uint64		nonce = f->nonce;
	XtsCipher  *cipher = unit_cipher(f);

	if (s < 16)
	{
		xts_sequential_tweaks(tweak, nonce, TWEAK_TINY, 1);
		ok = encrypt ?
			xts_encrypt(cipher, tweak, in, out, 16) :
			xts_decrypt(cipher, tweak, in, out, 16);
	}
	else
	{
		for (off_t u = a, len; ok && u < e; u += len)
		{
			len = unit_length(s, u);
			Assert(u % UNIT == 0 && u + len <= e);
			xts_sequential_tweaks(tweak, nonce, (uint64) (u / UNIT), 1);
			ok = encrypt ?
				xts_encrypt(cipher, tweak, in + (u - a), out + (u - a), len) :
				xts_decrypt(cipher, tweak, in + (u - a), out + (u - a), len);
		}
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 encrypt ? errmsg("could not encrypt a temporary file") :
				 errmsg("could not decrypt a temporary file"),
				 errdetail("%s", data_encryption_error_reason())));
}

/*
 * Our own I/O on a registered file must reach fd.c's plain paths, so
 * raw_io turns the hooks off for the length of one call.  A backend runs
 * one call at a time, so a flag is enough; but fd.c can throw in the middle
 * (temp_file_limit, no free file descriptor), and a flag left set would send
 * every later temporary file to disk in plaintext: it is reset on the error
 * path too.
 */
typedef enum RawOp
{
	RAW_READ,
	RAW_WRITE,
	RAW_SIZE,
	RAW_TRUNCATE,
} RawOp;

static ssize_t
raw_call(RawOp op, File file, void *buf, size_t len, off_t offset,
		 uint32 wait_event_info)
{
	ssize_t		r = -1;

	Assert(!raw_io);
	raw_io = true;
	PG_TRY();
	{
		switch (op)
		{
			case RAW_READ:
				r = FileRead(file, buf, len, offset, wait_event_info);
				break;
			case RAW_WRITE:
				r = FileWrite(file, buf, len, offset, wait_event_info);
				break;
			case RAW_SIZE:
				r = FileSize(file);
				break;
			case RAW_TRUNCATE:
				r = FileTruncate(file, offset, wait_event_info);
				break;
		}
	}
	PG_FINALLY();
	{
		raw_io = false;
	}
	PG_END_TRY();
	return r;
}

static void
raw_read(File file, unsigned char *buf, size_t len, off_t offset,
		 uint32 wait_event_info)
{
	ssize_t		r;

	r = raw_call(RAW_READ, file, buf, len, offset, wait_event_info);
	if (r != (ssize_t) len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read temporary file \"%s\": read %d of %d at offset %lld",
						FilePathName(file), (int) r, (int) len, (long long) offset)));
}

static ssize_t
raw_write(File file, const unsigned char *buf, size_t len, off_t offset,
		  uint32 wait_event_info)
{
	ssize_t		r;

	r = raw_call(RAW_WRITE, file, (void *) buf, len, offset, wait_event_info);
	return r;
}

/* The length block of a short file: magic, length, zeros */
static void
tiny_length_block(unsigned char *block, const EncryptedTempFile *f, int len,
				  bool encrypt)
{
	unsigned char tweaks[16];

	if (encrypt)
	{
		memset(block, 0, 16);
		memcpy(block, TINY_MAGIC, 8);
		block[8] = (unsigned char) len;
	}
	xts_sequential_tweaks(tweaks, f->nonce, TWEAK_TINY_LEN, 1);
	if (!(encrypt ?
		  xts_encrypt(unit_cipher(f), tweaks, block, block, 16) :
		  xts_decrypt(unit_cipher(f), tweaks, block, block, 16)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 encrypt ? errmsg("could not encrypt a temporary file") :
				 errmsg("could not decrypt a temporary file"),
				 errdetail("%s", data_encryption_error_reason())));
}

/* The logical length of the file as it is on disk (see the file header) */
static off_t
logical_size_on_disk(File file)
{
	unsigned char block[16];
	off_t		size;

	size = raw_call(RAW_SIZE, file, NULL, 0, 0, 0);
	if (size < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not determine size of temporary file \"%s\": %m",
						FilePathName(file))));
	if (size != TINY_PHYSICAL)
		return size;
	raw_read(file, block, 16, 16, 0);
	tiny_length_block(block, &files[file], 0, false);
	if (memcmp(block, TINY_MAGIC, 8) == 0 && block[8] > 0 && block[8] < 16)
		return block[8];
	return size;
}

/* Plaintext of the unit region [a, e) of the file as it is, into buf */
static void
load_region(File file, off_t a, off_t e, unsigned char *buf,
			uint32 wait_event_info)
{
	EncryptedTempFile *f = &files[file];

	if (e <= a)
		return;
	raw_read(file, buf, f->size < 16 ? 16 : e - a, a, wait_event_info);
	crypt_region(false, f, f->size, a, e, buf, buf);
}

ssize_t
ReadEncryptedTempFile(File file, const struct iovec *iov, int iovcnt,
					  off_t offset, uint32 wait_event_info)
{
	EncryptedTempFile *f = &files[file];
	size_t		len = 0;
	off_t		a,
				e;
	unsigned char *buf;
	size_t		n,
				copied = 0;

	flush_tail(file, wait_event_info);
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (offset >= current_size(file) || len == 0)
		return 0;
	n = Min(len, (size_t) (f->size - offset));
	a = offset;
	e = offset + n;
	unit_region(f->size, &a, &e);
	/* whole units into one buffer (a BufFile block): decrypt them there */
	if (iovcnt == 1 && a == offset && e == offset + (off_t) n && f->size >= 16)
	{
		load_region(file, a, e, iov[0].iov_base, wait_event_info);
		return n;
	}
	buf = scratch(e - a + 16);
	load_region(file, a, e, buf, wait_event_info);
	for (int i = 0; i < iovcnt && copied < n; i++)
	{
		size_t		c = Min(iov[i].iov_len, n - copied);

		memcpy(iov[i].iov_base, buf + (offset - a) + copied, c);
		copied += c;
	}
	return n;
}

/*
 * The smallest region that is made of whole units both for a file of size
 * old and of size new, and holds [a, e).
 */
static void
common_region(off_t old, off_t new, off_t *a, off_t *e)
{
	for (;;)
	{
		off_t		a1 = *a,
					e1 = *e,
					a2 = *a,
					e2 = Min(*e, old);

		unit_region(new, &a1, &e1);
		if (a2 < old)
			unit_region(old, &a2, &e2);
		else
			a2 = *a, e2 = *e;
		a2 = Min(a1, a2);
		e2 = Max(e1, e2);
		if (a2 == *a && e2 == *e)
			return;
		*a = a2;
		*e = e2;
	}
}

/*
 * Write plaintext [a, e) of a file of size new, from plain, encrypted
 * through buf (which may be plain itself: it is changed).  A file shorter
 * than 16 bytes is padded in buf, so plain must be buf then.
 */
static ssize_t
store_region(File file, off_t new, off_t a, off_t e, const unsigned char *plain,
			 unsigned char *buf, uint32 wait_event_info)
{
	EncryptedTempFile *f = &files[file];
	size_t		len = e - a;

	if (new < 16)
	{
		Assert(plain == buf);
		memset(buf + new, 0, 16 - new); /* padding */
		tiny_length_block(buf + 16, f, (int) new, true);
		len = TINY_PHYSICAL;
	}
	crypt_region(true, f, new, a, e, plain, buf);
	return raw_write(file, buf, len, a, wait_event_info);
}

static ssize_t
write_through(File file, const struct iovec *iov, int iovcnt,
			  off_t offset, uint32 wait_event_info)
{
	EncryptedTempFile *f = &files[file];
	size_t		len = 0,
				pos;
	off_t		old = current_size(file),
				new,
				a,
				e;
	unsigned char *buf;
	bool		whole;
	ssize_t		r;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len == 0)
		return 0;
	new = Max(old, offset + (off_t) len);
	a = offset;
	e = offset + len;
	/* the old last unit, if short, changes when the file grows: redo it */
	if (new > old && old % UNIT != 0)
		a = Min(a, old < 16 ? 0 : last_unit_start(old));
	/* a hole after the old end must read as zeros: encrypt them too */
	if (offset > old)
		a = Min(a, old - old % UNIT);
	common_region(old, new, &a, &e);

	/* a write that covers its whole region need not read it (a BufFile block) */
	whole = (a == offset && e == offset + (off_t) len);
	buf = scratch(e - a + 32);
	if (whole && iovcnt == 1 && new >= 16)
	{
		/*
		 * Whole units from one buffer (a BufFile block): nothing to read back
		 * or copy, encrypted straight from the caller's buffer.
		 */
		r = store_region(file, new, a, e, iov[0].iov_base, buf,
						 wait_event_info);
	}
	else
	{
		pos = offset - a;
		/* zeros wherever neither the file's contents nor the new data go */
		memset(buf, 0, pos);
		memset(buf + pos + len, 0, e - a + 32 - (pos + len));
		if (!whole)
			load_region(file, a, Min(e, old), buf, wait_event_info);
		for (int i = 0; i < iovcnt; i++)
		{
			memcpy(buf + pos, iov[i].iov_base, iov[i].iov_len);
			pos += iov[i].iov_len;
		}
		r = store_region(file, new, a, e, buf, buf, wait_event_info);
	}
	if (r < 0)
		return r;
	if (r < (new < 16 ? TINY_PHYSICAL : e - a))
	{
		/* a short write leaves the region half done: treat as out of space */
		errno = ENOSPC;
		return -1;
	}
	/* a short file that grew past 16 bytes: drop what is left of its form */
	if (old > 0 && old < 16 && new >= 16 && new < TINY_PHYSICAL)
	{
		r = raw_call(RAW_TRUNCATE, file, NULL, 0, new, wait_event_info);
		if (r < 0)
			return r;
	}
	f->size = new;
	return len;
}

/* Write the bytes a write-behind file holds back (an error if that fails) */
static void
flush_tail(File file, uint32 wait_event_info)
{
	EncryptedTempFile *f = &files[file];
	struct iovec iov;
	ssize_t		r;

	if (f->pending == 0)
		return;
	iov.iov_base = f->tail;
	iov.iov_len = f->pending;
	/* not held any more, even if the write fails (no second attempt) */
	f->pending = 0;
	r = write_through(file, &iov, 1, f->size, wait_event_info);
	if (r != (ssize_t) iov.iov_len)
	{
		if (r >= 0)
			errno = ENOSPC;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write temporary file \"%s\": %m",
						FilePathName(file))));
	}
}

/*
 * An append to a write-behind file (see the file header): whole units
 * written, the rest held back.  Returns -2 when the write is not such an
 * append (it is not at the end, or the file's last unit on disk is one
 * that cannot be held: the short form, or one with a remainder joined).
 */
static ssize_t
write_behind(File file, const struct iovec *iov, int iovcnt, off_t offset,
			 uint32 wait_event_info)
{
	EncryptedTempFile *f = &files[file];
	struct iovec v[PG_IOV_MAX + 1];
	size_t		len = 0,
				total,
				whole,
				skip,
				held;
	int			n = 0;

	if (iovcnt > PG_IOV_MAX)
		return -2;
	if (f->pending == 0)
	{
		off_t		old = current_size(file),
					t = old - old % UNIT;

		if (offset != old)
			return -2;
		if (t != old)
		{
			/* the file ends inside a unit: hold that unit from now on */
			if (old < 16 || last_unit_start(old) != t)
				return -2;
			if (f->tail == NULL)
				f->tail = MemoryContextAlloc(TopMemoryContext, UNIT);
			load_region(file, t, old, f->tail, wait_event_info);
			f->pending = old - t;
			f->size = t;
		}
	}
	else if (offset != f->size + f->pending)
		return -2;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	total = f->pending + len;
	whole = total - total % UNIT;
	skip = 0;					/* bytes of the new data already written */
	if (whole > 0)
	{
		ssize_t		r;
		size_t		need = whole - f->pending;

		if (f->pending > 0)
			v[n++] = (struct iovec)
		{
			.iov_base = f->tail,.iov_len = f->pending
		};
		for (int i = 0; need > 0; i++)
		{
			size_t		c = Min(iov[i].iov_len, need);

			v[n++] = (struct iovec)
			{
				.iov_base = iov[i].iov_base,.iov_len = c
			};
			need -= c;
		}
		r = write_through(file, v, n, f->size, wait_event_info);
		if (r != (ssize_t) whole)
		{
			if (r >= 0)
				errno = ENOSPC;
			return -1;
		}
		skip = whole - f->pending;
		f->pending = 0;
	}
	/* what is left of the new data joins the held bytes */
	held = len - skip;
	if (held > 0 && f->tail == NULL)
		f->tail = MemoryContextAlloc(TopMemoryContext, UNIT);
	for (int i = 0; i < iovcnt && held > 0; i++)
	{
		size_t		l = iov[i].iov_len;

		if (skip >= l)
		{
			skip -= l;
			continue;
		}
		memcpy(f->tail + f->pending, (char *) iov[i].iov_base + skip, l - skip);
		f->pending += l - skip;
		held -= l - skip;
		skip = 0;
	}
	return len;
}

ssize_t
WriteEncryptedTempFile(File file, const struct iovec *iov, int iovcnt,
					   off_t offset, uint32 wait_event_info)
{
	if (files[file].write_behind)
	{
		ssize_t		r = write_behind(file, iov, iovcnt, offset, wait_event_info);

		if (r != -2)
			return r;
	}
	flush_tail(file, wait_event_info);
	return write_through(file, iov, iovcnt, offset, wait_event_info);
}

int
TruncateEncryptedTempFile(File file, off_t offset, uint32 wait_event_info)
{
	EncryptedTempFile *f = &files[file];
	off_t		old = current_size(file),
				a,
				e;
	unsigned char *buf;
	int			rc;

	if (files[file].pending > 0)
	{
		flush_tail(file, wait_event_info);
		old = current_size(file);
	}
	if (offset >= old)
		return 0;				/* BufFile only shrinks files */
	/* the unit before may become the last, with the remainder joined */
	a = Max(0, offset - offset % UNIT - UNIT);
	e = offset;
	common_region(old, offset, &a, &e);
	buf = scratch(e - a + 32);
	memset(buf, 0, e - a + 32);
	load_region(file, a, Min(e, old), buf, wait_event_info);
	rc = raw_call(RAW_TRUNCATE, file, NULL, 0, a, wait_event_info);
	/* [a, offset) is whole units of the shorter file: write it back */
	if (rc == 0 && offset > a)
	{
		if (store_region(file, offset, a, offset, buf, buf, wait_event_info) < 0)
			rc = -1;
	}
	if (rc == 0)
		f->size = offset;
	return rc;
}
