package wire_test

// The proxy's catalog connections never hold a database a DBA needs: a
// database whose last client through the proxy has gone can be dropped
// and copied as a template, by clients connected directly, and a catalog
// connection unused for a while is closed (issue 40's first driver fault:
// node-postgres's and asyncpg's suites drop the databases they used).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/wire"
)

// catalogConnsOf counts the proxy's catalog connections to database db.
func catalogConnsOf(t *testing.T, dba *pgx.Conn, db string) int {
	t.Helper()
	var n int
	if err := dba.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = 'pgcipher-proxy catalog' AND datname = $1`, db).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCatalogConnsReleaseDatabases(t *testing.T) {
	e := setup(t)
	conninfo := e.startProxy(t, &syncBuffer{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dba, err := pgx.Connect(ctx, e.upstream) // directly, not through the proxy
	if err != nil {
		t.Fatal(err)
	}
	defer dba.Close(ctx)
	use := func() {
		c, err := pgx.Connect(ctx, conninfo)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pgcipher_columns"); err != nil {
			t.Fatal(err)
		}
		if n := catalogConnsOf(t, dba, e.db); n == 0 {
			t.Fatal("control: no catalog connection while a client is connected")
		}
		c.Close(ctx)
	}
	use()
	copyName := e.db + "_copy"
	if _, err := dba.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", copyName, e.db)); err != nil {
		t.Errorf("CREATE DATABASE … TEMPLATE a database the proxy's clients have left: %v", err)
	}
	dba.Exec(ctx, "DROP DATABASE IF EXISTS "+copyName)
	use()
	if _, err := dba.Exec(ctx, "DROP DATABASE "+e.db); err != nil {
		t.Errorf("DROP DATABASE (without FORCE) of a database the proxy's clients have left: %v", err)
	}
}

func TestCatalogConnsIdleClose(t *testing.T) {
	old := wire.SetCatalogIdle(300 * time.Millisecond)
	defer wire.SetCatalogIdle(old)
	e := setup(t)
	conninfo := e.startProxy(t, &syncBuffer{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, _ := pgconn.ParseConfig(e.upstream)
	dba, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=postgres", cfg.Host, cfg.Port, cfg.User))
	if err != nil {
		t.Fatal(err)
	}
	defer dba.Close(ctx)
	c := connect(t, conninfo)
	mustExec(t, c, "CREATE EXTENSION pgcipher_columns")
	mustExec(t, c, `SELECT pgcipher.add_column_key('k1');
CREATE TABLE idle_t (id int, v enc_text);
SELECT pgcipher.encrypt_column('idle_t', 'v', 'k1', 'EQ')`)
	deadline := time.Now().Add(10 * time.Second)
	for catalogConnsOf(t, dba, e.db) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the catalog connection of an idle session was not closed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// the session goes on: DDL makes it read the catalog again, on a new
	// connection
	mustExec(t, c, "ALTER TABLE idle_t ADD COLUMN w int")
	mustExec(t, c, "INSERT INTO idle_t VALUES (1, 'after idle', 2)")
	var v string
	if err := c.QueryRow(ctx, "SELECT v FROM idle_t WHERE v = 'after idle'").Scan(&v); err != nil || v != "after idle" {
		t.Fatalf("after the idle close: %q, %v", v, err)
	}
}
