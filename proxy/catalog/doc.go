// Package catalog is the proxy's picture of a database's encrypted
// columns: the extension's types, every relation with a column of such a
// type (views too), each column's binding (key, level, label, join group,
// from pgcipher.encrypted_columns) and the session's search path.  It is
// loaded with a few catalog queries on the client's own connection and
// cached per database.
//
// Keys unwraps column keys with the column master key, caches the
// derived colcrypt.Columns in memory only, and pins every binding it has
// used: a server that later reports another key, level, type or group for
// a label is detected (ErrPinMismatch), not obeyed.
//
// Rights (design 13.12): Load also reads pgcipher.column_rights; Keys
// verifies each grant's MAC under the key the CMK derives, pins the
// newest serial of each role's right and the columns seen with rights,
// and Keys.Allow decides whether a role may read or write a column
// (RightError; ErrRightForged for a grant that does not verify).
//
// Load reads a database's Catalog through a Querier (the proxy's own
// queries on the client's connection); Catalog.Lookup resolves a relation
// as the search path does, and each Relation's Attrs carry their Binding.
// NewKeys holds the column master key, and Keys.Column gives the
// colcrypt.Column of a Binding.  Package wire loads and reloads the
// catalog per database, package rewrite resolves every column reference
// against it, and cmd/pgcipher-proxy makes the one Keys all connections
// share.
package catalog
