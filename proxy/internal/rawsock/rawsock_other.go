//go:build !linux || race

package rawsock

import (
	"net"
	"syscall"
)

// Wrap returns c: raw system calls are Linux's only, and not under the
// race detector (rawsock_linux.go).
func Wrap(c net.Conn) net.Conn { return c }

// NothingToRead peeks at socket fd without waiting: true when it has
// nothing to read.
func NothingToRead(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == syscall.EAGAIN
}
