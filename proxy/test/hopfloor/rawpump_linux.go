package main

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawPump is pump with each read and write a raw system call on the
// non-blocking socket, made inside syscall.RawConn's Read and Write: the
// netpoller still parks the goroutine when the socket has nothing (the
// callback answers false on EAGAIN), but a read or write that does not
// block never enters the scheduler's syscall state, so it never wakes
// Go's monitor thread nor lets it hand the P to another thread.
func rawPump(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	rs, err1 := src.(syscall.Conn).SyscallConn()
	rd, err2 := dst.(syscall.Conn).SyscallConn()
	if err1 != nil || err2 != nil {
		return
	}
	buf := make([]byte, 8192)
	for {
		var n int
		var errno syscall.Errno
		err := rs.Read(func(fd uintptr) bool {
			r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
			if e == unix.EAGAIN {
				return false
			}
			n, errno = int(r), e
			return true
		})
		if err != nil || errno != 0 || n <= 0 {
			return // a failed read, or the end of the stream
		}
		for off := 0; off < n; {
			var w int
			err := rd.Write(func(fd uintptr) bool {
				r, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&buf[off])), uintptr(n-off))
				if e == unix.EAGAIN {
					return false
				}
				w, errno = int(r), e
				return true
			})
			if err != nil || errno != 0 {
				return
			}
			off += w
		}
	}
}
