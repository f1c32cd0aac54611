// OpenBao: a client from Options, keys from KV v2 and wrapped by Transit,
// and every failure made one clear line.

package kms

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/openbao/openbao/api/v2"
)

// DefaultTimeout bounds a key command's whole conversation with the KMS:
// well below the 30 seconds that the server (encryption_key_command_timeout)
// and the proxy give a key command.
const DefaultTimeout = 10 * time.Second

// Options say how to reach OpenBao and as whom.
type Options struct {
	Addr       string        // https://HOST:PORT
	CACert     string        // PEM file of the CA(s) that sign the server's certificate; "" trusts the system's
	ClientCert string        // PEM client certificate, for a listener that asks for one (optional)
	ClientKey  string        // its private key: a private file (ReadPrivateFile)
	TokenFile  string        // the token: a private file (ReadToken)
	Namespace  string        // OpenBao namespace (optional)
	Timeout    time.Duration // per call of ReadKVKey, NewWrappedKey, Unwrap; DefaultTimeout if 0
}

// OpenBao is a client of one OpenBao server with one token.
type OpenBao struct {
	c    *api.Client
	opts Options
}

// NewOpenBao checks opts, reads the token (and the client key), and makes
// a client; it does not connect yet.
func NewOpenBao(opts Options) (*OpenBao, error) {
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Timeout < 0 {
		return nil, newError(nil, nil, fmt.Sprintf("timeout %s is negative", opts.Timeout))
	}
	u, err := url.Parse(opts.Addr)
	if err != nil || u.Host == "" || u.User != nil {
		return nil, newError(nil, nil, fmt.Sprintf("address %q is not a URL like https://HOST:PORT", opts.Addr))
	}
	if u.Scheme != "https" {
		return nil, newError(nil, nil, fmt.Sprintf("address %s is not https: the token would travel in clear", opts.Addr))
	}
	if opts.TokenFile == "" {
		return nil, newError(nil, nil, "no token file: the token is read from a file only")
	}
	if (opts.ClientCert == "") != (opts.ClientKey == "") {
		return nil, newError(nil, nil, "a client certificate needs its key, and a key its certificate")
	}

	cfg := api.NewConfig() // reads no BAO_ or VAULT_ variable
	if cfg.Error != nil {
		return nil, newError(nil, cfg.Error, fmt.Sprintf("OpenBao client: %v", cfg.Error))
	}
	cfg.Address = opts.Addr
	cfg.Timeout = opts.Timeout
	cfg.MinRetryWait = 200 * time.Millisecond
	cfg.MaxRetryWait = time.Second
	tlsCfg := cfg.HttpClient.Transport.(*http.Transport).TLSClientConfig
	if opts.CACert != "" {
		pool, err := loadCAPool(opts.CACert)
		if err != nil {
			return nil, err
		}
		tlsCfg.RootCAs = pool
	}
	if opts.ClientCert != "" {
		cert, err := loadClientCert(opts.ClientCert, opts.ClientKey)
		if err != nil {
			return nil, err
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	token, err := ReadToken(opts.TokenFile)
	if err != nil {
		return nil, err
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, newError(nil, err, fmt.Sprintf("OpenBao client for %s: %v", opts.Addr, err))
	}
	c.SetToken(token)
	if opts.Namespace != "" {
		c.SetNamespace(opts.Namespace)
	}
	return &OpenBao{c: c, opts: opts}, nil
}

// KVSecret names a field of a KV version 2 secret.
type KVSecret struct {
	Mount   string // the engine's mount, e.g. "secret"
	Path    string // the secret's path under it, e.g. "pgcipher/kek"
	Field   string // the field holding the key as 64 hex digits
	Version int    // the version to read; 0 for the current one
}

func (s KVSecret) apiPath() string {
	return strings.Trim(s.Mount, "/") + "/data/" + strings.Trim(s.Path, "/")
}

// name names the secret in messages, with a version if v > 0.
func (s KVSecret) name(v int) string {
	if v > 0 {
		return fmt.Sprintf("secret %s (KV v2 mount %q, version %d)", strings.Trim(s.Path, "/"), strings.Trim(s.Mount, "/"), v)
	}
	return fmt.Sprintf("secret %s (KV v2 mount %q)", strings.Trim(s.Path, "/"), strings.Trim(s.Mount, "/"))
}

// ReadKVKey reads the key that field s.Field of a KV v2 secret holds as
// 64 hex digits.
func (b *OpenBao) ReadKVKey(ctx context.Context, s KVSecret) ([]byte, error) {
	if s.Mount == "" || s.Path == "" || s.Field == "" {
		return nil, newError(nil, nil, "a KV secret needs a mount, a path and a field")
	}
	if s.Version < 0 {
		return nil, newError(nil, nil, fmt.Sprintf("version %d is negative", s.Version))
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	kv := b.c.KVv2(strings.Trim(s.Mount, "/"))
	var sec *api.KVSecret
	var err error
	if s.Version > 0 {
		sec, err = kv.GetVersion(ctx, strings.Trim(s.Path, "/"), s.Version)
	} else {
		sec, err = kv.Get(ctx, strings.Trim(s.Path, "/"))
	}
	if errors.Is(err, api.ErrSecretNotFound) {
		return nil, newError(ErrNotFound, err, fmt.Sprintf(
			"%s not found (404): no such secret or version, or no KV v2 engine at that mount", s.name(s.Version)))
	}
	if err != nil {
		return nil, b.fail("read", s.apiPath(), err)
	}
	name := s.name(s.Version)
	if m := sec.VersionMetadata; m != nil && m.Version > 0 {
		name = s.name(m.Version)
	}
	if sec.Data == nil {
		state := "was deleted"
		if m := sec.VersionMetadata; m != nil && m.Destroyed {
			state = "was destroyed"
		} else if m != nil && !m.DeletionTime.IsZero() {
			state = "was deleted on " + m.DeletionTime.UTC().Format(time.RFC3339)
		}
		return nil, newError(ErrNotFound, nil, fmt.Sprintf("%s %s: undelete it (bao kv undelete) or name a live version", name, state))
	}
	v, ok := sec.Data[s.Field]
	if !ok {
		fields := make([]string, 0, len(sec.Data))
		for f := range sec.Data {
			fields = append(fields, f)
		}
		return nil, newError(ErrNotFound, nil, fmt.Sprintf("%s has no field %q (its fields: %s)", name, s.Field, listNames(fields)))
	}
	str, ok := v.(string)
	if !ok {
		return nil, newError(ErrBadKey, nil, fmt.Sprintf("field %q of %s is not a string", s.Field, name))
	}
	return ParseKey([]byte(str), fmt.Sprintf("field %q of %s", s.Field, name))
}

// TransitKey names a key of a Transit engine.
type TransitKey struct {
	Mount string // the engine's mount, e.g. "transit"
	Name  string // the key's name
}

func (k TransitKey) String() string {
	return fmt.Sprintf("Transit key %q (mount %q)", k.Name, strings.Trim(k.Mount, "/"))
}

func (k TransitKey) check() error {
	if k.Mount == "" || k.Name == "" || strings.Contains(k.Name, "/") {
		return newError(nil, nil, "a Transit key needs a mount and a name without a slash")
	}
	return nil
}

// NewWrappedKey asks Transit for a fresh 256-bit data key and receives it
// only wrapped under key k (transit/datakey/wrapped/NAME): the ciphertext,
// "vault:vN:...", that Unwrap turns back into the key.  The plaintext key
// never reaches this process.
func (b *OpenBao) NewWrappedKey(ctx context.Context, k TransitKey) (string, error) {
	if err := k.check(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	path := strings.Trim(k.Mount, "/") + "/datakey/wrapped/" + k.Name
	sec, err := b.c.Logical().WriteWithContext(ctx, path, map[string]any{"bits": 256})
	if err != nil {
		return "", b.transitFail(k, "update", path, err)
	}
	ct, _ := dataString(sec, "ciphertext")
	if !strings.HasPrefix(ct, "vault:v") {
		return "", newError(nil, nil, fmt.Sprintf("%s: Transit answered without a ciphertext", k))
	}
	return ct, nil
}

// Unwrap has Transit decrypt a ciphertext of NewWrappedKey with key k
// (transit/decrypt/NAME) and returns the 256-bit key.
func (b *OpenBao) Unwrap(ctx context.Context, k TransitKey, ciphertext string) ([]byte, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	ciphertext = strings.TrimSpace(ciphertext)
	if !strings.HasPrefix(ciphertext, "vault:v") || strings.ContainsAny(ciphertext, " \t\r\n") {
		return nil, newError(ErrBadKey, nil, "not a Transit ciphertext (one line vault:vN:...)")
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	path := strings.Trim(k.Mount, "/") + "/decrypt/" + k.Name
	sec, err := b.c.Logical().WriteWithContext(ctx, path, map[string]any{"ciphertext": ciphertext})
	var re *api.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest && !hasError(re, "encryption key not found") {
		// a damaged ciphertext, or one of another key
		return nil, newError(ErrBadKey, err, fmt.Sprintf("%s cannot decrypt the ciphertext (400 %s): damaged, or wrapped by another key",
			k, serverSaid(re)))
	}
	if err != nil {
		return nil, b.transitFail(k, "update", path, err)
	}
	pt, ok := dataString(sec, "plaintext")
	if !ok {
		return nil, newError(nil, nil, fmt.Sprintf("%s: Transit answered without a plaintext", k))
	}
	key, err := base64.StdEncoding.DecodeString(pt)
	if err != nil || len(key) != KeySize {
		clear(key)
		return nil, newError(ErrBadKey, nil, fmt.Sprintf("%s decrypted the ciphertext to %d bytes, not a 256-bit key", k, len(key)))
	}
	return key, nil
}

func dataString(sec *api.Secret, name string) (string, bool) {
	if sec == nil || sec.Data == nil {
		return "", false
	}
	s, ok := sec.Data[name].(string)
	return s, ok
}

// transitFail is fail with Transit's 400 "encryption key not found" taken
// for what it is.
func (b *OpenBao) transitFail(k TransitKey, op, path string, err error) error {
	var re *api.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest && hasError(re, "encryption key not found") {
		return newError(ErrNotFound, err, fmt.Sprintf("%s not found (create it: bao write -f %s/keys/%s)",
			k, strings.Trim(k.Mount, "/"), k.Name))
	}
	return b.fail(op, path, err)
}

// serverSaid is what the server said in an error answer, one line: its
// errors without the "1 error occurred:" and "* " of multi-error lists.
func serverSaid(re *api.ResponseError) string {
	var said []string
	for _, e := range re.Errors {
		for _, l := range strings.Split(e, "\n") {
			l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "* "))
			if l == "" || strings.HasSuffix(l, " occurred:") && (strings.HasSuffix(l, "error occurred:") || strings.HasSuffix(l, "errors occurred:")) {
				continue
			}
			if !slices.Contains(said, l) {
				said = append(said, l)
			}
		}
	}
	return strings.Join(said, "; ")
}

func hasError(re *api.ResponseError, text string) bool {
	for _, e := range re.Errors {
		if strings.Contains(e, text) {
			return true
		}
	}
	return false
}

// fail turns the error of an API call (op on path) into one line saying
// what went wrong and what to check.
func (b *OpenBao) fail(op, path string, err error) error {
	addr := b.opts.Addr
	var (
		re     *api.ResponseError
		netErr net.Error
		dnsErr *net.DNSError
		verErr *tls.CertificateVerificationError
		unkCA  x509.UnknownAuthorityError
		host   x509.HostnameError
		alert  tls.AlertError
		record tls.RecordHeaderError
		opErr  *net.OpError
	)
	ca := "--ca-cert " + b.opts.CACert
	if b.opts.CACert == "" {
		ca = "the system's CAs (no --ca-cert)"
	}
	switch {
	case errors.As(err, &re):
		return b.responseFail(op, path, re)
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return newError(ErrTimeout, err, fmt.Sprintf("no answer from OpenBao at %s within %s (--timeout)", addr, b.opts.Timeout))
	case errors.Is(err, syscall.ECONNREFUSED):
		return newError(ErrUnreachable, err, fmt.Sprintf("cannot connect to OpenBao at %s: connection refused (is it running, and is --addr right?)", addr))
	case errors.As(err, &dnsErr):
		return newError(ErrUnreachable, err, fmt.Sprintf("cannot connect to OpenBao at %s: %v", addr, dnsErr))
	case errors.As(err, &unkCA) || errors.As(err, &verErr) && !errors.As(err, &host):
		return newError(ErrTLS, err, fmt.Sprintf("the TLS certificate of OpenBao at %s is not signed by a CA in %s: %v", addr, ca, innermost(err)))
	case errors.As(err, &host):
		return newError(ErrTLS, err, fmt.Sprintf("the TLS certificate of OpenBao at %s is not for that host: %v", addr, host.Error()))
	case errors.As(err, &opErr) && opErr.Op == "remote error" || errors.As(err, &alert):
		// the server's TLS alert: crypto/tls reports it as a
		// *net.OpError "remote error" (AlertError is QUIC's)
		hint := ""
		if b.opts.ClientCert == "" {
			hint = ": does it ask for a client certificate? (--client-cert, --client-key)"
		}
		return newError(ErrTLS, err, fmt.Sprintf("OpenBao at %s refused the TLS connection (%v)%s", addr, innermost(err), hint))
	case b.opts.ClientCert == "" && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		strings.Contains(err.Error(), "http2: client conn could not be established")):
		// TLS 1.3: a server that wants a client certificate says so after
		// the handshake, and the request may meet the closed connection
		// before the client reads the alert (or HTTP/2's preface may: its
		// error is unexported, known by its text)
		return newError(ErrTLS, err, fmt.Sprintf("OpenBao at %s closed the connection after the TLS handshake (%v): does it ask for a client certificate? (--client-cert, --client-key)",
			addr, innermost(err)))
	case errors.As(err, &record):
		return newError(ErrTLS, err, fmt.Sprintf("OpenBao at %s does not speak TLS there (an http:// listener?)", addr))
	case errors.As(err, &opErr):
		return newError(ErrUnreachable, err, fmt.Sprintf("cannot connect to OpenBao at %s: %v", addr, innermost(err)))
	}
	return newError(nil, err, fmt.Sprintf("%s %s at OpenBao %s: %v", op, path, addr, err))
}

// responseFail explains an HTTP error answer.
func (b *OpenBao) responseFail(op, path string, re *api.ResponseError) error {
	said := serverSaid(re)
	if said == "" {
		said = http.StatusText(re.StatusCode)
	}
	switch re.StatusCode {
	case http.StatusForbidden:
		return newError(ErrDenied, re, fmt.Sprintf(
			"OpenBao at %s refused the token in %s (403 %s) for %s on %s: the token is wrong, expired or revoked, or its policy does not allow that",
			b.opts.Addr, b.opts.TokenFile, said, op, path))
	case http.StatusNotFound:
		return newError(ErrNotFound, re, fmt.Sprintf("%s not found at OpenBao %s (404 %s): no such path or mount", path, b.opts.Addr, said))
	case http.StatusServiceUnavailable:
		return newError(ErrUnreachable, re, fmt.Sprintf("OpenBao at %s cannot answer (503 %s): sealed, or in standby without an active node?", b.opts.Addr, said))
	}
	return newError(nil, re, fmt.Sprintf("OpenBao at %s answered %d to %s on %s: %s", b.opts.Addr, re.StatusCode, op, path, said))
}

// innermost is the deepest error in err's chain (through single Unwrap):
// "x509: certificate signed by unknown authority", not the URL around it.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func listNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
