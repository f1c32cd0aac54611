//go:build linux && !race

package rawsock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// socketPair is a connected pair of one network's sockets: a is wrapped
// by Wrap, b is Go's own.
func socketPair(t *testing.T, network string) (a, b net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	d, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-accepted
	a = Wrap(d)
	if _, ok := a.(*socket); !ok {
		t.Fatalf("Wrap(%T) is %T, not a socket", d, a)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestRawSocket: what a socket reads and writes, and how it fails, is
// what Go's own socket would give: every byte in order through full send
// buffers, io.EOF at the peer's close, net.ErrClosed after its own,
// timeouts at deadlines, a system call's error as net.OpError.
func TestRawSocket(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network+"/round trip", func(t *testing.T) {
			a, b := socketPair(t, network)
			if _, err := a.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4)
			if _, err := io.ReadFull(b, got); err != nil || string(got) != "ping" {
				t.Fatalf("peer read %q, %v", got, err)
			}
			b.Write([]byte("pong"))
			if _, err := io.ReadFull(a, got); err != nil || string(got) != "pong" {
				t.Fatalf("read %q, %v", got, err)
			}
			if n, err := a.Read(nil); n != 0 || err != nil {
				t.Fatalf("empty read: %d, %v", n, err)
			}
		})
		for _, size := range []int{writeMax, 1 << 24} {
			t.Run(fmt.Sprintf("%s/writes of %d bytes past the send buffer", network, size), func(t *testing.T) {
				// 16 MiB: far more than the socket buffers hold, so a
				// write waits (EAGAIN) until the slow peer has read; in
				// raw writes of writeMax, or in one of Go's own
				a, b := socketPair(t, network)
				want := bytes.Repeat([]byte("0123456789abcdef"), 1<<20)
				done := make(chan error, 1)
				go func() {
					var err error
					for off := 0; off < len(want) && err == nil; off += size {
						var n int
						if n, err = a.Write(want[off : off+size]); err == nil && n != size {
							err = errors.New("short write")
						}
					}
					done <- err
				}()
				time.Sleep(50 * time.Millisecond)
				got, err := io.ReadAll(io.LimitReader(b, int64(len(want))))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("peer read %d bytes (equal: %v), %v", len(got), bytes.Equal(got, want), err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		}
		t.Run(network+"/read waits for data", func(t *testing.T) {
			a, b := socketPair(t, network)
			go func() {
				time.Sleep(50 * time.Millisecond)
				b.Write([]byte("late"))
			}()
			got := make([]byte, 16)
			n, err := a.Read(got)
			if err != nil || string(got[:n]) != "late" {
				t.Fatalf("read %q, %v", got[:n], err)
			}
		})
		t.Run(network+"/peer closes", func(t *testing.T) {
			a, b := socketPair(t, network)
			b.Write([]byte("last"))
			b.Close()
			got, err := io.ReadAll(a)
			if err != nil || string(got) != "last" {
				t.Fatalf("read %q, %v (want io.EOF after the data)", got, err)
			}
		})
		t.Run(network+"/own close", func(t *testing.T) {
			a, _ := socketPair(t, network)
			errc := parkedRead(a)
			a.Close()
			if err := <-errc; !errors.Is(err, net.ErrClosed) {
				t.Fatalf("a read blocked at close: %v, want net.ErrClosed", err)
			}
			if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("write after close: %v, want net.ErrClosed", err)
			}
		})
		t.Run(network+"/a parked reader woken by a deadline", func(t *testing.T) {
			// what the relay does to wake the client loop at a
			// session's end: a deadline of now, set from elsewhere
			a, b := socketPair(t, network)
			errc := parkedRead(a)
			a.SetReadDeadline(time.Now())
			if err := <-errc; !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("parked read: %v, want a timeout", err)
			}
			a.SetReadDeadline(time.Time{})
			b.Write([]byte("again"))
			got := make([]byte, 5)
			if _, err := io.ReadFull(a, got); err != nil || string(got) != "again" {
				t.Fatalf("read after the deadline's reset: %q, %v", got, err)
			}
		})
		t.Run(network+"/a write stopped by its deadline", func(t *testing.T) {
			// small buffers, a peer that reads nothing: raw writes meet
			// EAGAIN, wait, and stop at the deadline having reported
			// exactly what the peer then receives
			a, b := socketPair(t, network)
			setBuffers(t, a, b)
			a.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			chunk := bytes.Repeat([]byte{'w'}, writeMax)
			total := 0
			var err error
			for err == nil {
				var n int
				n, err = a.Write(chunk)
				total += n
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write: %v, want a timeout", err)
			}
			a.Close()
			got, _ := io.ReadAll(b)
			if len(got) != total {
				t.Fatalf("wrote %d bytes by the count, the peer got %d", total, len(got))
			}
		})
		t.Run(network+"/reads and writes at once", func(t *testing.T) {
			// both directions of one socket in two goroutines, as a
			// session's client loop and relay use it; through small
			// buffers on Unix sockets (on TCP, delayed acknowledgements
			// make small windows take seconds: its buffers fill anyway)
			a, b := socketPair(t, network)
			if network == "unix" {
				setBuffers(t, a, b)
			}
			const n = 4 << 20
			want := bytes.Repeat([]byte("abcdefgh"), n/8)
			errc := make(chan error, 4)
			var fromA, fromB []byte
			go func() { errc <- writeChunks(a, want) }()
			go func() { errc <- writeChunks(b, want) }()
			go func() { var err error; fromA, err = readN(b, n); errc <- err }()
			go func() { var err error; fromB, err = readN(a, n); errc <- err }()
			for range 4 {
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(fromA, want) || !bytes.Equal(fromB, want) {
				t.Fatal("the bytes came out otherwise than they went in")
			}
		})
		t.Run(network+"/deadline", func(t *testing.T) {
			a, _ := socketPair(t, network)
			a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := a.Read(make([]byte, 8))
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read past its deadline: %v, want a timeout", err)
			}
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Op != "read" {
				t.Fatalf("read past its deadline: %#v, want a net.OpError of op read", err)
			}
		})
	}
	t.Run("reset by the peer", func(t *testing.T) {
		a, b := socketPair(t, "tcp")
		// a close with unread data sends RST
		b.(*net.TCPConn).SetLinger(0)
		b.Close()
		time.Sleep(50 * time.Millisecond)
		_, err := a.Read(make([]byte, 8))
		var oe *net.OpError
		if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &oe) || oe.Op != "read" {
			t.Fatalf("read after a reset: %v, want ECONNRESET in a net.OpError of op read", err)
		}
	})
	t.Run("nothing to read", func(t *testing.T) {
		// the pool's liveness peek: nothing there, bytes there (left
		// for the reader), the peer gone
		a, b := socketPair(t, "unix")
		rc, _ := a.(syscall.Conn).SyscallConn()
		peek := func() (nothing bool) {
			rc.Control(func(fd uintptr) { nothing = NothingToRead(fd) })
			return nothing
		}
		if !peek() {
			t.Fatal("an idle socket has something to read")
		}
		b.Write([]byte("E"))
		time.Sleep(20 * time.Millisecond)
		if peek() {
			t.Fatal("a socket with a byte waiting has nothing to read")
		}
		got := make([]byte, 1)
		if _, err := io.ReadFull(a, got); err != nil || got[0] != 'E' {
			t.Fatalf("the peeked byte was not left to read: %q, %v", got, err)
		}
		b.Close()
		time.Sleep(20 * time.Millisecond)
		if peek() {
			t.Fatal("a socket whose peer closed has nothing to read")
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		c1, c2 := net.Pipe()
		defer c1.Close()
		defer c2.Close()
		if Wrap(c1) != c1 {
			t.Fatal("Wrap wrapped a net.Pipe, which has no RawConn")
		}
	})
	t.Run("RawConn kept", func(t *testing.T) {
		a, _ := socketPair(t, "unix")
		if _, err := a.(syscall.Conn).SyscallConn(); err != nil {
			t.Fatal(err)
		}
	})
}

// setBuffers makes both sockets' buffers small, so that raw writes meet
// EAGAIN early.
func setBuffers(t *testing.T, conns ...net.Conn) {
	t.Helper()
	for _, c := range conns {
		type buffers interface {
			SetReadBuffer(int) error
			SetWriteBuffer(int) error
		}
		if rs, ok := c.(*socket); ok {
			c = rs.Conn
		}
		bc, ok := c.(buffers)
		if !ok {
			t.Fatalf("%T has no buffer sizes", c)
		}
		bc.SetReadBuffer(4096)
		bc.SetWriteBuffer(4096)
	}
}

// parkedRead starts a read of c that waits for bytes (given time to
// park on the netpoller) and returns where its error comes.
func parkedRead(c net.Conn) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	return errc
}

// writeChunks writes b in raw-sized writes.
func writeChunks(c net.Conn, b []byte) error {
	for off := 0; off < len(b); off += writeMax {
		if _, err := c.Write(b[off:min(off+writeMax, len(b))]); err != nil {
			return err
		}
	}
	return nil
}

// readN reads n bytes.
func readN(c net.Conn, n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	return b, err
}
