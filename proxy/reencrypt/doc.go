// Package reencrypt moves an ORD column from order format 1 to order
// format 2 (docs/design.md, section 13.5b) online, as a client of
// pgcipher-proxy: it holds no key.  The proxy decrypts what it reads and
// encrypts what it writes in the format the column's state says; the
// server's CHECK on the column allows, in each state, what the state
// before it wrote, so that sessions one step behind keep working while
// the rows move.
//
// Column runs the whole move on one connection through the proxy:
// 1 → 1+2 (new values carry both formats' ORE parts), every format-1 row
// rewritten, 1+2 → 12 (the CHECK, validated, allows values carrying both
// alone), the table's indexes rebuilt concurrently (a btree keeps old
// keys in its inner pages), 12 → 2+1, every row carrying both rewritten,
// 2+1 → 2.  A step killed half-way is
// resumed by running it again.  cmd/pgcipher-keys exposes it as
// reencrypt-column; package wire is the proxy it talks through, and
// package colcrypt writes the formats.
package reencrypt
