// A real KMIP server for tests: PyKMIP's, over mutual TLS with
// certificates this package makes.

package kmstest

import (
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
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// KMIPServer is a running PyKMIP server (pykmip-server) that requires a
// client certificate (enable_tls_client_auth) signed by its CA.
type KMIPServer struct {
	Addr       string // 127.0.0.1:PORT
	CACert     string // the CA that signs the server's and the clients' certificates
	ClientCert string // a client certificate it accepts, and its key (mode 0600)
	ClientKey  string
	SecondCert string // another client certificate of CACert (another owner), and its key
	SecondKey  string
	OtherCA    string // a CA that signed neither
	OtherCert  string // a client certificate of OtherCA, and its key (mode 0600)
	OtherKey   string
	Dir        string // where it runs: server.conf, its log server.log, its database
	cmd        *exec.Cmd
	exited     chan error
}

// ErrNoPyKMIP says that no pykmip-server was found.
var ErrNoPyKMIP = errors.New("no pykmip-server: set PGCIPHER_PYKMIP or put pykmip-server on PATH (scripts/test.sh kms installs PyKMIP from PyPI into build/kms-venv)")

// PyKMIP returns the pykmip-server to run: $PGCIPHER_PYKMIP if set (it
// must then be there), else pykmip-server on PATH; ErrNoPyKMIP if neither.
func PyKMIP() (string, error) {
	return findProgram("PGCIPHER_PYKMIP", "pykmip-server", ErrNoPyKMIP)
}

// StartKMIP makes a CA, the server's certificate and two client
// certificates in dir (which must exist), writes the server's
// configuration, starts pykmip-server and waits until it answers TLS.
func StartKMIP(bin, dir string) (*KMIPServer, error) {
	s := &KMIPServer{Dir: dir, exited: make(chan error, 1)}
	if err := s.makeCerts(); err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // the free port may be taken before the server binds it
		port, err := freePortPair()
		if err != nil {
			return nil, err
		}
		s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		if lastErr = s.start(bin, port); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

func (s *KMIPServer) start(bin string, port int) error {
	policies := filepath.Join(s.Dir, "policies")
	if err := os.MkdirAll(policies, 0o700); err != nil {
		return err
	}
	conf := filepath.Join(s.Dir, "server.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, `[server]
hostname=127.0.0.1
port=%d
certificate_path=%s
key_path=%s
ca_path=%s
auth_suite=TLS1.2
enable_tls_client_auth=True
logging_level=INFO
database_path=%s
policy_path=%s
`, port, filepath.Join(s.Dir, "server.pem"), filepath.Join(s.Dir, "server-key.pem"), s.CACert,
		filepath.Join(s.Dir, "pykmip.db"), policies), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(s.Dir, "server.log")
	out, err := os.OpenFile(filepath.Join(s.Dir, "server.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	s.exited = make(chan error, 1)
	s.cmd = exec.Command(bin, "-f", conf, "-l", logPath)
	s.cmd.Dir = s.Dir
	s.cmd.Stdout, s.cmd.Stderr = out, out
	s.cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore")
	setDeathSignal(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	var lastErr error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.exited:
			s.exited <- err
			return fmt.Errorf("pykmip-server exited (%v) before it was ready; its log %s:\n%s", err, logPath, tail(logPath)+tail(filepath.Join(s.Dir, "server.out")))
		case <-time.After(100 * time.Millisecond):
		}
		if lastErr = s.probe(); lastErr == nil {
			return nil
		}
	}
	s.Stop()
	return fmt.Errorf("pykmip-server at %s not ready in 60 s (%v); its log %s:\n%s", s.Addr, lastErr, logPath, tail(logPath))
}

// probe completes a TLS handshake with the client certificate.
func (s *KMIPServer) probe() error {
	pemCA, err := os.ReadFile(s.CACert)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	cert, err := tls.LoadX509KeyPair(s.ClientCert, s.ClientKey)
	if err != nil {
		return err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second},
		Config: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
	c, err := d.Dial("tcp", s.Addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// Pause and Resume stop and continue the server (one that no longer
// answers).
func (s *KMIPServer) Pause() error  { return s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *KMIPServer) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Stop stops the server and waits for it.  SIGINT, not SIGTERM: on
// SIGTERM pykmip-server only clears a flag and goes on blocking in
// accept(); SIGINT raises KeyboardInterrupt there, and it shuts down,
// its policy monitor process too.
func (s *KMIPServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-s.exited:
		s.exited <- err
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		s.exited <- <-s.exited
	}
}

// makeCerts writes the CA, the server's certificate (for 127.0.0.1), two
// client certificates of the CA and one of another CA.
func (s *KMIPServer) makeCerts() error {
	ca, caKey, err := writeCA(s.Dir, "ca", "kmstest KMIP CA")
	if err != nil {
		return err
	}
	other, otherKey, err := writeCA(s.Dir, "other-ca", "kmstest other CA")
	if err != nil {
		return err
	}
	s.CACert = filepath.Join(s.Dir, "ca.pem")
	s.OtherCA = filepath.Join(s.Dir, "other-ca.pem")
	if err := writeLeaf(s.Dir, "server", ca, caKey, 10, false); err != nil {
		return err
	}
	if err := writeLeaf(s.Dir, "client", ca, caKey, 11, true); err != nil {
		return err
	}
	if err := writeLeaf(s.Dir, "second-client", ca, caKey, 13, true); err != nil {
		return err
	}
	if err := writeLeaf(s.Dir, "other-client", other, otherKey, 12, true); err != nil {
		return err
	}
	s.ClientCert, s.ClientKey = filepath.Join(s.Dir, "client.pem"), filepath.Join(s.Dir, "client-key.pem")
	s.SecondCert, s.SecondKey = filepath.Join(s.Dir, "second-client.pem"), filepath.Join(s.Dir, "second-client-key.pem")
	s.OtherCert, s.OtherKey = filepath.Join(s.Dir, "other-client.pem"), filepath.Join(s.Dir, "other-client-key.pem")
	return nil
}

// writeCA makes a CA and writes its certificate to dir/NAME.pem.
func writeCA(dir, name, cn string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(filepath.Join(dir, name+".pem"), "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// writeLeaf writes dir/NAME.pem and dir/NAME-key.pem (mode 0600): a
// client certificate (CN NAME) or a server certificate for 127.0.0.1.
func writeLeaf(dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64, client bool) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, name+".pem"), "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+"-key.pem"), "PRIVATE KEY", keyDER, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
