//go:build !linux

package main

import (
	"errors"
	"net"
)

func relayEpoll(listen, upstream string, raw bool) error {
	return errors.New("-mode epoll needs Linux")
}

func rawPump(dst, src net.Conn) { pump(dst, src) }
