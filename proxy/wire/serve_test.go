package wire

// serveTest: a proxy with cfg serving on a loopback port for the length
// of a test, shared by the tests of package wire and (ServeTest) of
// package wire_test.

import (
	"context"
	"crypto/rand"
	"net"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/catalog"
)

// serveTest starts a proxy with cfg (Keys, when unset, under a random
// column master key) on 127.0.0.1 and returns its address and itself;
// both end with the test.
func serveTest(t testing.TB, cfg Config) (string, *Server) {
	t.Helper()
	if cfg.Keys == nil {
		cmk := make([]byte, 32)
		rand.Read(cmk)
		cfg.Keys = catalog.NewKeys(cmk, "main")
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx, l)
	t.Cleanup(func() { cancel(); l.Close(); srv.Close() })
	return l.Addr().String(), srv
}
