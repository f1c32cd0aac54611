//go:build !linux || race

package wire

import "net"

// rawIO: raw system calls are Linux's only, and not under the race
// detector (rawio_linux.go).
func rawIO(c net.Conn) net.Conn { return c }
