package wire

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
)

// fakeServer answers whatever a session sends as a server would that
// accepts everything (reject false: and returns no rows) or rejects every
// statement (reject true), and records the bytes it got.  COPY … FROM
// STDIN takes its data.
func fakeServer(conn net.Conn, got *bytes.Buffer, mu *sync.Mutex, reject bool) {
	defer conn.Close()
	r := io.TeeReader(conn, lockedWriter{got, mu})
	b := pgproto3.NewBackend(r, conn)
	failed := false // in the extended protocol: skip to Sync
	fail := func() {
		b.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "42804", Message: "rejected"})
	}
	for {
		m, err := b.Receive()
		if err != nil {
			return
		}
		switch m := m.(type) {
		case *pgproto3.Query:
			q := strings.ToUpper(m.String)
			switch {
			case reject:
				fail()
			case strings.Contains(q, "COPY") && strings.Contains(q, "FROM STDIN"):
				b.Send(&pgproto3.CopyInResponse{})
				if b.Flush() != nil {
					return
				}
				for {
					cm, err := b.Receive()
					if err != nil {
						return
					}
					if _, ok := cm.(*pgproto3.CopyData); !ok {
						break
					}
				}
				b.Send(&pgproto3.CommandComplete{CommandTag: []byte("COPY 0")})
			default:
				b.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
			}
			b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		case *pgproto3.Sync:
			failed = false
			b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		case *pgproto3.Terminate:
			return
		case *pgproto3.Flush:
		default:
			if failed {
				continue
			}
			if reject {
				fail()
				failed = true
				break
			}
			switch m := m.(type) {
			case *pgproto3.Parse:
				b.Send(&pgproto3.ParseComplete{})
			case *pgproto3.Bind:
				b.Send(&pgproto3.BindComplete{})
			case *pgproto3.Describe:
				if strings.HasPrefix(m.Name, "pgcipher: statement refused") {
					// as PostgreSQL: no such statement, skip to Sync
					b.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "26000", Message: "prepared statement does not exist"})
					failed = true
					break
				}
				b.Send(&pgproto3.NoData{})
			case *pgproto3.Execute:
				b.Send(&pgproto3.CommandComplete{CommandTag: []byte("SELECT 0")})
			case *pgproto3.Close:
				b.Send(&pgproto3.CloseComplete{})
			}
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
	return runSessionWith(t, cat, keys, false, input, nil)
}

// readyFor is an until of runSessionWith: true at the n-th ReadyForQuery.
func readyFor(n int) func(pgproto3.BackendMessage) bool {
	return func(m pgproto3.BackendMessage) bool {
		if _, ok := m.(*pgproto3.ReadyForQuery); ok {
			n--
		}
		return n == 0
	}
}

// runSessionWith is runSession with catalog cat and keys, in front of a
// fake server that accepts or rejects every statement; the client closes
// once until is true of a message it read (nil: after a millisecond).
func runSessionWith(t *testing.T, cat *catalog.Catalog, keys *catalog.Keys, reject bool, input []byte, until func(pgproto3.BackendMessage) bool) []byte {
	clientProxy, clientFuzz := net.Pipe()
	proxyServer, serverSide := net.Pipe()
	var got bytes.Buffer
	var mu sync.Mutex
	go fakeServer(serverSide, &got, &mu, reject)
	srv := &Server{cfg: Config{Keys: keys, Log: slog.New(slog.DiscardHandler)}, catalogs: newCatalogCache()}
	s := newSession(srv, &conns{r: clientProxy, w: clientProxy}, &conns{r: proxyServer, w: proxyServer}, "fuzz", "fuzz")
	s.names.reset("fuzz", "public", nil)
	s.setCatalog(cat)
	s.catGen = srv.catalogs.gen.Load()
	srv.catalogs.put("fuzz", cat, s.catGen)
	// as run() does: the connection ends when either loop ends
	clientDone, relayDone := make(chan struct{}), make(chan struct{})
	go func() { s.relay(s.up); close(relayDone) }()
	go func() { s.clientLoop(); s.q.close(); close(clientDone) }()
	answered := make(chan struct{})
	go func() { // the client reads whatever comes back
		if until == nil {
			io.Copy(io.Discard, clientFuzz)
			return
		}
		fe := pgproto3.NewFrontend(clientFuzz, io.Discard)
		for {
			m, err := fe.Receive()
			if err != nil {
				return
			}
			if until(m) {
				close(answered)
				io.Copy(io.Discard, clientFuzz)
				return
			}
		}
	}()
	clientFuzz.SetWriteDeadline(time.Now().Add(2 * time.Second))
	clientFuzz.Write(input)
	if until == nil {
		time.Sleep(time.Millisecond) // let the answers of complete messages pass
	} else {
		select {
		case <-answered:
		case <-time.After(5 * time.Second):
			t.Fatal("the session did not answer")
		}
	}
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
	// Django 5.2's bulk_create (server-side and client-side binding): a *
	// whose first column is plaintext once passed the rest unchecked
	encode(&pgproto3.Parse{Query: `INSERT INTO "enc_t" ("id", "t") SELECT * FROM UNNEST(($1)::integer[], ($2)::text[]) RETURNING "enc_t"."id"`},
		&pgproto3.Bind{Parameters: [][]byte{[]byte("{1,2}"), []byte("{MARKERX,MARKERX}")}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
	encode(&pgproto3.Query{String: `INSERT INTO "enc_t" ("id", "t") SELECT * FROM UNNEST('{1,2}'::integer[], '{MARKERX,MARKERX}'::text[])`}),
	encode(&pgproto3.Query{String: `INSERT INTO enc_t (id, tr, t) SELECT *, 'MARKERX' FROM plain_t`}),
	encode(&pgproto3.Query{String: `MERGE INTO enc_t USING (VALUES ('MARKERX')) v(x) ON enc_t.t = v.x WHEN NOT MATCHED THEN INSERT (t) VALUES (v.x)`}),
	// NOT LIKE $1 gives the server no test, but $1 still travels in Bind
	encode(&pgproto3.Parse{Query: "SELECT id FROM enc_t WHERE tm NOT LIKE $1"},
		&pgproto3.Bind{Parameters: [][]byte{[]byte("%MARKERX%")}}, &pgproto3.Execute{}, &pgproto3.Sync{}),
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

// TestRefusedThenFlush: a statement refused at Parse, followed by Describe
// and Flush without Sync (asyncpg prepares so), is answered at once with
// the refusal; the proxy used to drop the Flush with the rest of the
// batch, and the client waited for ever.
func TestRefusedThenFlush(t *testing.T) {
	cat, keys := testcat.New(t)
	in := encode(&pgproto3.Parse{Query: "SELECT id FROM enc_t WHERE tr = $1"}, &pgproto3.Describe{ObjectType: 'S'}, &pgproto3.Flush{})
	runSessionWith(t, cat, keys, false, in, func(m pgproto3.BackendMessage) bool {
		e, ok := m.(*pgproto3.ErrorResponse)
		return ok && e.Code == "PC001"
	})
}
