/*-------------------------------------------------------------------------
 *
 * encryption.c
 *	  pgcipher: environment defaults for initdb's encryption options.
 *
 * Harnesses that run initdb with fixed arguments (Debian's
 * pg_createcluster and pg_upgradecluster, Citus's test driver, PostgreSQL's
 * own TAP clusters) make encrypted clusters when these are set:
 *
 *	PGCIPHER_ENCRYPTION						as --encryption
 *	PGCIPHER_ENCRYPTION_KEY_COMMAND			as --encryption-key-command
 *	PGCIPHER_ENCRYPTION_KEY_COMMAND_TIMEOUT	as --encryption-key-command-timeout
 *	PGCIPHER_ENCRYPTION_KEY_MODE			as --encryption-key-mode
 *
 * The command line wins, option by option.  A variable that is set but
 * empty, a value initdb would refuse as an option, and a key command with
 * no cipher to use it for are errors, not silently ignored: an
 * administrator who set them meant to encrypt.  The one exception is a
 * key command in the environment when the command line says
 * --encryption=off: the explicit option wins, and initdb says it ignored
 * the variable.  initdb prints where the cipher and the key command came
 * from.  See docs/design.md, section 8.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/bin/initdb/encryption.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres_fe.h"

#include <errno.h>
#include <limits.h>

#include "common/data_encryption.h"
#include "common/keyring.h"
#include "common/logging.h"
#include "encryption.h"

/* The variable's value; NULL when unset; an error when set but empty. */
static const char *
encryption_env(const char *name)
{
	const char *value = getenv(name);

	if (value != NULL && value[0] == '\0')
	{
		pg_log_error("environment variable %s is set but empty", name);
		pg_log_error_hint("Unset it, or give it a value.");
		exit(1);
	}
	return value;
}

void
encryption_options_from_environment(const EncryptionOptionsGiven *given,
									int *cipher, char **key_command,
									int *timeout, int *key_mode)
{
	const char *env_cipher = encryption_env(ENCRYPTION_ENV);
	const char *env_command = encryption_env(ENCRYPTION_KEY_COMMAND_ENV);
	const char *env_timeout = encryption_env(ENCRYPTION_TIMEOUT_ENV);
	const char *env_mode = encryption_env(ENCRYPTION_KEY_MODE_ENV);
	bool		cipher_from_env = false;
	bool		command_from_env = false;

	if (!given->cipher && env_cipher != NULL)
	{
		int			c = data_encryption_cipher_from_name(env_cipher);

		if (c < 0)
		{
			pg_log_error("invalid value \"%s\" for environment variable %s",
						 env_cipher, ENCRYPTION_ENV);
			pg_log_error_hint("Use aes-128, aes-256 or off.");
			exit(1);
		}
		*cipher = c;
		cipher_from_env = true;
	}

	if (env_command != NULL && !given->key_command)
	{
		if (*cipher == DATA_ENCRYPTION_OFF && given->cipher)
			printf(_("%s ignored: --encryption=off on the command line.\n"),
				   ENCRYPTION_KEY_COMMAND_ENV);
		else if (*cipher == DATA_ENCRYPTION_OFF)
		{
			pg_log_error("%s is set, but no cipher is",
						 ENCRYPTION_KEY_COMMAND_ENV);
			if (cipher_from_env)
				pg_log_error_hint("%s is \"off\": unset the key command, or set %s to aes-128 or aes-256.",
								  ENCRYPTION_ENV, ENCRYPTION_ENV);
			else
				pg_log_error_hint("Set %s=aes-256 (or give --encryption), or unset %s.",
								  ENCRYPTION_ENV, ENCRYPTION_KEY_COMMAND_ENV);
			exit(1);
		}
		else
		{
			*key_command = pg_strdup(env_command);
			command_from_env = true;
		}
	}

	if (env_timeout != NULL && !given->timeout && *cipher != DATA_ENCRYPTION_OFF)
	{
		char	   *end;
		long		secs;

		errno = 0;
		secs = strtol(env_timeout, &end, 10);
		if (errno != 0 || *end != '\0' || secs < 1 || secs > 3600)
		{
			pg_log_error("invalid value \"%s\" for environment variable %s",
						 env_timeout, ENCRYPTION_TIMEOUT_ENV);
			pg_log_error_hint("Give a number of seconds from 1 to 3600.");
			exit(1);
		}
		*timeout = (int) secs;
	}

	if (env_mode != NULL && !given->key_mode && *cipher != DATA_ENCRYPTION_OFF)
	{
		*key_mode = keyring_mode_from_name(env_mode);
		if (*key_mode < 0)
		{
			pg_log_error("invalid value \"%s\" for environment variable %s",
						 env_mode, ENCRYPTION_KEY_MODE_ENV);
			pg_log_error_hint("Use kek or unwrap.");
			exit(1);
		}
		printf(_("The key mode (%s) comes from environment variable %s.\n"),
			   env_mode, ENCRYPTION_KEY_MODE_ENV);
	}
	if (given->key_mode && *cipher == DATA_ENCRYPTION_OFF)
	{
		pg_log_error("--encryption-key-mode needs --encryption=aes-128 or aes-256");
		exit(1);
	}

	/* say where the settings came from */
	if (cipher_from_env)
		printf(_("The cipher (%s) comes from environment variable %s.\n"),
			   data_encryption_cipher_name(*cipher), ENCRYPTION_ENV);
	if (command_from_env)
		printf(_("The key command comes from environment variable %s.\n"),
			   ENCRYPTION_KEY_COMMAND_ENV);

	/* a cipher without a key command, wherever each came from */
	if (*cipher != DATA_ENCRYPTION_OFF && *key_command == NULL)
	{
		pg_log_error("--encryption needs --encryption-key-command");
		pg_log_error_hint("Give --encryption-key-command or set %s.",
						  ENCRYPTION_KEY_COMMAND_ENV);
		exit(1);
	}
}
