package wire_test

// End-to-end tests against a real server (PGCIPHER_TEST_UPSTREAM, a libpq
// connection string of a superuser on a server with pgcipher_columns
// installed; ./pgcipher test sets it): two in-process proxies, one for the
// encrypted table and one for its plaintext twin, both recording what
// they send to the server.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

// syncBuffer is the recorder: every byte a proxy sent to the server.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

type env struct {
	upstream string
	db       string
	keys     *catalog.Keys
	cmk      []byte // the column master key of keys (signs rights)
}

// startProxy runs a proxy for db and returns its connection string.
func (e *env) startProxy(t *testing.T, rec *syncBuffer) string {
	return e.startProxyTLS(t, rec, nil)
}

func (e *env) startProxyTLS(t *testing.T, rec *syncBuffer, clientTLS *tls.Config) string {
	t.Helper()
	conninfo, _ := e.serve(t, wire.Config{Record: rec, ClientTLS: clientTLS})
	return conninfo
}

// serve runs a proxy with cfg in front of the test server (its Upstream,
// Catalog and Keys filled in: the server only, user and database come
// from the client) and returns the client's connection string and the
// proxy.
func (e *env) serve(t *testing.T, cfg wire.Config) (string, *wire.Server) {
	t.Helper()
	pc, _ := pgconn.ParseConfig(e.upstream)
	cfg.Upstream = fmt.Sprintf("host=%s port=%d", pc.Host, pc.Port)
	cfg.Catalog = fmt.Sprintf("host=%s port=%d user=%s", pc.Host, pc.Port, pc.User)
	cfg.Keys = e.keys
	addr, srv := wire.ServeTest(t, cfg)
	_, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("host=127.0.0.1 port=%s user=%s dbname=%s sslmode=disable TimeZone=UTC",
		port, pc.User, e.db), srv
}

func setup(t *testing.T) *env {
	up := os.Getenv("PGCIPHER_TEST_UPSTREAM")
	if up == "" {
		t.Skip("PGCIPHER_TEST_UPSTREAM not set (./pgcipher test sets it)")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := fmt.Sprintf("proxytest_%d", time.Now().UnixNano()%1e9)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db+" TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), up)
		if err == nil {
			c.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	cmk := make([]byte, 32)
	rand.Read(cmk)
	// the proxy dials the server; the database is each client's
	return &env{upstream: up, db: db, keys: catalog.NewKeys(cmk, "main"), cmk: cmk}
}

// The tables of the corpus: enc_c with every type and level, plain_c its
// twin.
const encSchema = `SELECT pgcipher.add_column_key('k1');
CREATE TABLE enc_c (id int PRIMARY KEY, i4 enc_int4, i4o enc_int4_ord, i8 enc_int8, i8o enc_int8_ord,
  f8 enc_float8_ord, num enc_numeric, numo enc_numeric_ord, t enc_text, tm enc_text, tr enc_text,
  to2 enc_text_ord, b enc_bytea, d enc_date_ord, ts enc_timestamptz_ord, bo enc_bool, g1 enc_int4, g2 enc_int4,
  ti enc_text);
SELECT pgcipher.encrypt_column('enc_c', 'i4', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_c', 'i4o', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_c', 'i8', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_c', 'i8o', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_c', 'f8', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_c', 'num', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_c', 'numo', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_c', 't', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_c', 'tm', 'k1', 'MATCH');
SELECT pgcipher.encrypt_column('enc_c', 'tr', 'k1', 'RND');
SELECT pgcipher.encrypt_column('enc_c', 'to2', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_c', 'b', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_c', 'd', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_c', 'ts', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('enc_c', 'bo', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('enc_c', 'g1', 'k1', 'EQ', 'g');
SELECT pgcipher.encrypt_column('enc_c', 'g2', 'k1', 'EQ', 'g');
SELECT pgcipher.encrypt_column('enc_c', 'ti', 'k1', 'MATCH', case_insensitive => true)`

const plainSchema = `CREATE TABLE plain_c (id int PRIMARY KEY, i4 int4, i4o int4, i8 int8, i8o int8,
  f8 float8, num numeric, numo numeric, t text COLLATE "C", tm text COLLATE "C", tr text COLLATE "C",
  to2 text COLLATE "C", b bytea, d date, ts timestamptz, bo bool, g1 int4, g2 int4, ti text COLLATE "C")`

// rows are the corpus data; NULLs every few rows; to2 values share a
// 16-byte prefix, which only the proxy's sort orders right.
func rows() []string {
	var out []string
	for i := 1; i <= 24; i++ {
		v := func(every int, s string) string {
			if i%every == 0 {
				return "NULL"
			}
			return s
		}
		out = append(out, fmt.Sprintf("(%d, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", i,
			v(5, fmt.Sprint(i%9)), v(6, fmt.Sprint(i*3-20)), v(7, fmt.Sprint(int64(i)*-1000000000)), v(5, fmt.Sprint(i*i*i-50)),
			v(8, fmt.Sprintf("%g", float64(i)*37.5-200)), v(6, fmt.Sprintf("'%d.%d0'", i%4*5, i%10)), v(9, fmt.Sprintf("%d.%d", i%6, i)),
			v(11, fmt.Sprintf("'MARKER-t-%02d'", i%8)), v(13, fmt.Sprintf("'MARKER-tm-%02d text'", i)), v(4, fmt.Sprintf("'MARKER-tr-%02d'", i)),
			v(10, fmt.Sprintf("'same-prefix-0123456789-%c'", 'z'-i%7)), v(6, fmt.Sprintf("'\\x%02x0b'", i%5+9)),
			v(7, fmt.Sprintf("'2024-%02d-%02d'", i%12+1, i%27+1)), v(9, fmt.Sprintf("'2024-%02d-01 %02d:00:00+00'", i%5+1, i%24)),
			v(3, fmt.Sprint(i%2 == 0)), v(4, fmt.Sprint(i%3)), v(5, fmt.Sprint(i%4)),
			// ti: mixed case, for the case-insensitive searches
			v(12, fmt.Sprintf("'%s-%02d Text'", []string{"MARKER-Ti", "marker-ti", "Marker-TI"}[i%3], i))))
	}
	return out
}

// connect opens a connection closed when the test ends.
func connect(t *testing.T, conninfo string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), conninfo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("%s: %v", firstLine(sql), err)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

type corpusLine struct {
	refuse bool
	sql    string
}

func readCorpus(t *testing.T) []corpusLine {
	f, err := os.Open("../test/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ok: "):
			out = append(out, corpusLine{sql: line[4:]})
		case strings.HasPrefix(line, "refuse: "):
			out = append(out, corpusLine{refuse: true, sql: line[8:]})
		}
	}
	return out
}

// result runs sql and returns its rows as text (sorted unless ordered)
// or its SQLSTATE.
func result(ctx context.Context, conn *pgx.Conn, sql string, mode pgx.QueryExecMode) (string, string) {
	rows, err := conn.Query(ctx, sql, mode)
	if err != nil {
		return "", sqlstate(err)
	}
	var lines []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			rows.Close()
			return "", sqlstate(err)
		}
		for i, v := range vals {
			if n, ok := v.(pgtype.Numeric); ok {
				// compare numerics by value and scale as text
				vals[i], _ = n.Value()
			}
		}
		lines = append(lines, fmt.Sprintf("%v", vals))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", sqlstate(err)
	}
	if !strings.Contains(strings.ToUpper(sql), "ORDER BY") {
		sort.Strings(lines)
	}
	return strings.Join(lines, "\n") + fmt.Sprintf("\n(%s)", rows.CommandTag()), ""
}

func sqlstate(err error) string {
	if err == nil {
		return ""
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return "error: " + err.Error()
}

// TestCorpus runs every corpus statement on both tables through the
// proxies, in the simple and the extended protocol, and then checks that
// no marker of the encrypted table reached the server while every marker
// of the plaintext one did.
func TestCorpus(t *testing.T) {
	corpusRun(t, wire.PoolConfig{}, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeDescribeExec)
}

// corpusRun runs the corpus through proxies pooling as pool says, in
// each of modes.
func corpusRun(t *testing.T, pool wire.PoolConfig, modes ...pgx.QueryExecMode) {
	e := setup(t)
	ctx := context.Background()
	encRec, plainRec := &syncBuffer{}, &syncBuffer{}
	encInfo, _ := e.serve(t, wire.Config{Record: encRec, Pool: pool})
	plainInfo, _ := e.serve(t, wire.Config{Record: plainRec, Pool: pool})
	encConn, err := pgx.Connect(ctx, encInfo)
	if err != nil {
		t.Fatal(err)
	}
	defer encConn.Close(ctx)
	plainConn, err := pgx.Connect(ctx, plainInfo)
	if err != nil {
		t.Fatal(err)
	}
	defer plainConn.Close(ctx)
	mustExec(t, encConn, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, encConn, encSchema)
	mustExec(t, plainConn, plainSchema)
	data := strings.Join(rows(), ",\n")
	mustExec(t, encConn, "INSERT INTO enc_c VALUES "+data)
	mustExec(t, plainConn, "INSERT INTO plain_c VALUES "+data)

	corpus := readCorpus(t)
	if len(corpus) < 150 {
		t.Fatalf("corpus has %d statements, want at least 150", len(corpus))
	}
	refused, same := 0, 0
	for _, mode := range modes {
		for _, c := range corpus {
			encSQL := strings.ReplaceAll(c.sql, "{t}", "enc_c")
			plainSQL := strings.ReplaceAll(c.sql, "{t}", "plain_c")
			before := len(encRec.Bytes())
			got, gotErr := result(ctx, encConn, encSQL, mode)
			if c.refuse {
				if !strings.HasPrefix(gotErr, "PC0") {
					t.Errorf("mode %v: %s\n  not refused: %q %s", mode, encSQL, gotErr, firstLine(got))
					continue
				}
				// nothing of the statement reached the server
				if sent := encRec.Bytes()[before:]; bytes.Contains(sent, []byte("enc_c")) {
					t.Errorf("mode %v: refused %s, but the server got it", mode, encSQL)
				}
				refused++
				continue
			}
			if strings.HasPrefix(gotErr, "PC0") {
				t.Errorf("mode %v: %s\n  refused (%s), but should run", mode, encSQL, gotErr)
				continue
			}
			want, wantErr := result(ctx, plainConn, plainSQL, mode)
			if got != want || gotErr != wantErr {
				t.Errorf("mode %v: %s\n  encrypted: %q %s\n  plaintext: %q %s", mode, c.sql, gotErr, got, wantErr, want)
				continue
			}
			same++
		}
	}
	t.Logf("corpus: %d statements × %d protocols: %d answered as on plaintext, %d refused", len(corpus), len(modes), same, refused)

	// the capture: markers written to the encrypted table never reached
	// the server; the control table's did, so the scan can fail
	enc, plain := encRec.Bytes(), plainRec.Bytes()
	for _, m := range []string{"MARKER-t-0", "MARKER-tm-", "MARKER-tr-", "MARKER-ins-", "MARKER-upd-", "MARKER-ups-", "MARKER-cmp-", "same-prefix-0123", "MARKER-Ti-", "marker-ti-", "Marker-TI-"} {
		if bytes.Contains(enc, []byte(m)) {
			t.Errorf("marker %q reached the server through the proxy", m)
		}
		if !bytes.Contains(plain, []byte(m)) {
			t.Errorf("control: marker %q not seen in what the plaintext connection sent", m)
		}
	}
	t.Logf("capture: %d bytes sent for the encrypted table, %d for the plaintext one, no marker of the first", len(enc), len(plain))
}

// TestProtocol: authentication relayed (SCRAM-SHA-256 and md5, a wrong
// password ends the connection), a cancel request reaching the right
// backend, notifications and notices passed on.
func TestProtocol(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	conninfo := e.startProxy(t, &syncBuffer{})
	admin := connect(t, conninfo)
	// the server must ask these roles for passwords (./pgcipher test's
	// pg_hba.conf does): PGCIPHER_TEST_PASSWORD_AUTH says so
	roles := []struct{ role, enc string }{{"pgc_scram", "scram-sha-256"}, {"pgc_md5", "md5"}}
	if os.Getenv("PGCIPHER_TEST_PASSWORD_AUTH") == "" {
		t.Log("PGCIPHER_TEST_PASSWORD_AUTH not set: authentication relay not tested")
		roles = nil
	}
	for _, m := range roles {
		mustExec(t, admin, fmt.Sprintf("SET password_encryption = '%s'; DROP ROLE IF EXISTS %s; CREATE ROLE %s LOGIN PASSWORD 'right-%s'",
			m.enc, m.role, m.role, m.role))
		t.Cleanup(func() { admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+m.role) })
		base := strings.Replace(conninfo, "user=", "user="+m.role+" olduser=", 1)
		base = strings.Replace(base, " olduser="+strings.Fields(strings.SplitN(conninfo, "user=", 2)[1])[0], "", 1)
		good, err := pgx.Connect(ctx, base+" password=right-"+m.role)
		if err != nil {
			t.Fatalf("%s through the proxy: %v", m.enc, err)
		}
		var who string
		if err := good.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != m.role {
			t.Errorf("%s: current_user = %q, %v", m.enc, who, err)
		}
		good.Close(ctx)
		_, err = pgx.Connect(ctx, base+" password=wrong")
		if sqlstate(err) != "28P01" {
			t.Errorf("%s with a wrong password: %v, want SQLSTATE 28P01", m.enc, err)
		}
	}

	// cancel: pgx sends a CancelRequest to the proxy when the context ends
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := admin.Exec(cctx, "SELECT pg_sleep(20)")
	if err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("pg_sleep(20) was not cancelled: %v after %v", err, time.Since(start))
	}
	admin.Close(ctx)
	admin = connect(t, conninfo)

	// LISTEN / NOTIFY and notices
	listener, err := pgx.Connect(ctx, conninfo)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	mustExec(t, listener, "LISTEN pgcipher_chan")
	mustExec(t, admin, "NOTIFY pgcipher_chan, 'hello'")
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	n, err := listener.WaitForNotification(wctx)
	if err != nil || n.Payload != "hello" {
		t.Errorf("notification: %v, %v", n, err)
	}
	var notices []string
	cfg, _ := pgx.ParseConfig(conninfo)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { notices = append(notices, n.Message) }
	nc, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close(ctx)
	mustExec(t, nc, "DO $$BEGIN RAISE NOTICE 'notice through the proxy'; END$$")
	if len(notices) != 1 || notices[0] != "notice through the proxy" {
		t.Errorf("notices: %q", notices)
	}
	admin.Close(ctx)
}

// TestClientTLS: a client that requires TLS gets it from the proxy, and
// values of encrypted columns travel to it inside TLS.
func TestClientTLS(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pgcipher-proxy test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	conninfo := e.startProxyTLS(t, &syncBuffer{}, &tls.Config{Certificates: []tls.Certificate{cert}})
	conninfo = strings.Replace(conninfo, "sslmode=disable", "sslmode=require", 1)
	conn, err := pgx.Connect(ctx, conninfo)
	if err != nil {
		t.Fatalf("TLS to the proxy: %v", err)
	}
	defer conn.Close(ctx)
	if conn.PgConn().Conn() == nil {
		t.Fatal("no connection")
	}
	if _, ok := conn.PgConn().Conn().(*tls.Conn); !ok {
		t.Fatalf("the client's connection is %T, not TLS", conn.PgConn().Conn())
	}
	mustExec(t, conn, "CREATE EXTENSION IF NOT EXISTS pgcipher_columns")
	mustExec(t, conn, "SELECT pgcipher.add_column_key('ktls'); CREATE TABLE tls_t (id int, s enc_text); SELECT pgcipher.encrypt_column('tls_t', 's', 'ktls', 'EQ')")
	mustExec(t, conn, "INSERT INTO tls_t VALUES (1, 'over TLS')")
	var got string
	if err := conn.QueryRow(ctx, "SELECT s FROM tls_t WHERE s = $1", "over TLS").Scan(&got); err != nil || got != "over TLS" {
		t.Fatalf("through TLS: %q, %v", got, err)
	}
	// direct SSL negotiation (PostgreSQL 17's sslnegotiation=direct): TLS
	// from the first byte, ALPN "postgresql"; a client without it could
	// not connect at all
	direct, err := pgx.Connect(ctx, conninfo+" sslnegotiation=direct")
	if err != nil {
		t.Fatalf("direct SSL negotiation with the proxy: %v", err)
	}
	defer direct.Close(ctx)
	if _, ok := direct.PgConn().Conn().(*tls.Conn); !ok {
		t.Fatalf("direct: the client's connection is %T, not TLS", direct.PgConn().Conn())
	}
	if err := direct.QueryRow(ctx, "SELECT s FROM tls_t WHERE s = $1", "over TLS").Scan(&got); err != nil || got != "over TLS" {
		t.Fatalf("through direct TLS: %q, %v", got, err)
	}
}

// TestUndecryptable: a value the DBA moved from one column to another of
// the same key and join group passes the server's binding check but not
// the proxy's label check: the client gets PC002, never the ciphertext,
// in the simple protocol and in a batch, and the connection goes on.
func TestUndecryptable(t *testing.T) {
	e := setup(t)
	// a proxy out of step with its client hangs: fail instead
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.startProxy(t, &syncBuffer{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	mustExec(t, conn, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, conn, `SELECT pgcipher.add_column_key('k1');
CREATE TABLE moved (id int PRIMARY KEY, a enc_int4, b enc_int4);
SELECT pgcipher.encrypt_column('moved', 'a', 'k1', 'EQ', 'g'), pgcipher.encrypt_column('moved', 'b', 'k1', 'EQ', 'g')`)
	mustExec(t, conn, "INSERT INTO moved VALUES (1, 10, 20), (2, 30, 40)")
	// the DBA, directly on the server
	cfg, _ := pgconn.ParseConfig(e.upstream)
	dba, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, e.db))
	if err != nil {
		t.Fatal(err)
	}
	defer dba.Close(ctx)
	if _, err := dba.Exec(ctx, "UPDATE moved SET b = a WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		_, state := result(ctx, conn, "SELECT id, b FROM moved ORDER BY id", mode)
		if state != "PC002" {
			t.Errorf("mode %v: moved value: %q, want PC002", mode, state)
		}
		// a batch whose first query fails: the connection stays in step
		b := &pgx.Batch{}
		b.Queue("SELECT b FROM moved WHERE id = 2")
		b.Queue("SELECT a FROM moved WHERE id = 1")
		br := conn.SendBatch(ctx, b)
		var x int32
		err1 := br.QueryRow().Scan(&x)
		br.Close()
		if sqlstate(err1) != "PC002" {
			t.Errorf("mode %v: batch: %v, want PC002", mode, err1)
		}
		var a int32
		if err := conn.QueryRow(ctx, "SELECT a FROM moved WHERE id = 1", mode).Scan(&a); err != nil || a != 10 {
			t.Errorf("mode %v: after the failure: %d, %v", mode, a, err)
		}
	}
}

// TestBindWithParameters: pgcipher.encrypt_column sent with parameters
// in the extended protocol, in autocommit (psycopg's server-side binding:
// SQLAlchemy's and Django's migrations), binds the column as the simple
// protocol does; before, the Parse that opened its batch counted as in
// one, and the binding was refused as if in a transaction block.
func TestBindWithParameters(t *testing.T) {
	_, conn, rec := withColumnKey(t, "kp")
	ctx := context.Background()
	mustExec(t, conn, "CREATE TABLE bound_by_params (id int, s enc_text, s2 enc_text, note text)")
	// pgx's default: prepared (Parse, Describe, Sync), then run (Bind,
	// Execute, Sync); psycopg's: Parse, Bind, Execute in one batch
	if _, err := conn.Exec(ctx, "SELECT pgcipher.encrypt_column($1, $2, $3, $4)", "bound_by_params", "s", "kp", "EQ"); err != nil {
		t.Fatalf("encrypt_column with parameters, prepared: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pgcipher.encrypt_column($1, $2, $3, $4)", pgx.QueryExecModeExec, "bound_by_params", "s2", "kp", "EQ"); err != nil {
		t.Fatalf("encrypt_column with parameters, in one batch: %v", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO bound_by_params VALUES ($1, $2, $3, $4)", 1, "PGCM-bound-by-params", "PGCM-bound-by-params", "PGCM-plain-control"); err != nil {
		t.Fatalf("insert into the column bound with parameters: %v", err)
	}
	var got string
	if err := conn.QueryRow(ctx, "SELECT s2 FROM bound_by_params WHERE s = $1 AND s2 = $2", "PGCM-bound-by-params", "PGCM-bound-by-params").Scan(&got); err != nil || got != "PGCM-bound-by-params" {
		t.Fatalf("read back: %q, %v", got, err)
	}
	if bytes.Contains(rec.Bytes(), []byte("PGCM-bound-by-params")) {
		t.Error("the value reached the server in plaintext")
	}
	if !bytes.Contains(rec.Bytes(), []byte("PGCM-plain-control")) {
		t.Error("control: the plaintext column's value is not in what the proxy sent")
	}
	// in a transaction block it stays refused: the proxy reads the
	// catalog on its own connection, which sees committed changes only
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pgcipher.encrypt_column($1, $2, $3, $4)", "bound_by_params", "id", "kp", "EQ"); sqlstate(err) != "PC001" {
		t.Errorf("encrypt_column in a transaction block: %v, want PC001", err)
	}
}

// TestRangeRecheck: ranges on ORD columns ordered by a 16-byte prefix
// (numeric's first 24 digits, text's first 16 bytes), with parameters
// (bounds encrypted at Bind) and literals, answered as on a plaintext twin,
// values that share the operand's prefix included; a NULL bound keeps no
// row.
func TestRangeRecheck(t *testing.T) {
	e, conn, rec := withColumnKey(t, "kr")
	ctx := context.Background()
	mustExec(t, conn, "CREATE TABLE rg (id int, n enc_numeric_ord, s enc_text_ord)")
	mustExec(t, conn, "SELECT pgcipher.encrypt_column('rg', 'n', 'kr', 'ORD')")
	mustExec(t, conn, "SELECT pgcipher.encrypt_column('rg', 's', 'kr', 'ORD')")
	// the twin directly on the server: only the encrypted table's
	// statements go through the proxy and its recorder
	direct := connect(t, e.upstream+" dbname="+e.db)
	mustExec(t, direct, `CREATE TABLE rg_plain (id int, n numeric, s text COLLATE "C")`)
	// 1.000…0001 to 1.000…0009 agree in their first 24 digits
	for i := 1; i <= 9; i++ {
		n := fmt.Sprintf("1.%s%d", strings.Repeat("0", 30), i)
		s := fmt.Sprintf("PGCM-range-prefix-%02d", i)
		for tbl, c := range map[string]*pgx.Conn{"rg": conn, "rg_plain": direct} {
			if _, err := c.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1, $2, $3)", i, n, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"SELECT id FROM %s WHERE n > $1 ORDER BY id", []any{"1." + strings.Repeat("0", 30) + "4"}},
		{"SELECT id FROM %s WHERE n <= $1 AND s > $2 ORDER BY id", []any{"1." + strings.Repeat("0", 30) + "7", "PGCM-range-prefix-02"}},
		{"SELECT id FROM %s WHERE n BETWEEN $1 AND $2 ORDER BY id", []any{"1." + strings.Repeat("0", 30) + "3", "1." + strings.Repeat("0", 30) + "5"}},
		{"SELECT id FROM %s WHERE s < 'PGCM-range-prefix-05' ORDER BY id DESC LIMIT 2", nil},
		{"SELECT id FROM %s WHERE $1 < s ORDER BY id LIMIT $2", []any{"PGCM-range-prefix-06", 2}},
		{"SELECT id FROM %s WHERE n > $1 ORDER BY id", []any{nil}},
	} {
		enc, plain := twinIDs(t, conn, direct, "rg", "rg_plain", q.sql, q.args...)
		if fmt.Sprint(enc) != fmt.Sprint(plain) {
			t.Errorf("%s %v: encrypted %v, plaintext %v", q.sql, q.args, enc, plain)
		}
	}
	if bytes.Contains(rec.Bytes(), []byte("PGCM-range-prefix")) {
		t.Error("a value of an encrypted column reached the server in plaintext")
	}
	// control: the same search of the plaintext twin through the proxy
	// leaves its values in what the proxy sent, where the scan finds them
	mustExec(t, conn, "SELECT 'PGCM-range-control', id FROM rg_plain WHERE s > 'PGCM-range-prefix-02'")
	if !bytes.Contains(rec.Bytes(), []byte("PGCM-range-control")) || !bytes.Contains(rec.Bytes(), []byte("PGCM-range-prefix")) {
		t.Error("control: a plaintext value is not in what the proxy sent")
	}
}

// twinIDs runs query (its %s the table) on the encrypted table through the
// proxy (conn) and on its plaintext twin directly: the ids each returns.
func twinIDs(t *testing.T, conn, direct *pgx.Conn, enc, plain, query string, args ...any) ([]int, []int) {
	t.Helper()
	var got [2][]int
	for k, c := range []*pgx.Conn{conn, direct} {
		tbl := []string{enc, plain}[k]
		rows, err := c.Query(context.Background(), fmt.Sprintf(query, tbl), args...)
		if err != nil {
			t.Fatalf("%s on %s: %v", query, tbl, err)
		}
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got[k] = append(got[k], id)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s on %s: %v", query, tbl, err)
		}
	}
	return got[0], got[1]
}

// withColumnKey: a test database behind a proxy recording what it sends,
// a connection through it (closed with the test), pgcipher_columns and a
// column key of the given name.
func withColumnKey(t *testing.T, key string) (*env, *pgx.Conn, *syncBuffer) {
	t.Helper()
	e := setup(t)
	rec := &syncBuffer{}
	conn := connect(t, e.startProxy(t, rec))
	mustExec(t, conn, "CREATE EXTENSION IF NOT EXISTS pgcipher_columns")
	mustExec(t, conn, "SELECT pgcipher.add_column_key('"+key+"')")
	return e, conn, rec
}

// TestCaseInsensitiveMatch: searches of a MATCH column bound
// case-insensitive with parameters (patterns encrypted at Bind) as ORMs
// write them — ILIKE, upper()/lower() of both sides of LIKE, Django's
// iexact (upper(c::text) = upper($1)), SQLAlchemy's '%' || $1 || '%' —
// answered as on a plaintext twin; an exact MATCH column refuses them,
// naming the binding that would serve them.
func TestCaseInsensitiveMatch(t *testing.T) {
	e, conn, rec := withColumnKey(t, "kc")
	ctx := context.Background()
	mustExec(t, conn, "CREATE TABLE ci (id int, s enc_text, x enc_text)")
	mustExec(t, conn, "SELECT pgcipher.encrypt_column('ci', 's', 'kc', 'MATCH', case_insensitive => true)")
	mustExec(t, conn, "SELECT pgcipher.encrypt_column('ci', 'x', 'kc', 'MATCH')")
	direct := connect(t, e.upstream+" dbname="+e.db)
	mustExec(t, direct, `CREATE TABLE ci_plain (id int, s text COLLATE "C", x text COLLATE "C")`)
	words := []string{"PGCI-Alpha_one", "pgci-ALPHA%two", "Pgci-beta", "PGCI-BETA", "pgci-gamma", "other"}
	for i, w := range words {
		for tbl, c := range map[string]*pgx.Conn{"ci": conn, "ci_plain": direct} {
			if _, err := c.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1, $2, $3)", i, w, w); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"SELECT id FROM %s WHERE s ILIKE $1 ORDER BY id", []any{"%alpha%"}},
		{"SELECT id FROM %s WHERE s NOT ILIKE $1 ORDER BY id", []any{"%BETA"}},
		{"SELECT id FROM %s WHERE upper(s::text) LIKE upper($1) ORDER BY id", []any{"%beta%"}},
		{"SELECT id FROM %s WHERE lower(s) LIKE lower($1) ESCAPE '!' ORDER BY id", []any{"%alpha!%%"}},
		{"SELECT id FROM %s WHERE upper(s::text) = upper($1) ORDER BY id", []any{"pgci-beta"}},
		{"SELECT id FROM %s WHERE upper(s) = upper($1) ORDER BY id", []any{"pgci-alpha%two"}},
		{"SELECT id FROM %s WHERE lower(s) <> lower($1) ORDER BY id", []any{"PGCI-BETA"}},
		{"SELECT id FROM %s WHERE s ILIKE '%%' || $1 || '%%' ORDER BY id LIMIT 2", []any{"PGCI"}},
		{"SELECT id FROM %s WHERE lower(s) LIKE $1 ORDER BY id", []any{"pgci-%a"}},
		{"SELECT id FROM %s WHERE s LIKE $1 ORDER BY id", []any{"%-beta"}},
	} {
		enc, plain := twinIDs(t, conn, direct, "ci", "ci_plain", q.sql, q.args...)
		if fmt.Sprint(enc) != fmt.Sprint(plain) || len(plain) == 0 {
			t.Errorf("%s %v: encrypted %v, plaintext %v", q.sql, q.args, enc, plain)
		}
	}
	for _, sql := range []string{
		"SELECT id FROM ci WHERE x ILIKE $1",
		"SELECT id FROM ci WHERE upper(x) = upper($1)",
	} {
		_, err := conn.Exec(ctx, sql, "%alpha%")
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "PC001" || !strings.Contains(pe.Hint, "case_insensitive => true") {
			t.Errorf("%s on an exact MATCH column: %v, want PC001 naming case_insensitive", sql, err)
		}
	}
	if bytes.Contains(bytes.ToLower(rec.Bytes()), []byte("pgci-")) || bytes.Contains(bytes.ToLower(rec.Bytes()), []byte("alpha")) {
		t.Error("a value or pattern of an encrypted column reached the server in plaintext")
	}
	// control: the same searches of the plaintext twin through the proxy
	// leave their patterns in what the proxy sent, where the scan finds them
	mustExec(t, conn, "SELECT 'PGCI-control', id FROM ci_plain WHERE s ILIKE '%alpha%' AND upper(s) <> upper('pgci-x')")
	if low := bytes.ToLower(rec.Bytes()); !bytes.Contains(rec.Bytes(), []byte("PGCI-control")) ||
		!bytes.Contains(low, []byte("pgci-")) || !bytes.Contains(low, []byte("alpha")) {
		t.Error("control: a plaintext pattern is not in what the proxy sent")
	}
}
