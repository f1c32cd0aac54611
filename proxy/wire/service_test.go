package wire_test

// The proxy as a service, against a real server: the metrics scraped over
// HTTP after real statements, a debug log that never holds a value written
// to an encrypted column, and a shutdown that lets transactions finish.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/metrics"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

// startService runs a proxy with the given logger and metrics and returns
// its connection string and the server.
func (e *env) startService(t *testing.T, log *slog.Logger, m *metrics.Metrics) (string, *wire.Server) {
	t.Helper()
	return e.serve(t, wire.Config{Log: log, Metrics: m})
}

// direct connects to the server itself, not through the proxy.
func (e *env) direct(t *testing.T) *pgx.Conn {
	cfg, _ := pgconn.ParseConfig(e.upstream)
	return connect(t, fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, e.db))
}

// rawExec is the extended protocol with the parameters' types left to
// the server (the proxy's: the encrypted types) and their values in text,
// as a driver sends what it does not type: the proxy reads each value at
// Bind.
const rawExec pgx.QueryExecMode = -1

// exec runs sql in mode, rawExec included.
func exec(ctx context.Context, conn *pgx.Conn, mode pgx.QueryExecMode, sql string, args ...any) error {
	if mode != rawExec {
		_, err := conn.Exec(ctx, sql, append([]any{mode}, args...)...)
		return err
	}
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(fmt.Sprint(a))
	}
	return conn.PgConn().ExecParams(ctx, sql, params, nil, nil, nil).Read().Err
}

// scrape reads every sample of a /metrics page: "name{labels}" → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

const serviceSchema = `SELECT pgcipher.add_column_key('k1');
CREATE TABLE svc (id int PRIMARY KEY, k enc_int4, t enc_text, note text);
SELECT pgcipher.encrypt_column('svc', 'k', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('svc', 't', 'k1', 'MATCH')`

// TestMetrics runs statements of every outcome through a proxy and
// checks what its /metrics page says after each: the statement's outcome
// and SQLSTATE, one latency sample, the errors the client got; then the
// connections and the bytes.
func TestMetrics(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := metrics.New()
	web := httptest.NewServer(m.Handler())
	defer web.Close()
	url := web.URL + "/metrics"
	conninfo, _ := e.startService(t, nil, m)
	conn := connect(t, conninfo)
	mustExec(t, conn, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, conn, serviceSchema)
	mustExec(t, conn, "INSERT INTO svc VALUES (1, 10, 'ten', 'a'), (2, 20, 'twenty', 'b')")

	simple, extended := pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement
	for _, tc := range []struct {
		name    string
		sql     string
		args    []any
		mode    pgx.QueryExecMode
		outcome metrics.Outcome
		code    string         // the refusal's SQLSTATE
		err     metrics.Source // who made the client's error ("": none)
		errCode string
	}{
		{"plain query", "SELECT 1", nil, simple, metrics.Passed, "", "", ""},
		{"plain, extended", "SELECT $1::int", []any{1}, extended, metrics.Passed, "", "", ""},
		{"encrypted literal", "SELECT id FROM svc WHERE k = 10", nil, simple, metrics.Rewritten, "", "", ""},
		{"encrypted parameter", "SELECT t FROM svc WHERE k = $1", []any{20}, extended, metrics.Rewritten, "", "", ""},
		{"insert", "INSERT INTO svc VALUES (3, 30, 'thirty', 'c')", nil, simple, metrics.Rewritten, "", "", ""},
		{"aggregate", "SELECT sum(k) FROM svc", nil, simple, metrics.Computed, "", "", ""},
		{"aggregate, extended", "SELECT sum(k) FROM svc WHERE id > $1", []any{0}, extended, metrics.Computed, "", "", ""},
		{"computed update", "UPDATE svc SET k = k + 1 WHERE id = 3", nil, simple, metrics.Computed, "", "", ""},
		{"computed update, extended", "UPDATE svc SET k = k + $1 WHERE id = 3", []any{1}, extended, metrics.Computed, "", "", ""},
		{"refused", "SELECT md5(t) FROM svc", nil, simple, metrics.Refused, "PC001", metrics.Proxy, "PC001"},
		{"refused at Parse", "SELECT md5(t) FROM svc WHERE id = $1", []any{1}, extended, metrics.Refused, "PC001", metrics.Proxy, "PC001"},
		{"refused value", "INSERT INTO svc VALUES (4, 'x', 'y', 'z')", nil, simple, metrics.Refused, "PC004", metrics.Proxy, "PC004"},
		{"refused at Bind", "SELECT id FROM svc WHERE k = $1", []any{"x"}, rawExec, metrics.Refused, "PC004", metrics.Proxy, "PC004"},
		{"syntax error", "SELECT id FROM svc WHERE", nil, simple, metrics.Refused, "42601", metrics.Proxy, "42601"},
		{"server's error", "INSERT INTO svc VALUES (1, 1, 'one', 'x')", nil, simple, metrics.Rewritten, "", metrics.Server, "23505"},
		{"server's error, plain", "SELECT 1/0", nil, simple, metrics.Passed, "", metrics.Server, "22012"},
		{"computation error", "UPDATE svc SET k = k * 1000000000 WHERE id = 2", nil, simple, metrics.Computed, "", metrics.Proxy, "22003"},
	} {
		before := scrape(t, url)
		err := exec(ctx, conn, tc.mode, tc.sql, tc.args...)
		if got := sqlstate(err); got != tc.errCode {
			t.Errorf("%s: %s: SQLSTATE %q, want %q", tc.name, tc.sql, got, tc.errCode)
			continue
		}
		after := scrape(t, url)
		delta := func(series string) float64 { return after[series] - before[series] }
		for _, o := range []metrics.Outcome{metrics.Passed, metrics.Rewritten, metrics.Computed, metrics.Refused} {
			want := 0.0
			if o == tc.outcome {
				want = 1
			}
			code := ""
			if o == metrics.Refused {
				code = tc.code
			}
			if d := delta(fmt.Sprintf(`pgcipher_proxy_statements_total{outcome="%s",sqlstate="%s"}`, o, code)); d != want {
				t.Errorf("%s: statements_total{outcome=%q,sqlstate=%q} went up by %v, want %v", tc.name, o, code, d, want)
			}
			if d := delta(fmt.Sprintf(`pgcipher_proxy_statement_duration_seconds_count{outcome="%s"}`, o)); d != want {
				t.Errorf("%s: duration samples of %q went up by %v, want %v", tc.name, o, d, want)
			}
		}
		if tc.err != "" {
			if d := delta(fmt.Sprintf(`pgcipher_proxy_errors_total{source="%s",sqlstate="%s"}`, tc.err, tc.errCode)); d != 1 {
				t.Errorf("%s: errors_total{source=%q,sqlstate=%q} went up by %v, want 1", tc.name, tc.err, tc.errCode, d)
			}
		}
	}

	// connections: one open now; a second one comes and goes
	before := scrape(t, url)
	if got := before["pgcipher_proxy_client_connections"]; got != 1 {
		t.Errorf("client_connections = %v with one client, want 1", got)
	}
	other := connect(t, conninfo)
	mustExec(t, other, "SELECT 1")
	other.Close(ctx)
	closed := `pgcipher_proxy_client_connections_total{outcome="client_closed"}`
	after := waitFor(t, url, closed, before[closed]+1)
	if got := after["pgcipher_proxy_client_connections"]; got != 1 {
		t.Errorf("client_connections = %v after the second client left, want 1", got)
	}
	// bytes: what the statements above moved, both ways on both sides
	for _, name := range []string{"client_received", "client_sent", "server_received", "server_sent"} {
		series := "pgcipher_proxy_" + name + "_bytes_total"
		if after[series] < 1000 || after[series] <= before[series] {
			t.Errorf("%s = %v (before the second client %v): not counting", series, after[series], before[series])
		}
	}
	// a client that cannot reach the server through the proxy
	bad, _ := e.startService(t, nil, m)
	badCfg, _ := pgconn.ParseConfig(bad)
	c, err := pgconn.Connect(ctx, fmt.Sprintf("host=127.0.0.1 port=%d user=no_such_role dbname=%s sslmode=disable", badCfg.Port, e.db))
	if err == nil {
		c.Close(ctx)
		t.Fatal("a role that does not exist logged in")
	}
	waitFor(t, url, `pgcipher_proxy_client_connections_total{outcome="auth_failed"}`, 1)
}

// waitFor scrapes url until series has value (connections end after
// their clients have gone), and fails after a few seconds.
func waitFor(t *testing.T, url, series string, value float64) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := scrape(t, url)
		if got[series] == value {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v, want %v", series, got[series], value)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLogsHoldNoPlaintext writes marker values into encrypted columns
// through a proxy that logs JSON at debug level — statements that
// succeed, that the server fails and that the proxy refuses, in both
// protocols, COPY included — and checks that no marker is in the log.
// The control: a marker in a plaintext column of the same statements is
// in the log (it prints the SQL it sends), so the scan can fail.
func TestLogsHoldNoPlaintext(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	var logBuf syncBuffer
	log := slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	conninfo, _ := e.startService(t, log, metrics.New())
	conn := connect(t, conninfo)
	mustExec(t, conn, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, conn, serviceSchema)

	simple, extended := pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement
	// each statement puts one secret marker where an encrypted value goes
	// (SECRET-n) and, where it can, a plaintext one (PLAIN-n) in the
	// column note
	for i, tc := range []struct {
		sql  string
		args []any
		mode pgx.QueryExecMode
		code string // the SQLSTATE it fails with
	}{
		{"INSERT INTO svc VALUES (1, 1, 'SECRET-1', 'PLAIN-1')", nil, simple, ""},
		{"INSERT INTO svc VALUES ($1, $2, $3, $4)", []any{2, 2, "SECRET-2", "PLAIN-2"}, extended, ""},
		{"SELECT id FROM svc WHERE t = 'SECRET-3' AND note <> 'PLAIN-3'", nil, simple, ""},
		{"SELECT id FROM svc WHERE t LIKE '%SECRET-4%' AND note <> 'PLAIN-4'", nil, simple, ""},
		{"SELECT id FROM svc WHERE t NOT LIKE 'SECRET-5%' AND note <> 'PLAIN-5'", nil, simple, ""},
		{"UPDATE svc SET t = 'SECRET-6', note = 'PLAIN-6' WHERE id = 1", nil, simple, ""},
		{"UPDATE svc SET t = t || 'SECRET-7', note = 'PLAIN-7' WHERE id = 1", nil, simple, ""},
		{"UPDATE svc SET t = upper($1), note = $2 WHERE id = 2", []any{"SECRET-8", "PLAIN-8"}, extended, ""},
		// the server fails them: a duplicate key (its detail shows the
		// ciphertext), a type error after the encrypted value
		{"INSERT INTO svc VALUES (1, 1, 'SECRET-9', 'PLAIN-9')", nil, simple, "23505"},
		{"INSERT INTO svc VALUES (10, 1, 'SECRET-10', 'PLAIN-10'::int)", nil, simple, "22P02"},
		{"INSERT INTO svc VALUES ($1, $2, $3, $4)", []any{1, 1, "SECRET-11", "PLAIN-11"}, extended, "23505"},
		// the proxy refuses them, the encrypted value in the text
		{"SELECT md5(t) FROM svc WHERE t = 'SECRET-12' AND note = 'PLAIN-12'", nil, simple, "PC001"},
		{"SELECT md5(t) FROM svc WHERE t = $1 AND note = $2", []any{"SECRET-13", "PLAIN-13"}, extended, "PC001"},
		{"INSERT INTO svc VALUES (14, 'SECRET-14', 'x', 'PLAIN-14')", nil, simple, "PC004"},
		{"INSERT INTO svc VALUES ($1, $2, $3, $4)", []any{15, "SECRET-15", "x", "PLAIN-15"}, rawExec, "PC004"},
		{"INSERT INTO svc VALUES (16, 16, 'SECRET-16', 'PLAIN-16'", nil, simple, "42601"},
		{"SELECT t FROM svc WHERE t ILIKE 'SECRET-17' AND note = 'PLAIN-17'", nil, simple, "PC001"},
		{"UPDATE svc SET k = k + 1, t = 'SECRET-18' || t, note = 'PLAIN-18' WHERE id = 1 RETURNING t", nil, simple, "PC001"},
	} {
		err := exec(ctx, conn, tc.mode, tc.sql, tc.args...)
		if got := sqlstate(err); got != tc.code {
			t.Errorf("statement %d: %s: SQLSTATE %q, want %q", i+1, tc.sql, got, tc.code)
		}
	}
	// COPY: a good row and a row that does not fit its column
	for i, data := range []string{"19\t19\tSECRET-19\tPLAIN-19\n", "20\tSECRET-20\tx\tPLAIN-20\n"} {
		_, err := conn.PgConn().CopyFrom(ctx, strings.NewReader(data), "COPY svc FROM STDIN")
		if want := []string{"", "PC004"}[i]; sqlstate(err) != want {
			t.Errorf("COPY %q: %v, want %q", data, err, want)
		}
	}
	// a computation that fails on a value read back
	if _, err := conn.Exec(ctx, "INSERT INTO svc VALUES (21, 2147483647, 'SECRET-21', 'PLAIN-21')", simple); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE svc SET k = k + 1 WHERE id = 21", simple); sqlstate(err) != "22003" {
		t.Errorf("overflow: %v, want 22003", err)
	}
	conn.Close(ctx)
	time.Sleep(100 * time.Millisecond) // the connection's last line

	out := logBuf.Bytes()
	lines := strings.Count(string(out), "\n")
	if lines < 20 {
		t.Fatalf("%d log lines at debug level, want one per statement at least:\n%s", lines, out)
	}
	if found := regexp.MustCompile(`SECRET-[0-9]+`).FindAllString(string(out), -1); len(found) > 0 {
		t.Errorf("the log holds values written to encrypted columns: %v\n%s", found, out)
	}
	// the control: the plaintext markers of statements that reached the
	// server are there (their SQL as sent); refused ones are not logged
	for _, n := range []int{1, 3, 4, 5, 6, 7, 9, 10, 21} {
		if !strings.Contains(string(out), fmt.Sprintf("PLAIN-%d'", n)) {
			t.Errorf("control: PLAIN-%d (a plaintext column's value in the SQL sent) is not in the log", n)
		}
	}
	for _, want := range []string{`"outcome":"refused"`, `"sqlstate":"PC001"`, `"sqlstate":"PC004"`, `"sqlstate":"23505"`,
		`"outcome":"computed"`, `"outcome":"rewritten"`, `"msg":"connection closed"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	// and the rows are there, decrypted, through the proxy
	check := connect(t, conninfo)
	var got string
	if err := check.QueryRow(ctx, "SELECT t FROM svc WHERE id = 19").Scan(&got); err != nil || got != "SECRET-19" {
		t.Errorf("the COPY row: %q, %v", got, err)
	}
}

// TestShutdown: Server.Shutdown closes an idle session at once, lets a
// transaction finish and closes its session when it ends, refuses new
// connections, closes a busy client's session between two statements
// (every statement it saw succeed is committed, none other), and at its
// timeout closes what is left, rolling back an open transaction.
func TestShutdown(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	m := metrics.New()
	web := httptest.NewServer(m.Handler())
	defer web.Close()
	var lb syncBuffer
	conninfo, srv := e.startService(t, slog.New(slog.NewTextHandler(&lb, &slog.HandlerOptions{Level: slog.LevelDebug})), m)
	defer func() {
		if t.Failed() {
			t.Log(string(lb.Bytes()))
		}
	}()
	setupConn := connect(t, conninfo)
	mustExec(t, setupConn, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, setupConn, serviceSchema)
	mustExec(t, setupConn, "CREATE TABLE busy (n int)")
	setupConn.Close(ctx)
	// its end is the proxy's to see, not the shutdown's
	waitFor(t, web.URL+"/metrics", `pgcipher_proxy_client_connections_total{outcome="client_closed"}`, 1)

	idle := connect(t, conninfo)
	mustExec(t, idle, "SELECT 1")
	inTx := connect(t, conninfo)
	mustExec(t, inTx, "BEGIN")
	mustExec(t, inTx, "INSERT INTO svc VALUES (1, 1, 'one', 'in a transaction')")
	// a busy client: autocommit inserts one after another
	busy := connect(t, conninfo)
	var wg sync.WaitGroup
	var busyOK int
	var busyErr error
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			if n == 20 {
				close(started)
			}
			if _, err := busy.Exec(ctx, "INSERT INTO busy VALUES ($1)", n); err != nil {
				busyErr = err
				return
			}
			busyOK++
		}
	}()
	<-started

	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	wg.Wait() // the busy client is closed between two statements
	if sqlstate(busyErr) != "57P01" && !pgconn.SafeToRetry(busyErr) && !isClosed(busyErr) {
		t.Errorf("the busy client got %v, want FATAL 57P01 or a closed connection", busyErr)
	}
	// the idle session is closed
	if _, err := idle.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("an idle session still runs statements during the shutdown")
	}
	// no new connection
	if c, err := pgx.Connect(ctx, conninfo); err == nil {
		c.Close(ctx)
		t.Error("a new connection during the shutdown")
	}
	// the transaction goes on and commits; then its session is closed
	mustExec(t, inTx, "INSERT INTO svc VALUES (2, 2, 'two', 'in a transaction')")
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a transaction was open", err)
	case <-time.After(200 * time.Millisecond):
	}
	mustExec(t, inTx, "COMMIT")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the last transaction ended")
	}
	if _, err := inTx.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("the session still runs statements after its transaction ended")
	}
	dba := e.direct(t)
	var n int
	if err := dba.QueryRow(ctx, "SELECT count(*) FROM svc WHERE note = 'in a transaction'").Scan(&n); err != nil || n != 2 {
		t.Errorf("the transaction that ran during the shutdown: %d rows (%v), want 2", n, err)
	}
	if err := dba.QueryRow(ctx, "SELECT count(*) FROM busy").Scan(&n); err != nil || n != busyOK {
		t.Errorf("the busy client saw %d inserts succeed, the table has %d (%v)", busyOK, n, err)
	}
	if got := scrape(t, web.URL+"/metrics")[`pgcipher_proxy_client_connections_total{outcome="shutdown"}`]; got != 3 {
		t.Errorf("client_connections_total{outcome=shutdown} = %v, want 3", got)
	}

	// the timeout: an open transaction is closed, and rolled back
	conninfo2, srv2 := e.startService(t, nil, nil)
	stuck := connect(t, conninfo2)
	mustExec(t, stuck, "BEGIN")
	mustExec(t, stuck, "INSERT INTO svc VALUES (3, 3, 'three', 'never committed')")
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := srv2.Shutdown(tctx)
	if err == nil || !strings.Contains(err.Error(), "1 connections were closed") {
		t.Errorf("Shutdown at its timeout: %v, want 1 connection closed", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v with a 300ms timeout", d)
	}
	_, err = stuck.Exec(ctx, "COMMIT")
	if err == nil {
		t.Error("COMMIT after the shutdown timeout succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		// the server ends the backend once it sees the connection close
		if err := dba.QueryRow(ctx, "SELECT count(*) FROM svc WHERE note = 'never committed'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("the open transaction closed at the timeout left %d rows (%v)", n, err)
		}
		var backends int
		if err := dba.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'").Scan(&backends); err != nil {
			t.Fatal(err)
		}
		if backends == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server still has the closed session's transaction open")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(fmt.Sprint(err), "conn closed")
}
