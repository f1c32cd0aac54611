// Command pgcipher-proxy lets unchanged PostgreSQL clients use
// always-encrypted columns: it sits between the clients and the server,
// encrypts what the clients write to and compare with encrypted columns,
// decrypts what they read, and refuses what cannot be run on ciphertext.
//
//	pgcipher-proxy --listen 127.0.0.1:6432 --upstream 'host=/run/postgresql port=5432' \
//	    (--cmk-file F | --cmk-command C) [--cmk-name main] [--tls-cert F --tls-key F]
//	    [--log-level info] [--log-format text] [--metrics HOST:PORT]
//	    [--shutdown-timeout 30s] [--record F] [--pprof HOST:PORT]
//	pgcipher-proxy --config /etc/pgcipher/proxy.conf [--check-config]
//
// A config file holds the same settings as "name = value" lines (names
// without the dashes; # starts a comment); flags override it.
// proxy.conf.example, next to this file, lists every one.  --check-config
// loads and checks them all and exits.
//
// config.go holds the settings: the table of every one (its default and
// whether a SIGHUP applies it), parse (flags and the file) and load (what
// the settings name, read and checked: log level and format, TLS, the
// column master key through colcrypt.LoadCMKFile or
// colcrypt.LoadCMKCommand).  main.go runs the service: the logger
// (log/slog, text or JSON), metrics.New served at /metrics, and a
// wire.Config (the upstream, catalog.NewKeys over the CMK, the logger,
// the metrics, the clients' TLS, the recorder) handed to wire.NewServer,
// whose Serve accepts the clients; everything after that is package
// wire's, which asks package rewrite what to do with each statement.
// Signals: SIGHUP reloads the file (wire.Server.SetTLS, the log level,
// the shutdown timeout; the other settings wait for a restart) and the
// catalog (wire.Server.Reload); SIGTERM or SIGINT calls
// wire.Server.Shutdown, which a second signal or --shutdown-timeout cuts
// short.  See proxy/README.md for running it and docs/design.md, section
// 15 for what it rewrites, computes and refuses, and 15.11 for the
// service.
package main
