//go:build linux && !race

package rawsock

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// socket is a TCP or Unix socket whose reads and small writes are raw
// system calls (the package's comment says why).  Measured
// (bench/reports/2026-11-29-raw-syscalls): reads and writes both raw take
// a point select's CPU in the proxy to 0.63-0.71 of Go's calls; either
// alone saves little, since one call in the system-call state per message
// is enough to keep the monitor waking.
type socket struct {
	net.Conn
	rc syscall.RawConn
	// one read and one write at a time, each with its own state, so that
	// a call allocates nothing (a closure per call would)
	rmu, wmu sync.Mutex
	rd, wr   rawCall
}

// rawCall is one direction's call in flight: the buffer, what the system
// call did, and the callback RawConn runs (made once).
type rawCall struct {
	b     []byte
	done  int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// writeMax: a larger write (a burst's full buffer, or a large message
// written from its own slice) goes through Go's Write.  It takes long
// enough that the P is better handed to the other direction's goroutine
// meanwhile: raw, a 1,000-row result cost the proxy 1.1 to 1.2 times the
// CPU; through Go's Write it is as before.
const writeMax = 4096

// Wrap returns c read and written with raw system calls when it is a
// socket that has a RawConn, c itself otherwise.
func Wrap(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	s := &socket{Conn: c, rc: rc}
	s.rd.fn, s.wr.fn = s.rd.read, s.wr.write
	return s
}

// SyscallConn keeps the socket's RawConn reachable (the proxy's pool
// peeks at its connections through it).
func (s *socket) SyscallConn() (syscall.RawConn, error) { return s.rc, nil }

func (s *socket) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := s.call(&s.rmu, &s.rd, b, false)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

func (s *socket) Write(b []byte) (int, error) {
	if len(b) > writeMax {
		return s.Conn.Write(b)
	}
	return s.call(&s.wmu, &s.wr, b, true)
}

// call runs one direction's call c on b: RawConn's Write or Read runs
// c.fn until it is done, waiting on the netpoller between tries.
func (s *socket) call(mu *sync.Mutex, c *rawCall, b []byte, write bool) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	c.b, c.done, c.errno = b, 0, 0
	var err error
	op := "read"
	if write {
		op = "write"
		err = s.rc.Write(c.fn)
	} else {
		err = s.rc.Read(c.fn)
	}
	c.b = nil
	switch {
	case err != nil:
		return c.done, s.opError(op, err)
	case c.errno == errNoProgress:
		return c.done, s.opError(op, io.ErrUnexpectedEOF)
	case c.errno != 0:
		return c.done, s.opError(op, os.NewSyscallError(op, c.errno))
	}
	return c.done, nil
}

// errNoProgress marks a write(2) that wrote nothing and said nothing
// (never seen on a socket; Go's own Write gives io.ErrUnexpectedEOF).
const errNoProgress = ^syscall.Errno(0)

// read is one read(2); false asks RawConn to wait until the socket is
// readable and call again.  The buffer is on the heap (c.b holds it) and
// syscall.RawSyscall keeps its arguments' pointers alive.
func (c *rawCall) read(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.b[0])), uintptr(len(c.b)))
		switch e {
		case 0:
			c.done = int(r)
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.errno = e
		}
		return true
	}
}

// write writes until all of b is written; false asks RawConn to wait
// until the socket is writable and call again.
func (c *rawCall) write(fd uintptr) bool {
	for c.done < len(c.b) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.b[c.done])), uintptr(len(c.b)-c.done))
		switch {
		case e == 0 && r == 0:
			c.errno = errNoProgress
			return true
		case e == 0:
			c.done += int(r)
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			return false
		default:
			c.errno = e
			return true
		}
	}
	return true
}

// NothingToRead peeks at a socket without waiting: true when it has
// nothing to read (EAGAIN), false when it has bytes, its peer closed, or
// it failed.  A raw call too: the pool peeks at every attachment, and
// one system call in the scheduler's state per transaction is enough to
// keep the runtime's monitor waking (design 15.14).
func NothingToRead(fd uintptr) bool {
	var b [1]byte
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	return e == syscall.EAGAIN
}

// opError is the error net.Conn's Read or Write would give: RawConn's
// own say "raw-read" or "raw-write", and a system call's is bare.
func (s *socket) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		e := *oe
		e.Op = op
		return &e
	}
	e := &net.OpError{Op: op, Err: err}
	if a := s.LocalAddr(); a != nil {
		e.Net, e.Source = a.Network(), a
	}
	e.Addr = s.RemoteAddr()
	return e
}
