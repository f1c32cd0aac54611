/*-------------------------------------------------------------------------
 *
 * test_tempcrypt.c
 *	  pgcipher: check encrypted temporary files against a model.
 *
 * tempcrypt.c keeps a temporary file's logical length while encrypting it
 * in units of one BufFile block, with a shorter last unit, a remainder of
 * under 16 bytes joined to the unit before it and a 32-byte form for files
 * shorter than 16 bytes; writes that cover units in part read them back.
 * Every one of those edges is reached here by random writes (at block
 * boundaries, near the end, past it leaving a hole, of 1 to 3 blocks),
 * reads, truncations and, for a file in a file set (whose length is read
 * from disk), closes and re-opens, each checked against a copy kept in
 * memory.  Run with and without encryption by TAP test 010; the summary
 * says whether the bytes on disk equal the model, so the test can tell
 * that the file really went through the cipher.  The same model runs on a
 * scratch file of an extension (below), with the small appends Citus makes,
 * which tempcrypt.c holds back in memory until they fill a unit.
 *
 * test_tempcrypt_scratch() does what Citus does with its intermediate
 * results (files under base/pgsql_job_cache, which tempcrypt.c encrypts
 * as temporary files): writes through PathNameOpenFilePerm() with
 * O_APPEND and O_TRUNC, reads through a virtual file descriptor and
 * through AllocateFile().
 *
 * test_tempcrypt_buffer() says how much memory the process keeps after a
 * write of a given size, for the shared buffer's release of large sizes.
 *
 * src/test/encryption/test_tempcrypt/test_tempcrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include <sys/stat.h>

#include "common/file_perm.h"
#include "common/pg_prng.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/fileset.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "varatt.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(test_tempcrypt_random);
PG_FUNCTION_INFO_V1(test_tempcrypt_scratch);
PG_FUNCTION_INFO_V1(test_tempcrypt_buffer);

/* A length that reaches the edges of tempcrypt's units */
static size_t
random_length(pg_prng_state *rng)
{
	switch (pg_prng_uint64_range(rng, 0, 5))
	{
		case 0:
			return pg_prng_uint64_range(rng, 1, 15);
		case 1:
			return pg_prng_uint64_range(rng, 16, 64);
		case 2:
			return BLCKSZ;
		case 3:
			return BLCKSZ + pg_prng_uint64_range(rng, 0, 32) - 16;
		default:
			return pg_prng_uint64_range(rng, 1, 3 * BLCKSZ);
	}
}

/* An offset at a block boundary, near the end, or anywhere up to past it */
static off_t
random_offset(pg_prng_state *rng, off_t size)
{
	switch (pg_prng_uint64_range(rng, 0, 3))
	{
		case 0:
			return BLCKSZ * (off_t) pg_prng_uint64_range(rng, 0, size / BLCKSZ + 1);
		case 1:
			return size;
		case 2:
			{
				/* not inside Max(): it evaluates its arguments twice */
				off_t		back = (off_t) pg_prng_uint64_range(rng, 0, 40);

				return Max(0, size - back);
			}
		default:
			return (off_t) pg_prng_uint64_range(rng, 0, size + 2 * BLCKSZ);
	}
}

static void
check_read(File file, const char *model, off_t size, off_t offset, size_t len,
		   char *buf, int op)
{
	int			expected = offset >= size ? 0 : (int) Min((off_t) len, size - offset);
	int			got = FileRead(file, buf, len, offset, 0);

	if (got != expected)
		elog(ERROR, "op %d: read of %zu bytes at %lld returned %d, expected %d (size %lld)",
			 op, len, (long long) offset, got, expected, (long long) size);
	if (expected > 0 && memcmp(buf, model + offset, expected) != 0)
		elog(ERROR, "op %d: read of %d bytes at %lld differs from what was written (size %lld)",
			 op, expected, (long long) offset, (long long) size);
}

/* Whether the file's bytes on disk are the model's, byte for byte */
static bool
disk_equals_model(const char *path, const char *model, off_t size)
{
	int			fd = open(path, O_RDONLY | PG_BINARY, 0);
	char	   *raw = palloc(size + 64);
	ssize_t		n;
	bool		same;

	if (fd < 0)
		elog(ERROR, "could not open \"%s\": %m", path);
	n = read(fd, raw, size + 64);
	close(fd);
	same = n == size && memcmp(raw, model, size) == 0;
	pfree(raw);
	return same;
}

Datum
test_tempcrypt_random(PG_FUNCTION_ARGS)
{
	int64		seed = PG_GETARG_INT64(0);
	int			nops = PG_GETARG_INT32(1);
	off_t		max_size = PG_GETARG_INT32(2);
	char	   *kind = text_to_cstring(PG_GETARG_TEXT_PP(3));
	bool		shared = strcmp(kind, "shared") == 0;
	bool		scratch = strcmp(kind, "scratch") == 0;
	char	   *path = psprintf("base/pgsql_job_cache/model%lld", (long long) seed);
	pg_prng_state rng;
	FileSet		fileset;
	File		file;
	char	   *model = palloc0(max_size + 4 * BLCKSZ);
	char	   *buf = palloc(4 * BLCKSZ);
	off_t		size = 0;
	int			counts[5] = {0};
	int			short_form = 0,
				joined = 0,
				held = 0;
	bool		disk_same = false;

	pg_prng_seed(&rng, (uint64) seed);
	if (shared)
	{
		FileSetInit(&fileset);
		file = FileSetCreate(&fileset, "model");
	}
	else if (scratch)
	{
		/* not O_APPEND as Citus: a plain file would append every write */
		MakePGDirectory("base/pgsql_job_cache");
		file = PathNameOpenFilePerm(path, O_CREAT | O_RDWR | O_TRUNC | PG_BINARY,
									pg_file_create_mode);
		if (file < 0)
			elog(ERROR, "could not open \"%s\": %m", path);
	}
	else if (strcmp(kind, "private") == 0)
		file = OpenTemporaryFile(false);
	else
		elog(ERROR, "kind must be private, shared or scratch");

	for (int op = 0; op < nops; op++)
	{
		int			what = (int) pg_prng_uint64_range(&rng, 0, 99);
		off_t		offset;
		size_t		len;

		if (what < 45)
		{
			/* write */
			offset = random_offset(&rng, size);
			len = random_length(&rng);
			/* mostly rows appended, on a scratch file */
			if (scratch && pg_prng_uint64_range(&rng, 0, 2) > 0)
			{
				offset = size;
				len = pg_prng_uint64_range(&rng, 1, 300);
			}
			if (offset + (off_t) len > max_size)
				offset = Max(0, max_size - (off_t) len);
			for (size_t i = 0; i < len; i++)
				buf[i] = (char) pg_prng_uint64_range(&rng, 0, 255);
			if (FileWrite(file, buf, len, offset, 0) != (int) len)
				elog(ERROR, "op %d: write of %zu bytes at %lld failed: %m",
					 op, len, (long long) offset);
			memcpy(model + offset, buf, len);	/* a hole stays zeros */
			size = Max(size, offset + (off_t) len);
			counts[0]++;
		}
		else if (what < 80)
		{
			/* read */
			offset = random_offset(&rng, size);
			len = random_length(&rng);
			check_read(file, model, size, offset, len, buf, op);
			counts[1]++;
		}
		else if (what < 88 && size > 0)
		{
			/* truncate, to a size near a unit's edge or anywhere */
			off_t		near = (off_t) pg_prng_uint64_range(&rng, 0, 40) - 20;
			off_t		to = pg_prng_bool(&rng) ?
				BLCKSZ * (size / BLCKSZ) + near :
				(off_t) pg_prng_uint64_range(&rng, 0, size);

			to = Max(0, Min(to, size));
			if (FileTruncate(file, to, 0) != 0)
				elog(ERROR, "op %d: truncate to %lld failed: %m", op, (long long) to);
			memset(model + to, 0, size - to);
			size = to;
			counts[2]++;
		}
		else if (what < 94)
		{
			struct stat st;

			if (FileSize(file) != size)
				elog(ERROR, "op %d: size %lld, expected %lld",
					 op, (long long) FileSize(file), (long long) size);
			/* bytes held back: the file on disk is shorter than its size */
			if (scratch && stat(path, &st) == 0 && st.st_size < size)
				held++;
			counts[3]++;
		}
		else if (shared)
		{
			/* re-open: the length and the short form come from disk */
			FileClose(file);
			file = FileSetOpen(&fileset, "model", O_RDWR);
			counts[4]++;
		}
		else if (scratch)
		{
			/* closing writes what is held back; the re-open reads it */
			FileClose(file);
			file = PathNameOpenFilePerm(path, O_RDWR | PG_BINARY, pg_file_create_mode);
			if (file < 0)
				elog(ERROR, "could not open \"%s\": %m", path);
			counts[4]++;
		}
		/* the edges this run reached */
		short_form += size > 0 && size < 16;
		joined += size > BLCKSZ && size % BLCKSZ > 0 && size % BLCKSZ < 16;
	}

	/* everything, then the bytes on disk */
	if (FileSize(file) != size)
		elog(ERROR, "final size %lld, expected %lld",
			 (long long) FileSize(file), (long long) size);
	for (off_t off = 0; off < size; off += 3 * BLCKSZ)
		check_read(file, model, size, off, 3 * BLCKSZ, buf, nops);
	if (scratch)
	{
		/* the last appends, held back again after the reads, and closed */
		for (int i = 0; i < 3 && size + 100 <= max_size; i++)
		{
			memset(buf, 'a' + i, 100);
			if (FileWrite(file, buf, 100, size, 0) != 100)
				elog(ERROR, "could not write \"%s\": %m", path);
			memcpy(model + size, buf, 100);
			size += 100;
		}
		FileClose(file);
		disk_same = disk_equals_model(path, model, size);
		file = PathNameOpenFilePerm(path, O_RDONLY | PG_BINARY, pg_file_create_mode);
		if (file < 0 || FileSize(file) != size)
			elog(ERROR, "re-opened \"%s\": size %lld, expected %lld", path,
				 file < 0 ? -1LL : (long long) FileSize(file), (long long) size);
		for (off_t off = 0; off < size; off += 3 * BLCKSZ)
			check_read(file, model, size, off, 3 * BLCKSZ, buf, nops);
		FileClose(file);
		unlink(path);
	}
	else
	{
		disk_same = disk_equals_model(FilePathName(file), model, size);
		FileClose(file);
	}
	if (shared)
		FileSetDeleteAll(&fileset);

	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%d writes, %d reads, %d truncations, %d size checks, %d re-opens; %d times under 16 bytes, %d with a remainder under 16 bytes, %d times held back; final size %lld; disk %s",
											  counts[0], counts[1], counts[2], counts[3], counts[4],
											  short_form, joined, held, (long long) size,
											  disk_same ? "equals the data" : "differs from the data")));
}

Datum
test_tempcrypt_scratch(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	text	   *data_text = PG_GETARG_TEXT_PP(1);
	const char *data = VARDATA_ANY(data_text);
	size_t		len = VARSIZE_ANY_EXHDR(data_text);
	int			chunk = PG_GETARG_INT32(2);
	bool		append_only = PG_GETARG_BOOL(3);
	char	   *path = psprintf("base/pgsql_job_cache/%s", name);
	char	   *abspath = psprintf("%s/%s", DataDir, path);
	char	   *back = palloc(len + 1);
	File		file;
	FILE	   *stream;
	size_t		got;
	off_t		off = 0;
	int			fd;
	ssize_t		n;
	struct stat st;
	bool		disk_equal;

	if (chunk < 1)
		elog(ERROR, "chunk must be positive");
	MakePGDirectory("base/pgsql_job_cache");

	/* written as Citus writes it: O_APPEND | O_TRUNC, offsets counted */
	file = PathNameOpenFilePerm(path, append_only ? (O_APPEND | O_CREAT | O_RDWR | PG_BINARY) :
								(O_APPEND | O_CREAT | O_RDWR | O_TRUNC | PG_BINARY),
								pg_file_create_mode);
	if (file < 0)
		elog(ERROR, "could not open \"%s\": %m", path);
	while (off < len)
	{
		size_t		n1 = Min((size_t) chunk, len - off);

		if (FileWrite(file, data + off, n1, off, 0) != n1)
			elog(ERROR, "could not write \"%s\": %m", path);
		off += n1;
	}
	FileClose(file);

	/* read back by the absolute name (another spelling, the same tweak) */
	file = PathNameOpenFile(abspath, O_RDONLY | PG_BINARY);
	if (file < 0)
		elog(ERROR, "could not open \"%s\": %m", abspath);
	if (FileSize(file) != len)
		elog(ERROR, "size %lld, expected %zu", (long long) FileSize(file), len);
	if (FileRead(file, back, len, 0, 0) != len || memcmp(back, data, len) != 0)
		elog(ERROR, "what a virtual file descriptor reads differs from what was written");
	FileClose(file);

	/* read as COPY FROM a file reads it: a stdio stream, fstat of fileno */
	stream = AllocateFile(path, PG_BINARY_R);
	if (stream == NULL)
		elog(ERROR, "could not open \"%s\" as a stream: %m", path);
	if (fstat(fileno(stream), &st) != 0 || !S_ISREG(st.st_mode))
		elog(ERROR, "fstat of the stream's descriptor failed: %m");
	memset(back, 0, len + 1);
	got = fread(back, 1, len + 1, stream);
	if (got != len || ferror(stream) || memcmp(back, data, len) != 0)
		elog(ERROR, "what the stream reads differs from what was written (%zu bytes of %zu)", got, len);
	FreeFile(stream);

	/* the bytes on disk */
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
		elog(ERROR, "could not open \"%s\": %m", path);
	memset(back, 0, len + 1);
	n = read(fd, back, len + 1);
	CloseTransientFile(fd);
	disk_equal = (n == len && memcmp(back, data, len) == 0);

	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%zu bytes in chunks of %d; disk %s",
											  len, chunk,
											  disk_equal ? "equals the data" : "differs from the data")));
}

/*
 * len bytes written to a temporary file at offset 1 (so that the write
 * goes through the shared buffer), the file closed; returns the memory
 * TopMemoryContext holds after it.
 */
Datum
test_tempcrypt_buffer(PG_FUNCTION_ARGS)
{
	int			len = PG_GETARG_INT32(0);
	char	   *data = palloc0(len);
	File		file = OpenTemporaryFile(false);

	if (FileWrite(file, data, len, 1, 0) != len)
		elog(ERROR, "could not write a temporary file: %m");
	FileClose(file);
	pfree(data);
	PG_RETURN_INT64((int64) MemoryContextMemAllocated(TopMemoryContext, true));
}
