// Client authentication in transaction mode (design 15.14): the proxy
// logs clients in itself (trust, SCRAM-SHA-256 against the auth file's
// secrets or those the auth query reads from the server, or a verified
// client certificate), as PgBouncer does, and opens server connections
// with credentials of its own or the client's SCRAM key (scrampass.go).

package wire

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"
)

// Auth types.
const (
	AuthTrust = "trust"
	AuthSCRAM = "scram-sha-256"
	AuthCert  = "cert"
)

// authUsers is the auth file: each user's secret, a SCRAM verifier
// (PostgreSQL's pg_authid form) or a plaintext password.
type authUsers map[string]string

// LoadAuthFile reads a file in PgBouncer's userlist.txt format: one
// "user" "secret" pair of double-quoted strings per line (a quote
// doubled inside), ; or # comments.
func LoadAuthFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	defer f.Close()
	users := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		user, rest, err := readQuoted(line)
		if err == nil {
			var secret string
			// what follows the secret is ignored, as PgBouncer does
			secret, _, err = readQuoted(strings.TrimSpace(rest))
			if err == nil && strings.HasPrefix(secret, "md5") && len(secret) == 35 {
				err = errors.New("an md5 secret cannot log clients in with SCRAM; give a SCRAM-SHA-256 secret or the password")
			}
			if err == nil && strings.HasPrefix(secret, "SCRAM-SHA-256$") {
				_, err = scramCredentials(secret)
			}
			users[user] = secret
		}
		if err != nil {
			return nil, fmt.Errorf("auth file %s, line %d: %w", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth file %s: %w", path, err)
	}
	return users, nil
}

// readQuoted reads a double-quoted string at the start of s.
func readQuoted(s string) (string, string, error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", errors.New(`expected "user" "secret"`)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] == '"' {
			if i+1 < len(s) && s[i+1] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			return b.String(), s[i+1:], nil
		}
		b.WriteByte(s[i])
	}
	return "", "", errors.New("unterminated quoted string")
}

// scramCredentials reads a SCRAM-SHA-256 verifier:
// SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey (base64).
func scramCredentials(secret string) (scram.StoredCredentials, error) {
	var c scram.StoredCredentials
	parts := strings.Split(strings.TrimPrefix(secret, "SCRAM-SHA-256$"), "$")
	if len(parts) != 2 {
		return c, errors.New("malformed SCRAM-SHA-256 secret")
	}
	it, salt, ok1 := strings.Cut(parts[0], ":")
	sk, svk, ok2 := strings.Cut(parts[1], ":")
	iters, err := strconv.Atoi(it)
	if !ok1 || !ok2 || err != nil || iters <= 0 {
		return c, errors.New("malformed SCRAM-SHA-256 secret")
	}
	var errs [3]error
	var s []byte
	s, errs[0] = base64.StdEncoding.DecodeString(salt)
	c.StoredKey, errs[1] = base64.StdEncoding.DecodeString(sk)
	c.ServerKey, errs[2] = base64.StdEncoding.DecodeString(svk)
	if err := errors.Join(errs[:]...); err != nil || len(c.StoredKey) != sha256.Size || len(c.ServerKey) != sha256.Size {
		return c, errors.New("malformed SCRAM-SHA-256 secret")
	}
	c.Salt, c.Iters = string(s), iters
	return c, nil
}

// credentials returns a user's SCRAM credentials from the auth file,
// or from the auth query; verifier: they are a verifier, not a password
// the proxy knows.
func (s *Server) credentials(db, user string) (c scram.StoredCredentials, known, verifier bool, err error) {
	users := s.authUsers.Load()
	secret, ok := "", false
	if users != nil {
		secret, ok = (*users)[user]
	}
	if !ok && s.PoolConfig().AuthUser != "" {
		secret, err = s.authQuery(db, user)
		if err != nil {
			return c, false, false, err
		}
		if secret == "" {
			return c, false, false, nil
		}
		if !strings.HasPrefix(secret, "SCRAM-SHA-256$") {
			// an md5 hash or a password in clear cannot serve SCRAM
			s.cfg.Log.Warn("the auth query's secret is not a SCRAM-SHA-256 verifier: login refused", "user", user)
			return c, false, false, nil
		}
		ok = true
	}
	if !ok {
		return c, false, false, nil
	}
	if strings.HasPrefix(secret, "SCRAM-SHA-256$") {
		c, err := scramCredentials(secret)
		return c, err == nil, true, nil
	}
	// a plaintext password: a verifier of it, with a salt of its own
	client, err := scram.SHA256.NewClient(user, secret, "")
	if err != nil {
		return c, false, false, nil
	}
	salt := sha256.Sum256([]byte("pgcipher-proxy auth file salt\x00" + user))
	c, err = client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt[:16]), Iters: 4096})
	return c, err == nil, false, nil
}

// authQuery runs the auth query in db as the auth user and returns the
// user's secret ("": no such user, or no secret).
func (s *Server) authQuery(db, user string) (string, error) {
	cfg := s.PoolConfig()
	s.authMu.Lock()
	defer s.authMu.Unlock()
	for attempt := 0; ; attempt++ {
		conn, err := s.authConn(db, cfg.AuthUser)
		if err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rr := conn.ExecParams(ctx, cfg.AuthQuery, [][]byte{[]byte(user)}, nil, nil, nil).Read()
		cancel()
		if rr.Err != nil {
			conn.Close(context.Background())
			delete(s.authConns, db+"\x00"+cfg.AuthUser)
			if attempt == 0 && conn.IsClosed() && !isServerError(rr.Err) {
				continue // a connection the server ended: once more on a new one
			}
			return "", fmt.Errorf("auth query: %w", rr.Err)
		}
		if len(rr.Rows) == 0 || len(rr.Rows[0]) < 2 || rr.Rows[0][1] == nil {
			return "", nil
		}
		return string(rr.Rows[0][1]), nil
	}
}

func isServerError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// authConn is the auth query's connection to db, opened as the auth user
// with its password from the auth file or --upstream's.
func (s *Server) authConn(db, authUser string) (*pgconn.PgConn, error) {
	// keyed by the auth user too: SIGHUP may name another
	key := db + "\x00" + authUser
	if c := s.authConns[key]; c != nil && !c.IsClosed() {
		return c, nil
	}
	cfg := s.upstream.Copy()
	cfg.User = authUser
	if !s.setDB {
		cfg.Database = db
	}
	s.loginAs(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("auth query: connecting as %s: %w", authUser, err)
	}
	if s.authConns == nil {
		s.authConns = map[string]*pgconn.PgConn{}
	}
	s.authConns[key] = c
	return c, nil
}

// closeAuthConns closes the auth query's connections (shutdown).
func (s *Server) closeAuthConns() {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	for k, c := range s.authConns {
		c.Close(context.Background())
		delete(s.authConns, k)
	}
}

// authPassword is a user's plaintext password from the auth file, which
// the proxy uses to log in to the server ("": none there).
func (s *Server) authPassword(user string) string {
	users := s.authUsers.Load()
	if users == nil {
		return ""
	}
	if secret := (*users)[user]; !strings.HasPrefix(secret, "SCRAM-SHA-256$") {
		return secret
	}
	return ""
}

// loginAs gives a server login as cfg.User (a pooled connection, a
// catalog or auth query connection) the user's password from the auth
// file, else, where cfg has no password of its own, the SCRAM key of the
// user's last login to the proxy (scrampass.go).
func (s *Server) loginAs(cfg *pgconn.Config) {
	if pw := s.authPassword(cfg.User); pw != "" {
		cfg.Password = pw
	} else if k, ok := s.passKeys.Load(cfg.User); ok && cfg.Password == "" {
		cfg.Password, cfg.BuildFrontend = passPlaceholder, k.(scramKeys).buildFrontend
	}
}

// SetAuthFile replaces the auth file's users (SIGHUP).
func (s *Server) SetAuthFile(users map[string]string) {
	u := authUsers(users)
	s.authUsers.Store(&u)
}

// authenticateClient logs a client in as user (certUser: the common
// name of its verified certificate).
func (s *Server) authenticateClient(b *pgproto3.Backend, db, user, certUser string) error {
	switch t := s.PoolConfig().AuthType; t {
	case AuthTrust:
		return nil
	case AuthCert:
		if certUser == "" || certUser != user {
			return fatal(b, "28000", fmt.Sprintf("certificate authentication failed for user %q", user))
		}
		return nil
	case AuthSCRAM, "":
		return s.scramClient(b, db, user)
	default:
		return fatal(b, "28000", "pgcipher-proxy: unknown auth-type "+t)
	}
}

// scramClient runs SCRAM-SHA-256 (RFC 7677, without channel binding)
// with the client, as the server would.
func (s *Server) scramClient(b *pgproto3.Backend, db, user string) error {
	failed := func() error {
		return fatal(b, "28P01", fmt.Sprintf("password authentication failed for user %q", user))
	}
	creds, known, verifier, err := s.credentials(db, user)
	if err != nil {
		s.cfg.Log.Warn("auth query failed", "user", user, "database", db, "err", err)
		return fatalHint(b, "08004", "pgcipher-proxy: cannot look up the user's secret: "+err.Error(),
			"Check --auth-user, its password and --auth-query against the server.")
	}
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) {
		if !known {
			return creds, errors.New("unknown user")
		}
		return creds, nil
	})
	if err != nil {
		return err
	}
	conv := srv.NewConversation()
	b.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}})
	if err := b.Flush(); err != nil {
		return err
	}
	if err := b.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return err
	}
	m, err := b.Receive()
	if err != nil {
		return err
	}
	first, ok := m.(*pgproto3.SASLInitialResponse)
	if !ok || first.AuthMechanism != "SCRAM-SHA-256" {
		return fatal(b, "28000", "pgcipher-proxy: expected a SCRAM-SHA-256 initial response")
	}
	// a copy: the message's bytes are the backend's until its next Receive
	clientFirst := string(first.Data)
	out, err := conv.Step(clientFirst)
	if err != nil {
		return failed()
	}
	b.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte(out)})
	if err := b.Flush(); err != nil {
		return err
	}
	if err := b.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return err
	}
	if m, err = b.Receive(); err != nil {
		return err
	}
	final, ok := m.(*pgproto3.SASLResponse)
	if !ok {
		return fatal(b, "28000", "pgcipher-proxy: expected a SCRAM-SHA-256 response")
	}
	serverFirst := out
	out, err = conv.Step(string(final.Data))
	if err != nil || !conv.Valid() {
		return failed()
	}
	if verifier {
		// the key this client proved it holds logs in to the server for it
		key, err := clientKeyOf(creds, clientFirst, serverFirst, string(final.Data))
		if err != nil {
			return failed()
		}
		s.passKeys.Store(user, scramKeys{clientKey: key, creds: creds})
	}
	b.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(out)})
	return nil
}
