// The settings: flags, the config file, which of them a SIGHUP changes,
// and what --check-config checks.

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
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

const usage = `usage: pgcipher-proxy --upstream CONNINFO (--cmk-file F | --cmk-command C) [options]
       pgcipher-proxy --config F [options]

  --config F             read the settings below from F: "name = value" lines,
                         names without the dashes, # comments; flags win
  --check-config         read and check every setting (files readable, TLS pair,
                         CMK file or command, addresses; no connection to the
                         server), print one line and exit 0, or 1 with the error
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
  --log-level LEVEL      debug, info, warn or error (default info); at debug, one
                         line per statement: outcome, SQLSTATE, duration and the
                         SQL sent to the server, never an encrypted column's value
  --log-format FORMAT    text or json (default text), on stderr
  --metrics HOST:PORT    serve Prometheus metrics at http://HOST:PORT/metrics
  --shutdown-timeout D   on SIGTERM or SIGINT, how long sessions may finish their
                         transactions before they are closed (default 30s); a
                         second signal closes them at once
  --record F             test mode: append every byte sent to the server to F
  --pprof HOST:PORT      serve Go's profiler (net/http/pprof) there, for performance work

Pooling (PgBouncer's settings under its names; durations as 30s, or seconds):
  --pool-mode MODE       session (default: a server connection per client, the
                         client's own authentication relayed) or transaction (a
                         server connection per transaction, from a pool per
                         database and user; the proxy logs clients in itself)
  --max-client-conn N    clients connected at once (default 100)
  --default-pool-size N  server connections per database and user (default 20)
  --min-pool-size N      idle server connections kept open per pool (default 0)
  --reserve-pool-size N  more connections once a client waited
                         --reserve-pool-timeout (default 0, 5s)
  --server-idle-timeout D, --server-lifetime D   close server connections idle
                         that long (default 600s) or that old (default 3600s)
  --query-wait-timeout D a client waiting longer for a server connection is
                         disconnected (default 120s; 0: waits for ever)
  --server-reset-query Q run before a connection serves a client whose session
                         settings differ, before they are replayed (RESET ALL)
  --max-prepared-statements N  clients' statements kept prepared per server
                         connection (default 200)
  --auth-type T          transaction mode: scram-sha-256 (default; secrets from
                         --auth-file), cert (a verified client certificate
                         naming the user) or trust
  --auth-file F          "user" "secret" lines, PgBouncer's userlist.txt: a
                         SCRAM-SHA-256 verifier (pg_authid's rolpassword) or the
                         password, which is also the proxy's to log in to the server
  --auth-user U          look up the secrets of users not in --auth-file on the
                         server, logged in as U (its password from --auth-file
                         or --upstream); the proxy then logs in to the server as
                         the client with the client's own SCRAM key, never its
                         password
  --auth-query Q         the lookup, $1 the user's name (default PgBouncer's:
                         SELECT usename, passwd FROM pg_shadow WHERE usename=$1)

Decryption rights (design 13.12; pgcipher-keys grant and revoke sign them):
  --ungranted-columns W  what roles may do with a column that has no signed
                         right at all: all (default, as before rights) or
                         none; a column with rights allows its grantees only

Tenant keys (design 13.13; pgcipher-keys add-tenant and shred-tenant):
  --tenant-keyring F     the tenant keyring file (pgcipher-keys keyring-init
                         makes it; keep it out of backups): unwraps the tenant
                         keys of columns bound tenant-keyed; read again on SIGHUP
  --tenant-key-cache N   tenant columns kept unwrapped (default 4096; least
                         recently used out)

Audit of decryptions (design 15.15; pgcipher-keys verify-audit checks a log):
  --audit-log F          append a JSON line per statement that decrypted or
                         encrypted values (or was refused a right) to F, or to
                         standard output with -; MAC-chained under the CMK
  --audit-log-max-size S rotate F to F.1, F.2, ... past S (default 100MB; 0: never)
  --audit-required on|off  on: a record is written before such a statement is
                         sent, and one that cannot be written refuses it (PC006)

SIGHUP reads the config file again and applies log-level, tls-cert, tls-key,
tls-client-ca, upstream-certs, shutdown-timeout, ungranted-columns, tenant-keyring,
tenant-key-cache and the pooling settings but
pool-mode (certificates and the auth file read again) to what comes next; a change of any other setting is logged as waiting for a
restart.  It also makes every connection reload the encrypted-column catalog.
`

// settings are the proxy's settings as the command line and the config
// file give them.
type settings struct {
	listen, upstream, catalog, cmkFile, cmkCommand, cmkName, tlsCert, tlsKey, tlsClientCA, upstreamCerts,
	logLevel, logFormat, metrics, shutdownTimeout, record, pprof string
	poolMode, maxClientConn, defaultPoolSize, minPoolSize, reservePoolSize, reservePoolTimeout,
	serverIdleTimeout, serverLifetime, queryWaitTimeout, serverResetQuery, maxPreparedStatements,
	authType, authFile, authUser, authQuery string
	ungrantedColumns, auditLog, auditLogMaxSize, auditRequired string
	tenantKeyring, tenantKeyCache                              string

	config      string // the file they were read from ("": none)
	checkConfig bool
}

// setting is one of them: its name (the flag without its dashes, and the
// config file's name), its default, and whether a SIGHUP applies it.
type setting struct {
	name  string
	def   string
	live  bool
	field func(*settings) *string
}

// table lists every setting; --config and --check-config are the
// command line's only.
var table = []setting{
	{"listen", "127.0.0.1:6432", false, func(s *settings) *string { return &s.listen }},
	{"upstream", "", false, func(s *settings) *string { return &s.upstream }},
	{"catalog", "", false, func(s *settings) *string { return &s.catalog }},
	{"cmk-file", "", false, func(s *settings) *string { return &s.cmkFile }},
	{"cmk-command", "", false, func(s *settings) *string { return &s.cmkCommand }},
	{"cmk-name", "main", false, func(s *settings) *string { return &s.cmkName }},
	{"tls-cert", "", true, func(s *settings) *string { return &s.tlsCert }},
	{"tls-key", "", true, func(s *settings) *string { return &s.tlsKey }},
	{"tls-client-ca", "", true, func(s *settings) *string { return &s.tlsClientCA }},
	{"upstream-certs", "", true, func(s *settings) *string { return &s.upstreamCerts }},
	{"log-level", "info", true, func(s *settings) *string { return &s.logLevel }},
	{"log-format", "text", false, func(s *settings) *string { return &s.logFormat }},
	{"metrics", "", false, func(s *settings) *string { return &s.metrics }},
	{"shutdown-timeout", "30s", true, func(s *settings) *string { return &s.shutdownTimeout }},
	{"record", "", false, func(s *settings) *string { return &s.record }},
	{"pprof", "", false, func(s *settings) *string { return &s.pprof }},
	{"pool-mode", "session", false, func(s *settings) *string { return &s.poolMode }},
	{"max-client-conn", "100", true, func(s *settings) *string { return &s.maxClientConn }},
	{"default-pool-size", "20", true, func(s *settings) *string { return &s.defaultPoolSize }},
	{"min-pool-size", "0", true, func(s *settings) *string { return &s.minPoolSize }},
	{"reserve-pool-size", "0", true, func(s *settings) *string { return &s.reservePoolSize }},
	{"reserve-pool-timeout", "5s", true, func(s *settings) *string { return &s.reservePoolTimeout }},
	{"server-idle-timeout", "600s", true, func(s *settings) *string { return &s.serverIdleTimeout }},
	{"server-lifetime", "3600s", true, func(s *settings) *string { return &s.serverLifetime }},
	{"query-wait-timeout", "120s", true, func(s *settings) *string { return &s.queryWaitTimeout }},
	{"server-reset-query", "RESET ALL", true, func(s *settings) *string { return &s.serverResetQuery }},
	{"max-prepared-statements", "200", true, func(s *settings) *string { return &s.maxPreparedStatements }},
	{"auth-type", "scram-sha-256", true, func(s *settings) *string { return &s.authType }},
	{"auth-file", "", true, func(s *settings) *string { return &s.authFile }},
	{"auth-user", "", true, func(s *settings) *string { return &s.authUser }},
	{"auth-query", wire.DefaultAuthQuery, true, func(s *settings) *string { return &s.authQuery }},
	{"ungranted-columns", "all", true, func(s *settings) *string { return &s.ungrantedColumns }},
	{"audit-log", "", false, func(s *settings) *string { return &s.auditLog }},
	{"audit-log-max-size", "100MB", false, func(s *settings) *string { return &s.auditLogMaxSize }},
	{"audit-required", "off", false, func(s *settings) *string { return &s.auditRequired }},
	{"tenant-keyring", "", true, func(s *settings) *string { return &s.tenantKeyring }},
	{"tenant-key-cache", "4096", true, func(s *settings) *string { return &s.tenantKeyCache }},
}

// parse reads the command line and the config file it names.
func parse(args []string) (*settings, error) {
	st := &settings{}
	fs := flag.NewFlagSet("pgcipher-proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&st.config, "config", "", "")
	fs.BoolVar(&st.checkConfig, "check-config", false, "")
	for _, x := range table {
		fs.StringVar(x.field(st), x.name, x.def, "")
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
	if st.config != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if err := readConfig(st.config, st, set); err != nil {
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
	if st.tlsClientCA != "" && st.tlsCert == "" {
		return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	return st, nil
}

// readConfig reads "name = value" lines into st; settings given on the
// command line (set) win.  A value may be quoted with ' or ".
func readConfig(path string, st *settings, set map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	defer f.Close()
	fields := map[string]*string{}
	for _, x := range table {
		fields[x.name] = x.field(st)
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), unquote(strings.TrimSpace(v))
		p := fields[k]
		if !ok || p == nil {
			return fmt.Errorf("%s:%d: expected \"name = value\" with a name of --help", path, n)
		}
		if !set[k] {
			*p = v
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("--config: %s: %w", path, err)
	}
	return nil
}

// unquote strips one pair of matching quotes around a value.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// loaded is what the settings name, read and checked.
type loaded struct {
	level           slog.Level
	json            bool
	clientTLS       *tls.Config // nil: no TLS offered to clients
	shutdownTimeout time.Duration
	cmk             []byte // only when load was asked for it
	pool            wire.PoolConfig
	authUsers       map[string]string // the auth file's
	ungranted       catalog.Ungranted
	auditMaxSize    int64
	auditRequired   bool
	tenantKeyCache  int
}

// load reads and checks everything the settings name; withCMK loads the
// column master key too (at start and for --check-config; a SIGHUP keeps
// the key the proxy has).  It connects to nothing.
func load(ctx context.Context, st *settings, withCMK bool) (*loaded, error) {
	ld := &loaded{}
	if err := ld.level.UnmarshalText([]byte(st.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	switch st.logFormat {
	case "text":
	case "json":
		ld.json = true
	default:
		return nil, fmt.Errorf("--log-format: %q is neither text nor json", st.logFormat)
	}
	d, err := time.ParseDuration(st.shutdownTimeout)
	if err != nil || d < 0 {
		return nil, fmt.Errorf("--shutdown-timeout: %q is not a duration such as 30s or 2m", st.shutdownTimeout)
	}
	ld.shutdownTimeout = d
	for _, a := range []struct{ name, addr string }{{"listen", st.listen}, {"metrics", st.metrics}, {"pprof", st.pprof}} {
		if a.addr == "" && a.name != "listen" {
			continue
		}
		if err := checkAddress(a.addr); err != nil {
			return nil, fmt.Errorf("--%s: %w", a.name, err)
		}
	}
	if _, err := pgconn.ParseConfig(st.upstream); err != nil {
		return nil, fmt.Errorf("--upstream: %w", err)
	}
	if st.catalog != "" {
		if _, err := pgconn.ParseConfig(st.catalog); err != nil {
			return nil, fmt.Errorf("--catalog: %w", err)
		}
	}
	if ld.clientTLS, err = loadTLS(st); err != nil {
		return nil, err
	}
	if st.upstreamCerts != "" {
		if _, err := os.ReadDir(st.upstreamCerts); err != nil {
			return nil, fmt.Errorf("--upstream-certs: %w", err)
		}
	}
	if st.record != "" {
		if fi, err := os.Stat(filepath.Dir(st.record)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--record: no directory for %s", st.record)
		}
	}
	if ld.pool, err = poolSettings(st); err != nil {
		return nil, err
	}
	if ld.ungranted, err = catalog.ParseUngranted(st.ungrantedColumns); err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	if ld.auditMaxSize, err = parseSize(st.auditLogMaxSize); err != nil {
		return nil, fmt.Errorf("--audit-log-max-size: %w", err)
	}
	switch st.auditRequired {
	case "on":
		ld.auditRequired = true
		if st.auditLog == "" {
			return nil, errors.New("--audit-required on needs --audit-log")
		}
	case "off":
	default:
		return nil, fmt.Errorf("--audit-required: %q is neither on nor off", st.auditRequired)
	}
	if st.auditLog != "" && st.auditLog != "-" {
		if fi, err := os.Stat(filepath.Dir(st.auditLog)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--audit-log: no directory for %s", st.auditLog)
		}
	}
	if ld.tenantKeyCache, err = strconv.Atoi(st.tenantKeyCache); err != nil || ld.tenantKeyCache < 1 {
		return nil, fmt.Errorf("--tenant-key-cache: %q is not a positive number", st.tenantKeyCache)
	}
	if st.tenantKeyring != "" {
		if _, err := os.Stat(st.tenantKeyring); err != nil {
			return nil, fmt.Errorf("--tenant-keyring: %w", err)
		}
	}
	if st.authFile != "" {
		if ld.authUsers, err = wire.LoadAuthFile(st.authFile); err != nil {
			return nil, fmt.Errorf("--auth-file: %w", err)
		}
	}
	if ld.pool.Mode == wire.TransactionMode {
		switch {
		case ld.pool.AuthType == wire.AuthSCRAM && st.authFile == "" && st.authUser == "":
			return nil, errors.New("--auth-type scram-sha-256 needs --auth-file or --auth-user (transaction mode)")
		case ld.pool.AuthType == wire.AuthCert && st.tlsClientCA == "":
			return nil, errors.New("--auth-type cert needs --tls-client-ca (transaction mode)")
		}
	}
	if withCMK {
		if st.cmkFile != "" {
			ld.cmk, err = colcrypt.LoadCMKFile(st.cmkFile)
		} else {
			ld.cmk, err = colcrypt.LoadCMKCommand(ctx, st.cmkCommand)
		}
		if err != nil {
			return nil, fmt.Errorf("the column master key: %w", err)
		}
		if st.tenantKeyring != "" {
			if _, err := colcrypt.LoadKeyring(st.tenantKeyring, ld.cmk, st.cmkName); err != nil {
				return nil, fmt.Errorf("--tenant-keyring: %w", err)
			}
		}
	}
	return ld, nil
}

// checkAddress checks a HOST:PORT to listen on (HOST may be empty: every
// address).
func checkAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q of %q is not a number from 0 to 65535", port, addr)
	}
	return nil
}

// loadTLS reads the clients' TLS certificate, key and CAs.
func loadTLS(st *settings) (*tls.Config, error) {
	if st.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(st.tlsCert, st.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if st.tlsClientCA != "" {
		pem, err := os.ReadFile(st.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca: no certificate in %s", st.tlsClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

var passwordKey = regexp.MustCompile(`(?i)((?:^|\s)(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)

// redact hides the passwords of a connection string, for the log.
func redact(conninfo string) string {
	if strings.HasPrefix(conninfo, "postgres://") || strings.HasPrefix(conninfo, "postgresql://") {
		u, err := url.Parse(conninfo)
		if err != nil {
			return "(a URL that does not parse)"
		}
		q := u.Query()
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
		return u.Redacted()
	}
	return passwordKey.ReplaceAllString(conninfo, "${1}xxxxx")
}

// poolSettings reads the pooling settings: counts, and durations as Go
// durations (30s) or, as PgBouncer writes them, seconds.
func poolSettings(st *settings) (wire.PoolConfig, error) {
	c := wire.DefaultPoolConfig()
	switch st.poolMode {
	case wire.SessionMode, wire.TransactionMode:
		c.Mode = st.poolMode
	default:
		return c, fmt.Errorf("--pool-mode: %q is neither session nor transaction", st.poolMode)
	}
	switch st.authType {
	case wire.AuthSCRAM, wire.AuthCert, wire.AuthTrust:
		c.AuthType = st.authType
	default:
		return c, fmt.Errorf("--auth-type: %q is not scram-sha-256, cert or trust", st.authType)
	}
	c.ServerResetQuery, c.AuthFile = st.serverResetQuery, st.authFile
	c.AuthUser, c.AuthQuery = st.authUser, st.authQuery
	for _, n := range []struct {
		name, v string
		to      *int
	}{{"max-client-conn", st.maxClientConn, &c.MaxClientConn}, {"default-pool-size", st.defaultPoolSize, &c.DefaultPoolSize},
		{"min-pool-size", st.minPoolSize, &c.MinPoolSize}, {"reserve-pool-size", st.reservePoolSize, &c.ReservePoolSize},
		{"max-prepared-statements", st.maxPreparedStatements, &c.MaxPreparedStatements}} {
		v, err := strconv.Atoi(n.v)
		if err != nil || v < 0 {
			return c, fmt.Errorf("--%s: %q is not a count", n.name, n.v)
		}
		*n.to = v
	}
	if c.DefaultPoolSize < 1 {
		return c, errors.New("--default-pool-size: at least 1")
	}
	for _, d := range []struct {
		name, v string
		to      *time.Duration
	}{{"reserve-pool-timeout", st.reservePoolTimeout, &c.ReservePoolTimeout}, {"server-idle-timeout", st.serverIdleTimeout, &c.ServerIdleTimeout},
		{"server-lifetime", st.serverLifetime, &c.ServerLifetime}, {"query-wait-timeout", st.queryWaitTimeout, &c.QueryWaitTimeout}} {
		v, err := time.ParseDuration(d.v)
		if err != nil {
			var secs float64
			if secs, err = strconv.ParseFloat(d.v, 64); err == nil {
				v = time.Duration(secs * float64(time.Second))
			}
		}
		if err != nil || v < 0 {
			return c, fmt.Errorf("--%s: %q is not a duration such as 30s, or seconds", d.name, d.v)
		}
		*d.to = v
	}
	return c, nil
}

// parseSize reads a size in bytes, with an optional kB, MB or GB (powers
// of 1024, as PostgreSQL's units).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size such as 100MB", s)
	}
	return n * mult, nil
}
