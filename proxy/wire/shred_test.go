package wire_test

// Crypto-shredding proven on the bytes (design 13.13): on a cluster
// without TDE (so that a scan sees the column ciphertexts), one of three
// tenants is shredded after a base backup and with its values in the WAL
// archive; every ciphertext of that tenant found in the data directory,
// the base backup and the archive is then tried with everything an
// attacker holding the CMK, the current keyring and the backup has: none
// decrypts.  The control, a copy of the keyring from before the
// shredding, decrypts every one of them; the other tenants' values, old
// copies included, still decrypt.  The shredding is stopped after each
// of its steps (as by kill -9) and run again.

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/shred"
	"github.com/pgcipher/pgcipher/proxy/wire"
)

// plainCluster starts an unencrypted cluster archiving its WAL into
// dir/archive, and returns its connection string (database postgres).
func plainCluster(t *testing.T, bindir, dir string) string {
	t.Helper()
	run := func(name string, args ...string) {
		t.Helper()
		out, err := osexec.Command(filepath.Join(bindir, name), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	run("initdb", "-D", dir+"/data", "-A", "trust", "-U", "pgc_tester", "--no-sync")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	os.MkdirAll(dir+"/archive", 0o700)
	conf := fmt.Sprintf("port = %d\nlisten_addresses = ''\nunix_socket_directories = '%s'\nwal_level = replica\n"+
		"archive_mode = on\narchive_command = 'cp %%p %s/archive/%%f'\nfsync = off\n", port, dir, dir)
	f, _ := os.OpenFile(dir+"/data/postgresql.conf", os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(conf)
	f.Close()
	run("pg_ctl", "-D", dir+"/data", "-l", dir+"/server.log", "-w", "start")
	t.Cleanup(func() {
		osexec.Command(filepath.Join(bindir, "pg_ctl"), "-D", dir+"/data", "-m", "immediate", "stop").Run()
	})
	return fmt.Sprintf("host=%s port=%d user=pgc_tester dbname=postgres", dir, port)
}

// found is every 64-byte int8 EQ ciphertext of tenant key id in the files
// under root, keyed by the ciphertext (a value found twice counts once).
func foundValues(t *testing.T, root string, header []byte) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !fi.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for i := 0; ; {
			j := bytes.Index(b[i:], header)
			if j < 0 {
				break
			}
			if k := i + j; k+64 <= len(b) {
				out[string(b[k:k+64])] = true
			}
			i += j + 1
		}
		return nil
	})
	return out
}

// decryptable counts the values col decrypts (nil col: none).
func decryptable(col *colcrypt.Column, values map[string]bool) int {
	n := 0
	for v := range values {
		if col != nil {
			if _, err := col.DecryptPayload([]byte(v)); err == nil {
				n++
			}
		}
	}
	return n
}

// tenantCol is what an attacker can make of a tenant key row with a
// keyring: the column of tenant-keyed binding b, or nil when no epoch
// of the keyring unwraps the row (whatever epoch the row claims).
func tenantCol(t *testing.T, ring *colcrypt.Keyring, row *catalog.TenantKey, b *catalog.Binding) *colcrypt.Column {
	t.Helper()
	for _, e := range ring.Epochs() {
		for _, claim := range []int{row.Epoch, e} {
			tk, err := colcrypt.UnwrapTenantKey(ring.Key(e), row.Wrapped, row.Tenant, row.ID, claim)
			if err != nil {
				continue
			}
			key, _ := colcrypt.TenantColumnKey(tk, b.KeyName)
			spec := b.Spec
			spec.KeyID, spec.Tenant = row.ID, true
			col, err := colcrypt.NewColumn(key, spec)
			if err != nil {
				t.Fatal(err)
			}
			return col
		}
	}
	return nil
}

func TestShredEverywhere(t *testing.T) {
	bindir := os.Getenv("PGCIPHER_TEST_BINDIR")
	if bindir == "" {
		t.Skip("PGCIPHER_TEST_BINDIR not set (./pgcipher test sets it)")
	}
	ctx := context.Background()
	dir := t.TempDir()
	up := plainCluster(t, bindir, dir)
	cmk := make([]byte, 32)
	rand.Read(cmk)
	kr := shred.Keyring{Path: dir + "/keyring", CMK: cmk, CMKName: "main"}
	ring, _ := colcrypt.NewKeyring(rand.Reader)
	if err := ring.Write(kr.Path, cmk, "main", rand.Reader); err != nil {
		t.Fatal(err)
	}
	e := &env{upstream: up, db: "postgres", keys: catalog.NewKeys(cmk, "main"), cmk: cmk}
	if err := e.keys.LoadTenantKeyring(kr.Path, 0); err != nil {
		t.Fatal(err)
	}
	conninfo, srv := e.serve(t, wire.Config{})
	conn := connect(t, conninfo)
	for _, q := range []string{
		"CREATE EXTENSION pgcipher_columns",
		"SELECT pgcipher.add_column_key('ks')",
		"CREATE TABLE ledger (id int, tenant text, v enc_int8)",
		"SELECT pgcipher.encrypt_column('ledger', 'v', 'ks', 'EQ', tenant_by => 'session')",
	} {
		mustExec(t, conn, q)
	}
	tenants := []string{"t1", "t2", "t3"}
	insert := func(from int) {
		for i, tn := range tenants {
			if from >= 40 && tn == "t2" {
				continue // shredded by then
			}
			mustExec(t, conn, "SET pgcipher.tenant = '"+tn+"'")
			for k := from; k < from+20; k++ {
				if _, err := conn.Exec(ctx, "INSERT INTO ledger VALUES ($1, $2, $3)", 1000*i+k, tn, int64(7000000+1000*i+k)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tn := range tenants {
		mustExec(t, conn, "SELECT pgcipher.add_tenant_key('"+tn+"')")
	}
	insert(0)
	direct, err := pgx.Connect(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	mustExec(t, direct, "CHECKPOINT")
	if out, err := osexec.Command(filepath.Join(bindir, "pg_basebackup"), "-d", up, "-D", dir+"/backup",
		"-X", "stream", "-c", "fast", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	insert(20)
	mustExec(t, direct, "CHECKPOINT")

	// what the backup holds of the keys, and of the binding
	rows := tenantKeyRows(t, direct)
	cat, err := catalog.Load(pgconnQuerier{direct.PgConn()})
	if err != nil {
		t.Fatal(err)
	}
	cat.SetDatabase("postgres")
	var b *catalog.Binding
	for _, x := range cat.Bindings() {
		b = x
	}
	if b == nil || b.TenantBy != "session" {
		t.Fatalf("binding %+v", b)
	}
	header := func(tn string) []byte {
		h := colcrypt.Header{Version: colcrypt.Version, Type: colcrypt.Int8, Level: colcrypt.EQ,
			Flags: colcrypt.FlagTenant, KeyID: rows[tn].ID, GroupTag: colcrypt.GroupTag(b.Spec.Group)}
		return h.Append(nil)
	}
	old, err := colcrypt.LoadKeyring(kr.Path, cmk, "main") // the control: a copy kept from before
	if err != nil {
		t.Fatal(err)
	}

	// the shredding of t2, stopped after each step and run again
	pc := direct.PgConn()
	if done, err := shred.Advance(ctx, pc, kr, "t2"); err != nil || done {
		t.Fatalf("advance: %v %v", done, err)
	}
	check := func(step string) { // the others work through the proxy at every step
		t.Helper()
		if err := e.keys.LoadTenantKeyring(kr.Path, 0); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		srv.Reload()
		c := connect(t, conninfo)
		var n int
		if err := c.QueryRow(ctx, "SELECT count(v) FROM ledger WHERE tenant IN ('t1', 't3') AND id % 1000 < 40").Scan(&n); err != nil || n != 80 {
			t.Errorf("%s: the other tenants' values: %d %v", step, n, err)
		}
		c.Close(ctx)
	}
	check("after advance")
	if done, err := shred.Advance(ctx, pc, kr, "t2"); err != nil || done {
		t.Fatalf("advance again: %v %v", done, err)
	}
	if _, err := shred.Rewrap(ctx, pc, kr, "t2"); err != nil {
		t.Fatal(err)
	}
	check("after rewrap")
	start := time.Now()
	res, err := shred.Tenant(ctx, pc, kr, "t2")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the shredding's last step, run again: %v, %+v", time.Since(start), res)
	check("after forget")
	insert(40) // writing goes on, t2 refused below
	mustExec(t, direct, "CHECKPOINT")
	var lsn string
	direct.QueryRow(ctx, "SELECT pg_walfile_name(pg_switch_wal())").Scan(&lsn)
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(dir + "/archive/" + lsn); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// a keyring older than the database's keys (a copy not updated) must
	// not draw an epoch of its own: it would lose every key
	stale := shred.Keyring{Path: dir + "/stale-keyring", CMK: cmk, CMKName: "main"}
	if err := old.Write(stale.Path, cmk, "main", rand.Reader); err != nil {
		t.Fatal(err)
	}
	if _, err := shred.Tenant(ctx, pc, stale, "t3"); err == nil || !strings.Contains(err.Error(), "use the newest keyring") {
		t.Errorf("shredding with a stale keyring: %v", err)
	}
	// nor may a tenant key wrapped under the old epoch be added
	id, epoch, w, _ := catalog.NewTenantKey(old, "t9")
	_, err = direct.Exec(ctx, "SELECT pgcipher.add_tenant_key('t9', $1, $2, $3)", int64(id), epoch, w)
	if err == nil || !strings.Contains(err.Error(), "the tenant keys are under epoch 2") {
		t.Errorf("a tenant key under the destroyed epoch: %v", err)
	}

	now, err := colcrypt.LoadKeyring(kr.Path, cmk, "main")
	if err != nil || len(now.Epochs()) != 1 || now.Key(1) != nil {
		t.Fatalf("keyring after the shredding: %v %v", now.Epochs(), err)
	}
	// the current rows of the other tenants (rewrapped under epoch 2)
	current := tenantKeyRows(t, direct)
	if current["t2"] != nil || len(current) != 2 {
		t.Fatalf("tenant keys after the shredding: %v", current)
	}
	for _, place := range []string{"data", "backup", "archive"} {
		t2 := foundValues(t, dir+"/"+place, header("t2"))
		if len(t2) == 0 {
			t.Errorf("%s: no value of t2 found: the scan sees nothing", place)
			continue
		}
		// (a value the WAL split across a page boundary is found and
		// decrypts with neither: the control's count is what counts)
		control := decryptable(tenantCol(t, old, rows["t2"], b), t2)
		after := decryptable(tenantCol(t, now, rows["t2"], b), t2)
		t1 := foundValues(t, dir+"/"+place, header("t1"))
		t1Before := decryptable(tenantCol(t, old, rows["t1"], b), t1)
		t1After := decryptable(tenantCol(t, now, current["t1"], b), t1)
		t.Logf("%s: %d values of t2 found, %d decrypt with the old keyring (control), %d with the current one; t1: %d found, %d decrypt before, %d after",
			place, len(t2), control, after, len(t1), t1Before, t1After)
		if control == 0 || control < len(t2)-2 {
			t.Errorf("%s: the control decrypts %d of %d values of t2", place, control, len(t2))
		}
		if after != 0 {
			t.Errorf("%s: %d values of t2 decrypt after the shredding", place, after)
		}
		if t1After != t1Before || t1Before == 0 {
			t.Errorf("%s: %d values of t1 decrypt after t2's shredding, %d before", place, t1After, t1Before)
		}
	}
	// through the proxy: t2's rows refused as destroyed, not as corrupt
	c := connect(t, conninfo)
	var v int64
	err = c.QueryRow(ctx, "SELECT v FROM ledger WHERE tenant = 't2' LIMIT 1").Scan(&v)
	wantCode(t, err, "PC003", `the key of tenant "t2" was destroyed`)
	if !strings.Contains(err.Error(), "destroyed") {
		t.Errorf("t2's value: %v", err)
	}
}

// tenantKeyRows: pgcipher.tenant_keys by tenant.
func tenantKeyRows(t *testing.T, c *pgx.Conn) map[string]*catalog.TenantKey {
	t.Helper()
	out := map[string]*catalog.TenantKey{}
	r, err := c.Query(context.Background(), "SELECT key_id, tenant, epoch, wrapped FROM pgcipher.tenant_keys")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for r.Next() {
		var k catalog.TenantKey
		var id int64
		if err := r.Scan(&id, &k.Tenant, &k.Epoch, &k.Wrapped); err != nil {
			t.Fatal(err)
		}
		k.ID = uint32(id)
		out[k.Tenant] = &k
	}
	return out
}

// pgconnQuerier runs the catalog's queries on a pgconn.
type pgconnQuerier struct{ c *pgconn.PgConn }

func (q pgconnQuerier) SimpleQuery(sql string) ([]catalog.Result, error) {
	res, err := q.c.Exec(context.Background(), sql).ReadAll()
	if err != nil {
		return nil, err
	}
	out := make([]catalog.Result, len(res))
	for i, r := range res {
		out[i].Rows = r.Rows
	}
	return out, nil
}
