// TestMain's side: one dev server for a test binary.

package kmstest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"testing"
)

// Main starts a dev server for a test binary, stores it in *srv, runs the
// tests and stops the server; TestMain exits with what it returns:
//
//	func TestMain(m *testing.M) { os.Exit(kmstest.Main(m, &bao)) }
//
// Without a bao binary (ErrNoBao: PGCIPHER_BAO unset and none on PATH) it
// says so in one line and runs the tests with *srv nil: those that need
// the server skip (Need), the others run.  With PGCIPHER_BAO set (as the
// kms suite sets it), a server that does not start fails the binary.
func Main(m *testing.M, srv **Server) int {
	// the server's parent-death signal follows this thread (setDeathSignal)
	runtime.LockOSThread()
	bao, err := Bao()
	if errors.Is(err, ErrNoBao) {
		fmt.Fprintf(os.Stderr, "kmstest: %v: tests against OpenBao skipped\n", err)
		return m.Run()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kmstest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	s, err := Start(bao, dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
		return 1
	}
	defer s.Stop()
	*srv = s
	return m.Run()
}

// Need skips t when there is no server (Main found no bao binary).
func Need(t testing.TB, s *Server) {
	t.Helper()
	if s == nil {
		t.Skip("no OpenBao dev server (no bao binary)")
	}
}
