package wire_test

// Transaction mode (design 15.14) against the real test server: the
// corpus through pooled connections, many clients over few server
// connections without cross-talk, what transaction mode refuses, the
// proxy's own authentication, cancel, and failures of server connections
// and clients.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/wire"
)

// txPool is transaction mode with trust authentication and n server
// connections per pool.
func txPool(n int) wire.PoolConfig {
	c := wire.DefaultPoolConfig()
	c.Mode, c.AuthType, c.DefaultPoolSize, c.MaxClientConn = wire.TransactionMode, wire.AuthTrust, n, 5000
	c.QueryWaitTimeout = time.Minute
	return c
}

// TestCorpusPooled: the corpus through two proxies in transaction mode
// whose clients share one server connection each, in the simple protocol,
// with unnamed statements and with named prepared statements (pgx's
// default, prepared on whichever connection runs them).
func TestCorpusPooled(t *testing.T) {
	corpusRun(t, txPool(1), pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeDescribeExec, pgx.QueryExecModeCacheStatement)
}

// TestPoolManyClients: clients far more than server connections, each
// with its own setting, its own prepared statements and its own results,
// in and out of transaction blocks: none sees another's.
func TestPoolManyClients(t *testing.T) {
	e := setup(t)
	clients := 2000
	if testing.Short() {
		clients = 200
	}
	info, srv := e.serve(t, wire.Config{Pool: txPool(10)})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	gate := make(chan struct{}, 200) // connecting at once
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gate <- struct{}{}
			c, err := pgx.Connect(ctx, info)
			<-gate
			if err != nil {
				errs <- fmt.Errorf("client %d: connect: %w", i, err)
				return
			}
			defer c.Close(ctx)
			if err := oneClient(ctx, c, i); err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 10 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d clients failed", n, clients)
	}
	for _, p := range srv.Pools() {
		if p.ServersActive+p.ServersIdle > 10 {
			t.Errorf("pool %s: %d server connections, more than its size 10", p.Database, p.ServersActive+p.ServersIdle)
		}
	}
}

// oneClient checks one client's own state across its transactions.
func oneClient(ctx context.Context, c *pgx.Conn, i int) error {
	name := fmt.Sprintf("client-%d", i)
	if _, err := c.Exec(ctx, "SET application_name = '"+name+"'"); err != nil {
		return err
	}
	// a statement of this client's only: pgx prepares it, named
	sql := fmt.Sprintf("SELECT $1::int + %d, current_setting('application_name')", i)
	for round := range 3 {
		var sum int
		var app string
		if err := c.QueryRow(ctx, sql, round).Scan(&sum, &app); err != nil {
			return err
		}
		if sum != round+i || app != name {
			return fmt.Errorf("round %d: got %d, %q; want %d, %q", round, sum, app, round+i, name)
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = 12345"); err != nil {
			return err
		}
		var st string
		if err := tx.QueryRow(ctx, "SHOW statement_timeout").Scan(&st); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, sql, -i).Scan(&sum, &app); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		if st != "12345ms" || sum != 0 || app != name {
			return fmt.Errorf("in a transaction: %q, %d, %q", st, sum, app)
		}
	}
	var st string
	if err := c.QueryRow(ctx, "SHOW statement_timeout", pgx.QueryExecModeSimpleProtocol).Scan(&st); err != nil || st != "0" {
		return fmt.Errorf("SET LOCAL outlived its transaction: statement_timeout %q, %v", st, err)
	}
	return nil
}

// TestPoolSessionState: what would outlive a transaction on a shared
// connection is refused with the proxy's error and never sent; SET LOCAL,
// a temporary table dropped at commit and a session SET outside a block
// work.
func TestPoolSessionState(t *testing.T) {
	e := setup(t)
	rec := &syncBuffer{}
	info, _ := e.serve(t, wire.Config{Pool: txPool(1), Record: rec})
	ctx := context.Background()
	c := connect(t, info)
	for _, q := range []string{
		"LISTEN pool_chan",
		"PREPARE pool_p AS SELECT 1",
		"SELECT pg_advisory_lock(42)",
		"CREATE TEMP TABLE pool_t (x int)",
		"CREATE TEMPORARY TABLE pool_t AS SELECT 1 AS x",
		"CREATE TYPE pg_temp.pool_r AS RANGE (subtype = text)",
		"CREATE TYPE pg_temp.pool_e AS ENUM ('a')",
		"CREATE DOMAIN pg_temp.pool_d AS int",
		"CREATE FUNCTION pg_temp.pool_f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"SET work_mem = '7MB'; SELECT 1",
	} {
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeDescribeExec} {
			if mode != pgx.QueryExecModeSimpleProtocol && strings.Contains(q, ";") {
				continue
			}
			before := len(rec.Bytes())
			_, err := c.Exec(ctx, q, mode)
			if sqlstate(err) != "PC001" {
				t.Errorf("%s (%v): %v, want PC001", q, mode, err)
			}
			if sent := rec.Bytes()[before:]; strings.Contains(string(sent), q) {
				t.Errorf("%s: refused, but the server got it", q)
			}
		}
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "DECLARE pool_c CURSOR WITH HOLD FOR SELECT 1"); sqlstate(err) != "PC001" {
		t.Errorf("WITH HOLD cursor: %v, want PC001", err)
	}
	tx.Rollback(ctx)
	tx, _ = c.Begin(ctx)
	if _, err := tx.Exec(ctx, "SET work_mem = '7MB'"); sqlstate(err) != "PC001" {
		t.Errorf("session SET in a block: %v, want PC001", err)
	}
	tx.Rollback(ctx)
	tx, _ = c.Begin(ctx)
	for _, q := range []string{"SET LOCAL work_mem = '7MB'", "CREATE TEMP TABLE pool_ok (x int) ON COMMIT DROP",
		"INSERT INTO pool_ok VALUES (1)", "SELECT pg_advisory_xact_lock(42)"} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Error(err)
	}
	// a session SET outside a block is the client's on every connection;
	// another client on the same one does not see it
	mustExec(t, c, "SET work_mem = '7MB'")
	other := connect(t, info)
	var mine, theirs string
	if err := other.QueryRow(ctx, "SHOW work_mem").Scan(&theirs); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SHOW work_mem").Scan(&mine); err != nil {
		t.Fatal(err)
	}
	if mine != "7MB" || theirs == "7MB" {
		t.Errorf("work_mem: the client that set it sees %q, the other %q", mine, theirs)
	}
	mustExec(t, c, "RESET work_mem")
	if err := c.QueryRow(ctx, "SHOW work_mem").Scan(&mine); err != nil || mine != theirs {
		t.Errorf("after RESET: %q, %v; want %q", mine, err, theirs)
	}
	// DEALLOCATE of a statement the proxy named on the server
	if _, err := c.Prepare(ctx, "mine", "SELECT 41 + 1"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := c.QueryRow(ctx, "mine").Scan(&v); err != nil || v != 42 {
		t.Errorf("prepared: %d, %v", v, err)
	}
	// Close (pgx's Deallocate) forgets the client's name: it may be
	// prepared again
	if _, err := c.Prepare(ctx, "gone", "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Deallocate(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prepare(ctx, "gone", "SELECT 2"); err != nil {
		t.Errorf("prepared again after Close: %v", err)
	}
	mustExec(t, c, "DEALLOCATE mine")
	if _, err := c.Prepare(ctx, "mine", "SELECT 43"); err != nil {
		t.Errorf("prepared again after DEALLOCATE: %v", err)
	}
	// DISCARD ALL drops the connection's statements too: the client's
	// next statements are prepared again there
	if _, err := c.Prepare(ctx, "before", "SELECT 40 + $1::int"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, c, "DISCARD ALL")
	if _, err := c.Prepare(ctx, "after", "SELECT 40 + $1::int"); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "after", 2).Scan(&v); err != nil || v != 42 {
		t.Errorf("the same statement prepared after DISCARD ALL: %d, %v", v, err)
	}
}

// TestPoolFailures: a backend killed in a client's transaction fails that
// client only; a client gone in a transaction leaves no transaction on
// the connection the next client gets; connections the server ended are
// replaced; a cancel reaches the backend running the client's statement;
// no server connection within query-wait-timeout ends the client with an
// error.
func TestPoolFailures(t *testing.T) {
	e := setup(t)
	cfg := txPool(2)
	info, srv := e.serve(t, wire.Config{Pool: cfg})
	ctx := context.Background()
	admin := connect(t, e.upstream+" dbname="+e.db)
	mustExec(t, admin, "CREATE TABLE pool_f (x int)")

	// killed backend
	a, b := connect(t, info), connect(t, info)
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("a query on a killed backend succeeded")
	}
	var one int
	if err := b.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("the other client after the kill: %v", err)
	}

	// client gone mid-transaction: its insert is rolled back, and the
	// next client's connection is outside any transaction
	gone, err := pgx.Connect(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	gtx, _ := gone.Begin(ctx)
	if _, err := gtx.Exec(ctx, "INSERT INTO pool_f VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	gone.PgConn().Conn().Close() // no Terminate, no ROLLBACK
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND datname = current_database()").Scan(&n)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a transaction of a client gone stayed open")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 4 {
		c := connect(t, info)
		var inTx bool
		var rows int
		if err := c.QueryRow(ctx, "SELECT now() <> statement_timestamp(), (SELECT count(*) FROM pool_f)", pgx.QueryExecModeSimpleProtocol).Scan(&inTx, &rows); err != nil {
			t.Fatal(err)
		}
		if inTx || rows != 0 {
			t.Errorf("a later client: in a transaction %v, rows of the client gone %d", inTx, rows)
		}
	}

	// the server ends every idle pooled connection: the next clients get
	// new ones
	mustExec(t, admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = ''")
	time.Sleep(200 * time.Millisecond)
	for range 3 {
		c := connect(t, info)
		if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Errorf("after the server closed the pooled connections: %v", err)
		}
	}

	// cancel
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.Exec(cctx, "SELECT pg_sleep(20)")
	if err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("pg_sleep(20) was not cancelled: %v after %v", err, time.Since(start))
	}

	// both connections held in transactions: a third client waits
	// query-wait-timeout, then is told why
	short := cfg
	short.QueryWaitTimeout = 300 * time.Millisecond
	srv.SetPool(short)
	h1, h2, third := connect(t, info), connect(t, info), connect(t, info)
	t1, _ := h1.Begin(ctx)
	t2, _ := h2.Begin(ctx)
	t1.Exec(ctx, "SELECT 1")
	t2.Exec(ctx, "SELECT 1")
	_, err = third.Exec(ctx, "SELECT 1")
	if sqlstate(err) != "08P01" || !strings.Contains(err.Error(), "query-wait-timeout") {
		t.Errorf("waiting past query-wait-timeout: %v", err)
	}
	t1.Rollback(ctx)
	t2.Rollback(ctx)
}

// TestPoolAuth: the proxy logs clients in itself with SCRAM-SHA-256, from
// the server's own verifier or a password in the auth file (which it also
// uses to log in to the server); a wrong password or an unknown user is
// refused as the server would.
func TestPoolAuth(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	admin := connect(t, e.upstream)
	mustExec(t, admin, "SET password_encryption = 'scram-sha-256'; DROP ROLE IF EXISTS pgc_pool_a; CREATE ROLE pgc_pool_a LOGIN SUPERUSER PASSWORD 'secret-a'")
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP ROLE IF EXISTS pgc_pool_a") })
	var verifier string
	if err := admin.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = 'pgc_pool_a'").Scan(&verifier); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "userlist.txt")
	content := fmt.Sprintf("; users\n\"pgc_pool_a\" \"%s\"\n\"pgc_pool_b\" \"pass\"\"word\"\n", verifier)
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := wire.LoadAuthFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if users["pgc_pool_b"] != `pass"word` {
		t.Errorf("auth file: doubled quote read as %q", users["pgc_pool_b"])
	}
	cfg := txPool(2)
	cfg.AuthType = wire.AuthSCRAM
	info, _ := e.serve(t, wire.Config{Pool: cfg, AuthUsers: users})
	as := func(user, pw string) string {
		f := strings.Fields(info)
		for i, kv := range f {
			if strings.HasPrefix(kv, "user=") {
				f[i] = "user=" + user
			}
		}
		return strings.Join(f, " ") + " password=" + pw
	}
	checkLogins(t, as, "pgc_pool_a", "secret-a", "pgc_nobody", 1)
}

// checkLogins logs in n times as user with its password (as gives the
// connection string), checking current_user, then with a wrong password
// and as an unknown user: both refused with 28P01.
func checkLogins(t *testing.T, as func(user, pw string) string, user, pw, unknown string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		c, err := pgx.Connect(ctx, as(user, pw))
		if err != nil {
			t.Fatalf("login %d as %s: %v", i, user, err)
		}
		var who string
		if err := c.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != user {
			t.Errorf("current_user %q, %v", who, err)
		}
		c.Close(ctx)
	}
	for _, bad := range []struct{ user, pw string }{{user, "wrong"}, {unknown, "x"}} {
		_, err := pgx.Connect(ctx, as(bad.user, bad.pw))
		if sqlstate(err) != "28P01" {
			t.Errorf("%s with a wrong password: %v, want 28P01", bad.user, err)
		}
	}
}

// TestPoolAuthQuery: a user absent from the auth file is looked up with
// the auth query (a SECURITY DEFINER function, as PgBouncer's docs
// advise), logs in with SCRAM, and the proxy logs in to the server as
// that user, which pg_hba.conf holds to scram-sha-256, with the key the
// client's proof revealed: the proxy never had its password.
func TestPoolAuthQuery(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	admin := connect(t, e.upstream)
	mustExec(t, admin, `SET password_encryption = 'scram-sha-256';
		DROP ROLE IF EXISTS pgc_aq_user; DROP ROLE IF EXISTS pgc_aq_lookup;
		CREATE ROLE pgc_aq_user LOGIN PASSWORD 'secret-q';
		CREATE ROLE pgc_aq_lookup LOGIN PASSWORD 'look-pw'`)
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP ROLE IF EXISTS pgc_aq_user; DROP ROLE IF EXISTS pgc_aq_lookup")
	})
	dbAdmin := connect(t, e.upstream+" dbname="+e.db)
	mustExec(t, dbAdmin, `CREATE FUNCTION public.pgc_lookup(u text, OUT usename name, OUT passwd text) RETURNS record
		LANGUAGE sql SECURITY DEFINER AS $$ SELECT usename, passwd FROM pg_shadow WHERE usename = u $$;
		REVOKE ALL ON FUNCTION public.pgc_lookup(text) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION public.pgc_lookup(text) TO pgc_aq_lookup;
		GRANT ALL ON SCHEMA public TO pgc_aq_user`)
	// both roles must prove their password to the server
	var hba string
	if err := admin.QueryRow(ctx, "SHOW hba_file").Scan(&hba); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatalf("the test edits the server's pg_hba.conf: %v", err)
	}
	lines := "local all pgc_aq_user,pgc_aq_lookup scram-sha-256\nhost all pgc_aq_user,pgc_aq_lookup all scram-sha-256\n"
	if err := os.WriteFile(hba, append([]byte(lines), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, "SELECT pg_reload_conf()")
	t.Cleanup(func() {
		os.WriteFile(hba, old, 0o600)
		admin.Exec(context.Background(), "SELECT pg_reload_conf()")
	})
	pc, _ := pgconn.ParseConfig(e.upstream)
	direct := fmt.Sprintf("host=%s port=%d dbname=%s user=pgc_aq_user", pc.Host, pc.Port, e.db)
	if c, err := pgx.Connect(ctx, direct+" password=wrong"); err == nil {
		c.Close(ctx)
		t.Fatal("the server let pgc_aq_user in with a wrong password: pg_hba.conf not in force")
	}
	cfg := txPool(2)
	cfg.AuthType, cfg.AuthUser = wire.AuthSCRAM, "pgc_aq_lookup"
	cfg.AuthQuery = "SELECT usename, passwd FROM public.pgc_lookup($1)"
	// the catalog connection names no user: it logs in as the client,
	// with the client's key too (as demo step 4c'' runs it)
	addr, _ := wire.ServeTest(t, wire.Config{Pool: cfg, AuthUsers: map[string]string{"pgc_aq_lookup": "look-pw"},
		Upstream: fmt.Sprintf("host=%s port=%d", pc.Host, pc.Port), Catalog: fmt.Sprintf("host=%s port=%d", pc.Host, pc.Port),
		Keys: e.keys})
	_, port, _ := net.SplitHostPort(addr)
	as := func(user, pw string) string {
		return fmt.Sprintf("host=127.0.0.1 port=%s user=%s password=%s dbname=%s sslmode=disable", port, user, pw, e.db)
	}
	checkLogins(t, as, "pgc_aq_user", "secret-q", "pgc_aq_nobody", 3)
	// the auth user's own password wrong: the lookup fails, said so
	cfg.AuthUser = "pgc_aq_user"
	info2, _ := e.serve(t, wire.Config{Pool: cfg, AuthUsers: map[string]string{"pgc_aq_lookup": "look-pw"}})
	_, err = pgx.Connect(ctx, strings.Replace(info2, "user="+pc.User, "user=pgc_aq_lookup", 1)+" password=look-pw")
	if err != nil {
		t.Errorf("pgc_aq_lookup is in the auth file: %v", err)
	}
	_, err = pgx.Connect(ctx, strings.Replace(info2, "user="+pc.User, "user=pgc_aq_other", 1)+" password=x")
	if sqlstate(err) != "08004" || !strings.Contains(err.Error(), "cannot look up") {
		t.Errorf("auth query as a user without a password: %v, want 08004", err)
	}
}

// TestAuthFileErrors: what the auth file may not hold is refused with the
// line that holds it.
func TestAuthFileErrors(t *testing.T) {
	for _, c := range []struct{ content, want string }{
		{"pgc \"x\"\n", "line 1"},
		{"\"a\" \"x\"\n\"b\" \"md5" + strings.Repeat("0", 32) + "\"\n", "line 2: an md5 secret"},
		{"\"a\" \"SCRAM-SHA-256$4096:abc\"\n", "malformed SCRAM"},
		{"\"a\n", "unterminated"},
	} {
		f := filepath.Join(t.TempDir(), "u")
		os.WriteFile(f, []byte(c.content), 0o600)
		if _, err := wire.LoadAuthFile(f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.content, err, c.want)
		}
	}
}

// TestPoolStatementInvalidation: a statement that a change of its table
// made stale, which the client closes and prepares again (pgx after
// "cached plan must not change result type"), is prepared again on every
// pooled connection that had it, not only on the one the Close reached.
func TestPoolStatementInvalidation(t *testing.T) {
	e := setup(t)
	info, _ := e.serve(t, wire.Config{Pool: txPool(2)})
	ctx := context.Background()
	admin := connect(t, e.upstream+" dbname="+e.db)
	mustExec(t, admin, "CREATE TABLE inv (id int PRIMARY KEY, f1 int, f2 int); INSERT INTO inv VALUES (1, 10, 20)")
	c1, c2 := connect(t, info), connect(t, info)
	q := "SELECT * FROM inv WHERE id = $1"
	// c1's statement on both connections: c2 holds the idle list's top
	// one in a transaction while c1 runs on the other, then lets it go
	run := func() error {
		rows, err := c1.Query(ctx, q, 1)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
	other := func(f func() error) error {
		tx, err := c2.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
			return err
		}
		return f()
	}
	if err := other(run); err != nil {
		t.Fatal(err)
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin, "ALTER TABLE inv DROP COLUMN f1")
	run() // 0A000 at most, as on one connection; pgx closes the statement
	for i := range 4 {
		if err := run(); err != nil {
			t.Errorf("after the Close, on the connection that got it (%d): %v", i, err)
		}
		if err := other(run); err != nil {
			t.Errorf("after the Close, on the other connection (%d): %v", i, err)
		}
	}
}

// TestPoolParseWithoutConnection: a client that prepares synchronously
// (Parse and Sync, as pgbench -M prepared does for each of its clients in
// turn on one thread) gets its answer without a server connection when
// another client holds the only one in a transaction: the statement is
// known to parse, and it is prepared where it is bound.
func TestPoolParseWithoutConnection(t *testing.T) {
	e := setup(t)
	cfg := txPool(1)
	cfg.QueryWaitTimeout = 3 * time.Second
	info, _ := e.serve(t, wire.Config{Pool: cfg})
	ctx := context.Background()
	sql := "SELECT 40 + $1::int"
	first := connect(t, info)
	if _, err := first.Prepare(ctx, "s", sql); err != nil {
		t.Fatal(err)
	}
	holder := connect(t, info)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	c := connect(t, info)
	fe := c.PgConn().Frontend()
	fe.Send(&pgproto3.Parse{Name: "mine", Query: sql})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	c.PgConn().Conn().SetReadDeadline(time.Now().Add(2 * time.Second))
	for _, want := range []string{"*pgproto3.ParseComplete", "*pgproto3.ReadyForQuery"} {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("waiting for %s while the only connection is held: %v", want, err)
		}
		if got := fmt.Sprintf("%T", m); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	}
	c.PgConn().Conn().SetReadDeadline(time.Time{})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// bound later: prepared on the connection then
	fe.Send(&pgproto3.Bind{PreparedStatement: "mine", Parameters: [][]byte{[]byte("2")}})
	fe.Send(&pgproto3.Execute{})
	fe.Send(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	var got string
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := m.(*pgproto3.DataRow); ok {
			got = string(r.Values[0])
		}
		if er, ok := m.(*pgproto3.ErrorResponse); ok {
			t.Fatalf("bound: %s", er.Message)
		}
		if _, ok := m.(*pgproto3.ReadyForQuery); ok {
			break
		}
	}
	if got != "42" {
		t.Errorf("bound: %q, want 42", got)
	}
}
