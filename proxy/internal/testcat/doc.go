// Package testcat builds the catalog the proxy's tests share: enc_t with
// columns of several types and levels, two of them in one join group, and
// other(id, j) whose j is in that group too.
//
// New returns the Catalog and the Keys (under a random column master key)
// that the tests of packages rewrite and wire analyze and run statements
// against, so that they agree on one schema without a server.  It is
// internal: nothing outside the proxy's tests should build a catalog by
// hand rather than load it with catalog.Load.
package testcat
