// Command pgcipher-proxy lets unchanged PostgreSQL clients use
// always-encrypted columns: it sits between the clients and the server,
// encrypts what the clients write to and compare with encrypted columns,
// decrypts what they read, and refuses what cannot be run on ciphertext.
//
//	pgcipher-proxy --listen 127.0.0.1:6432 --upstream 'host=/run/postgresql port=5432' \
//	    (--cmk-file F | --cmk-command C) [--cmk-name main] [--tls-cert F --tls-key F]
//	    [--log-level info] [--record F] [--config F] [--pprof HOST:PORT]
//
// A config file holds the same settings as "name = value" lines (names
// without the dashes; # starts a comment); flags override it.  SIGHUP
// makes every connection reload the encrypted-column catalog.
//
// main reads the flags and the config file, loads the column master key
// with colcrypt.LoadCMKFile or colcrypt.LoadCMKCommand, and hands a
// wire.Config (the upstream, catalog.NewKeys over the CMK, the logger, the
// clients' TLS certificate, the recorder) to wire.NewServer, whose Serve
// accepts the clients; everything after that is package wire's, which
// asks package rewrite what to do with each statement.  See
// proxy/README.md for running it and docs/design.md, section 15 for what
// it rewrites, computes and refuses.
package main
