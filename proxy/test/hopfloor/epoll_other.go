//go:build !linux

package main

import "errors"

func relayEpoll(listen, upstream string, raw bool) error {
	return errors.New("-mode epoll needs Linux")
}
