//go:build !linux || race

package wire

import (
	"net"
	"syscall"
)

// rawIO: raw system calls are Linux's only, and not under the race
// detector (rawio_linux.go).
func rawIO(c net.Conn) net.Conn { return c }

// nothingToRead peeks at a socket without waiting: true when it has
// nothing to read.
func nothingToRead(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == syscall.EAGAIN
}
