// TestMain's side: one dev server for a test binary.

package kmstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
func Main(m *testing.M, srv **Server) int { return MainWith(m, srv, nil) }

// MainWith is Main that also starts a PyKMIP server (StartKMIP) into
// *kmip when kmip is not nil.  Without pykmip-server (ErrNoPyKMIP) it says
// so in one line and leaves *kmip nil (NeedKMIP skips); with
// PGCIPHER_PYKMIP set, a server that does not start fails the binary.
func MainWith(m *testing.M, srv **Server, kmip **KMIPServer) int {
	// the servers' parent-death signal follows this thread (setDeathSignal)
	runtime.LockOSThread()
	dir, err := os.MkdirTemp("", "kmstest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bao, err := Bao()
	switch {
	case errors.Is(err, ErrNoBao):
		fmt.Fprintf(os.Stderr, "kmstest: %v: tests against OpenBao skipped\n", err)
	case err != nil:
		fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
		return 1
	default:
		s, err := Start(bao, dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
			return 1
		}
		defer s.Stop()
		*srv = s
	}
	if kmip != nil {
		bin, err := PyKMIP()
		switch {
		case errors.Is(err, ErrNoPyKMIP):
			fmt.Fprintf(os.Stderr, "kmstest: %v: tests against KMIP skipped\n", err)
		case err != nil:
			fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
			return 1
		default:
			kdir := filepath.Join(dir, "kmip")
			if err := os.Mkdir(kdir, 0o700); err != nil {
				fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
				return 1
			}
			k, err := StartKMIP(bin, kdir)
			if err != nil {
				fmt.Fprintf(os.Stderr, "kmstest: %v\n", err)
				return 1
			}
			defer k.Stop()
			*kmip = k
		}
	}
	return m.Run()
}

// Need skips t when there is no server (Main found no bao binary).
func Need(t testing.TB, s *Server) {
	t.Helper()
	if s == nil {
		t.Skip("no OpenBao dev server (no bao binary)")
	}
}

// NeedKMIP skips t when there is no KMIP server (no pykmip-server).
func NeedKMIP(t testing.TB, s *KMIPServer) {
	t.Helper()
	if s == nil {
		t.Skip("no PyKMIP server (no pykmip-server)")
	}
}
