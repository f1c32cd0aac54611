package wire_test

// Tenant keys end to end (design 13.13): a column bound tenant-keyed
// through the proxy, the session's tenant (SET, SET LOCAL, RESET, a
// rollback, a prepared statement bound under another tenant), the
// refusals (PC007), one of three tenants shredded while the others keep
// working, and what the shredded tenant's values are afterwards (PC003).

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/shred"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

// tenantEnv: a test database behind a proxy whose keys hold a tenant
// keyring (a file of the test's), and the table acct: each row's secret
// (EQ), amount (ORD) and note (MATCH) under the session's tenant.
type tenantEnv struct {
	*env
	srv      *wire.Server
	conninfo string
	keyring  shred.Keyring
	rec      *syncBuffer // every byte the proxy sent to the server
}

// noPlaintext: no value of an encrypted column (marker) reached the
// server, and the control (a plaintext column's value) did.
func (te *tenantEnv) noPlaintext(t *testing.T, marker, control string) {
	t.Helper()
	sent := te.rec.Bytes()
	if bytes.Contains(sent, []byte(marker)) {
		t.Errorf("%q, a value of an encrypted column, reached the server", marker)
	}
	if !bytes.Contains(sent, []byte(control)) {
		t.Errorf("the control %q is not in what the proxy sent: the scan sees nothing", control)
	}
}

func setupTenants(t *testing.T, tenants ...string) (*tenantEnv, *pgx.Conn) {
	t.Helper()
	e := setup(t)
	path := filepath.Join(t.TempDir(), "keyring")
	r, err := colcrypt.NewKeyring(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kr := shred.Keyring{Path: path, CMK: e.cmk, CMKName: "main"}
	if err := r.Write(path, e.cmk, "main", rand.Reader); err != nil {
		t.Fatal(err)
	}
	if err := e.keys.LoadTenantKeyring(path, 8); err != nil {
		t.Fatal(err)
	}
	rec := &syncBuffer{}
	conninfo, srv := e.serve(t, wire.Config{Record: rec})
	conn := connect(t, conninfo)
	for _, q := range []string{
		"CREATE EXTENSION IF NOT EXISTS pgcipher_columns",
		"SELECT pgcipher.add_column_key('kt')",
		"CREATE TABLE acct (id int, tenant text, secret enc_text, amount enc_int8_ord, note enc_text)",
		"SELECT pgcipher.encrypt_column('acct', 'secret', 'kt', 'EQ', tenant_by => 'session')",
		"SELECT pgcipher.encrypt_column('acct', 'amount', 'kt', 'ORD', tenant_by => 'session')",
		"SELECT pgcipher.encrypt_column('acct', 'note', 'kt', 'MATCH', tenant_by => 'session')",
	} {
		mustExec(t, conn, q)
	}
	for _, tn := range tenants {
		mustExec(t, conn, fmt.Sprintf("SELECT pgcipher.add_tenant_key('%s')", tn))
	}
	return &tenantEnv{env: e, srv: srv, conninfo: conninfo, keyring: kr, rec: rec}, conn
}

// fill: each tenant's three rows, with literals and with parameters.
func fillTenants(t *testing.T, conn *pgx.Conn, tenants ...string) {
	t.Helper()
	ctx := context.Background()
	for i, tn := range tenants {
		mustExec(t, conn, fmt.Sprintf("SET pgcipher.tenant = '%s'", tn))
		mustExec(t, conn, fmt.Sprintf("INSERT INTO acct VALUES (%d, '%s', 'secret-%s', %d, 'note of %s')", 10*i+1, tn, tn, 100*i+1, tn))
		for k := 2; k <= 3; k++ {
			if _, err := conn.Exec(ctx, "INSERT INTO acct VALUES ($1, $2, $3, $4, $5)", 10*i+k, tn,
				fmt.Sprintf("secret-%s", tn), 100*i+k, fmt.Sprintf("note %d of %s", k, tn)); err != nil {
				t.Fatalf("%s: %v", tn, err)
			}
		}
	}
}

// ids runs a query and returns its first column's ints, in order.
func ids(t *testing.T, conn *pgx.Conn, sql string, args ...any) ([]int, error) {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
	if err != nil {
		return nil, err
	}
	var out []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func wantIDs(t *testing.T, conn *pgx.Conn, want []int, sql string, args ...any) {
	t.Helper()
	got, err := ids(t, conn, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", sql, got, want)
	}
}

func wantCode(t *testing.T, err error, code, contains string) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, contains) {
		t.Errorf("want %s (%q), got %v", code, contains, err)
	}
}

func TestTenants(t *testing.T) {
	te, conn := setupTenants(t, "t1", "t2", "t3")
	ctx := context.Background()
	fillTenants(t, conn, "t1", "t2", "t3")

	// within the session's tenant: equality, order, substring search
	mustExec(t, conn, "SET pgcipher.tenant = 't2'")
	wantIDs(t, conn, []int{11, 12, 13}, "SELECT id FROM acct WHERE secret = 'secret-t2' ORDER BY id")
	wantIDs(t, conn, []int{11, 12, 13}, "SELECT id FROM acct WHERE secret = $1 ORDER BY id", "secret-t2")
	wantIDs(t, conn, nil, "SELECT id FROM acct WHERE secret = 'secret-t1'") // t1's value under t2's key: no row
	wantIDs(t, conn, []int{12, 13}, "SELECT id FROM acct WHERE amount >= $1 ORDER BY amount", 102)
	wantIDs(t, conn, []int{11, 12, 13}, "SELECT id FROM acct WHERE note LIKE 'note %' ORDER BY id")
	// reading decrypts every tenant's values, each under the key it names
	var all []string
	rows, err := conn.Query(ctx, "SELECT secret FROM acct ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		all = append(all, s)
	}
	if rows.Err() != nil || len(all) != 9 || all[0] != "secret-t1" || all[8] != "secret-t3" {
		t.Fatalf("all secrets: %v %v", all, rows.Err())
	}

	// SET LOCAL inside a block, then the session's again
	tx, _ := conn.Begin(ctx)
	tx.Exec(ctx, "SET LOCAL pgcipher.tenant = 't3'")
	wantIDs(t, conn, []int{21, 22, 23}, "SELECT id FROM acct WHERE secret = 'secret-t3' ORDER BY id")
	tx.Commit(ctx)
	wantIDs(t, conn, []int{11, 12, 13}, "SELECT id FROM acct WHERE secret = 'secret-t2' ORDER BY id")

	// a prepared INSERT bound under another tenant encrypts for that one
	mustExec(t, conn, "SET pgcipher.tenant = 't1'")
	if _, err := conn.Prepare(ctx, "ins", "INSERT INTO acct VALUES ($1, $2, $3, $4, $5)"); err != nil {
		t.Fatal(err)
	}
	mustExec(t, conn, "SET pgcipher.tenant = 't3'")
	if _, err := conn.Exec(ctx, "ins", 24, "t3", "secret-t3", 204, "note 4 of t3"); err != nil {
		t.Fatal(err)
	}
	wantIDs(t, conn, []int{21, 22, 23, 24}, "SELECT id FROM acct WHERE secret = 'secret-t3' ORDER BY id")

	// refusals: no tenant, an unknown one, one the proxy cannot follow
	mustExec(t, conn, "RESET pgcipher.tenant")
	_, err = conn.Exec(ctx, "INSERT INTO acct VALUES (99, 'x', 'secret-x', 1, 'n')")
	wantCode(t, err, "PC007", "the session has no tenant")
	_, err = ids(t, conn, "SELECT id FROM acct WHERE secret = $1", "secret-t1")
	wantCode(t, err, "PC007", "the session has no tenant")
	mustExec(t, conn, "SET pgcipher.tenant = 'nobody'")
	_, err = conn.Exec(ctx, "INSERT INTO acct VALUES (99, 'x', 'secret-x', 1, 'n')")
	wantCode(t, err, "PC007", `tenant "nobody" has no key`)
	mustExec(t, conn, "SET pgcipher.tenant = 't1'")
	tx, _ = conn.Begin(ctx)
	tx.Exec(ctx, "SET pgcipher.tenant = 't2'")
	tx.Rollback(ctx)
	_, err = conn.Exec(ctx, "INSERT INTO acct VALUES (99, 'x', 'secret-x', 1, 'n')")
	wantCode(t, err, "PC007", "does not follow")
	mustExec(t, conn, "SELECT set_config('pgcipher.tenant', 't1', false)")
	wantIDs(t, conn, []int{1, 2, 3}, "SELECT id FROM acct WHERE secret = 'secret-t1' ORDER BY id")
	_, err = conn.Exec(ctx, "SELECT pgcipher.add_tenant_key('t1')")
	wantCode(t, err, "42710", `tenant "t1" has a key already`) // the server's check

	// what would reach other tenants' rows, or run under another tenant
	// than planned, is refused
	mustExec(t, conn, "SET pgcipher.tenant = 't1'")
	for _, q := range []string{
		"SELECT id FROM acct WHERE secret <> 'secret-t1'",
		"SELECT id FROM acct WHERE NOT (amount > 2)",
		"SELECT id FROM acct WHERE amount NOT BETWEEN 1 AND 2",
		"SELECT id FROM acct WHERE note NOT LIKE 'note%'",
		"SELECT id FROM acct WHERE secret IS DISTINCT FROM 'x'",
		"DELETE FROM acct WHERE secret NOT IN ('secret-t1')",
	} {
		_, err := ids(t, conn, q)
		wantCode(t, err, "PC007", "would be true of every other tenant's values")
	}
	_, err = conn.Exec(ctx, "SET pgcipher.tenant = 't3'; INSERT INTO acct VALUES (98, 't3', 'secret-t3', 1, 'n')", pgx.QueryExecModeSimpleProtocol)
	wantCode(t, err, "PC007", "a query that changes pgcipher.tenant cannot also use")
	// a computed UPDATE writes under the session's tenant: its own rows only
	if _, err := conn.Exec(ctx, "UPDATE acct SET amount = amount + 1000 WHERE tenant = 't1'"); err != nil {
		t.Fatalf("a computed UPDATE of the session's rows: %v", err)
	}
	_, err = conn.Exec(ctx, "UPDATE acct SET amount = amount + 1000 WHERE tenant = 't3'")
	wantCode(t, err, "PC007", "updates a row of another tenant")
	wantIDs(t, conn, []int{1, 2, 3}, "SELECT id FROM acct WHERE amount > 1000 ORDER BY id")
	// COPY TO needs no tenant: each value under the key it names
	mustExec(t, conn, "RESET pgcipher.tenant")
	var copied bytes.Buffer
	if _, err := conn.PgConn().CopyTo(ctx, &copied, "COPY acct (id, secret) TO STDOUT"); err != nil {
		t.Fatalf("COPY TO without a tenant: %v", err)
	}
	if !strings.Contains(copied.String(), "1\tsecret-t1") || !strings.Contains(copied.String(), "21\tsecret-t3") {
		t.Errorf("COPY TO: %q", copied.String())
	}
	mustExec(t, conn, "SET pgcipher.tenant = 't1'")

	// shredding t2, on a connection of its own to the server
	direct, err := pgconn.Connect(ctx, te.upstream+" dbname="+te.db)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	start := time.Now()
	res, err := shred.Tenant(ctx, direct, te.keyring, "t2")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shredded t2 in %v: %+v", time.Since(start), res)
	if res.Rewrapped != 2 || res.Epoch != 2 || res.KeyID == 0 {
		t.Errorf("shred result %+v", res)
	}
	// again: nothing left to do, the same answer
	if res2, err := shred.Tenant(ctx, direct, te.keyring, "t2"); err != nil || res2.KeyID != res.KeyID || res2.Rewrapped != 0 {
		t.Errorf("shredding again: %+v %v", res2, err)
	}
	if _, err := shred.Tenant(ctx, direct, te.keyring, "nobody"); !errors.Is(err, shred.ErrNoTenant) {
		t.Errorf("shredding a tenant without a key: %v", err)
	}
	// what a SIGHUP does: the keyring and the catalog read again
	if err := te.keys.LoadTenantKeyring(te.keyring.Path, 8); err != nil {
		t.Fatal(err)
	}
	te.srv.Reload()

	conn2 := connect(t, te.conninfo)
	mustExec(t, conn2, "SET pgcipher.tenant = 't1'")
	wantIDs(t, conn2, []int{1, 2, 3}, "SELECT id FROM acct WHERE secret = 'secret-t1' ORDER BY id")
	mustExec(t, conn2, "SET pgcipher.tenant = 't3'")
	wantIDs(t, conn2, []int{21, 22, 23, 24}, "SELECT id FROM acct WHERE amount > 200 ORDER BY id")
	_, err = ids(t, conn2, "SELECT id FROM acct WHERE tenant = 't2'") // plaintext columns only: fine
	if err != nil {
		t.Errorf("plaintext columns of t2's rows: %v", err)
	}
	var s string
	err = conn2.QueryRow(ctx, "SELECT secret FROM acct WHERE tenant = 't2' LIMIT 1").Scan(&s)
	wantCode(t, err, "PC003", `the key of tenant "t2" was destroyed`)
	mustExec(t, conn2, "SET pgcipher.tenant = 't2'")
	_, err = conn2.Exec(ctx, "INSERT INTO acct VALUES (15, 't2', 'secret-t2', 1, 'n')")
	wantCode(t, err, "PC003", `the key of tenant "t2" was destroyed`)
	// the other tenants' values all decrypt
	mustExec(t, conn2, "SET pgcipher.tenant = 't1'")
	var n int
	if err := conn2.QueryRow(ctx, "SELECT count(secret) FROM acct WHERE tenant <> 't2'").Scan(&n); err != nil || n != 7 {
		t.Errorf("the other tenants' rows: %d %v", n, err)
	}
	te.noPlaintext(t, "secret-t", "'t2'")
	held, hits, misses := te.keys.TenantCacheStats()
	t.Logf("tenant column cache: %d held, %d hits, %d misses", held, hits, misses)
	if held > 8 {
		t.Errorf("the tenant column cache holds %d, more than its size 8", held)
	}
}

// TestRowTenants: a column bound tenant_by a column of its table takes
// each INSERTed row's tenant from that column, a literal or a parameter
// (text or binary); comparisons elsewhere use the session's tenant, and
// a write that gives no row's tenant is refused.
func TestRowTenants(t *testing.T) {
	te, conn := setupTenants(t, "acme", "globex")
	ctx := context.Background()
	for _, q := range []string{
		"CREATE TABLE orders (id int, org text NOT NULL, card enc_text, total enc_int8_ord)",
		"SELECT pgcipher.encrypt_column('orders', 'card', 'kt', 'EQ', tenant_by => 'org')",
		"SELECT pgcipher.encrypt_column('orders', 'total', 'kt', 'ORD', tenant_by => 'org')",
	} {
		mustExec(t, conn, q)
	}
	// no session tenant at all: the rows say theirs
	mustExec(t, conn, "INSERT INTO orders VALUES (1, 'acme', 'card-a1', 10), (2, 'globex', 'card-g1', 20)")
	if _, err := conn.Exec(ctx, "INSERT INTO orders (org, id, card, total) VALUES ($1, $2, $3, $4)", "globex", 3, "card-g2", 30); err != nil {
		t.Fatal(err)
	}
	// binary parameters (pgx sends int8 and text binary in this mode)
	if _, err := conn.Exec(ctx, "INSERT INTO orders VALUES ($1, $2, $3, $4)", pgx.QueryExecModeExec, 4, "acme", "card-a2", 40); err != nil {
		t.Fatal(err)
	}
	direct, err := pgx.Connect(ctx, te.upstream+" dbname="+te.db)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	// each value is under its row's tenant's key
	rows, _ := direct.Query(ctx, "SELECT o.id, o.org, split_part(enc_describe(o.card), 'tenant-key=', 2) = split_part(enc_describe(o2.card), 'tenant-key=', 2) FROM orders o JOIN orders o2 ON o2.org = o.org AND o2.id <> o.id ORDER BY o.id")
	n := 0
	for rows.Next() {
		var id int
		var org string
		var same bool
		rows.Scan(&id, &org, &same)
		if !same {
			t.Errorf("row %d of %s: its card is not under its tenant's key", id, org)
		}
		n++
	}
	if rows.Err() != nil || n != 4 {
		t.Fatalf("rows checked: %d %v", n, rows.Err())
	}
	var keyA, keyG string
	direct.QueryRow(ctx, "SELECT split_part(enc_describe(card), 'tenant-key=', 2) FROM orders WHERE id = 1").Scan(&keyA)
	direct.QueryRow(ctx, "SELECT split_part(enc_describe(card), 'tenant-key=', 2) FROM orders WHERE id = 2").Scan(&keyG)
	if keyA == keyG || keyA == "" {
		t.Errorf("acme's and globex's cards under the same key: %q %q", keyA, keyG)
	}
	// comparisons take the session's tenant
	mustExec(t, conn, "SET pgcipher.tenant = 'globex'")
	wantIDs(t, conn, []int{2, 3}, "SELECT id FROM orders WHERE total >= $1 ORDER BY id", 0)
	wantIDs(t, conn, []int{3}, "SELECT id FROM orders WHERE card = 'card-g2'")
	// every row reads back
	var cards []string
	r, _ := conn.Query(ctx, "SELECT card FROM orders ORDER BY id")
	for r.Next() {
		var c string
		r.Scan(&c)
		cards = append(cards, c)
	}
	if strings.Join(cards, " ") != "card-a1 card-g1 card-g2 card-a2" {
		t.Errorf("cards: %v %v", cards, r.Err())
	}
	// refusals: no row's tenant, a parameter tenant with a literal value,
	// a tenant without a key, an UPDATE of the value
	_, err = conn.Exec(ctx, "INSERT INTO orders (id, card) VALUES (9, 'card-x')")
	wantCode(t, err, "PC007", "which this INSERT does not give")
	_, err = conn.Exec(ctx, "INSERT INTO orders VALUES (9, $1, 'card-x', 1)", "acme")
	wantCode(t, err, "PC007", "its row's tenant is a parameter")
	_, err = conn.Exec(ctx, "INSERT INTO orders VALUES (9, $1, $2, $3)", "nobody", "card-x", 1)
	wantCode(t, err, "PC007", `tenant "nobody" has no key`)
	_, err = conn.Exec(ctx, "UPDATE orders SET card = 'card-y' WHERE id = 1")
	wantCode(t, err, "PC007", "which the proxy takes from an INSERT's VALUES only")
	// one parameter for two rows of two tenants, a value copied from
	// another row, a tenant with a cast
	_, err = conn.Exec(ctx, "INSERT INTO orders VALUES (10, $1, $3, $4), (11, $2, $3, $5)", "acme", "globex", "card-z", 1, 2)
	wantCode(t, err, "PC001", "used for two encrypted columns or in two ways")
	_, err = conn.Exec(ctx, "INSERT INTO orders (id, org, card) SELECT 12, 'acme', card FROM orders WHERE id = 2")
	wantCode(t, err, "PC007", "a value copied from another row could be another tenant's")
	_, err = conn.Exec(ctx, "INSERT INTO orders VALUES (13, 'acme'::varchar(2), 'card-c', 1)")
	wantCode(t, err, "PC007", "neither a literal nor a parameter")
	te.noPlaintext(t, "card-", "globex")
}
