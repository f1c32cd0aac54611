// Package rewrite decides what the proxy does with one SQL string: pass it
// on untouched, rewrite it so that the server sees only ciphertext for
// encrypted columns, or refuse it.
//
// It parses with PostgreSQL's own parser (pg_query_go), resolves every
// column reference against the catalog, and allows an encrypted column
// only where the server can work on ciphertext at the column's level:
// comparisons with a literal or parameter (literals are encrypted in
// place, parameters are typed with the encrypted type and encrypted at
// Bind), IN lists, BETWEEN, IS NULL, ORDER BY, GROUP BY, DISTINCT,
// MIN/MAX, count, joins between columns of one join group, LIKE on MATCH
// columns (rewritten to the Bloom-filter candidate test and rechecked by
// the proxy), and the values of INSERT, UPDATE … SET, ON CONFLICT and
// COPY.  Every other use of an encrypted column — a function, operator or
// cast the proxy does not know, a subquery it cannot follow, a column
// compared with a column of another key — is refused with a Refusal,
// before anything is sent to the server.
package rewrite
