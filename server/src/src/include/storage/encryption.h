/*-------------------------------------------------------------------------
 *
 * encryption.h
 *	  pgcipher: transparent data encryption in the server.
 *
 * The key ring is loaded once, early in start-up (postmaster, single-user
 * backend, bootstrap), before anything is written to the data directory;
 * every process forked afterwards inherits the keys.  The storage manager
 * encrypts blocks on their way to disk and decrypts them on the way back.
 *
 * src/include/storage/encryption.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef STORAGE_ENCRYPTION_H
#define STORAGE_ENCRYPTION_H

#include "access/xlogdefs.h"
#include "common/data_encryption.h"
#include "common/keyring.h"
#include "common/relpath.h"
#include "port/pg_crc32c.h"
#include "port/pg_iovec.h"
#include "storage/fd.h"
#include "storage/block.h"
#include "storage/relfilelocator.h"

/* GUC variables (state.c) */
extern PGDLLIMPORT char *encryption_key_command;
extern PGDLLIMPORT int encryption_key_command_timeout;
extern PGDLLIMPORT int data_encryption_cipher;	/* DATA_ENCRYPTION_* */

/*
 * Whether the server's I/O encrypts now: shared by every process, and
 * turned on or off while the server runs by pg_enable_encryption() and
 * pg_disable_encryption() (design 9.7)
 */
extern int	DataEncryptionCipher(void);

#define DataEncryptionEnabled() (DataEncryptionCipher() != DATA_ENCRYPTION_OFF)

/* encryption.c: start-up, the one place that loads keys */
extern void InitializeDataEncryption(bool bootstrap);
extern void CheckDataEncryptionMatchesControlFile(void);

/*
 * state.c: what the modules read back, beneath them all: the key ring's
 * memory, the server's one way to report a key ring error, buffers
 * (common/keyring.h defines the structs)
 */
struct Keyring;
struct KeyringError;
struct PageKeysState;
extern struct Keyring *DataEncryptionKeyringMemory(void);
extern const struct Keyring *DataEncryptionKeyring(void);
extern void CopyDataEncryptionKeyring(struct Keyring *out);
extern uint32 DataKeysVersion(void);
extern bool CopyDataKey(uint32 id, unsigned char *key);
extern void CopyStartupSlotKey(uint32 id_a, uint32 id_b, const char *what,
							   unsigned char *key);
extern void SetDataEncryptionCipher(int cipher);
extern int	DataKeysCipher(void);

/* A module's one cipher, keyed from the shared key ring (state.c) */
typedef struct ModuleCipher
{
	XtsCipher  *xts;			/* one of the two */
	CtrCipher  *ctr;
	uint32		id;				/* its key, or fallback if the ring lacks it */
	uint32		fallback;
	uint32		seen;			/* DataKeysVersion() it was keyed at */
	bool		have;			/* keyed from the ring */
} ModuleCipher;

extern void StartModuleCipher(ModuleCipher *mc, bool ctr, uint32 id,
							  uint32 fallback);
extern bool RefreshModuleCipher(ModuleCipher *mc);

/*
 * The temporary-file key's two slots as a module keeps them (tempcrypt.c,
 * spillcrypt.c, pgsscrypt.c; design 9.6), each file under its own
 */
typedef struct TempKeyCiphers
{
	ModuleCipher slot[2];		/* PAGE_SLOT_A, PAGE_SLOT_B */
} TempKeyCiphers;

/*
 * The key a temporary file began under: a slot, and how often its key had
 * been replaced then (TempKeyEpoch(); design 9.6)
 */
typedef struct TempFileKey
{
	int			slot;			/* PAGE_SLOT_A or PAGE_SLOT_B */
	uint32		epoch;
} TempFileKey;

extern void StartTempKeyCiphers(TempKeyCiphers *tc, bool ctr);
extern ModuleCipher *TempKeyCipher(TempKeyCiphers *tc, int slot,
								   const char *what);
extern void *StartupCipher(void *cipher);
extern void ChangeDataKeys(const struct Keyring *ring);
extern uint32 PageWriteGeneration(void);
extern bool PagesMarked(void);
extern uint32 SlrusConverted(void);
extern bool DataEncryptionChanging(void);
extern bool NewWritesEncrypted(void);
extern bool DataKeysLoaded(void);
extern void GetPageKeysState(struct PageKeysState *out);
extern void SetPageKeysState(const struct PageKeysState *state);
extern int	WALWriteSlot(XLogRecPtr pageptr);
extern int	TempWriteSlot(void);
extern bool TempKeySwitchedSinceStart(void);
extern uint32 TempKeyEpoch(int slot);
extern void CheckTempKeyEpoch(int slot, uint32 epoch, const char *what);
extern void SetWALKeySwitch(uint32 wal_generation, XLogRecPtr switch_lsn);
extern bool WALKeySwitchDiffers(const struct PageKeysState *state);
extern void ReportKeyringError(int elevel, const struct KeyringError *err);
extern void *GrowStaticBuffer(void *buf, size_t *size, size_t len);
extern int	LockKeyringDirectory(bool wait);
extern const char *CurrentKeyCommand(void);
extern void EncryptionTestCrashPoint(const char *envvar, const char *step);

/* What the online rotation's workers are at (datarotation.c, state.c) */
#define DATA_ROTATION_IDLE			0
#define DATA_ROTATION_REWRITING		1	/* dirtying every block of a database */
#define DATA_ROTATION_WAITING_TEMP	2	/* for older temporary tables to go */
#define DATA_ROTATION_CHECKPOINT	3	/* writing every dirty block */
#define DATA_ROTATION_DROPPING_KEY	4	/* the old page key leaves the ring */
#define DATA_ROTATION_PAUSED		5
#define DATA_ROTATION_WAITING_XACTS	6	/* for transactions older than the
										 * switch */
#define DATA_ROTATION_WAITING_WAL	7	/* decrypting: for the WAL before the
										 * switch to be no longer needed */
#define DATA_ROTATION_WAITING_SPACE	8	/* for encryption_min_free_space */

/*
 * encryption_min_free_space: the workers of an online operation wait while
 * the file system of pg_wal or of the data directory has less free (MB;
 * 0: never)
 */
extern PGDLLIMPORT int encryption_min_free_space;
#define ENCRYPTION_MIN_FREE_SPACE_DEFAULT	256

typedef struct DataRotationProgress
{
	int			phase;			/* DATA_ROTATION_* */
	int			pid;			/* the process doing it */
	uint32		generation;		/* being written */
	uint32		dbid;
	uint32		relid;
	int			forknum;
	int64		blocks_done;	/* of this fork */
	int64		blocks_total;
	int64		blocks_rewritten;	/* since the operation (re)started */
	int			databases_done;
	int			databases_total;
	int			worker_result;	/* the latest worker's: running, done, stopped */
} DataRotationProgress;

extern void GetDataRotationProgress(DataRotationProgress *out);
extern void SetDataRotationProgress(const DataRotationProgress *progress);

/*
 * keylog.c: a change of the key ring or the page key state, written,
 * WAL-logged and in effect; its redo
 */
struct XLogReaderState;
extern void InstallDataKeyring(struct Keyring *ring);
extern void WritePageKeysState(struct PageKeysState *state);
extern void DropDataKey(uint32 id, struct PageKeysState *state);
extern void LogPageKeysChange(const struct PageKeysState *state);
extern void RedoPageKeysChange(struct XLogReaderState *record);

/* datarotation.c: the online rotation of the page key and its workers */
extern int	LockDataKeysChange(bool wait);
extern void CheckDataKeysThrottle(int cost_delay, int cost_limit);
extern void CheckDataKeysOperator(const char *what);
extern void SetDataKeysSwitchPoint(struct PageKeysState *state);
extern void RegisterDataRotationLauncher(void);
extern PGDLLIMPORT void DataRotationLauncherMain(Datum main_arg);
extern PGDLLIMPORT void DataRotationWorkerMain(Datum main_arg);

/*
 * walkeys.c: new WAL switches to a rotation's WAL key at a segment
 * boundary; the old WAL key leaves the ring when nothing needs it
 */
extern void SwitchWALKey(void);
extern bool OldWALKeyNeeded(const struct PageKeysState *state,
							bool checkpoint, char *why, size_t size);
extern uint32 OldWALKeyId(const struct PageKeysState *state);
extern bool WALBeforeSwitchNeeded(XLogRecPtr switch_lsn, bool checkpoint,
								  char *why, size_t size);
extern void RemoveRecycledWALSegments(XLogRecPtr from);

/* enabling.c: pg_enable_encryption(), and the launcher's SLRU step */
extern bool ConvertSlrusForOperation(void);
extern bool FinishDecryption(bool completed_here);
extern void RemoveKeyFilesOfDecryptedCluster(void);
extern const char *show_data_encryption(void);

/* keyrotation.c: pg_rotate_encryption_key() and its start-up half */
extern void CompleteKeyRotation(bool loaded_from_next);

/*
 * Each module's cipher, handed over by InitializeDataEncryption() in the
 * order its start_modules() shows
 */
extern void InitializePageEncryption(int cipher);
extern void InitializeSlruEncryption(void);
extern void InitializeWALEncryption(int cipher);
extern void InitializeTempFileEncryption(void);
extern void InitializeSpillFileEncryption(void);
extern void InitializeStatementTextEncryption(void);

/* walcrypt.c: XLogWrite() and XLogFileCopy() hooks */
extern void ChooseWALEncryptionEpoch(void);
extern ssize_t WriteWALPages(int fd, char *buf, size_t nbytes, off_t offset,
							 XLogSegNo segno, XLogRecPtr valid_end);
extern void ResetWALPageEpoch(char *page);
extern void CopyWALPagePrefix(int srcfd, const char *path, char *page,
							  off_t offset, int upto, XLogSegNo segno);
extern bool WALSegmentRecyclable(const char *path);

/* slrucrypt.c: SLRU pages and two-phase state files */
extern const char *EncryptSlruPage(const char *dir, int64 pageno,
								   const char *page);
extern void DecryptSlruPage(const char *dir, int64 pageno, char *page);
extern void *EncryptTwoPhaseState(TransactionId xid, const void *content,
								  int len, pg_crc32c *crc);
extern void DecryptTwoPhaseState(TransactionId xid, char *buf, size_t len);
struct SlruCtlData;
extern void RegisterEncryptedSlru(struct SlruCtlData *ctl);
extern void CompleteSlruConversion(void);
extern bool ConvertSlrusOnline(uint32 done, bool decrypt,
							   void (*commit) (uint32 bit));
extern void DecryptTwoPhaseFiles(void);

/* spillcrypt.c: logical decoding spill files */
extern ssize_t WriteSpillFileData(int fd, const char *data, size_t len);
extern off_t SpillFileFirstOffset(File vfd);
extern void DecryptSpillFileData(File vfd, char *data, size_t len,
								 off_t offset);

/* pgsscrypt.c: pg_stat_statements' query texts */
extern void CryptStatementTexts(uint64 nonce, uint64 offset, char *buf,
								size_t len);
extern uint64 NewStatementTextsNonce(void);
extern bool WriteStatementText(int fd, const char *query, int query_len,
							   off_t off, uint64 nonce);
extern bool WriteStatementTextsDumpNonce(FILE *file, uint64 *nonce);
extern bool ReadStatementTextsDumpNonce(FILE *file, uint64 *nonce);

/* tempcrypt.c: fd.c's hooks for temporary files */
extern bool TempFileIsEncrypted(File file);
extern void RegisterEncryptedTempFile(File file, const char *path);
extern void ForgetEncryptedTempFile(File file);
extern off_t EncryptedTempFileSize(File file);
extern ssize_t ReadEncryptedTempFile(File file, const struct iovec *iov,
									 int iovcnt, off_t offset,
									 uint32 wait_event_info);
extern ssize_t WriteEncryptedTempFile(File file, const struct iovec *iov,
									  int iovcnt, off_t offset,
									  uint32 wait_event_info);
extern int	TruncateEncryptedTempFile(File file, off_t offset,
									  uint32 wait_event_info);

/* ... and what scratchfile.c asks of it */
extern void RegisterEncryptedTempFileNamed(File file, const char *path,
										   bool shared, TempFileKey key);
extern TempFileKey ScratchFileKey(const char *path);
extern void SetEncryptedTempFileWriteBehind(File file, bool on);

/* scratchfile.c: fd.c's hooks for extensions' temporary files */
extern bool IsEncryptedScratchPath(const char *path);
extern int	EncryptedScratchFileFlags(const char *path, int flags);
extern void RegisterEncryptedScratchFile(File file, const char *path);
extern FILE *OpenEncryptedScratchStream(const char *path, const char *mode);

/* pagecrypt.c: the storage manager's hooks */
extern const void **EncryptBlocksForWrite(RelFileLocator rlocator,
										  ForkNumber forknum,
										  BlockNumber blocknum,
										  const void **buffers,
										  BlockNumber nblocks);
extern void DecryptBlocksAfterRead(RelFileLocator rlocator,
								   ForkNumber forknum,
								   BlockNumber blocknum,
								   void **buffers,
								   BlockNumber nblocks);
#if PG_VERSION_NUM >= 180000
/* 18's asynchronous reads: md.c's completion callback (critical section) */
struct PgAioHandle;
union PgAioTargetData;
extern void PrepareAsyncRead(struct PgAioHandle *ioh);
extern bool DecryptBlocksAfterAsyncRead(struct PgAioHandle *ioh,
										const union PgAioTargetData *td,
										int nblocks);
#endif

/* bufpage.c: did the page just decrypted pass its ciphertext checksum? */
extern bool PageChecksumVerifiedOnRead(const void *page, uint16 *computed);

/* One page, for tests and benchmarks; in and out may be the same */
extern void EncryptPage(RelFileNumber relnumber, ForkNumber forknum,
						BlockNumber blocknum, const char *in, char *out);
extern void DecryptPage(RelFileNumber relnumber, ForkNumber forknum,
						BlockNumber blocknum, char *page);

#endif							/* STORAGE_ENCRYPTION_H */
