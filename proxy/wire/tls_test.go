package wire

// The proxy's TLS towards the server: the certificate it presents for a
// user whose own certificate it verified, and when SCRAM channel binding
// can pass through (the proxy shows the server's certificate); and the
// clients' certificates replaced while it runs.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// newCert makes a certificate for cn, signed by parent (self-signed when nil).
func newCert(t *testing.T, cn string, parent *tls.Certificate) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"},
		IsCA: parent == nil, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	signer, signerKey := tmpl, any(key)
	if parent != nil {
		signer, _ = x509.ParseCertificate(parent.Certificate[0])
		signerKey = parent.PrivateKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writeCert(t *testing.T, dir, user string, c tls.Certificate) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, user+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600)
	os.WriteFile(filepath.Join(dir, user+".key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// fakeTLSServer answers one SSLRequest with 'S' and a TLS handshake that
// asks for a client certificate; it reports the common name it got.
func fakeTLSServer(t *testing.T, cert tls.Certificate) (string, chan string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req := make([]byte, 8)
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		c.Write([]byte{'S'})
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert})
		if err := tc.Handshake(); err != nil {
			got <- "handshake: " + err.Error()
			return
		}
		cn := "(none)"
		if p := tc.ConnectionState().PeerCertificates; len(p) > 0 {
			cn = p[0].Subject.CommonName
		}
		got <- cn
		tc.Read(make([]byte, 1))
	}()
	return l.Addr().String(), got
}

func TestUpstreamCertificate(t *testing.T) {
	ca := newCert(t, "test CA", nil)
	serverCert := newCert(t, "localhost", &ca)
	dir := t.TempDir()
	writeCert(t, dir, "alice", newCert(t, "alice", &ca))
	for _, tc := range []struct {
		user, want string
	}{{"alice", "alice"}, {"", "(none)"}} {
		addr, got := fakeTLSServer(t, serverCert)
		host, port, _ := net.SplitHostPort(addr)
		up, err := pgconn.ParseConfig(fmt.Sprintf("host=%s port=%s sslmode=require", host, port))
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{upstream: up}
		var cert *tls.Certificate
		if tc.user != "" {
			if cert, err = upstreamCert(dir, tc.user); err != nil {
				t.Fatal(err)
			}
		}
		c, err := s.dial(cert, false)
		if err != nil {
			t.Fatal(err)
		}
		if cn := <-got; cn != tc.want {
			t.Errorf("user %q: the server got certificate %q, want %q", tc.user, cn, tc.want)
		}
		// channel binding passes only with the server's own certificate
		client, _ := net.Pipe()
		tlsClient := tls.Server(client, &tls.Config{})
		if !channelBindingPasses(&tls.Config{Certificates: []tls.Certificate{serverCert}}, tlsClient, c) {
			t.Error("the proxy shows the server's certificate: channel binding should pass")
		}
		if channelBindingPasses(&tls.Config{Certificates: []tls.Certificate{newCert(t, "localhost", &ca)}}, tlsClient, c) {
			t.Error("another certificate: channel binding must not pass")
		}
		c.Close()
	}
	for _, bad := range []string{"../alice", "bob", ".alice", "a/b"} {
		if _, err := upstreamCert(dir, bad); err == nil {
			t.Errorf("upstreamCert(%q) succeeded", bad)
		}
	}
}

// TestSetTLS: certificates replaced while the proxy runs (SIGHUP) serve
// the connections that come next: TLS offered, the new certificate shown,
// and TLS withdrawn.  No server is needed: the handshake with the client
// comes before the proxy dials the server, which here is not there.
func TestSetTLS(t *testing.T) {
	srv, err := NewServer(Config{Upstream: "host=" + t.TempDir() + " port=1"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(t.Context(), l)
	defer l.Close()
	// handshake reports the certificate the proxy showed, or an error
	handshake := func() (string, error) {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return "", err
		}
		defer c.Close()
		req, _ := (&pgproto3.SSLRequest{}).Encode(nil)
		c.Write(req)
		reply := make([]byte, 1)
		if _, err := io.ReadFull(c, reply); err != nil {
			return "", err
		}
		if reply[0] != 'S' {
			return "", fmt.Errorf("TLS refused (%q)", reply)
		}
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		return tc.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	if _, err := handshake(); err == nil || err.Error() != `TLS refused ("N")` {
		t.Fatalf("without certificates: %v, want TLS refused", err)
	}
	for _, cn := range []string{"first", "second"} {
		srv.SetTLS(&tls.Config{Certificates: []tls.Certificate{newCert(t, cn, nil)}}, "")
		if got, err := handshake(); err != nil || got != cn {
			t.Fatalf("after SetTLS with %q: the proxy showed %q (%v)", cn, got, err)
		}
	}
	srv.SetTLS(nil, "")
	if _, err := handshake(); err == nil || err.Error() != `TLS refused ("N")` {
		t.Fatalf("after SetTLS(nil): %v, want TLS refused", err)
	}
}

// fakeSCRAMServer answers startups as a server with ssl = on and SCRAM:
// over TLS it offers SCRAM-SHA-256-PLUS too and refuses a client that
// says it supports channel binding but saw none offered ("y,", as
// PostgreSQL does); over a plain link it offers SCRAM-SHA-256 only.  It
// answers an initial response it accepts with a SASLContinue, and reports
// each as "tls y,", "plain n,", ...
func fakeSCRAMServer(t *testing.T, cert tls.Certificate, timeout bool) (string, chan string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan string, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				var conn net.Conn = c
				b := pgproto3.NewBackend(c, c)
				m, err := b.ReceiveStartupMessage()
				if err != nil {
					return
				}
				link := "plain"
				if _, ok := m.(*pgproto3.SSLRequest); ok {
					c.Write([]byte{'S'})
					tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
					if tc.Handshake() != nil {
						return
					}
					conn, link = tc, "tls"
					b = pgproto3.NewBackend(tc, tc)
					if m, err = b.ReceiveStartupMessage(); err != nil {
						return
					}
				}
				if _, ok := m.(*pgproto3.StartupMessage); !ok {
					return
				}
				mechs := []string{"SCRAM-SHA-256"}
				if link == "tls" {
					mechs = append([]string{"SCRAM-SHA-256-PLUS"}, mechs...)
				}
				b.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: mechs})
				b.Flush()
				b.SetAuthType(pgproto3.AuthTypeSASL)
				r, err := b.Receive()
				ir, ok := r.(*pgproto3.SASLInitialResponse)
				if err != nil || !ok || len(ir.Data) < 2 {
					return
				}
				got <- link + " " + string(ir.Data[:2])
				if link == "tls" && string(ir.Data[:2]) == "y," {
					b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "08P01", Message: "SCRAM channel binding negotiation error"})
				} else {
					b.Send(&pgproto3.AuthenticationSASLContinue{Data: []byte("r=servernonce,s=c2FsdA==,i=4096")})
				}
				b.Flush()
				if timeout {
					// authentication_timeout: the client did not answer
					time.Sleep(100 * time.Millisecond)
					b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "08P01", Message: "canceling authentication due to timeout"})
					b.Flush()
					return
				}
				conn.Read(make([]byte, 1))
			}(c)
		}
	}()
	return l.Addr().String(), got
}

// TestChannelBindingPlainClient: a client that came without TLS and
// supports channel binding (node-postgres with enableChannelBinding
// sends "y,") behind a proxy whose link to the server is TLS: the server
// offers SCRAM-SHA-256-PLUS there and would refuse "y,".  Where the
// upstream connection string accepts a link without TLS (sslmode
// prefer), the proxy authenticates on one, as the client's own link is;
// where it requires TLS, the client is refused with a hint.  A client
// that does not support binding ("n,") keeps the TLS link.
func TestChannelBindingPlainClient(t *testing.T) {
	serverCert := newCert(t, "localhost", nil)
	for _, tc := range []struct {
		sslmode, gs2 string
		links        []string // the initial responses the server saw, in order
		want         string   // what the client got: "continue" or an SQLSTATE
		// the server ends the authentication while the client does not
		// answer (authentication_timeout): the client, waiting, must see
		// it, as node-postgres does after refusing an empty password
		timeout bool
	}{
		{"prefer", "y", []string{"plain y,"}, "continue", false},
		{"prefer", "n", []string{"tls n,"}, "continue", false},
		{"require", "y", nil, "08P01", false},
		{"disable", "y", []string{"plain y,"}, "continue", false},
		{"prefer", "y", []string{"plain y,"}, "continue", true},
		{"require", "n", []string{"tls n,"}, "continue", true},
	} {
		t.Run(fmt.Sprintf("%s/%s/timeout=%v", tc.sslmode, tc.gs2, tc.timeout), func(t *testing.T) {
			addr, got := fakeSCRAMServer(t, serverCert, tc.timeout)
			host, port, _ := net.SplitHostPort(addr)
			proxy, _ := serveTest(t, Config{Upstream: fmt.Sprintf("host=%s port=%s sslmode=%s", host, port, tc.sslmode),
				Catalog: fmt.Sprintf("host=%s port=%s sslmode=disable", host, port)})
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			f := pgproto3.NewFrontend(c, c)
			f.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
				Parameters: map[string]string{"user": "u", "database": "d"}})
			f.Flush()
			m, err := f.Receive()
			sasl, ok := m.(*pgproto3.AuthenticationSASL)
			if err != nil || !ok {
				t.Fatalf("the client got %T %v, not AuthenticationSASL", m, err)
			}
			if slices.Contains(sasl.AuthMechanisms, "SCRAM-SHA-256-PLUS") {
				t.Fatalf("SCRAM-SHA-256-PLUS shown to a client without TLS: %v", sasl.AuthMechanisms)
			}
			f.Send(&pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte(tc.gs2 + ",,n=,r=clientnonce")})
			f.Flush()
			m, err = f.Receive()
			switch m := m.(type) {
			case *pgproto3.AuthenticationSASLContinue:
				if tc.want != "continue" {
					t.Errorf("the client went on; want %s", tc.want)
				}
			case *pgproto3.ErrorResponse:
				if m.Code != tc.want {
					t.Errorf("the client got %s %q (hint %q); want %s", m.Code, m.Message, m.Hint, tc.want)
				} else if m.Hint == "" {
					t.Error("the refusal has no hint")
				}
			default:
				t.Fatalf("the client got %T %v", m, err)
			}
			if tc.timeout {
				if m, err := f.Receive(); err != nil {
					t.Fatalf("the client got %v, not the server's FATAL", err)
				} else if e, ok := m.(*pgproto3.ErrorResponse); !ok || e.Message != "canceling authentication due to timeout" {
					t.Fatalf("the client got %T %+v, not the server's FATAL", m, m)
				}
				if _, err := f.Receive(); err == nil {
					t.Fatal("the connection stays open after the server's FATAL")
				}
			}
			for _, want := range tc.links {
				select {
				case link := <-got:
					if link != want {
						t.Errorf("the server saw %q, want %q", link, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("the server saw no %q", want)
				}
			}
		})
	}
}
