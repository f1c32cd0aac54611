package main

import (
	"fmt"
	"net/netip"

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
// a socket is readable, one read and one write to its peer.
func relayEpoll(listen, upstream string) error {
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
		n, err := unix.EpollWait(ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			if fd == lfd {
				l.accept(lfd)
				continue
			}
			e := l.ends[fd]
			if e == nil {
				continue // closed earlier in this batch
			}
			if ev.Events&unix.EPOLLOUT != 0 && !l.flush(e) {
				continue
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 && len(e.peer.pending) == 0 {
				l.read(e, buf)
			}
		}
	}
}

// accept takes every waiting client and opens its server connection.
func (l *loop) accept(lfd int) {
	for {
		cfd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: none left (or a client gone before its accept)
		}
		_ = unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		sfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			if err = unix.Connect(sfd, &unix.SockaddrUnix{Name: l.upstream}); err == nil {
				err = unix.SetNonblock(sfd, true)
			}
			if err != nil {
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
