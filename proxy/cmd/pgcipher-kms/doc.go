// Command pgcipher-kms is the key command that fetches pgcipher's keys
// from OpenBao (or HashiCorp Vault) or a KMIP server: the server's
// key-encryption key, for encryption_key_command (docs/design.md,
// sections 8 and 9.3), and the proxy's column master key, for pgcipher-proxy --cmk-command.  It prints
// the key as one line of 64 hex digits, what both expect.
//
//	pgcipher-kms openbao-kv          COMMON --path P [--mount secret] [--field kek] [--version N]
//	pgcipher-kms openbao-transit-new COMMON --key NAME --file F [--mount transit]
//	pgcipher-kms openbao-transit     COMMON --key NAME --file F [--mount transit]
//	pgcipher-kms kmip-new            KMIP --file F
//	pgcipher-kms kmip                KMIP --file F
//
//	COMMON: --addr https://HOST:PORT --token-file F [--ca-cert F]
//	        [--client-cert F --client-key F] [--namespace NS] [--timeout 10s]
//	KMIP:   --addr HOST:PORT [--ca-cert F] --client-cert F --client-key F [--timeout 10s]
//
// openbao-kv prints a key stored as 64 hex digits in a field of a KV
// version 2 secret.  openbao-transit-new asks Transit for a new 256-bit
// data key, returned only wrapped under the Transit key NAME, and writes
// that ciphertext to F (crash-safely; an existing F is never replaced);
// openbao-transit has Transit decrypt F and prints the key: the key then
// exists in plaintext only in OpenBao and, for a moment, in the memory of
// whoever runs the command.  kmip-new and kmip do the same with a KMIP
// server (KMIP 1.4 over mutual TLS): kmip-new has it Create and Activate
// an AES-256 key, draws a 256-bit key and has the server Encrypt it with
// AES-256-GCM, and writes the key's Unique Identifier, IV, ciphertext and
// tag to F; kmip has the server Decrypt F.
//
// The token is read from --token-file only (never from the command line,
// which the server stores in postgresql.conf and shows in the process
// list, nor from the environment), and the file, like --client-key, must
// be the running user's own and closed to group and others (mode 600), or
// it is refused.  TLS is always verified: against --ca-cert, else the
// system's CAs.
//
// Every failure is one line on stderr ("pgcipher-kms: openbao-kv: ..."),
// never a token or a key, and exit status 1 (2 for a usage error); the
// server quotes it in its log before its FATAL.  The work is package
// kms's; this is its command line.
package main
