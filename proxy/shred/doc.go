// Package shred destroys one tenant's key (crypto-shredding, design
// 13.13): every value of the tenant — in the table, the WAL, archives,
// base backups and replicas — becomes undecryptable, because the only
// key that unwraps the tenant's key, the tenant keyring key of its epoch,
// is destroyed after every other tenant's key moved to a new epoch.
//
// Tenant runs the three steps on one connection to the database (direct
// or through pgcipher-proxy: it only reads and writes the pgcipher
// schema's tables) and the keyring file: Advance writes the keyring with
// a new epoch beside the current one, Rewrap moves every other tenant's
// key to the new epoch and deletes the tenant's in one transaction,
// Forget writes the keyring with the new epoch alone.  Each step is
// idempotent, so a run killed anywhere is finished by running Tenant
// again.  cmd/pgcipher-keys exposes it as shred-tenant; package colcrypt
// wraps the keys and writes the keyring.
package shred
