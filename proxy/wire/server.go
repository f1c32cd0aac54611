// Listening, startup, TLS, authentication relay and cancel requests.

package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/audit"
	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/internal/rawsock"
	"github.com/pgcipher/pgcipher/proxy/metrics"
)

// Config is what a Server needs.
type Config struct {
	// Upstream is a libpq connection string or URL naming the server;
	// user and database come from each client unless it names them.
	Upstream string
	Keys     *catalog.Keys
	// ClientTLS, if set, is offered to clients that ask for TLS.  With
	// ClientCAs and ClientAuth = VerifyClientCertIfGiven, a client's
	// certificate is verified, and UpstreamCerts may stand in for it.
	ClientTLS *tls.Config
	// UpstreamCerts, if set, is a directory of certificates the proxy
	// presents to the server for a user (USER.crt, USER.key): used for a
	// client that connected with a certificate verified against
	// ClientTLS.ClientCAs whose common name is the user it logs in as
	// (what PostgreSQL's cert authentication checks).
	UpstreamCerts string
	// Catalog is a libpq connection string for the proxy's own
	// connections, on which it reads each database's encrypted-column
	// catalog ("": Upstream); the database is each client's, and so is
	// the user unless the string names one.
	Catalog string
	// Record, if set, receives a copy of every byte sent to the server
	// (test mode: proves what the server saw).
	Record io.Writer
	// Log gets the proxy's messages: connections at debug level (how
	// each ended at warn when the server or the catalog could not be
	// read), and at debug level each statement (design 15.11): what the
	// proxy did with it, its SQLSTATE, its duration and the SQL sent to
	// the server; never a value of an encrypted column.
	Log *slog.Logger
	// Metrics, if set, counts connections, statements, errors and bytes.
	Metrics *metrics.Metrics
	// Pool: session mode (the default) or transaction mode, and how
	// transaction mode pools (pool.go); AuthUsers: the auth file's users.
	Pool      PoolConfig
	AuthUsers map[string]string
	// Audit, if set, gets a record of each statement that decrypted or
	// encrypted values, or was refused for want of a right (design
	// 15.15); with AuditRequired, also one before such a statement is
	// sent, and a statement whose record cannot be written is refused.
	Audit         *audit.Log
	AuditRequired bool
}

// Server accepts client connections and proxies them.
type Server struct {
	cfg      Config
	upstream *pgconn.Config
	setUser  bool
	setDB    bool
	catalogs *catalogCache
	recordMu sync.Mutex
	// the catalog connections' configuration, and whether it names the
	// user (otherwise each client's user reads its database's catalog)
	catalogCfg   *pgconn.Config
	catalogUser  bool
	catalogConns *catalogConns

	metrics *metrics.Metrics
	tls     atomic.Pointer[tlsSettings] // SetTLS replaces it
	// mu guards the listeners and connections Shutdown closes
	mu        sync.Mutex
	listeners map[net.Listener]bool
	conns     map[*clientConn]bool
	draining  atomic.Bool
	drained   chan struct{} // closed when the last connection ends after Shutdown

	// transaction mode: the pools, their settings (SetPool replaces
	// them), the auth file's users, and the cancel keys the proxy gave
	// its clients
	poolCfg   atomic.Pointer[PoolConfig]
	poolsMu   sync.Mutex
	pools     map[poolKey]*pool
	authUsers atomic.Pointer[authUsers]
	// passKeys: user -> scramKeys, the SCRAM keys of the last client
	// that logged in with a verifier (scrampass.go); authConns: the
	// auth query's connections, per database and auth user
	passKeys  sync.Map
	authMu    sync.Mutex
	authConns map[string]*pgconn.PgConn
	clients   atomic.Int64
	cancelMu  sync.Mutex
	cancels   map[uint32]*session
	stopPools chan struct{}
}

// NewServer checks cfg.
func NewServer(cfg Config) (*Server, error) {
	up, err := pgconn.ParseConfig(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("wire: upstream %q: %w", cfg.Upstream, err)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{cfg: cfg, upstream: up, catalogs: newCatalogCache(), metrics: cfg.Metrics,
		listeners: map[net.Listener]bool{}, conns: map[*clientConn]bool{}}
	s.SetTLS(cfg.ClientTLS, cfg.UpstreamCerts)
	s.setUser, s.setDB = namesUserAndDB(cfg.Upstream)
	catStr := cfg.Catalog
	if catStr == "" {
		catStr = cfg.Upstream
	}
	if s.catalogCfg, err = pgconn.ParseConfig(catStr); err != nil {
		return nil, fmt.Errorf("wire: catalog connection %q: %w", catStr, err)
	}
	s.catalogUser, _ = namesUserAndDB(catStr)
	s.catalogConns = &catalogConns{srv: s, conns: map[string]*catalogConn{}, sessions: map[string]int{}}
	if cfg.Pool.Mode == "" {
		cfg.Pool.Mode = SessionMode
	}
	if cfg.Pool.Mode != SessionMode && cfg.Pool.Mode != TransactionMode {
		return nil, fmt.Errorf("wire: pool mode %q (session or transaction)", cfg.Pool.Mode)
	}
	s.SetPool(cfg.Pool)
	s.SetAuthFile(cfg.AuthUsers)
	s.pools, s.cancels = map[poolKey]*pool{}, map[uint32]*session{}
	if cfg.Pool.Mode == TransactionMode {
		s.stopPools = make(chan struct{})
		go s.maintain(s.stopPools)
		s.metrics.Pools(s.Pools)
	}
	return s, nil
}

// SetPool replaces the pool settings (SIGHUP); the mode stays.
func (s *Server) SetPool(c PoolConfig) {
	if old := s.poolCfg.Load(); old != nil {
		c.Mode = old.Mode
	}
	s.poolCfg.Store(&c)
}

// PoolConfig returns the pool settings in force.
func (s *Server) PoolConfig() PoolConfig { return *s.poolCfg.Load() }

func (s *Server) pooling() bool { return s.poolCfg.Load().Mode == TransactionMode }

var (
	userKey = regexp.MustCompile(`(^|\s)user\s*=`)
	dbKey   = regexp.MustCompile(`(^|\s)dbname\s*=`)
)

// namesUserAndDB reports whether a connection string sets the user and
// the database itself (otherwise each client's startup message does).
func namesUserAndDB(s string) (bool, bool) {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return false, false
		}
		return u.User != nil && u.User.Username() != "", strings.Trim(u.Path, "/") != ""
	}
	return userKey.MatchString(s), dbKey.MatchString(s)
}

// Close closes the proxy's catalog connections (client connections end
// with their clients, or with Shutdown).
func (s *Server) Close() {
	s.catalogConns.closeAll()
	if s.stopPools != nil {
		close(s.stopPools)
		s.stopPools = nil
	}
	s.closePools()
	s.closeAuthConns()
}

// Reload marks every cached catalog stale (SIGHUP).
func (s *Server) Reload() { s.catalogs.invalidateAll() }

// Serve accepts connections until l is closed (or Shutdown closes it).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.mu.Lock()
	if s.draining.Load() {
		l.Close()
	}
	s.listeners[l] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		go s.handle(c)
	}
}

func (s *Server) handle(c net.Conn) {
	s.metrics.Opened()
	c = s.metrics.Client(rawsock.Wrap(c))
	cc := &clientConn{sock: c, start: time.Now()}
	if !s.track(cc) {
		c.Close()
		s.ended(cc, metrics.Shutdown, errShutdown)
		return
	}
	// last: Shutdown returns once every connection is counted and logged
	defer s.untrack(cc)
	sess, params, end, err := s.startup(cc)
	if sess != nil {
		// the session runs here, once the startup's deeper stack is
		// gone: an idle session's goroutine stays small (design 15.11)
		end, err = sess.run(params)
		if sess.pooled != nil {
			sess.detachAtEnd()
			s.endPooled(sess)
		} else {
			sess.serverSock.Close()
		}
	}
	c.Close()
	s.ended(cc, end, err)
}

// ended counts and logs a connection that has ended.
func (s *Server) ended(cc *clientConn, end metrics.End, err error) {
	s.metrics.Closed(end)
	level := slog.LevelDebug
	if end == metrics.UpstreamFailed || end == metrics.CatalogFailed || end == metrics.Failed {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("outcome", string(end)), slog.String("remote", cc.sock.RemoteAddr().String()),
		slog.Duration("duration", time.Since(cc.start))}
	if cc.user != "" {
		attrs = append(attrs, slog.String("user", cc.user), slog.String("database", cc.db))
	}
	if err != nil && !closedError(err) {
		// the proxy's own errors and the server's (which never sees an
		// encrypted column's plaintext), never a client's statement
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	s.cfg.Log.LogAttrs(context.Background(), level, "connection closed", attrs...)
}

// fatal sends a FATAL error to a client that has not reached the server.
func fatal(b *pgproto3.Backend, code, msg string) error { return fatalHint(b, code, msg, "") }

func fatalHint(b *pgproto3.Backend, code, msg, hint string) error {
	b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg, Hint: hint})
	b.Flush()
	return errors.New(msg)
}

// startup takes a client connection through startup and authentication
// to a session ready to run, or says how the connection ended.
func (s *Server) startup(cc *clientConn) (*session, map[string]string, metrics.End, error) {
	ts := s.tls.Load() // this connection's certificates
	// the first byte tells a TLS handshake from PostgreSQL's messages; a
	// small buffer (bufio's least) for what comes with it
	br := bufio.NewReaderSize(cc.sock, 16)
	first, err := br.Peek(1)
	if err != nil {
		return nil, nil, metrics.StartupFailed, err
	}
	c := &peekedConn{Conn: cc.sock, r: br}
	var client net.Conn = c
	certUser := "" // the common name of the client's verified certificate
	if first[0] == tlsHandshake {
		// direct SSL negotiation (PostgreSQL 17's sslnegotiation=direct):
		// TLS from the first byte, with ALPN "postgresql"
		if ts.client == nil {
			return nil, nil, metrics.StartupFailed, errors.New("wire: a client began TLS at once (sslnegotiation=direct), and the proxy has no certificate (--tls-cert)")
		}
		tc := tls.Server(c, ts.client)
		if err := tc.Handshake(); err != nil {
			return nil, nil, metrics.StartupFailed, fmt.Errorf("wire: direct TLS with client: %w", err)
		}
		if tc.ConnectionState().NegotiatedProtocol != alpnPostgres {
			tc.Close()
			return nil, nil, metrics.StartupFailed, errors.New("wire: direct TLS without ALPN \"postgresql\" (refused as PostgreSQL refuses it)")
		}
		if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
			certUser = chains[0][0].Subject.CommonName
		}
		client = tc
	}
	b := pgproto3.NewBackend(client, client)
	var startup *pgproto3.StartupMessage
	for startup == nil {
		m, err := b.ReceiveStartupMessage()
		if err != nil {
			return nil, nil, metrics.StartupFailed, err
		}
		switch m := m.(type) {
		case *pgproto3.SSLRequest:
			if ts.client == nil {
				if _, err := client.Write([]byte{'N'}); err != nil {
					return nil, nil, metrics.StartupFailed, err
				}
				continue
			}
			if _, err := client.Write([]byte{'S'}); err != nil {
				return nil, nil, metrics.StartupFailed, err
			}
			tc := tls.Server(c, ts.client)
			if err := tc.Handshake(); err != nil {
				return nil, nil, metrics.StartupFailed, fmt.Errorf("wire: TLS with client: %w", err)
			}
			if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
				certUser = chains[0][0].Subject.CommonName
			}
			client = tc
			b = pgproto3.NewBackend(client, client)
		case *pgproto3.GSSEncRequest:
			if _, err := client.Write([]byte{'N'}); err != nil {
				return nil, nil, metrics.StartupFailed, err
			}
		case *pgproto3.CancelRequest:
			return nil, nil, metrics.Cancel, s.cancel(m)
		case *pgproto3.StartupMessage:
			startup = m
		default:
			return nil, nil, metrics.StartupFailed, fatal(b, "08P01", "pgcipher-proxy: unexpected startup message")
		}
	}
	params := map[string]string{}
	for k, v := range startup.Parameters {
		params[k] = v
	}
	if s.setUser {
		params["user"] = s.upstream.User
	}
	if s.setDB {
		params["database"] = s.upstream.Database
	}
	if params["database"] == "" {
		params["database"] = params["user"]
	}
	for k, v := range s.upstream.RuntimeParams {
		if _, ok := params[k]; !ok {
			params[k] = v
		}
	}
	cc.user, cc.db = params["user"], params["database"]
	if s.pooling() {
		return s.startupPooled(cc, b, client, c, startup.ProtocolVersion, params, certUser)
	}
	var cert *tls.Certificate
	if certUser != "" && certUser == params["user"] && ts.upstreamCerts != "" {
		var err error
		if cert, err = upstreamCert(ts.upstreamCerts, certUser); err != nil {
			return nil, nil, metrics.UpstreamFailed, fatal(b, "08006", "pgcipher-proxy: "+err.Error())
		}
	}
	var server net.Conn
	ok := false
	defer func() {
		if !ok && server != nil {
			server.Close()
		}
	}()
	// the client's protocol version: the server negotiates it with the
	// client (NegotiateProtocolVersion is relayed)
	start := &pgproto3.StartupMessage{ProtocolVersion: startup.ProtocolVersion, Parameters: params}
	_, clientTLS := client.(*tls.Conn)
	var (
		w       io.Writer
		f       *pgproto3.Frontend
		pending *pgproto3.SASLInitialResponse
	)
	for plain := false; ; plain = true {
		if server, err = s.dial(cert, plain); err != nil {
			return nil, nil, metrics.UpstreamFailed, fatal(b, "08006", "pgcipher-proxy: cannot connect to the server: "+err.Error())
		}
		w = server
		if s.cfg.Record != nil {
			w = &recorder{w: server, rec: s.cfg.Record, mu: &s.recordMu}
		}
		// the authentication reads the server through a small buffer
		// (bufio's least; larger reads pass through) it can peek at
		a := auth{passPlus: channelBindingPasses(ts.client, client, server), pending: pending,
			plainLink: !plain && !clientTLS && s.plainAllowed(),
			client:    client, server: server, fromServer: bufio.NewReaderSize(server, 16)}
		f = pgproto3.NewFrontend(a.fromServer, w)
		f.Send(start)
		if err := f.Flush(); err != nil {
			return nil, nil, metrics.UpstreamFailed, err
		}
		err = s.authenticate(b, f, &a)
		if err == nil && a.fromServer.Buffered() > 0 {
			// nothing comes after ReadyForQuery before the first query;
			// kept for the session all the same
			server = &peekedConn{Conn: server, r: a.fromServer}
		}
		if a.retry == nil {
			break
		}
		// the client came without TLS and supports channel binding: a
		// server link without TLS, as the client's, offers none
		server.Close()
		pending = a.retry
	}
	if err != nil {
		return nil, nil, metrics.AuthFailed, err
	}
	sess := newSession(s, &conns{r: client, w: client}, &conns{r: server, w: w}, params["database"], params["user"])
	sess.clientSock, sess.serverSock = c, server
	sess.clientAddr, sess.certIdentity = c.RemoteAddr().String(), certUser
	if !s.started(cc, sess) {
		f.Send(&pgproto3.Terminate{})
		f.Flush()
		return nil, nil, metrics.Shutdown, fatal(b, "57P01", shutdownError().Message)
	}
	ok = true
	return sess, params, "", nil
}

// tlsHandshake is the first byte of a TLS record carrying a handshake.
const tlsHandshake = 0x16

// alpnPostgres is PostgreSQL's ALPN protocol name (PostgreSQL 17 and
// later send it, and require it with direct SSL negotiation).
const alpnPostgres = "postgresql"

// directTLS is the client TLS configuration with PostgreSQL's ALPN
// protocol offered, so that clients that send it (libpq 17 and later,
// always) negotiate it.
func directTLS(cfg *tls.Config) *tls.Config {
	for _, p := range cfg.NextProtos {
		if p == alpnPostgres {
			return cfg
		}
	}
	c := cfg.Clone()
	c.NextProtos = append(c.NextProtos, alpnPostgres)
	return c
}

// peekedConn is a connection whose first bytes were read ahead.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

// Read reads what was read ahead, then from the connection itself.
func (p *peekedConn) Read(b []byte) (int, error) {
	if p.r != nil {
		if p.r.Buffered() > 0 {
			return p.r.Read(b)
		}
		p.r = nil
	}
	return p.Conn.Read(b)
}

// recorder copies what is written to the server (test mode).
type recorder struct {
	w   io.Writer
	rec io.Writer
	mu  *sync.Mutex
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.rec.Write(p)
	r.mu.Unlock()
	return r.w.Write(p)
}

// upstreamCert loads the certificate the proxy presents for user from
// directory dir.
func upstreamCert(dir, user string) (*tls.Certificate, error) {
	if user == "" || strings.ContainsAny(user, "/\\\x00") || strings.HasPrefix(user, ".") {
		return nil, fmt.Errorf("no upstream certificate for user %q", user)
	}
	base := filepath.Join(dir, user)
	c, err := tls.LoadX509KeyPair(base+".crt", base+".key")
	if err != nil {
		return nil, fmt.Errorf("the upstream certificate of user %q: %w", user, err)
	}
	return &c, nil
}

// plainAllowed reports whether the upstream connection string accepts
// a server link without TLS (sslmode disable, allow or prefer).
func (s *Server) plainAllowed() bool {
	if s.upstream.TLSConfig == nil {
		return true
	}
	for _, fb := range s.upstream.Fallbacks {
		if fb.TLSConfig == nil {
			return true
		}
	}
	return false
}

// dial opens a connection to the server, with TLS if the connection
// string asks for it and plain is false, presenting cert if given.
func (s *Server) dial(cert *tls.Certificate, plain bool) (net.Conn, error) {
	cfg := s.upstream
	network, addr := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	timeout := cfg.ConnectTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	conn = s.metrics.Server(rawsock.Wrap(conn))
	if cfg.TLSConfig == nil || network == "unix" || plain {
		return conn, nil
	}
	req, _ := (&pgproto3.SSLRequest{}).Encode(nil)
	if _, err := conn.Write(req); err != nil {
		conn.Close()
		return nil, err
	}
	reply := make([]byte, 1)
	if _, err := io.ReadFull(conn, reply); err != nil {
		conn.Close()
		return nil, err
	}
	if reply[0] == 'S' {
		tcfg := cfg.TLSConfig
		if cert != nil {
			tcfg = tcfg.Clone()
			tcfg.Certificates = []tls.Certificate{*cert}
		}
		tc := tls.Client(conn, tcfg)
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS with server: %w", err)
		}
		return tc, nil
	}
	for _, fb := range cfg.Fallbacks {
		if fb.TLSConfig == nil {
			return conn, nil // sslmode=prefer: plain is acceptable
		}
	}
	conn.Close()
	return nil, errors.New("the server refused TLS, which the connection string requires")
}

// channelBindingPasses reports whether SCRAM channel binding can pass
// through the proxy: both legs are TLS and the proxy shows clients the
// server's own certificate, so that the client's tls-server-end-point
// binding (a hash of the certificate it sees) is the server's.
func channelBindingPasses(ct *tls.Config, client, server net.Conn) bool {
	_, ok1 := client.(*tls.Conn)
	st, ok2 := server.(*tls.Conn)
	if !ok1 || !ok2 || ct == nil || len(ct.Certificates) != 1 || len(ct.Certificates[0].Certificate) == 0 {
		return false
	}
	peers := st.ConnectionState().PeerCertificates
	return len(peers) > 0 && bytes.Equal(ct.Certificates[0].Certificate[0], peers[0].Raw)
}

// auth is what authenticate is told and what it reports.
type auth struct {
	// passPlus: SCRAM with channel binding may pass through (the proxy
	// shows the server's own certificate); else it is hidden from the
	// client, whose binding would be to its TLS session with the proxy
	passPlus bool
	// plainLink: the client came without TLS and the upstream connection
	// string accepts a link without it
	plainLink bool
	// pending: the client's SASLInitialResponse, already sent to a
	// server link that was given up; the mechanisms the new one offers
	// are not shown to the client again
	pending *pgproto3.SASLInitialResponse
	// the two links, and the server's as the authentication reads it
	client, server net.Conn
	fromServer     *bufio.Reader
	// retry, set on return: the client supports channel binding and saw
	// none offered, the server offered it over TLS and would refuse
	// ("negotiation error"); plainLink allowed a link without TLS, on
	// which the server offers none either: authenticate again there,
	// with this initial response
	retry *pgproto3.SASLInitialResponse
}

// authenticate relays authentication until the server's ReadyForQuery;
// a failed authentication ends the connection.
func (s *Server) authenticate(b *pgproto3.Backend, f *pgproto3.Frontend, a *auth) error {
	hidPlus := false
	for {
		m, err := f.Receive()
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *pgproto3.AuthenticationSASL:
			var mechs []string
			for _, x := range m.AuthMechanisms {
				if a.passPlus || !strings.HasSuffix(x, "-PLUS") {
					mechs = append(mechs, x)
				} else {
					hidPlus = true
				}
			}
			var r pgproto3.FrontendMessage
			if a.pending != nil {
				if !slices.Contains(mechs, a.pending.AuthMechanism) {
					return fatal(b, "08P01", "pgcipher-proxy: the server no longer offers SASL mechanism "+a.pending.AuthMechanism)
				}
				r = a.pending
			} else {
				b.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: mechs})
				if err := b.Flush(); err != nil {
					return err
				}
				if err := b.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
					return err
				}
				if r, err = a.clientReply(b); err == errServerSpoke {
					continue
				} else if err != nil {
					return err
				}
			}
			if ir, ok := r.(*pgproto3.SASLInitialResponse); ok && hidPlus && bytes.HasPrefix(ir.Data, []byte("y,")) {
				// the client supports channel binding and saw none
				// offered: the server, which offered it, would refuse
				// with a "negotiation error"
				if a.plainLink {
					a.retry = ir
					return nil
				}
				return fatalHint(b, "08P01", "pgcipher-proxy: SCRAM channel binding cannot pass through the proxy with this configuration",
					"Give the proxy the server's own certificate and key (--tls-cert, --tls-key), so that channel binding passes through; or let the proxy reach the server without TLS (a Unix socket, or sslmode=prefer in --upstream for clients that come without TLS); or connect with channel_binding=disable.")
			}
			f.Send(r)
			if err := f.Flush(); err != nil {
				return err
			}
			continue
		case *pgproto3.AuthenticationSASLContinue:
			b.Send(m)
			if err := a.reply(b, f, pgproto3.AuthTypeSASLContinue); err != nil {
				return err
			}
		case *pgproto3.AuthenticationCleartextPassword:
			b.Send(m)
			if err := a.reply(b, f, pgproto3.AuthTypeCleartextPassword); err != nil {
				return err
			}
		case *pgproto3.AuthenticationMD5Password:
			b.Send(m)
			if err := a.reply(b, f, pgproto3.AuthTypeMD5Password); err != nil {
				return err
			}
		case *pgproto3.AuthenticationGSS, *pgproto3.AuthenticationGSSContinue:
			return fatal(b, "28000", "pgcipher-proxy: GSSAPI authentication is not supported through the proxy")
		case *pgproto3.ErrorResponse:
			b.Send(m)
			b.Flush()
			return fmt.Errorf("wire: authentication failed: %s", m.Message)
		case *pgproto3.ReadyForQuery:
			// sent by the session once the catalog is loaded
			return nil
		default:
			// AuthenticationOk, AuthenticationSASLFinal,
			// ParameterStatus, BackendKeyData, NoticeResponse
			b.Send(m)
		}
		if err := b.Flush(); err != nil {
			return err
		}
	}
}

// reply relays the client's answer to an authentication request of
// type t; if the server speaks first, it returns to read what it said.
func (a *auth) reply(b *pgproto3.Backend, f *pgproto3.Frontend, t uint32) error {
	if err := b.Flush(); err != nil {
		return err
	}
	if err := b.SetAuthType(t); err != nil {
		return err
	}
	m, err := a.clientReply(b)
	if err == errServerSpoke {
		return nil
	} else if err != nil {
		return err
	}
	f.Send(m)
	return f.Flush()
}

// errServerSpoke: the server spoke, or closed, while the proxy waited
// for the client's answer.
var errServerSpoke = errors.New("wire: the server spoke during the client's turn")

// clientReply waits for the client's answer to an authentication
// request while watching the server: a server ends an authentication
// that takes too long (authentication_timeout, a FATAL and a close), and
// the client, which may wait for that, must see it as it would directly
// (node-postgres waits so after refusing an empty password).
func (a *auth) clientReply(b *pgproto3.Backend) (pgproto3.FrontendMessage, error) {
	type answer struct {
		m   pgproto3.FrontendMessage
		err error
	}
	fromClient, spoke := make(chan answer, 1), make(chan error, 1)
	go func() {
		m, err := b.Receive()
		fromClient <- answer{m, err}
	}()
	go func() {
		_, err := a.fromServer.Peek(1)
		spoke <- err
	}()
	select {
	case r := <-fromClient:
		// the watch ends; what the server may have sent meanwhile stays
		// in fromServer
		a.server.SetReadDeadline(time.Now())
		<-spoke
		a.server.SetReadDeadline(time.Time{})
		return r.m, r.err
	case <-spoke:
		a.client.SetReadDeadline(time.Now())
		<-fromClient
		a.client.SetReadDeadline(time.Time{})
		return nil, errServerSpoke
	}
}

// cancel forwards a CancelRequest: the client holds the server's own
// process id and key (BackendKeyData is relayed unchanged).  It returns,
// and the client's cancel connection is closed, only once the server has
// closed its own: the server has then signalled the backend, as libpq
// waits for it to, so that the cancel cannot hit the client's next
// statement.
func (s *Server) cancel(m *pgproto3.CancelRequest) error {
	if s.pooling() {
		// the key the proxy gave its client: the backend that runs the
		// client's transaction now, if any, is cancelled
		var done func()
		if m, done = s.pooledCancel(m); m == nil {
			return nil
		}
		defer done()
	}
	c, err := s.dial(nil, false)
	if err != nil {
		return err
	}
	defer c.Close()
	buf, err := m.Encode(nil)
	if err != nil {
		return err
	}
	if _, err = c.Write(buf); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(cancelWait))
	_, err = io.Copy(io.Discard, c)
	return err
}

// cancelWait bounds the wait for the server to close a cancel connection.
const cancelWait = 10 * time.Second
