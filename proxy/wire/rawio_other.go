//go:build !linux

package wire

import "net"

// rawIO: raw system calls are Linux's only (rawio_linux.go).
func rawIO(c net.Conn) net.Conn { return c }
