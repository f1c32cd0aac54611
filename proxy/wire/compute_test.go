package wire_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestComputedUpdates: UPDATE … SET k = k + 1 through the proxy is a
// read-modify-write under row locks: concurrent increments from several
// connections and both protocols add up exactly; a failure in the middle
// of a multi-row update leaves no row changed; a rolled-back transaction
// undoes it; an aborted transaction's update fails without hanging.
func TestComputedUpdates(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	conninfo := e.startProxy(t, &syncBuffer{})
	admin := connect(t, conninfo)
	mustExec(t, admin, `CREATE EXTENSION pgcipher_columns;
SELECT pgcipher.add_column_key('k1');
CREATE TABLE counters (id int PRIMARY KEY, k enc_int4, ko enc_int8_ord);
SELECT pgcipher.encrypt_column('counters', 'k', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('counters', 'ko', 'k1', 'ORD')`)
	mustExec(t, admin, "INSERT INTO counters VALUES (1, 0, 0), (2, 5, 1), (3, 2000000000, 2)")

	const clients, increments = 6, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, conninfo)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			mode := pgx.QueryExecModeCacheStatement
			if c%2 == 1 {
				mode = pgx.QueryExecModeSimpleProtocol
			}
			for i := 0; i < increments; i++ {
				tag, err := conn.Exec(ctx, "UPDATE counters SET k = k + $1, ko = ko + 2 WHERE id = $2", mode, 1, 1)
				if err == nil && tag.String() != "UPDATE 1" {
					err = fmt.Errorf("command tag %q, want UPDATE 1", tag)
				}
				if err != nil {
					errs <- fmt.Errorf("client %d, increment %d: %w", c, i, err)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var k int32
	var ko int64
	if err := admin.QueryRow(ctx, "SELECT k, ko FROM counters WHERE id = 1").Scan(&k, &ko); err != nil {
		t.Fatal(err)
	}
	if k != clients*increments || ko != 2*clients*increments {
		t.Fatalf("after %d×%d increments: k = %d, ko = %d; want %d, %d", clients, increments, k, ko, clients*increments, 2*clients*increments)
	}
	t.Logf("%d connections × %d increments, both protocols: k = %d, ko = %d", clients, increments, k, ko)

	// row 3 overflows int4: the statement fails and row 2 keeps its value
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheStatement} {
		_, err := admin.Exec(ctx, "UPDATE counters SET k = k * 2 WHERE id IN (2, 3)", mode)
		if sqlstate(err) != "22003" {
			t.Fatalf("%v: overflow gave %v, want SQLSTATE 22003", mode, err)
		}
		var k2 int32
		if err := admin.QueryRow(ctx, "SELECT k FROM counters WHERE id = 2").Scan(&k2); err != nil || k2 != 5 {
			t.Fatalf("%v: after a failed update row 2 has k = %d (%v), want 5", mode, k2, err)
		}
	}

	// in a transaction: rolled back, and after an error
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE counters SET k = k * 2 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	var inTx int32
	if err := tx.QueryRow(ctx, "SELECT k FROM counters WHERE id = 2").Scan(&inTx); err != nil || inTx != 10 {
		t.Fatalf("inside the transaction k = %d (%v), want 10", inTx, err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1/0"); err == nil {
		t.Fatal("1/0 succeeded")
	}
	_, err = tx.Exec(ctx, "UPDATE counters SET k = k + 1 WHERE id = 2", pgx.QueryExecModeSimpleProtocol)
	if sqlstate(err) != "25P02" {
		t.Fatalf("update in an aborted transaction: %v, want 25P02", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, "SELECT k FROM counters WHERE id = 2").Scan(&inTx); err != nil || inTx != 5 {
		t.Fatalf("after rollback k = %d (%v), want 5", inTx, err)
	}
	// no row: UPDATE 0; the connection goes on
	tag, err := admin.Exec(ctx, "UPDATE counters SET k = k + 1 WHERE id = 99")
	if err != nil || tag.String() != "UPDATE 0" {
		t.Fatalf("update of no row: %q, %v", tag, err)
	}
}

// TestComputedParams: parameters inside a select list the proxy computes
// (Django's annotate(F('balance') * 2 + 1) with server-side binding) are
// typed by their operands, told to the server, and read at Bind; the
// results equal the plaintext twin's.
func TestComputedParams(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	rec := &syncBuffer{}
	conninfo := e.startProxy(t, rec)
	c := connect(t, conninfo)
	mustExec(t, c, `CREATE EXTENSION pgcipher_columns;
SELECT pgcipher.add_column_key('k1');
CREATE TABLE acct (id int PRIMARY KEY, city enc_text, balance enc_numeric_ord);
SELECT pgcipher.encrypt_column('acct', 'city', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('acct', 'balance', 'k1', 'ORD');
CREATE TABLE acct_plain (id int PRIMARY KEY, city text, balance numeric)`)
	for _, tb := range []string{"acct", "acct_plain"} {
		mustExec(t, c, "INSERT INTO "+tb+" VALUES (1, 'Oslo', 10.5), (2, 'Oslo', 2), (3, 'Rome', NULL), (4, 'Rome', 7.25)")
	}
	for _, q := range []string{
		"SELECT id, balance * $1 + $2 FROM %s ORDER BY id",
		"SELECT city, sum(balance) * $1 FROM %s GROUP BY 1 ORDER BY 2",
		"SELECT id, coalesce(balance, $1) FROM %s WHERE id > $2 ORDER BY id",
	} {
		var args []any
		switch {
		case strings.Contains(q, "$2") && strings.Contains(q, "coalesce"):
			args = []any{"0", 1}
		case strings.Contains(q, "$2"):
			args = []any{2, "1"}
		default:
			args = []any{3}
		}
		var got [2]string
		for i, tb := range []string{"acct", "acct_plain"} {
			rows, err := c.Query(ctx, fmt.Sprintf(q, tb), args...)
			if err != nil {
				t.Fatalf("%s on %s: %v", q, tb, err)
			}
			for rows.Next() {
				vals, _ := rows.Values()
				got[i] += fmt.Sprintln(vals...)
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("%s on %s: %v", q, tb, err)
			}
		}
		if got[0] != got[1] {
			t.Errorf("%s:\nencrypted:\n%splaintext:\n%s", q, got[0], got[1])
		}
	}
	// a parameter only the proxy's computation reads is a value computed
	// with an encrypted column: it travels as NULL, never in plaintext;
	// on the plaintext twin it is sent (the control)
	for _, tc := range []struct{ table, marker string }{{"acct", "MARKER-cp-enc"}, {"acct_plain", "MARKER-cp-plain"}} {
		var n int
		if err := c.QueryRow(ctx, "SELECT count(coalesce(city, $1)) FROM "+tc.table, tc.marker).Scan(&n); err != nil || n != 4 {
			t.Fatalf("coalesce(city, $1) on %s: %d, %v", tc.table, n, err)
		}
	}
	if bytes.Contains(rec.Bytes(), []byte("MARKER-cp-enc")) {
		t.Error("a parameter of a computation over an encrypted column reached the server in plaintext")
	}
	if !bytes.Contains(rec.Bytes(), []byte("MARKER-cp-plain")) {
		t.Error("control: the plaintext twin's parameter did not reach the server")
	}
}

// TestLikeLimitParams: LIKE on a MATCH column with LIMIT and OFFSET given
// as parameters (SQLAlchemy binds them) is served: the proxy applies them
// to the rows its recheck keeps, as the plaintext twin's server does.
func TestLikeLimitParams(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	c := connect(t, e.startProxy(t, &syncBuffer{}))
	mustExec(t, c, `CREATE EXTENSION pgcipher_columns;
SELECT pgcipher.add_column_key('k1');
CREATE TABLE notes (id int PRIMARY KEY, body enc_text);
SELECT pgcipher.encrypt_column('notes', 'body', 'k1', 'MATCH');
CREATE TABLE notes_plain (id int PRIMARY KEY, body text)`)
	for _, tb := range []string{"notes", "notes_plain"} {
		for i := 1; i <= 30; i++ {
			mustExec(t, c, fmt.Sprintf("INSERT INTO %s VALUES (%d, 'note %d %s')", tb, i, i, []string{"red", "blue", "green"}[i%3]))
		}
	}
	for _, args := range [][]any{{"%re%", 4, 2}, {"%blue%", 100, 0}, {"%e%", 0, 5}, {"%green", nil, 3}} {
		var got [2][]int
		for i, tb := range []string{"notes", "notes_plain"} {
			rows, err := c.Query(ctx, "SELECT id FROM "+tb+" WHERE body LIKE $1 ORDER BY id LIMIT $2 OFFSET $3", args...)
			if err != nil {
				t.Fatalf("%v on %s: %v", args, tb, err)
			}
			for rows.Next() {
				var id int
				rows.Scan(&id)
				got[i] = append(got[i], id)
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("%v on %s: %v", args, tb, err)
			}
		}
		if fmt.Sprint(got[0]) != fmt.Sprint(got[1]) {
			t.Errorf("LIKE %v LIMIT/OFFSET: encrypted %v, plaintext %v", args, got[0], got[1])
		}
	}
}
