package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // --pprof
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

const usage = `usage: pgcipher-proxy --listen HOST:PORT --upstream CONNINFO (--cmk-file F | --cmk-command C) [options]

  --listen HOST:PORT     where clients connect (default 127.0.0.1:6432)
  --upstream CONNINFO    the server: a libpq connection string or URL; user and
                         database come from each client unless it sets them
  --catalog CONNINFO     the proxy's own connections, on which it reads each
                         database's encrypted columns (default: --upstream, with
                         each client's user unless CONNINFO names one)
  --cmk-file F           file holding the column master key (pgcipher-keys new-cmk)
  --cmk-command C        command printing it (sh -c, 30 s limit)
  --cmk-name NAME        name of the CMK, wrapped into column keys (default main)
  --tls-cert F, --tls-key F   offer TLS to clients (with the server's own
                         certificate and key, SCRAM channel binding passes through)
  --tls-client-ca F      verify clients' certificates against these CAs
  --upstream-certs DIR   for a client whose verified certificate names the user
                         it logs in as, present DIR/USER.crt and DIR/USER.key
                         to the server (PostgreSQL's cert authentication)
  --log-level LEVEL      debug, info, warn or error (default info)
  --record F             test mode: append every byte sent to the server to F
  --pprof HOST:PORT      serve Go's profiler (net/http/pprof) there, for performance work
  --config F             read these settings from F ("name = value" lines)
`

type settings struct {
	listen, upstream, catalog, cmkFile, cmkCommand, cmkName, tlsCert, tlsKey, tlsClientCA, upstreamCerts, logLevel, record, pprof string
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(os.Stdout, usage)
			return
		}
		fmt.Fprintf(os.Stderr, "pgcipher-proxy: %v\n", err)
		os.Exit(1)
	}
}

func parse(args []string) (*settings, error) {
	st := &settings{listen: "127.0.0.1:6432", cmkName: "main", logLevel: "info"}
	fs := flag.NewFlagSet("pgcipher-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	config := fs.String("config", "", "")
	vars := map[string]*string{"listen": &st.listen, "upstream": &st.upstream, "catalog": &st.catalog, "cmk-file": &st.cmkFile,
		"cmk-command": &st.cmkCommand, "cmk-name": &st.cmkName, "tls-cert": &st.tlsCert, "tls-key": &st.tlsKey,
		"tls-client-ca": &st.tlsClientCA, "upstream-certs": &st.upstreamCerts,
		"log-level": &st.logLevel, "record": &st.record, "pprof": &st.pprof}
	for name, p := range vars {
		fs.StringVar(p, name, *p, "")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w\n%s", err, usage)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), usage)
	}
	if *config != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := readConfig(*config, vars, set); err != nil {
			return nil, err
		}
	}
	if st.upstream == "" {
		return nil, errors.New("--upstream is required")
	}
	if (st.cmkFile == "") == (st.cmkCommand == "") {
		return nil, errors.New("give exactly one of --cmk-file and --cmk-command")
	}
	if (st.tlsCert == "") != (st.tlsKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	return st, nil
}

// readConfig reads "name = value" lines; flags given on the command line
// win.
func readConfig(path string, vars map[string]*string, set map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `'"`)
		p := vars[k]
		if !ok || p == nil {
			return fmt.Errorf("%s:%d: expected \"name = value\" with a name of --help", path, n)
		}
		if !set[k] {
			*p = v
		}
	}
	return sc.Err()
}

func run(args []string) error {
	st, err := parse(args)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(st.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	var cmk []byte
	if st.cmkFile != "" {
		cmk, err = colcrypt.LoadCMKFile(st.cmkFile)
	} else {
		cmk, err = colcrypt.LoadCMKCommand(context.Background(), st.cmkCommand)
	}
	if err != nil {
		return err
	}
	cfg := wire.Config{Upstream: st.upstream, Catalog: st.catalog, Keys: catalog.NewKeys(cmk, st.cmkName), Log: log}
	if st.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(st.tlsCert, st.tlsKey)
		if err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
		cfg.ClientTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if st.tlsClientCA != "" {
			pem, err := os.ReadFile(st.tlsClientCA)
			if err != nil {
				return fmt.Errorf("--tls-client-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--tls-client-ca: no certificate in %s", st.tlsClientCA)
			}
			cfg.ClientTLS.ClientCAs, cfg.ClientTLS.ClientAuth = pool, tls.VerifyClientCertIfGiven
		}
	}
	if st.tlsClientCA != "" && st.tlsCert == "" {
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	cfg.UpstreamCerts = st.upstreamCerts
	if st.record != "" {
		f, err := os.OpenFile(st.record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		cfg.Record = f
	}
	if st.pprof != "" {
		go func() { log.Error("pprof", "err", http.ListenAndServe(st.pprof, nil)) }()
	}
	srv, err := wire.NewServer(cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", st.listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			log.Info("SIGHUP: reloading the encrypted-column catalog")
			srv.Reload()
		}
	}()
	go func() { <-ctx.Done(); l.Close() }()
	log.Info("listening", "address", l.Addr().String(), "upstream", st.upstream)
	defer srv.Close()
	return srv.Serve(ctx, l)
}
