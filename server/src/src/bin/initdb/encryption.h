/*-------------------------------------------------------------------------
 *
 * encryption.h
 *	  pgcipher: initdb's encryption options, from the command line or the
 *	  environment.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/bin/initdb/encryption.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef INITDB_ENCRYPTION_H
#define INITDB_ENCRYPTION_H

/* the environment variables that give initdb's encryption defaults */
#define ENCRYPTION_ENV			"PGCIPHER_ENCRYPTION"
#define ENCRYPTION_KEY_COMMAND_ENV	"PGCIPHER_ENCRYPTION_KEY_COMMAND"
#define ENCRYPTION_TIMEOUT_ENV	"PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT"
#define ENCRYPTION_KEY_MODE_ENV	"PGCIPHER_ENCRYPTION_KEY_MODE"

/* which options the command line gave (the environment fills the others) */
typedef struct EncryptionOptionsGiven
{
	bool		cipher;
	bool		key_command;
	bool		timeout;
	bool		key_mode;
} EncryptionOptionsGiven;

extern void encryption_options_from_environment(const EncryptionOptionsGiven *given,
												int *cipher, char **key_command,
												int *timeout, int *key_mode);

#endif							/* INITDB_ENCRYPTION_H */
