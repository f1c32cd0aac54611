/*-------------------------------------------------------------------------
 *
 * scratchfile.c
 *	  pgcipher: extensions' temporary files ("scratch files"), encrypted as
 *	  PostgreSQL's own temporary files are (tempcrypt.c).
 *
 * Extensions keep temporary files of their own where fd.c does not know
 * them as such: Citus writes intermediate results (repartition joins, CTEs
 * and subqueries pushed to the workers, create_intermediate_result()) to
 * files under base/pgsql_job_cache with PathNameOpenFilePerm(), and reads
 * them with it or with COPY FROM (AllocateFile()).  fd.c asks
 * IsEncryptedScratchPath() about every path it opens those two ways; such
 * a "scratch file" is encrypted as a temporary file, and AllocateFile()
 * gets a stdio stream that reads and writes through the same cipher
 * (OpenEncryptedScratchStream()).
 *
 * They are encrypted and held back at their end ("write-behind") by
 * tempcrypt.c, which says why.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/backend/storage/encryption/scratchfile.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <stdio.h>

#include "miscadmin.h"
#include "storage/encryption.h"
#include "storage/fd.h"
#include "utils/wait_event.h"

/*
 * Scratch files: extensions' temporary files under the data directory,
 * known by their directory.  Only Citus's job cache for now; its files are
 * removed when the server starts, as temporary files are.
 */
static const char *const scratch_dirs[] = {
	"base/pgsql_job_cache/",	/* Citus: intermediate results */
};

/* "path" relative to the data directory, or NULL when outside it */
static const char *
relative_to_data_dir(const char *path)
{
	size_t		n;

	if (!is_absolute_path(path))
		return path;
	if (DataDir == NULL)
		return NULL;
	n = strlen(DataDir);
	if (strncmp(path, DataDir, n) != 0 || path[n] != '/')
		return NULL;
	return path + n + 1;
}

bool
IsEncryptedScratchPath(const char *path)
{
	char	   *canon;
	const char *rel;
	bool		found = false;

	if (!DataEncryptionEnabled() || strstr(path, "pgsql_") == NULL)
		return false;
	/* "./base//pgsql_job_cache/x" is the same file */
	canon = pstrdup(path);
	canonicalize_path(canon);
	rel = relative_to_data_dir(canon);
	for (int i = 0; rel != NULL && i < lengthof(scratch_dirs); i++)
		if (strncmp(rel, scratch_dirs[i], strlen(scratch_dirs[i])) == 0)
			found = true;
	pfree(canon);
	return found;
}

/*
 * The open flags for a scratch file.  Encrypted writes land at the offset
 * asked for (a write that grows the file rewrites its last unit), which
 * O_APPEND would turn into appends.  A caller that truncates on open and
 * counts its offsets from zero (Citus does) writes at the end anyway:
 * O_APPEND is dropped.  Appending to an existing file by O_APPEND alone
 * cannot be served: refused before anything is written.  A write that
 * covers a unit in part reads it first: write-only becomes read-write.
 */
int
EncryptedScratchFileFlags(const char *path, int flags)
{
	if ((flags & O_ACCMODE) == O_WRONLY)
		flags = (flags & ~O_ACCMODE) | O_RDWR;
	if ((flags & O_APPEND) == 0)
		return flags;
	if ((flags & O_TRUNC) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot append to encrypted scratch file \"%s\" with O_APPEND", path),
				 errdetail("Files under this directory are encrypted as temporary files, whose writes need their offset."),
				 errhint("Open the file with O_TRUNC, or write at explicit offsets.")));
	return flags & ~O_APPEND;
}

/*
 * A scratch file, opened by PathNameOpenFilePerm().  Its caller never sees
 * "file" when this fails (reading the size can), so the file is closed
 * here rather than left open until the process exits.
 */
void
RegisterEncryptedScratchFile(File file, const char *path)
{
	PG_TRY();
	{
		char	   *canon = pstrdup(path);
		const char *rel;

		/* the relative name: the same nonce whichever way a process names it */
		canonicalize_path(canon);
		rel = relative_to_data_dir(canon);
		RegisterEncryptedTempFileNamed(file, rel ? rel : canon, true,
									   ScratchFileKey(canon));
		SetEncryptedTempFileWriteBehind(file, true);
		pfree(canon);
	}
	PG_CATCH();
	{
		FileClose(file);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

#ifdef __GLIBC__
/*
 * A stdio stream over a scratch file, for AllocateFile(): a virtual file
 * descriptor registered as above, read and written at the stream's
 * position through FileRead() and FileWrite().
 */
typedef struct ScratchStream
{
	File		file;
	off_t		pos;
} ScratchStream;

/*
 * One read or write of the stream.  An ERROR must not unwind through
 * stdio (an fclose() at abort would flush the same buffer again, and fail
 * again, from inside the error handler): it is logged here and stdio
 * gets an I/O error, which its caller reports (COPY: "could not read from
 * COPY file").
 */
static ssize_t
scratch_stream_io(ScratchStream *s, char *buf, size_t size, bool write)
{
	MemoryContext cxt = CurrentMemoryContext;
	ssize_t		n = -1;

	PG_TRY();
	{
		if (write)
			n = FileWrite(s->file, buf, size, s->pos, WAIT_EVENT_DATA_FILE_WRITE);
		else
			n = FileRead(s->file, buf, size, s->pos, WAIT_EVENT_DATA_FILE_READ);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(LOG,
				(errcode(edata->sqlerrcode),
				 errmsg("%s", edata->message),
				 errdetail("While %s encrypted scratch file \"%s\".",
						   write ? "writing" : "reading", FilePathName(s->file))));
		FreeErrorData(edata);
		n = -1;
		errno = EIO;
	}
	PG_END_TRY();
	if (n > 0)
		s->pos += n;
	return n;
}

static ssize_t
scratch_stream_read(void *cookie, char *buf, size_t size)
{
	return scratch_stream_io(cookie, buf, size, false);
}

static ssize_t
scratch_stream_write(void *cookie, const char *buf, size_t size)
{
	ssize_t		n = scratch_stream_io(cookie, unconstify(char *, buf), size, true);

	/* stdio takes 0 for an error */
	return n < 0 ? 0 : n;
}

static int
scratch_stream_seek(void *cookie, off64_t * offset, int whence)
{
	ScratchStream *s = cookie;
	off_t		base;

	switch (whence)
	{
		case SEEK_SET:
			base = 0;
			break;
		case SEEK_CUR:
			base = s->pos;
			break;
		case SEEK_END:
			base = FileSize(s->file);
			if (base < 0)
				return -1;
			break;
		default:
			errno = EINVAL;
			return -1;
	}
	if (base + *offset < 0)
	{
		errno = EINVAL;
		return -1;
	}
	s->pos = base + *offset;
	*offset = s->pos;
	return 0;
}

static int
scratch_stream_close(void *cookie)
{
	ScratchStream *s = cookie;

	FileClose(s->file);
	free(s);
	return 0;
}

FILE *
OpenEncryptedScratchStream(const char *path, const char *mode)
{
	cookie_io_functions_t io = {
		.read = scratch_stream_read,
		.write = scratch_stream_write,
		.seek = scratch_stream_seek,
		.close = scratch_stream_close,
	};
	bool		plus = strchr(mode, '+') != NULL;
	int			flags;
	ScratchStream *s;
	FILE	   *stream;

	/* writes read back the unit they cover in part: never write-only */
	switch (mode[0])
	{
		case 'r':
			flags = plus ? O_RDWR : O_RDONLY;
			break;
		case 'w':
			flags = O_RDWR | O_CREAT | O_TRUNC;
			break;
		case 'a':
			flags = O_RDWR | O_CREAT;
			break;
		default:
			errno = EINVAL;
			return NULL;
	}
	s = malloc(sizeof(ScratchStream));
	if (s == NULL)
	{
		errno = ENOMEM;
		return NULL;
	}
	s->file = PathNameOpenFile(path, flags | PG_BINARY);
	if (s->file < 0)
	{
		int			save_errno = errno;

		free(s);
		errno = save_errno;
		return NULL;
	}
	/* PathNameOpenFile() registered it (IsEncryptedScratchPath()) */
	Assert(TempFileIsEncrypted(s->file));
	/* stdio writes in its buffer's chunks, and closes from inside stdio */
	SetEncryptedTempFileWriteBehind(s->file, false);
	s->pos = mode[0] == 'a' ? FileSize(s->file) : 0;
	stream = fopencookie(s, mode, io);
	if (stream == NULL)
	{
		int			save_errno = errno;

		FileClose(s->file);
		free(s);
		errno = save_errno;
		return NULL;
	}

	/*
	 * COPY FROM fstat()s fileno() of the stream it opened (to refuse a
	 * directory).  A cookie stream has no descriptor (glibc keeps -2 there);
	 * glibc reads, writes and closes it only through the cookie, so the
	 * number can be the file's kernel descriptor, valid at least until the
	 * next file is opened.
	 */
	stream->_fileno = FileGetRawDesc(s->file);
	return stream;
}
#else
FILE *
OpenEncryptedScratchStream(const char *path, const char *mode)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot open encrypted scratch file \"%s\" as a stream on this platform", path),
			 errdetail("Streams over encrypted files need the C library's fopencookie().")));
	return NULL;
}
#endif
