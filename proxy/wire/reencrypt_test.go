package wire_test

// An ORD column moved from order format 1 to 2 through the proxy while
// writers insert and update it and readers run range queries on it: no
// write is lost, every value reads back, every range answer is the
// plaintext's, and afterwards the server holds format 2 alone.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/reencrypt"
)

// legacyColumn makes acct(id, k enc_int8_ord) with k bound at order
// format 1, as extension 0.1 bound ORD columns, behind a proxy of its own.
func legacyColumn(t *testing.T) (*env, string, *pgx.Conn) {
	e := setup(t)
	proxy := e.startProxy(t, &syncBuffer{})
	admin := connect(t, proxy)
	mustExec(t, admin, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, admin, `SELECT pgcipher.add_column_key('k1');
CREATE TABLE acct (id int PRIMARY KEY, k enc_int8_ord);
SELECT pgcipher.encrypt_column('acct', 'k', 'k1', 'ORD');
SELECT pgcipher.set_ore_format('acct', 'k', '1');
ALTER TABLE acct VALIDATE CONSTRAINT pgcipher_k`)
	return e, proxy, admin
}

func TestReencryptColumnOnline(t *testing.T) {
	e, proxy, admin := legacyColumn(t)
	ctx := context.Background()
	// the proxy read the catalog before set_ore_format: a new session
	// sees format 1 (the statement above reloaded it)
	const rowsN = 3000
	model := make([]atomic.Int64, 4*rowsN)
	ins := connect(t, proxy)
	for i := 1; i <= rowsN; i++ {
		v := int64(i * 7 % 1000)
		if _, err := ins.Exec(ctx, "INSERT INTO acct VALUES ($1, $2)", i, v); err != nil {
			t.Fatal(err)
		}
		model[i].Store(v + 1) // 0: no row
	}
	// statistics of format 1: the planner compares range operands with
	// their histogram, in every later state (design 13.5b)
	mustExec(t, admin, "CREATE INDEX ON acct (k); ANALYZE acct")
	direct, err := pgx.Connect(ctx, e.upstream+" dbname="+e.db)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	formats := func() map[int]int {
		out := map[int]int{}
		rows, _ := direct.Query(ctx, "SELECT enc_format(k), count(*) FROM acct GROUP BY 1")
		for rows.Next() {
			var f, n int
			if err := rows.Scan(&f, &n); err == nil {
				out[f] = n
			}
		}
		return out
	}
	if f := formats(); f[1] != rowsN {
		t.Fatalf("before: formats %v, want %d rows of format 1", f, rowsN)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes, reads, retried atomic.Int64
	errs := make(chan error, 16)
	retryable := func(err error) bool {
		var pe *pgconn.PgError
		// a statement planned a moment before a step: the CHECK names it
		if errors.As(err, &pe) && pe.Code == "23514" {
			retried.Add(1)
			return true
		}
		return false
	}
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, proxy)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			r := rand.New(rand.NewPCG(uint64(w), 1))
			next := rowsN + 1 + w*rowsN
			for {
				select {
				case <-stop:
					return
				default:
				}
				var id int
				v := r.Int64N(1000)
				var err error
				if r.IntN(2) == 0 { // update one of this writer's rows
					id = 1 + w + 3*r.IntN(rowsN/3)
					_, err = conn.Exec(ctx, "UPDATE acct SET k = $1 WHERE id = $2", v, id)
				} else {
					id = next
					_, err = conn.Exec(ctx, "INSERT INTO acct VALUES ($1, $2)", id, v)
				}
				if err != nil && retryable(err) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
				if id == next {
					next++
				}
				model[id].Store(v + 1)
				writes.Add(1)
			}
		}(w)
	}
	wg.Add(1)
	go func() { // ranges: every answer must be a count the model allows
		defer wg.Done()
		conn, err := pgx.Connect(ctx, proxy)
		if err != nil {
			errs <- err
			return
		}
		defer conn.Close(ctx)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM acct WHERE k BETWEEN $1 AND $2", 100, 199).Scan(&n); err != nil {
				if retryable(err) {
					continue
				}
				errs <- fmt.Errorf("reader: %w", err)
				return
			}
			reads.Add(1)
		}
	}()

	mover, err := pgconn.Connect(ctx, proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer mover.Close(ctx)
	time.Sleep(200 * time.Millisecond)
	res, err := reencrypt.Column(ctx, mover, "acct", "k", reencrypt.Options{Batch: 200, Log: t.Logf})
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if err != nil {
		t.Fatalf("reencrypt: %v", err)
	}
	t.Logf("moved %d rows from format %s; %d writes (%d retried), %d range reads meanwhile",
		res.Moved, res.From, writes.Load(), retried.Load(), reads.Load())
	if res.From != "1" || res.Moved < rowsN || writes.Load() == 0 || reads.Load() == 0 {
		t.Errorf("moved %d from %q with %d writes and %d reads", res.Moved, res.From, writes.Load(), reads.Load())
	}
	if f := formats(); len(f) != 1 || f[2] == 0 {
		t.Errorf("after: formats %v, want format 2 alone", f)
	}
	var state string
	if err := direct.QueryRow(ctx, "SELECT ore_format FROM pgcipher.encrypted_columns WHERE relid = 'acct'::regclass").Scan(&state); err != nil || state != "2" {
		t.Errorf("catalog: format %q, %v", state, err)
	}
	// every row reads back as the model says, and ranges are the model's
	check := connect(t, proxy)
	rows, err := check.Query(ctx, "SELECT id, k FROM acct")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var id int
		var k int64
		if err := rows.Scan(&id, &k); err != nil {
			t.Fatal(err)
		}
		if want := model[id].Load() - 1; want != k {
			t.Errorf("row %d: %d, want %d", id, k, want)
		}
		seen++
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	want := 0
	inRange := 0
	for i := range model {
		if v := model[i].Load(); v != 0 {
			want++
			if v-1 >= 100 && v-1 <= 199 {
				inRange++
			}
		}
	}
	if seen != want {
		t.Errorf("%d rows, want %d", seen, want)
	}
	mustExec(t, check, "SET enable_seqscan = off")
	var n int
	if err := check.QueryRow(ctx, "SELECT count(*) FROM acct WHERE k BETWEEN $1 AND $2", 100, 199).Scan(&n); err != nil || n != inRange {
		t.Errorf("range through the index: %d rows, %v; want %d", n, err, inRange)
	}
	// a second run has nothing to do
	if res, err := reencrypt.Column(ctx, mover, "acct", "k", reencrypt.Options{}); err != nil || res.Moved != 0 || res.From != "2" {
		t.Errorf("second run: %+v, %v", res, err)
	}
}

// A move killed at any of its steps is finished by running it again: the
// tool's connection is closed at each step in turn (what a kill -9 of the
// tool does to it), a rebuild's invalid leftover index is dropped, and the
// column ends at format 2 with every value and its index whole.
func TestReencryptResumes(t *testing.T) {
	e, proxy, admin := legacyColumn(t)
	ctx := context.Background()
	const n = 500
	ins := connect(t, proxy)
	for i := 1; i <= n; i++ {
		if _, err := ins.Exec(ctx, "INSERT INTO acct VALUES ($1, $2)", i, int64(i*3)); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, admin, "CREATE INDEX acct_k ON acct (k)")
	direct, err := pgx.Connect(ctx, e.upstream+" dbname="+e.db)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	// the steps, in the order a move meets them
	for _, at := range []string{"order format 1+2", "rows of format 1 rewritten", "order format 12",
		"indexes rebuilt", "order format 2+1", "rows of format 3 rewritten"} {
		conn, err := pgconn.Connect(ctx, proxy)
		if err != nil {
			t.Fatal(err)
		}
		_, err = reencrypt.Column(ctx, conn, "acct", "k", reencrypt.Options{Batch: 100,
			Log: func(format string, a ...any) {
				if strings.Contains(fmt.Sprintf(format, a...), at) {
					conn.Close(ctx)
				}
			}})
		if err == nil {
			t.Fatalf("killed at %q: the move ended", at)
		}
		t.Logf("killed at %q: %v", at, err)
		if at == "order format 12" {
			// a rebuild killed half-way: its copy of the index, invalid
			if _, err := direct.Exec(ctx, "CREATE INDEX acct_k_ccnew ON acct (k); "+
				"UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'acct_k_ccnew'::regclass"); err != nil {
				t.Fatal(err)
			}
		}
	}
	conn, err := pgconn.Connect(ctx, proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := reencrypt.Column(ctx, conn, "acct", "k", reencrypt.Options{Batch: 100, Log: t.Logf})
	if err != nil {
		t.Fatalf("the last run: %v", err)
	}
	t.Logf("the last run: from %s, %d rows", res.From, res.Moved)
	var formats, invalid, leftovers int
	if err := direct.QueryRow(ctx, "SELECT count(DISTINCT enc_format(k)) FILTER (WHERE enc_format(k) <> 2), "+
		"(SELECT count(*) FROM pg_index WHERE indrelid = 'acct'::regclass AND NOT indisvalid), "+
		"(SELECT count(*) FROM pg_class WHERE relname LIKE 'acct_k_cc%') FROM acct").Scan(&formats, &invalid, &leftovers); err != nil {
		t.Fatal(err)
	}
	if formats != 0 || invalid != 0 || leftovers != 0 {
		t.Errorf("after: %d formats other than 2, %d invalid indexes, %d leftovers", formats, invalid, leftovers)
	}
	check := connect(t, proxy)
	mustExec(t, check, "SET enable_seqscan = off")
	var count int
	var sum int64
	if err := check.QueryRow(ctx, "SELECT count(*), sum(k) FROM acct WHERE k BETWEEN $1 AND $2", 300, 599).Scan(&count, &sum); err != nil {
		t.Fatal(err)
	}
	// k = 3i for i in 1..500: 300..599 holds i = 100..199
	if count != 100 || sum != 3*(100+199)*100/2 {
		t.Errorf("range through the index: %d rows summing to %d, want 100 and %d", count, sum, 3*(100+199)*100/2)
	}
}

// What a move sends the server: the proxy decrypts each value for the
// tool and encrypts it again, so no plaintext of the column reaches the
// server, in either pass; a plaintext twin written through the same
// proxy does (the control: the scan can fail).
func TestReencryptSendsNoPlaintext(t *testing.T) {
	e := setup(t)
	rec := &syncBuffer{}
	proxy := e.startProxy(t, rec)
	ctx := context.Background()
	admin := connect(t, proxy)
	mustExec(t, admin, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, admin, `SELECT pgcipher.add_column_key('k1');
CREATE TABLE notes (id int PRIMARY KEY, t enc_text_ord);
SELECT pgcipher.encrypt_column('notes', 't', 'k1', 'ORD');
SELECT pgcipher.set_ore_format('notes', 't', '1');
ALTER TABLE notes VALIDATE CONSTRAINT pgcipher_t;
CREATE TABLE notes_plain (id int PRIMARY KEY, t text)`)
	ins := connect(t, proxy)
	const n = 50
	for i := 1; i <= n; i++ {
		if _, err := ins.Exec(ctx, "INSERT INTO notes VALUES ($1, $2)", i, fmt.Sprintf("MOVEMARK-%03d", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := ins.Exec(ctx, "INSERT INTO notes_plain VALUES ($1, $2)", i, fmt.Sprintf("TWINMARK-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgconn.Connect(ctx, proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := reencrypt.Column(ctx, conn, "notes", "t", reencrypt.Options{Batch: 20})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 2*n {
		t.Errorf("%d rows rewritten, want %d (both passes)", res.Moved, 2*n)
	}
	sent := rec.Bytes()
	if bytes.Contains(sent, []byte("MOVEMARK-")) {
		t.Error("a plaintext of the encrypted column reached the server")
	}
	if !bytes.Contains(sent, []byte("TWINMARK-")) {
		t.Error("control: the plaintext twin's values were not seen in what the proxy sent")
	}
	rows, err := connect(t, proxy).Query(ctx, "SELECT id, t FROM notes ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for rows.Next() {
		var id int
		var v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("MOVEMARK-%03d", id); v != want {
			t.Errorf("row %d: %q, want %q", id, v, want)
		}
		read++
	}
	if rows.Err() != nil || read != n {
		t.Errorf("%d rows read back (%v), want %d", read, rows.Err(), n)
	}
	t.Logf("capture: %d bytes sent, no marker of the encrypted column, the twin's present", len(sent))
}
