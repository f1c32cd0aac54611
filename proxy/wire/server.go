// Listening, startup, TLS, authentication relay and cancel requests.

package wire

import (
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/catalog"
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
	Log    *slog.Logger
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
	s := &Server{cfg: cfg, upstream: up, catalogs: newCatalogCache()}
	s.setUser, s.setDB = namesUserAndDB(cfg.Upstream)
	catStr := cfg.Catalog
	if catStr == "" {
		catStr = cfg.Upstream
	}
	if s.catalogCfg, err = pgconn.ParseConfig(catStr); err != nil {
		return nil, fmt.Errorf("wire: catalog connection %q: %w", catStr, err)
	}
	s.catalogUser, _ = namesUserAndDB(catStr)
	s.catalogConns = &catalogConns{srv: s, conns: map[string]*catalogConn{}}
	return s, nil
}

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
// with their clients).
func (s *Server) Close() { s.catalogConns.closeAll() }

// Reload marks every cached catalog stale (SIGHUP).
func (s *Server) Reload() { s.catalogs.invalidateAll() }

// Serve accepts connections until l is closed.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
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
	defer c.Close()
	if err := s.serveConn(c); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		s.cfg.Log.Debug("connection ended", "remote", c.RemoteAddr().String(), "err", err)
	}
}

// fatal sends a FATAL error to a client that has not reached the server.
func fatal(b *pgproto3.Backend, code, msg string) error { return fatalHint(b, code, msg, "") }

func fatalHint(b *pgproto3.Backend, code, msg, hint string) error {
	b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg, Hint: hint})
	b.Flush()
	return errors.New(msg)
}

func (s *Server) serveConn(c net.Conn) error {
	var client net.Conn = c
	certUser := "" // the common name of the client's verified certificate
	b := pgproto3.NewBackend(client, client)
	var startup *pgproto3.StartupMessage
	for startup == nil {
		m, err := b.ReceiveStartupMessage()
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *pgproto3.SSLRequest:
			if s.cfg.ClientTLS == nil {
				if _, err := client.Write([]byte{'N'}); err != nil {
					return err
				}
				continue
			}
			if _, err := client.Write([]byte{'S'}); err != nil {
				return err
			}
			tc := tls.Server(c, s.cfg.ClientTLS)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("wire: TLS with client: %w", err)
			}
			if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
				certUser = chains[0][0].Subject.CommonName
			}
			client = tc
			b = pgproto3.NewBackend(client, client)
		case *pgproto3.GSSEncRequest:
			if _, err := client.Write([]byte{'N'}); err != nil {
				return err
			}
		case *pgproto3.CancelRequest:
			return s.cancel(m)
		case *pgproto3.StartupMessage:
			startup = m
		default:
			return fatal(b, "08P01", "pgcipher-proxy: unexpected startup message")
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
	var cert *tls.Certificate
	if certUser != "" && certUser == params["user"] && s.cfg.UpstreamCerts != "" {
		var err error
		if cert, err = s.upstreamCert(certUser); err != nil {
			return fatal(b, "08006", "pgcipher-proxy: "+err.Error())
		}
	}
	server, err := s.dial(cert)
	if err != nil {
		return fatal(b, "08006", "pgcipher-proxy: cannot connect to the server: "+err.Error())
	}
	defer server.Close()
	var w io.Writer = server
	if s.cfg.Record != nil {
		w = &recorder{w: server, rec: s.cfg.Record, mu: &s.recordMu}
	}
	f := pgproto3.NewFrontend(server, w)
	// the client's protocol version: the server negotiates it with the
	// client (NegotiateProtocolVersion is relayed)
	f.Send(&pgproto3.StartupMessage{ProtocolVersion: startup.ProtocolVersion, Parameters: params})
	if err := f.Flush(); err != nil {
		return err
	}
	if err := s.authenticate(b, f, s.channelBindingPasses(client, server)); err != nil {
		return err
	}
	sess := newSession(s, &conns{r: client, w: client}, &conns{r: server, w: w}, params["database"], params["user"])
	return sess.run(params)
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

// upstreamCert loads the certificate the proxy presents for user.
func (s *Server) upstreamCert(user string) (*tls.Certificate, error) {
	if user == "" || strings.ContainsAny(user, "/\\\x00") || strings.HasPrefix(user, ".") {
		return nil, fmt.Errorf("no upstream certificate for user %q", user)
	}
	base := filepath.Join(s.cfg.UpstreamCerts, user)
	c, err := tls.LoadX509KeyPair(base+".crt", base+".key")
	if err != nil {
		return nil, fmt.Errorf("the upstream certificate of user %q: %w", user, err)
	}
	return &c, nil
}

// dial opens a connection to the server, with TLS if the connection
// string asks for it, presenting cert if given.
func (s *Server) dial(cert *tls.Certificate) (net.Conn, error) {
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
	if cfg.TLSConfig == nil || network == "unix" {
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
func (s *Server) channelBindingPasses(client, server net.Conn) bool {
	_, ok1 := client.(*tls.Conn)
	st, ok2 := server.(*tls.Conn)
	ct := s.cfg.ClientTLS
	if !ok1 || !ok2 || ct == nil || len(ct.Certificates) != 1 || len(ct.Certificates[0].Certificate) == 0 {
		return false
	}
	peers := st.ConnectionState().PeerCertificates
	return len(peers) > 0 && bytes.Equal(ct.Certificates[0].Certificate[0], peers[0].Raw)
}

// authenticate relays authentication until the server's ReadyForQuery;
// a failed authentication ends the connection.  Without passPlus, SCRAM
// with channel binding is hidden from the client: its binding would be
// to its TLS session with the proxy.
func (s *Server) authenticate(b *pgproto3.Backend, f *pgproto3.Frontend, passPlus bool) error {
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
				if passPlus || !strings.HasSuffix(x, "-PLUS") {
					mechs = append(mechs, x)
				} else {
					hidPlus = true
				}
			}
			b.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: mechs})
			if err := b.Flush(); err != nil {
				return err
			}
			if err := b.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
				return err
			}
			r, err := b.Receive()
			if err != nil {
				return err
			}
			if ir, ok := r.(*pgproto3.SASLInitialResponse); ok && hidPlus && bytes.HasPrefix(ir.Data, []byte("y,")) {
				// the client supports channel binding and saw none
				// offered: the server, which offered it, would refuse
				// with a "negotiation error"
				return fatalHint(b, "08P01", "pgcipher-proxy: SCRAM channel binding cannot pass through the proxy with this configuration",
					"Give the proxy the server's own certificate and key (--tls-cert, --tls-key), so that channel binding passes through; or connect the proxy to the server without TLS (a Unix socket); or connect with channel_binding=disable.")
			}
			f.Send(r)
			if err := f.Flush(); err != nil {
				return err
			}
			continue
		case *pgproto3.AuthenticationSASLContinue:
			b.Send(m)
			if err := s.authReply(b, f, pgproto3.AuthTypeSASLContinue); err != nil {
				return err
			}
		case *pgproto3.AuthenticationCleartextPassword:
			b.Send(m)
			if err := s.authReply(b, f, pgproto3.AuthTypeCleartextPassword); err != nil {
				return err
			}
		case *pgproto3.AuthenticationMD5Password:
			b.Send(m)
			if err := s.authReply(b, f, pgproto3.AuthTypeMD5Password); err != nil {
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

func (s *Server) authReply(b *pgproto3.Backend, f *pgproto3.Frontend, t uint32) error {
	if err := b.Flush(); err != nil {
		return err
	}
	if err := b.SetAuthType(t); err != nil {
		return err
	}
	m, err := b.Receive()
	if err != nil {
		return err
	}
	f.Send(m)
	return f.Flush()
}

// cancel forwards a CancelRequest: the client holds the server's own
// process id and key (BackendKeyData is relayed unchanged).
func (s *Server) cancel(m *pgproto3.CancelRequest) error {
	c, err := s.dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	buf, err := m.Encode(nil)
	if err != nil {
		return err
	}
	_, err = c.Write(buf)
	return err
}
