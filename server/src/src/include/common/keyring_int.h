/*-------------------------------------------------------------------------
 *
 * keyring_int.h
 *	  pgcipher: what the three files of the key ring share and nothing else
 *	  uses -- keyring.c (the file and its formats), key_command.c (running
 *	  encryption_key_command, reading what it prints) and key_wrapping.c
 *	  (the unwrap mode: data keys wrapped by the command, a KMS).
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/include/common/keyring_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef KEYRING_INT_H
#define KEYRING_INT_H

#include "common/keyring.h"

#define KEYRING_HEADER_LEN_V1	52
#define KEYRING_HEADER_LEN	68
#define KEYRING_MAX_FILE	4096

/* the file's integers are big-endian, so the file is portable */
static inline void
put32(unsigned char *p, uint32 v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static inline uint32
get32(const unsigned char *p)
{
	return ((uint32) p[0] << 24) | ((uint32) p[1] << 16) |
		((uint32) p[2] << 8) | (uint32) p[3];
}

static inline void
put64(unsigned char *p, uint64 v)
{
	put32(p, (uint32) (v >> 32));
	put32(p + 4, (uint32) v);
}

static inline uint64
get64(const unsigned char *p)
{
	return ((uint64) get32(p) << 32) | get32(p + 4);
}

/* key_command.c */
extern bool keyring_run_command_io(const char *command, const char *action,
								   const char *input, size_t inputlen,
								   int timeout_s, char *out, size_t outsize,
								   size_t *outlen, KeyringError *err);
extern int	keyring_hexval(char c);
extern bool keyring_output_line(const char *out, size_t *outlen,
								const char *command, const char *hint,
								KeyringError *err);

/* key_wrapping.c */
extern bool keyring_unwrap_with_command(const char *command, int timeout_s,
										const unsigned char *file,
										Keyring *ring, KeyringError *err);
extern size_t keyring_wrap_with_command(Keyring *ring, const char *command,
										int timeout_s, unsigned char *file,
										size_t filesize, KeyringError *err);

#endif							/* KEYRING_INT_H */
