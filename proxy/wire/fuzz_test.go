package wire

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
)

// fakeServer answers whatever a session sends as a server would that
// accepts everything and returns no rows, and records the bytes it got.
func fakeServer(conn net.Conn, got *bytes.Buffer, mu *sync.Mutex) {
	defer conn.Close()
	r := io.TeeReader(conn, lockedWriter{got, mu})
	b := pgproto3.NewBackend(r, conn)
	for {
		m, err := b.Receive()
		if err != nil {
			return
		}
		switch m.(type) {
		case *pgproto3.Query:
			b.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
			b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		case *pgproto3.Parse:
			b.Send(&pgproto3.ParseComplete{})
		case *pgproto3.Bind:
			b.Send(&pgproto3.BindComplete{})
		case *pgproto3.Describe:
			b.Send(&pgproto3.NoData{})
		case *pgproto3.Execute:
			b.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
		case *pgproto3.Close:
			b.Send(&pgproto3.CloseComplete{})
		case *pgproto3.Sync:
			b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		case *pgproto3.Terminate:
			return
		}
		if b.Flush() != nil {
			return
		}
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// runSession feeds input as the client's messages (after startup) to a
// session whose catalog has encrypted columns, in front of a fake
// server, and returns what the server received.
func runSession(t *testing.T, input []byte) []byte {
	cat, keys := testcat.New(t)
	clientProxy, clientFuzz := net.Pipe()
	proxyServer, serverSide := net.Pipe()
	var got bytes.Buffer
	var mu sync.Mutex
	go fakeServer(serverSide, &got, &mu)
	srv := &Server{cfg: Config{Keys: keys, Log: slog.New(slog.DiscardHandler)}, catalogs: newCatalogCache()}
	s := newSession(srv, &conns{r: clientProxy, w: clientProxy}, &conns{r: proxyServer, w: proxyServer}, "fuzz", "fuzz")
	s.names.reset("fuzz", "public", nil)
	s.setCatalog(cat)
	s.catGen = srv.catalogs.gen.Load()
	srv.catalogs.put("fuzz", cat, s.catGen)
	// as run() does: the connection ends when either loop ends
	clientDone, relayDone := make(chan struct{}), make(chan struct{})
	go func() { s.relay(); close(relayDone) }()
	go func() { s.clientLoop(); s.q.close(); close(clientDone) }()
	go io.Copy(io.Discard, clientFuzz) // the client reads whatever comes back
	clientFuzz.SetWriteDeadline(time.Now().Add(2 * time.Second))
	clientFuzz.Write(input)
	time.Sleep(time.Millisecond) // let the answers of complete messages pass
	clientFuzz.Close()
	select {
	case <-clientDone:
	case <-relayDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the session hung")
	}
	proxyServer.Close()
	clientProxy.Close()
	for _, c := range []chan struct{}{clientDone, relayDone} {
		select {
		case <-c:
		case <-time.After(5 * time.Second):
			t.Fatal("a loop of the session did not end with its connections")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return bytes.Clone(got.Bytes())
}

func encode(ms ...pgproto3.FrontendMessage) []byte {
	var out []byte
	for _, m := range ms {
		out, _ = m.Encode(out)
	}
	return out
}

// sessionSeeds write MARKERX into encrypted columns through every path.
var sessionSeeds = [][]byte{
	encode(&pgproto3.Query{String: "INSERT INTO enc_t (id, t) VALUES (1, 'MARKERX')"}),
	encode(&pgproto3.Parse{Query: "SELECT i4 FROM enc_t WHERE t = $1"},
		&pgproto3.Bind{Parameters: [][]byte{[]byte("MARKERX")}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
	encode(&pgproto3.Query{String: "COPY enc_t (id, t) FROM STDIN"}, &pgproto3.CopyData{Data: []byte("1\tMARKERX\n")},
		&pgproto3.CopyDone{}),
	encode(&pgproto3.Query{String: "SELECT upper(t) FROM enc_t WHERE t = 'MARKERX'"},
		&pgproto3.Query{String: "COPY enc_t (id, t) FROM STDIN WITH (FORMAT binary)"}, &pgproto3.CopyData{Data: []byte("MARKERX")},
		&pgproto3.Parse{Name: "s", Query: "UPDATE enc_t SET t = $1 WHERE i4 = $2", ParameterOIDs: []uint32{25, 23}},
		&pgproto3.Bind{PreparedStatement: "s", ParameterFormatCodes: []int16{0, 1}, Parameters: [][]byte{[]byte("MARKERX"), {0, 0, 0, 7}}},
		&pgproto3.Execute{}, &pgproto3.Sync{}),
	encode(&pgproto3.Query{String: "INSERT INTO enc_t (id, t) VALUES (1, 'MARKERX'"}), // does not parse
	encode(&pgproto3.Parse{Query: "SELECT md5(t) FROM enc_t WHERE i4 = $1"},
		&pgproto3.Bind{Parameters: [][]byte{[]byte("7")}}, &pgproto3.Parse{Query: "SELECT 1 WHERE $1 = 'x'"},
		&pgproto3.Bind{Parameters: [][]byte{[]byte("MARKERX")}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
}

// TestSessionSeeds: MARKERX, written into encrypted columns through
// literals, parameters and COPY, or in a batch after a refused statement,
// never reaches the server; the same on a plaintext table does (control).
func TestSessionSeeds(t *testing.T) {
	for i, in := range sessionSeeds {
		t.Logf("seed %d", i)
		if got := runSession(t, in); bytes.Contains(got, []byte("MARKERX")) {
			t.Errorf("seed %d: the marker reached the server: %q", i, got)
		}
	}
	plain := encode(&pgproto3.Query{String: "INSERT INTO plain_t (id, t) VALUES (1, 'MARKERX')"})
	if got := runSession(t, plain); !bytes.Contains(got, []byte("MARKERX")) {
		t.Error("control: the marker of a plaintext table did not reach the server")
	}
}

// FuzzSession: no sequence of client bytes makes the proxy panic or hang.
func FuzzSession(f *testing.F) {
	for _, s := range sessionSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		runSession(t, input)
	})
}
