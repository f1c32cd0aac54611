// Package wire is the proxy's connection handling: it accepts PostgreSQL
// clients, opens one server connection per client, relays startup and
// authentication untouched (SCRAM channel binding where the proxy shows
// the server's certificate, design 15), and then runs two loops per
// connection, which pass every message they do not rewrite on as the
// bytes it came as (frame.go), in order and as soon as it arrives, with
// an unbounded queue of answers between them (queue.go, design 15.9):
//
//   - the client loop reads the client's messages, asks package rewrite
//     what to do with each statement, rewrites Parse, Bind and Query
//     messages (encrypted literals, encrypted parameters typed with the
//     encrypted types), streams COPY FROM STDIN rows through encryption,
//     and queues one answer (answer.go) per message the server answers;
//   - the relay loop reads the server's messages, matches each to the
//     answer at the head of the queue, rewrites descriptions of
//     encrypted types into their plaintext types, decrypts every value of
//     an encrypted type into the format the client asked for, rechecks
//     LIKE candidates, sorts prefix-ordered results again, and decrypts
//     COPY TO STDOUT rows.
//
// A refused statement is never sent: the client loop sends the server a
// harmless message that fails (DEALLOCATE of a statement that does not
// exist, or Describe of one), so that the server's transaction state and
// its skipping of a failed pipeline stay exactly as they would be, and
// the relay loop hands the client the proxy's error in place of the
// server's.
//
// The catalog is read on connections of the proxy's own (catconn.go),
// never on a client's; each session follows its search path, role and
// temporary relations (names.go, design 15.10).
//
// NewServer makes a Server from a Config (the upstream server, the
// catalog connections, the shared catalog.Keys, TLS for clients, a logger,
// the metrics and an optional recorder of everything sent to the server),
// Server.Serve accepts connections on a listener until it is closed,
// Server.Reload makes every connection reload its catalog (SIGHUP in
// cmd/pgcipher-proxy), Server.SetTLS replaces the certificates for the
// connections to come, and Server.Shutdown stops accepting and closes each
// session at its next idle point, outside a transaction (service.go,
// design 15.11).  Each statement's outcome (passed, rewritten, computed,
// refused), its errors and its duration go to package metrics and, at
// debug level, to the log, with the SQL sent to the server and never a
// value of an encrypted column (stats.go).  Wire is the only package
// that speaks the protocol: it loads the catalog with package catalog, asks rewrite.Analyze for a Plan, converts values with
// package values, evaluates computed results with package compute and
// encrypts and decrypts with package colcrypt.
package wire
