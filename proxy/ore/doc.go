// Package ore implements the block order-revealing encryption of Lewi and
// Wu ("Order-Revealing Encryption: New Constructions, Applications, and
// Lower Bounds", CCS 2016, section 4) with 4-bit blocks, exactly as
// docs/design.md section 13.5 lays it out, so that the C extension in
// columns/ can compare what this package produces.
//
// A ciphertext is a left part (per block: a 16-byte key k′ and the permuted
// nibble x̃) followed by a right part (a random 16-byte r and, per block,
// sixteen 2-bit values z).  Both parts are stored together, so any two
// ciphertexts can be compared; the comparison leaks the index of the first
// differing block.
//
// NewKey makes a Key from the two HMAC keys, Key.Encrypt encrypts an order
// input of at most MaxInput bytes into Size(len) bytes, and Compare orders
// two ciphertexts without a key, as the server does.  Order format 2
// (section 13.5b) has the same layout on AES: NewKey2, Key2.Encrypt,
// Key2.EncryptLeft (the left part alone, a query operand) and Compare2.  Package colcrypt is
// its only user: it derives the keys from a column's CEK and encrypts the
// order input of each value of an ORD column (design 13.3).
package ore
