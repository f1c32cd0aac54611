// Package kms fetches pgcipher's keys from a key management service:
// the server's key-encryption key (KEK, printed by encryption_key_command,
// docs/design.md, sections 8 and 9.3) and the proxy's column master key
// (CMK, printed by pgcipher-proxy's --cmk-command, design 13.6).  Both
// are 32 bytes that a key command prints as 64 hex digits.
//
// It speaks to OpenBao (and HashiCorp Vault, which answers the same API),
// through OpenBao's own Go client (github.com/openbao/openbao/api/v2), in
// two ways:
//
//   - KV version 2: the key is a field of a secret (OpenBao.ReadKVKey);
//   - Transit, as an envelope: OpenBao.NewWrappedKey asks Transit for a
//     fresh 256-bit data key and gets it back only wrapped under a Transit
//     key that never leaves OpenBao, WriteNewFile stores that ciphertext
//     crash-safely, and OpenBao.Unwrap has Transit decrypt it at every
//     start.  The key then exists in plaintext only inside OpenBao and,
//     for a moment, in the memory of the process that asked for it.
//
// It speaks to KMIP servers with the same envelope: KMIP.NewWrappedKey
// has the server Create and Activate an AES-256 key and Encrypt a fresh
// 256-bit key under it with AES-256-GCM, KMIPWrappedKey's MarshalText is what
// WriteNewFile stores, and KMIP.Unwrap has the server Decrypt it.  The
// client is this package's own (kmip.go over ttlv.go, KMIP 1.4 in TTLV,
// one request per mutual-TLS connection): the Go module proxy that builds
// pgcipher does not serve the Go KMIP libraries.  NewKMIP makes it from
// KMIPOptions: HOST:PORT, the CA, and the client certificate that the
// KMIP server knows this client by, its key a private file.
//
// NewOpenBao makes an OpenBao client from Options: an https address, the
// CA that signs the server's certificate (there is no way to skip verification),
// an optional client certificate, and a token read from a file, never
// from the command line or the environment; ReadPrivateFile refuses a
// token or key file that is not the caller's own or that its group or
// others can read, as ssh refuses private keys.  The client reads no
// BAO_ or VAULT_ environment variable: what a key command does is all in
// its command line, which the server stores in postgresql.conf.
//
// Every failure is an *Error: one line that says what failed and what to
// check, never a token or a key, and a kind that errors.Is tells apart
// (ErrUnreachable, ErrTLS, ErrDenied, ErrNotFound, ErrTimeout, ErrBadKey,
// ErrUnsafeFile, ErrExists).
//
// cmd/pgcipher-kms is the command line over this package, the key command
// that the server and pgcipher-proxy run; package kmstest starts the real
// OpenBao dev server and the PyKMIP server that this package's tests run
// against.
package kms
