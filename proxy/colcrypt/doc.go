// Package colcrypt is the client side of pgcipher's encrypted columns: it
// encrypts and decrypts the values of one column in the ciphertext format
// that the server's extension (columns/ in this repository) parses and
// compares, byte for byte as docs/design.md, section 13 lays it out.
//
// A column is described by a Spec (key id, plain Type, Level, label and
// join group) and made into a Column with NewColumn from its unwrapped
// column encryption key (CEK).  Column.Encrypt and Column.Decrypt work on
// PostgreSQL's text form of the plain type, Column.EncryptPayload and
// Column.DecryptPayload on the canonical payload (Encode and Decode convert
// between the two), and Column.EncryptPattern turns a LIKE pattern into a
// query for a MATCH column.  The levels are RND (randomized only), EQ
// (plus a deterministic equality token), ORD (plus an order-revealing
// ciphertext of package ore) and MATCH (text only: plus a Bloom filter of
// trigrams, design 13.5a).
//
// Keys: LoadCMKFile and LoadCMKCommand read the column master key (CMK),
// NewCEK draws a CEK, WrapCEK and UnwrapCEK wrap it under the CMK with
// AES-256-GCM bound to both keys' names, and SubKey derives a CEK's
// per-purpose keys (design 13.6).  A Grant is a role's right on a column,
// MACed under RightsKey, which the CMK derives (design 13.12).  Parse,
// Equal, Compare and MayMatch are
// the server's checks and comparisons on ciphertexts, written again in Go
// and needing no key: the tests hold them against PostgreSQL's answers on
// the plaintexts, and the proxy parses headers with Parse.
//
// Package catalog unwraps keys and builds a Column per encrypted column
// the proxy meets; packages rewrite, wire and values encrypt and decrypt
// through those Columns; cmd/pgcipher-keys exposes this package on the
// command line and writes the test vectors the C extension checks too.
package colcrypt
