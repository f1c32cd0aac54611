// Package rawsock reads and writes TCP and Unix sockets with system calls
// Go's scheduler does not see (design 15.14).
//
// Go's own Read and Write enter the scheduler's system-call state around
// each call: that wakes the runtime's monitor thread when it sleeps and
// lets it hand the P to another thread when a call outlasts its tick,
// context switches on every message of a proxy.  A socket from Wrap makes
// each read, and each write of up to 4 KiB, a raw read(2) or write(2)
// inside its syscall.RawConn: the socket is non-blocking, so the call
// returns at once, and on EAGAIN RawConn parks the goroutine on the
// netpoller as Go's calls do, deadlines included.  NothingToRead is the
// same for a peek.  pgcipher-proxy wraps every client and server socket;
// hopfloor's goroutines-raw mode (proxy/test/hopfloor) relays through the
// same sockets, so bench/experiments/hop_floor.py measures what ships.
//
// Linux only, and not under the race detector, which sees only what goes
// through Go's own calls: elsewhere Wrap returns its argument.
package rawsock
