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
//
// Analyze is the entry point: it takes the SQL, the catalog.Catalog and
// the catalog.Keys and returns a Plan (the SQL to send, how to encrypt
// each parameter, how to treat the results: decryption, LIKE filters,
// resorts, computed fields, COPY and computed UPDATE plans) or a Refusal
// (SQLSTATE PC001; PC002 to PC004: a value that does not decrypt, a key
// that cannot be used, a value that does not fit its column).  Package
// wire runs the Plan; the expressions of computed results are package
// compute's, and literals are encoded with package values and encrypted
// with the colcrypt.Column that catalog.Keys gives for their column.
// Shape, NewTemplate and Template.Plan plan statements that carry their
// literals inline once per shape (design 15.12).
package rewrite
