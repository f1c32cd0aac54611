package main

import (
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// end is one socket of a relayed pair: what was read from its peer and
// not yet written to it waits in pending, and its peer is not read until
// that is written (no buffer grows without bound).
type end struct {
	fd       int
	peer     *end
	pending  []byte
	interest uint32
	added    bool
}

// loop is the event loop's state; one goroutine owns all of it.
type loop struct {
	ep       int
	ends     map[int]*end
	upstream string
}

// relayEpoll accepts clients and relays every pair from one event loop,
// as PgBouncer does with libevent: level triggered, and after epoll says
// a socket is readable, one read and one write to its peer.  raw waits in
// epoll_pwait without telling Go's scheduler (a raw system call): its
// monitor then does not take the thread's P away during each wait and
// wake another thread to run it, which a blocking wait through
// unix.EpollWait costs; Go's preemption signal interrupts the wait
// (EINTR) when the runtime needs the goroutine.
func relayEpoll(listen, upstream string, raw bool) error {
	ap, err := netip.ParseAddrPort(listen)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("-listen %q: an IPv4 address and port", listen)
	}
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	if err := unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fmt.Errorf("SO_REUSEADDR: %w", err)
	}
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		return fmt.Errorf("bind %s: %w", listen, err)
	}
	if err := unix.Listen(lfd, 4096); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)}); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	l := &loop{ep: ep, ends: map[int]*end{}, upstream: upstream}
	events := make([]unix.EpollEvent, 256)
	buf := make([]byte, 65536)
	for {
		var n int
		if raw {
			n, err = rawEpollWait(ep, events)
		} else {
			n, err = unix.EpollWait(ep, events, -1)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		accept := false
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == lfd {
				// after the batch: a new pair must not reuse the number
				// of an end closed in it while its events are still here
				accept = true
				continue
			}
			e := l.ends[fd]
			if e == nil {
				continue // closed earlier in this batch
			}
			if ev.Events&unix.EPOLLERR != 0 || ev.Events&(unix.EPOLLHUP|unix.EPOLLIN) == unix.EPOLLHUP {
				// reported whatever the interest: closed now, or epoll
				// would report it again at once while the end waits
				l.close(e)
				continue
			}
			if ev.Events&unix.EPOLLOUT != 0 && !l.flush(e) {
				continue
			}
			if ev.Events&unix.EPOLLIN != 0 && len(e.peer.pending) == 0 {
				l.read(e, buf)
			}
		}
		if accept {
			l.accept(lfd)
		}
	}
}

// rawEpollWait is epoll_pwait(ep, events, -1, NULL) as a raw system call.
func rawEpollWait(ep int, events []unix.EpollEvent) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), ^uintptr(0), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// accept takes every waiting client and opens its server connection.
func (l *loop) accept(lfd int) {
	for {
		cfd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: none left (or a client gone before its accept)
		}
		_ = unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		// a Unix socket connects at once or fails (EAGAIN: the
		// server's backlog is full): the client is then closed
		sfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			if err = unix.Connect(sfd, &unix.SockaddrUnix{Name: l.upstream}); err != nil {
				unix.Close(sfd)
			}
		}
		if err != nil {
			unix.Close(cfd)
			continue
		}
		c, s := &end{fd: cfd}, &end{fd: sfd}
		c.peer, s.peer = s, c
		l.ends[cfd], l.ends[sfd] = c, s
		l.update(c)
		l.update(s)
	}
}

// read makes one read from e and writes it to its peer; what the peer does
// not take waits in its pending bytes.
func (l *loop) read(e *end, buf []byte) {
	n, err := unix.Read(e.fd, buf)
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	if n <= 0 || err != nil {
		l.close(e)
		return
	}
	w, err := unix.Write(e.peer.fd, buf[:n])
	if err != nil && err != unix.EAGAIN {
		l.close(e)
		return
	}
	if w < 0 {
		w = 0
	}
	if w < n {
		e.peer.pending = append(e.peer.pending[:0], buf[w:n]...)
		l.update(e.peer)
		l.update(e)
	}
}

// flush writes e's pending bytes; false when the pair was closed.
func (l *loop) flush(e *end) bool {
	w, err := unix.Write(e.fd, e.pending)
	if err != nil && err != unix.EAGAIN {
		l.close(e)
		return false
	}
	if w > 0 {
		e.pending = e.pending[w:]
	}
	if len(e.pending) == 0 {
		e.pending = nil
		l.update(e.peer)
	}
	l.update(e)
	return true
}

// update sets e's epoll interest: readable while its peer has nothing
// pending, writable while it has.
func (l *loop) update(e *end) {
	var want uint32
	if len(e.peer.pending) == 0 {
		want |= unix.EPOLLIN
	}
	if len(e.pending) > 0 {
		want |= unix.EPOLLOUT
	}
	op := unix.EPOLL_CTL_MOD
	if !e.added {
		op = unix.EPOLL_CTL_ADD
	} else if want == e.interest {
		return
	}
	_ = unix.EpollCtl(l.ep, op, e.fd, &unix.EpollEvent{Events: want, Fd: int32(e.fd)})
	e.interest, e.added = want, true
}

// close ends a pair: both sockets (closing leaves epoll too).
func (l *loop) close(e *end) {
	for _, x := range []*end{e, e.peer} {
		delete(l.ends, x.fd)
		unix.Close(x.fd)
	}
}
