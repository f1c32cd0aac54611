//go:build !linux

package main

import "errors"

func relayEpoll(listen, upstream string) error {
	return errors.New("-mode epoll needs Linux")
}
