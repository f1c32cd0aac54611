// Command hopfloor is the cheapest hop a Go process can be: a byte relay
// between TCP clients and a PostgreSQL server's Unix socket, which parses
// nothing.  bench/experiments/hop_floor.py runs it beside pgcipher-proxy
// and PgBouncer to measure what the proxy's design costs before the proxy
// does any work of its own (issue 43, design 15.14):
//
//	-mode goroutines  two goroutines per client, each a read/write loop
//	                  (the shape of the proxy's relay: Go's netpoller)
//	-mode goroutines-raw  the same over the proxy's sockets whose reads and
//	                  small writes are system calls Go's scheduler does
//	                  not see (proxy/internal/rawsock)
//	-mode epoll       one event loop over epoll in one goroutine, level
//	                  triggered, one read and one write per readable socket
//	                  (PgBouncer's shape, in Go: its blocking epoll_wait
//	                  still lets Go's scheduler hand the thread's P on)
//	-mode epoll-raw   the same loop waiting in a raw system call, which
//	                  Go's scheduler does not see
//
// The goroutine relay reads into 8 KiB, the event loop into 64 KiB,
// PgBouncer into 4 KiB (pkt_buf): the same for messages of a few hundred
// bytes, as pgbench's are.
//
// It is a measuring instrument, not a product: no authentication, no TLS,
// no cancel requests; a client's bytes go to a new server connection as
// they come.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgcipher/pgcipher/proxy/internal/rawsock"
)

func main() {
	mode := flag.String("mode", "goroutines", "goroutines, goroutines-raw, epoll or epoll-raw")
	listen := flag.String("listen", "127.0.0.1:6433", "TCP address for clients")
	upstream := flag.String("upstream", "", "the server's Unix socket (…/.s.PGSQL.PORT)")
	flag.Parse()
	if *upstream == "" {
		log.Fatal("hopfloor: -upstream is required")
	}
	go func() {
		// SIGTERM from the experiment ends the process at once
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
		<-c
		os.Exit(0)
	}()
	var err error
	switch *mode {
	case "goroutines":
		err = relayGoroutines(*listen, *upstream, false)
	case "goroutines-raw":
		err = relayGoroutines(*listen, *upstream, true)
	case "epoll", "epoll-raw":
		err = relayEpoll(*listen, *upstream, *mode == "epoll-raw")
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		log.Fatalf("hopfloor: %v", err)
	}
}

// relayGoroutines accepts clients and relays each with two goroutines;
// raw: through the proxy's raw sockets (proxy/internal/rawsock).
func relayGoroutines(listen, upstream string, raw bool) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			s, err := net.Dial("unix", upstream)
			if err != nil {
				log.Printf("hopfloor: server: %v", err)
				c.Close()
				return
			}
			if raw {
				c, s = rawsock.Wrap(c), rawsock.Wrap(s)
			}
			go pump(s, c)
			pump(c, s)
		}()
	}
}

// pump copies src to dst with plain reads and writes (io.Copy would splice
// between these socket kinds, which no pooler here does), then closes both.
func pump(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 8192)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a failed read: the pair ends either way
		}
	}
}
