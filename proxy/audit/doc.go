// Package audit is the proxy's record of who decrypted or encrypted what
// (design 15.15): one JSON line per statement that used a column key —
// time, role, client address and certificate identity, database, the
// statement's fingerprint (never a value or a literal), per column the
// access and the number of values decrypted and encrypted, and the
// outcome — written to a file or to standard output.
//
// Each line carries the MAC of the one before it (prev) and its own
// (mac): HMAC-SHA-256 under a key the column master key derives, over
// prev and the line without its mac.  A record removed or edited breaks
// the chain at the next line, and nobody without the CMK can write a
// chain that verifies.  The file is rotated by size: FILE becomes
// FILE.1, FILE.2, … and the chain goes on across files.  Removing the
// newest records is seen only against a head kept elsewhere: the proxy
// logs the chain's head at each rotation and at shutdown, and Verify
// checks it when given.
//
// Log writes records (safe for concurrent use); Verify reads files in
// order and reports the first break.  cmd/pgcipher-proxy opens the Log
// (--audit-log), package wire writes a Record per statement, and
// cmd/pgcipher-keys verify-audit runs Verify.
package audit
