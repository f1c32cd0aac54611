// Package wire is the proxy's connection handling: it accepts PostgreSQL
// clients, opens one server connection per client, relays startup and
// authentication untouched (SCRAM without channel binding), and then runs
// two loops per connection:
//
//   - the client loop reads the client's messages, asks package rewrite
//     what to do with each statement, rewrites Parse, Bind and Query
//     messages (encrypted literals, encrypted parameters typed with the
//     encrypted types), streams COPY FROM STDIN rows through encryption,
//     and queues one expectation per message that the server answers;
//   - the relay loop reads the server's messages, matches each to the
//     expectation at the head of the queue, rewrites descriptions of
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
package wire
