// Client authentication in transaction mode (design 15.14): the proxy
// logs clients in itself (trust, SCRAM-SHA-256 against the auth file's
// secrets, or a verified client certificate), as PgBouncer does, and
// opens server connections with credentials of its own.

package wire

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

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

// credentials returns a user's SCRAM credentials from the auth file.
func (s *Server) credentials(user string) (scram.StoredCredentials, bool) {
	users := s.authUsers.Load()
	if users == nil {
		return scram.StoredCredentials{}, false
	}
	secret, ok := (*users)[user]
	if !ok {
		return scram.StoredCredentials{}, false
	}
	if strings.HasPrefix(secret, "SCRAM-SHA-256$") {
		c, err := scramCredentials(secret)
		return c, err == nil
	}
	// a plaintext password: a verifier of it, with a salt of its own
	client, err := scram.SHA256.NewClient(user, secret, "")
	if err != nil {
		return scram.StoredCredentials{}, false
	}
	salt := sha256.Sum256([]byte("pgcipher-proxy auth file salt\x00" + user))
	c, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt[:16]), Iters: 4096})
	return c, err == nil
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

// SetAuthFile replaces the auth file's users (SIGHUP).
func (s *Server) SetAuthFile(users map[string]string) {
	u := authUsers(users)
	s.authUsers.Store(&u)
}

// authenticateClient logs a client in as user (certUser: the common
// name of its verified certificate).
func (s *Server) authenticateClient(b *pgproto3.Backend, user, certUser string) error {
	switch t := s.PoolConfig().AuthType; t {
	case AuthTrust:
		return nil
	case AuthCert:
		if certUser == "" || certUser != user {
			return fatal(b, "28000", fmt.Sprintf("certificate authentication failed for user %q", user))
		}
		return nil
	case AuthSCRAM, "":
		return s.scramClient(b, user)
	default:
		return fatal(b, "28000", "pgcipher-proxy: unknown auth-type "+t)
	}
}

// scramClient runs SCRAM-SHA-256 (RFC 7677, without channel binding)
// with the client, as the server would.
func (s *Server) scramClient(b *pgproto3.Backend, user string) error {
	failed := func() error {
		return fatal(b, "28P01", fmt.Sprintf("password authentication failed for user %q", user))
	}
	creds, known := s.credentials(user)
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
	out, err := conv.Step(string(first.Data))
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
	out, err = conv.Step(string(final.Data))
	if err != nil || !conv.Valid() {
		return failed()
	}
	b.Send(&pgproto3.AuthenticationSASLFinal{Data: []byte(out)})
	return nil
}
