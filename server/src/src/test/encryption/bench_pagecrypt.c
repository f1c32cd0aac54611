/*-------------------------------------------------------------------------
 *
 * bench_pagecrypt.c
 *	  pgcipher: micro-benchmark of page encryption, per 8 kB page.
 *
 * Times what the server does per page with the same code (XtsCipher from
 * src/common/data_encryption.c, tweak reset per page, bytes 16..8191):
 *   xts-encrypt / xts-decrypt   the cipher alone
 *   write-path                  encrypt + checksum over the ciphertext
 *   read-path                   checksum check over the ciphertext + decrypt
 *   ctr-wal                     AES-CTR over 8 kB at its WAL offset (walcrypt.c)
 *   xts-temp                    a temporary file's 8 kB block: tweak made,
 *                               encrypted from the caller's block into the
 *                               write buffer (tempcrypt.c)
 * (the server computes no plaintext checksum when encryption is on)
 * Compare the cipher alone with `openssl speed -evp aes-256-xts -bytes 8192`
 * (and aes-256-ctr) on the same machine: that is the physical limit.
 *
 * Usage: bench_pagecrypt [SECONDS_PER_CASE]
 * Prints a table and, last, one JSON line per case.
 *
 *        bench_pagecrypt --native-instructions
 * Counts the instructions the CPU executes for one xts-encrypt, one
 * xts-decrypt and one ctr-wal call per cipher, by single-stepping a child
 * process with ptrace (this VM has no performance counters): one JSON line
 * each.
 *
 *        bench_pagecrypt --calls CIPHER CASE N
 * Makes N calls of one of those cases and exits: run under callgrind with
 * two values of N, the difference is callgrind's count per call.  valgrind
 * does not emulate AVX-512, so OpenSSL takes another XTS code path there
 * (its CTR has no VAES path: the same either way); the bench suite's
 * `instructions` scenario uses both counts to say what the cipher costs on
 * the real CPU.
 *
 * src/test/encryption/bench_pagecrypt.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <signal.h>
#include <time.h>
#ifdef __linux__
#include <sys/ptrace.h>
#include <sys/wait.h>
#endif

#include "common/data_encryption.h"
#include "storage/bufpage.h"
#include "storage/checksum.h"
#include "storage/checksum_impl.h"

#define OFFSET 16

typedef enum Case
{
	XTS_ENCRYPT, XTS_DECRYPT, WRITE_PATH, READ_PATH, CTR_WAL, XTS_TEMP
} Case;

static const char *case_names[] = {"xts-encrypt", "xts-decrypt", "write-path", "read-path",
"ctr-wal", "xts-temp"};

/* One cipher's contexts, as the server sets them up once per process */
typedef struct Ciphers
{
	XtsCipher  *xts;
	CtrCipher  *ctr;
} Ciphers;

static double
now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
tweak_for(unsigned char *tweak, uint32 block)
{
	memset(tweak, 0, 16);
	memcpy(tweak, &block, 4);
	tweak[4] = 0x39;			/* some relfilenumber */
}

static long failures = 0;

/* The cases the counting modes take, and the bytes of one call */
static const Case counted_cases[] = {XTS_ENCRYPT, XTS_DECRYPT, CTR_WAL};

static int
bytes_per_call(Case c)
{
	return c == CTR_WAL ? BLCKSZ : BLCKSZ - OFFSET;
}

/*
 * One call of a counted case on page blk (run_case(), the counting modes):
 * the cipher alone, as the server calls it.
 */
static void
one_call(Ciphers *ciphers, Case c, char *pages, char *out, uint32 blk)
{
	unsigned char tweak[16];
	char	   *in = pages + (size_t) blk * BLCKSZ;
	char	   *dst = out + (size_t) blk * BLCKSZ;

	Assert(c == XTS_ENCRYPT || c == XTS_DECRYPT || c == CTR_WAL);
	if (c == CTR_WAL)
	{
		ctr_crypt_at(ciphers->ctr, 1, (uint64) blk * BLCKSZ,
					 (unsigned char *) in, (unsigned char *) dst, BLCKSZ);
		return;
	}
	tweak_for(tweak, blk);
	if (c == XTS_ENCRYPT)
		xts_encrypt(ciphers->xts, tweak, (unsigned char *) in + OFFSET,
					(unsigned char *) dst + OFFSET, BLCKSZ - OFFSET);
	else
		xts_decrypt(ciphers->xts, tweak, (unsigned char *) dst + OFFSET,
					(unsigned char *) dst + OFFSET, BLCKSZ - OFFSET);
}

static double
run_case(Ciphers *ciphers, Case c, double seconds, char *pages, char *out, int npages)
{
	XtsCipher  *xts = ciphers->xts;
	unsigned char tweak[16];
	long		done = 0;
	double		start = now_sec(),
				elapsed;

	do
	{
		for (int i = 0; i < 1024; i++)
		{
			uint32		blk = (uint32) ((done + i) % npages);
			char	   *in = pages + (size_t) blk * BLCKSZ;
			char	   *dst = out + (size_t) blk * BLCKSZ;

			if (c == WRITE_PATH || c == READ_PATH)
				tweak_for(tweak, blk);
			switch (c)
			{
				case XTS_ENCRYPT:
				case XTS_DECRYPT:
				case CTR_WAL:
					one_call(ciphers, c, pages, out, blk);
					break;
				case WRITE_PATH:
					memcpy(dst, in, OFFSET);
					xts_encrypt(xts, tweak, (unsigned char *) in + OFFSET,
								(unsigned char *) dst + OFFSET, BLCKSZ - OFFSET);
					((PageHeader) dst)->pd_checksum = pg_checksum_page(dst, blk);
					break;
				case READ_PATH:
					{
						/*
						 * verify, decrypt a copy (the ciphertext must survive
						 * the loop)
						 */
						char		plain[BLCKSZ] pg_attribute_aligned(16);

						if (pg_checksum_page(dst, blk) != ((PageHeader) dst)->pd_checksum)
							failures++;
						xts_decrypt(xts, tweak, (unsigned char *) dst + OFFSET,
									(unsigned char *) plain + OFFSET, BLCKSZ - OFFSET);
					}
					break;
				case XTS_TEMP:
					xts_sequential_tweaks(tweak, 7, blk, 1);
					xts_encrypt(xts, tweak, (unsigned char *) in, (unsigned char *) dst, BLCKSZ);
					break;
			}
		}
		done += 1024;
		elapsed = now_sec() - start;
	} while (elapsed < seconds);
	return elapsed * 1e9 / done;	/* ns per page */
}

#ifdef __linux__
/*
 * Instructions a child executes between two SIGSTOPs around ncalls calls,
 * single-stepped with ptrace.  A REP-prefixed instruction would count once
 * per iteration; OpenSSL's XTS and CTR cores have none (objdump), and
 * what surrounds them copies a few bytes at a time.
 */
static long
single_step_calls(Ciphers *ciphers, Case c, int ncalls, char *pages, char *out)
{
	pid_t		pid;
	int			status;
	long		steps = 0;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
	{
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
			_exit(1);
		raise(SIGSTOP);
		for (int i = 0; i < ncalls; i++)
			one_call(ciphers, c, pages, out, i);
		raise(SIGSTOP);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
		return -1;
	while (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) == 0 &&
		   waitpid(pid, &status, 0) == pid &&
		   WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP)
		steps++;
	/* only the second SIGSTOP ends a complete count */
	if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGSTOP)
		steps = -1;
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return steps;
}

static int
native_instructions(char *pages, char *out, const unsigned char *key)
{
	for (int cipher = DATA_ENCRYPTION_AES128; cipher <= DATA_ENCRYPTION_AES256; cipher++)
	{
		Ciphers		ciphers = {xts_cipher_create(cipher, key), ctr_cipher_create(cipher, key)};

		if (ciphers.xts == NULL || ciphers.ctr == NULL)
		{
			fprintf(stderr, "could not create the ciphers\n");
			return 1;
		}
		for (int i = 0; i < lengthof(counted_cases); i++)
		{
			Case		c = counted_cases[i];
			long		none,
						four;

			/* warm: lazy set-up in OpenSSL is not a per-call cost */
			one_call(&ciphers, c, pages, out, 0);
			none = single_step_calls(&ciphers, c, 0, pages, out);
			four = single_step_calls(&ciphers, c, 4, pages, out);
			if (none < 0 || four < 0)
			{
				fprintf(stderr, "could not single-step a child with ptrace: %m\n");
				return 1;
			}
			printf("{\"cipher\": \"%s\", \"case\": \"%s\", \"native_instructions_per_call\": %.1f, \"bytes_per_call\": %d}\n",
				   data_encryption_cipher_name(cipher), case_names[c],
				   (four - none) / 4.0, bytes_per_call(c));
		}
		xts_cipher_free(ciphers.xts);
		ctr_cipher_free(ciphers.ctr);
	}
	return 0;
}

#else
static int
native_instructions(char *pages, char *out, const unsigned char *key)
{
	fprintf(stderr, "--native-instructions needs Linux's ptrace\n");
	return 1;
}
#endif							/* __linux__ */

int
main(int argc, char **argv)
{
	double		seconds = argc > 1 ? atof(argv[1]) : 1.0;
	int			npages = 64;	/* 512 kB: stays in L2, like a hot write
								 * buffer */
	char	   *pages = aligned_alloc(4096, (size_t) npages * BLCKSZ);
	char	   *out = aligned_alloc(4096, (size_t) npages * BLCKSZ);
	unsigned char key[64];
	char		json[4096] = "";

	for (size_t i = 0; i < (size_t) npages * BLCKSZ; i++)
		pages[i] = (char) (i * 2654435761u >> 13);
	for (int i = 0; i < 64; i++)
		key[i] = (unsigned char) (i * 37 + 11);

	if (argc == 2 && strcmp(argv[1], "--native-instructions") == 0)
		return native_instructions(pages, out, key);
	if (argc == 5 && strcmp(argv[1], "--calls") == 0)
	{
		int			cipher = data_encryption_cipher_from_name(argv[2]);
		Ciphers		ciphers = {xts_cipher_create(cipher, key), ctr_cipher_create(cipher, key)};
		Case		c = XTS_ENCRYPT;
		bool		found = false;
		int			ncalls = atoi(argv[4]);

		if (ciphers.xts == NULL || ciphers.ctr == NULL)
		{
			fprintf(stderr, "unknown cipher %s\n", argv[2]);
			return 1;
		}
		for (int i = 0; i < lengthof(counted_cases); i++)
			if (strcmp(argv[3], case_names[counted_cases[i]]) == 0)
			{
				c = counted_cases[i];
				found = true;
			}
		if (!found)
		{
			fprintf(stderr, "unknown case %s (xts-encrypt, xts-decrypt or ctr-wal)\n", argv[3]);
			return 1;
		}
		one_call(&ciphers, c, pages, out, 0);
		for (int i = 0; i < ncalls; i++)
			one_call(&ciphers, c, pages, out, i % npages);
		return 0;
	}

	printf("%-8s %-12s %10s %10s\n", "cipher", "case", "ns/page", "GB/s");
	for (int cipher = DATA_ENCRYPTION_AES128; cipher <= DATA_ENCRYPTION_AES256; cipher++)
	{
		Ciphers		ciphers = {xts_cipher_create(cipher, key), ctr_cipher_create(cipher, key)};

		if (ciphers.xts == NULL || ciphers.ctr == NULL)
		{
			fprintf(stderr, "could not create the ciphers\n");
			return 1;
		}
		for (Case c = XTS_ENCRYPT; c <= XTS_TEMP; c++)
		{
			double		ns;

			/* decrypt cases need ciphertext (with checksums) in out[] */
			if (c == XTS_DECRYPT || c == READ_PATH)
				run_case(&ciphers, WRITE_PATH, 0.05, pages, out, npages);
			failures = 0;
			ns = run_case(&ciphers, c, seconds, pages, out, npages);
			printf("%-8s %-12s %10.0f %10.2f\n", data_encryption_cipher_name(cipher),
				   case_names[c], ns, BLCKSZ / ns);
			if (c == READ_PATH && failures > 0)
				fprintf(stderr, "read-path: %ld checksum failures (benchmark bug)\n", failures);
			snprintf(json + strlen(json), sizeof(json) - strlen(json),
					 "{\"cipher\": \"%s\", \"case\": \"%s\", \"ns_per_page\": %.1f, \"gb_per_s\": %.3f}\n",
					 data_encryption_cipher_name(cipher), case_names[c], ns, BLCKSZ / ns);
		}
		xts_cipher_free(ciphers.xts);
		ctr_cipher_free(ciphers.ctr);
	}
	printf("%s", json);
	return 0;
}
