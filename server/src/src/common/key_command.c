/*-------------------------------------------------------------------------
 *
 * key_command.c
 *	  pgcipher: running encryption_key_command and reading what it prints.
 *
 * The command runs with /bin/sh, its stdout collected up to a limit and a
 * timeout (its whole process group killed past it); what it prints must be
 * one line of printable ASCII, 64 hexadecimal digits (the key-encryption
 * key itself) or a passphrase stretched with scrypt.  Errors say what is
 * wrong and where in the output, never what was printed.  The unwrap mode
 * (key_wrapping.c) runs the same command with "wrap" or "unwrap" and input
 * on its stdin.
 *
 * Portions Copyright (c) 2026, pgcipher developers
 *
 * src/common/key_command.c
 *
 *-------------------------------------------------------------------------
 */
#ifndef FRONTEND
#include "postgres.h"
#else
#include "postgres_fe.h"
#endif

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/data_encryption.h"
#include "common/keyring_int.h"

static int64
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Run command with /bin/sh, collect what it prints on stdout, and give up
 * after timeout_s seconds (killing its whole process group).  stderr is
 * left alone so the command's own complaints reach the server log.  With
 * action, the command runs with that word appended ("wrap", "unwrap") and
 * input on its stdin; without, stdin is /dev/null.
 */
bool
keyring_run_command_io(const char *command, const char *action, const char *input,
					   size_t inputlen, int timeout_s, char *out, size_t outsize,
					   size_t *outlen, KeyringError *err)
{
	const char *hint = "Check the setting of encryption_key_command.";
	char		full[8192];
	int			pipefd[2];
	int			infd[2] = {-1, -1};
	pid_t		pid;
	int64		deadline;
	size_t		len = 0;
	bool		timed_out = false;
	bool		too_long = false;
	int			status = 0;

	if (command == NULL || command[0] == '\0')
	{
		keyring_set_error(err, KEYRING_ERR_COMMAND_FAILED,
						  "Set encryption_key_command in postgresql.conf to the command that prints the key or passphrase given to initdb.",
						  "encryption_key_command is not set");
		return false;
	}
	if (action != NULL)
	{
		snprintf(full, sizeof(full), "%s %s", command, action);
		command = full;
	}

	/*
	 * The input (a few kB at most) goes into its pipe before the command
	 * starts: the pipe holds it, so no write can block or raise SIGPIPE
	 * however the command treats its stdin.
	 */
	if (action != NULL)
	{
		if (inputlen > 16384 || pipe(infd) != 0 ||
			write(infd[1], input, inputlen) != (ssize_t) inputlen)
		{
			if (infd[0] >= 0)
			{
				close(infd[0]);
				close(infd[1]);
			}
			keyring_set_error(err, KEYRING_ERR_COMMAND_FAILED, NULL,
							  "could not pass the key ring to encryption key command: %s", strerror(errno));
			return false;
		}
		close(infd[1]);
	}
	if (pipe(pipefd) != 0)
	{
		if (infd[0] >= 0)
			close(infd[0]);
		keyring_set_error(err, KEYRING_ERR_COMMAND_FAILED, NULL,
						  "could not create pipe for encryption key command: %s", strerror(errno));
		return false;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0)
	{
		close(pipefd[0]);
		close(pipefd[1]);
		if (infd[0] >= 0)
			close(infd[0]);
		keyring_set_error(err, KEYRING_ERR_COMMAND_FAILED, NULL,
						  "could not fork encryption key command: %s", strerror(errno));
		return false;
	}
	if (pid == 0)
	{
		/* child: own process group, clean signal state, stdout to the pipe */
		sigset_t	none;
		int			devnull;

		setpgid(0, 0);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGCHLD, SIG_DFL);
		if (infd[0] >= 0)
			dup2(infd[0], 0);
		else if ((devnull = open("/dev/null", O_RDONLY)) >= 0)
			dup2(devnull, 0);
		if (infd[0] >= 0)
			close(infd[0]);
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		close(pipefd[1]);
		execl("/bin/sh", "sh", "-c", command, (char *) NULL);
		_exit(127);
	}
	setpgid(pid, pid);			/* also from here, to avoid a race */
	close(pipefd[1]);
	if (infd[0] >= 0)
		close(infd[0]);

	deadline = now_ms() + (int64) timeout_s * 1000;
	for (;;)
	{
		struct pollfd pfd = {.fd = pipefd[0],.events = POLLIN};
		int64		left = deadline - now_ms();
		int			rc;
		ssize_t		n;
		char		chunk[256];

		if (left <= 0)
		{
			timed_out = true;
			break;
		}
		rc = poll(&pfd, 1, (int) Min(left, 1000));
		if (rc < 0 && errno != EINTR)
			break;
		if (rc <= 0)
			continue;
		n = read(pipefd[0], chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;				/* EOF (or error): the command is done */
		if (len + n > outsize)
		{
			data_encryption_wipe(chunk, n);
			too_long = true;
			break;
		}
		memcpy(out + len, chunk, n);
		len += n;
		data_encryption_wipe(chunk, n);
	}
	close(pipefd[0]);

	/* Reap the child, still within the deadline; kill it if it overstays */
	for (;;)
	{
		pid_t		r = waitpid(pid, &status, WNOHANG);

		if (r == pid || (r < 0 && errno != EINTR))
			break;
		if (timed_out || too_long || now_ms() >= deadline)
		{
			if (!too_long)
				timed_out = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			break;
		}
		pg_usleep(10000);
	}

	if (timed_out)
	{
		data_encryption_wipe(out, outsize);
		keyring_set_error(err, KEYRING_ERR_COMMAND_TIMEOUT,
						  "Make sure the key command finishes without waiting for input, or raise encryption_key_command_timeout.",
						  "encryption key command did not finish within %d seconds", timeout_s);
		keyring_set_detail(err, "The command \"%s\" was killed.", command);
		return false;
	}
	if (too_long)
	{
		data_encryption_wipe(out, outsize);
		keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
						  "encryption key command printed more than %zu bytes", outsize);
		return false;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
	{
		data_encryption_wipe(out, outsize);
		keyring_set_error(err, KEYRING_ERR_COMMAND_FAILED, hint,
						  "encryption key command \"%s\" failed", command);
		if (WIFEXITED(status))
			keyring_set_detail(err, "The command exited with status %d.", WEXITSTATUS(status));
		else if (WIFSIGNALED(status))
			keyring_set_detail(err, "The command was terminated by signal %d.", WTERMSIG(status));
		return false;
	}
	*outlen = len;
	return true;
}

bool
run_key_command(const char *command, int timeout_s,
				char *out, size_t outsize, size_t *outlen,
				KeyringError *err)
{
	return keyring_run_command_io(command, NULL, NULL, 0, timeout_s, out, outsize,
								  outlen, err);
}

int
keyring_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool
is_hex_key(const char *s, size_t len)
{
	if (len != KEK_LEN * 2)
		return false;
	for (size_t i = 0; i < len; i++)
		if (keyring_hexval(s[i]) < 0)
			return false;
	return true;
}

/*
 * What the key command printed (one trailing newline dropped) must be one
 * line of printable ASCII.  Errors say what is wrong and where, never what
 * was printed: it may be most of a key.
 */
static bool
output_is_one_printable_line(const char *out, size_t outlen, const char *hint,
							 KeyringError *err)
{
	for (size_t i = 0; i < outlen; i++)
	{
		unsigned char c = (unsigned char) out[i];

		if (c == '\n' || c == '\r')
		{
			keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
							  "encryption key command printed more than one line");
			keyring_set_detail(err, "Byte %zu of the output ends a line, and more follows.", i + 1);
			return false;
		}
		if (c < 0x20 || c == 0x7f)
		{
			keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
							  "encryption key command printed a control character");
			keyring_set_detail(err, "Byte %zu of the output is a control character.", i + 1);
			return false;
		}
		if (c > 0x7f)
		{
			keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
							  "encryption key command printed a byte that is not ASCII");
			keyring_set_detail(err, "Byte %zu of the output is not an ASCII character.", i + 1);
			return false;
		}
	}
	return true;
}

/*
 * One trailing newline (LF or CRLF) off what command (quoted in the message
 * when given: "COMMAND unwrap") printed; what is left must be one printable
 * line
 */
bool
keyring_output_line(const char *out, size_t *outlen, const char *command,
					const char *hint, KeyringError *err)
{
	if (*outlen > 0 && out[*outlen - 1] == '\n')
		(*outlen)--;
	if (*outlen > 0 && out[*outlen - 1] == '\r')
		(*outlen)--;
	if (*outlen == 0)
	{
		if (command)
			keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
							  "encryption key command \"%s\" printed nothing", command);
		else
			keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
							  "encryption key command printed nothing");
		return false;
	}
	return output_is_one_printable_line(out, *outlen, hint, err);
}

/* For a cluster keyed by a hexadecimal KEK: exactly 64 hexadecimal digits */
static bool
output_is_hex_key(const char *out, size_t outlen, const char *hint,
				  KeyringError *err)
{
	if (outlen != KEK_LEN * 2)
	{
		keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
						  outlen < KEK_LEN * 2 ?
						  "encryption key command printed a key that is too short" :
						  "encryption key command printed a key that is too long");
		keyring_set_detail(err, "The cluster was initialized with a hexadecimal key of %d digits; the command printed %zu characters.",
						   KEK_LEN * 2, outlen);
		return false;
	}
	for (size_t i = 0; i < outlen; i++)
	{
		if (keyring_hexval(out[i]) < 0)
		{
			keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
							  "encryption key command printed a key with a character that is not a hexadecimal digit");
			keyring_set_detail(err, "Character %zu of the %d is not a hexadecimal digit (0-9, a-f, A-F).",
							   i + 1, KEK_LEN * 2);
			return false;
		}
	}
	return true;
}

/*
 * Turn what the key command printed into the KEK.  One trailing newline is
 * dropped; what is left must be one line of printable ASCII.  With
 * choose_source (initdb) 64 hex digits select KEK_SOURCE_HEX and anything
 * else a passphrase, for which a fresh salt is drawn; otherwise the source
 * recorded in ring decides.
 */
bool
kek_from_command_output(const char *out, size_t outlen, Keyring *ring,
						bool choose_source, unsigned char *kek,
						KeyringError *err)
{
	const char *hint = "The key command must print the key (64 hexadecimal digits) or the passphrase given to initdb, on one line.";

	if (!keyring_output_line(out, &outlen, NULL, hint, err))
		return false;

	if (choose_source)
	{
		if (is_hex_key(out, outlen))
			ring->kek_source = KEK_SOURCE_HEX;
		else
		{
			if (outlen < 8)
			{
				keyring_set_error(err, KEYRING_ERR_COMMAND_OUTPUT, hint,
								  "encryption passphrase is too short");
				keyring_set_detail(err, "A passphrase needs at least 8 characters; the command printed %zu.", outlen);
				return false;
			}
			ring->kek_source = KEK_SOURCE_PASSPHRASE;
			ring->scrypt_log2_n = KEYRING_SCRYPT_LOG2_N;
			ring->scrypt_r = KEYRING_SCRYPT_R;
			ring->scrypt_p = KEYRING_SCRYPT_P;
			if (!pg_strong_random(ring->salt, KEYRING_SALT_LEN))
			{
				keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL, "could not generate random salt");
				return false;
			}
		}
	}

	if (ring->kek_source == KEK_SOURCE_HEX)
	{
		if (!output_is_hex_key(out, outlen, hint, err))
			return false;
		for (int i = 0; i < KEK_LEN; i++)
			kek[i] = (keyring_hexval(out[2 * i]) << 4) | keyring_hexval(out[2 * i + 1]);
		return true;
	}
	if (ring->kek_source == KEK_SOURCE_PASSPHRASE)
	{
		if (!derive_key_scrypt(out, outlen, ring->salt, KEYRING_SALT_LEN,
							   ring->scrypt_log2_n, ring->scrypt_r,
							   ring->scrypt_p, kek, KEK_LEN))
		{
			keyring_set_error(err, KEYRING_ERR_CRYPTO, NULL,
							  "could not derive key from passphrase with scrypt");
			keyring_set_detail(err, "scrypt parameters: log2(N) = %u, r = %u, p = %u.",
							   ring->scrypt_log2_n, ring->scrypt_r, ring->scrypt_p);
			return false;
		}
		return true;
	}
	keyring_set_error(err, KEYRING_ERR_FILE_CORRUPT, NULL,
					  "unknown key source %u in key ring", ring->kek_source);
	return false;
}
