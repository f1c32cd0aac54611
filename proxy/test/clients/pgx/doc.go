// Command pgx is the pgx (github.com/jackc/pgx/v5) client test of
// pgcipher-proxy, run by proxy/test/clients/run.sh (go build, then the
// binary; `go run ./test/clients/pgx` from proxy/ with the PGC_*
// variables of run.sh set works too).
//
// The same operations on enc_t and on plain_t, through the proxy, with
// ordinary pgx code: every query in the five query exec modes (cache
// statement and cache describe: extended protocol with binary parameters
// and results; describe-exec; exec: parameter types from the Go types, text
// results; simple protocol: client-side interpolation), inserts in three
// of them, a Batch, transactions with rollback, and CopyFrom (binary COPY).
// Every result is recorded as text, with the marker prefix PGCMARK-E /
// PGCMARK-P replaced, and the two tables' records must be equal.  Then, on
// enc_t, statements the proxy must refuse (SQLSTATE PC001), after which the
// connection must stay usable.  Exits 1 on any difference.
//
// It imports nothing of the proxy: like the other clients of
// proxy/test/clients (psql, pgbench, psycopg 3, pgJDBC, sysbench) it
// talks to a running pgcipher-proxy only through the protocol, on the
// schema of proxy/test/clients/schema.sql.
package main
