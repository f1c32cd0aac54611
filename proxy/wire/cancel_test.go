package wire_test

// A cancel request is forwarded and the client's cancel connection closed
// only once the server has closed its own (as libpq waits for it): closed
// at once, the client went on to its next statement while the server had
// not yet signalled the backend, and the cancel could hit that statement
// (asyncpg's copy and timeout tests failed now and then through the
// proxy, never directly).

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/wire"
)

func TestCancelWaitsForServer(t *testing.T) {
	const serverDelay = 300 * time.Millisecond
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	got := make(chan *pgproto3.CancelRequest, 1)
	go func() { // the server: reads the request, signals, then closes
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		m, err := pgproto3.NewBackend(c, c).ReceiveStartupMessage()
		if cr, ok := m.(*pgproto3.CancelRequest); ok && err == nil {
			got <- cr
		}
		time.Sleep(serverDelay)
	}()
	port := up.Addr().(*net.TCPAddr).Port
	proxy, _ := wire.ServeTest(t, wire.Config{Upstream: fmt.Sprintf("host=127.0.0.1 port=%d sslmode=disable", port),
		Catalog: fmt.Sprintf("host=127.0.0.1 port=%d sslmode=disable", port)})
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req, _ := (&pgproto3.CancelRequest{ProcessID: 4242, SecretKey: []byte{1, 2, 3, 4}}).Encode(nil)
	start := time.Now()
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, c) // until the proxy closes the cancel connection
	waited := time.Since(start)
	select {
	case cr := <-got:
		if cr.ProcessID != 4242 {
			t.Errorf("the server got process id %d", cr.ProcessID)
		}
	default:
		t.Fatal("the cancel request did not reach the server")
	}
	if waited < serverDelay {
		t.Errorf("the proxy closed the cancel connection after %v, before the server closed its own (%v)", waited, serverDelay)
	}
}
