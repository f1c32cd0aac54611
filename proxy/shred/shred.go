// The three steps of a shredding, and the whole of it.

package shred

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// Keyring is where the keyring lives and the CMK that unwraps it.
type Keyring struct {
	Path    string
	CMK     []byte
	CMKName string
}

func (k Keyring) load() (*colcrypt.Keyring, error) {
	return colcrypt.LoadKeyring(k.Path, k.CMK, k.CMKName)
}

func (k Keyring) write(r *colcrypt.Keyring) error {
	return r.Write(k.Path, k.CMK, k.CMKName, rand.Reader)
}

// Result is what a shredding did.
type Result struct {
	KeyID     uint32 // the tenant key destroyed
	Epoch     int    // the epoch every other tenant key is under now
	Rewrapped int    // other tenants' keys moved to it
}

// ErrNoTenant: the tenant has no key and was never shredded.
var ErrNoTenant = errors.New("no such tenant")

// Tenant shreds tenant: Advance, Rewrap, Forget.  Run again after a
// failure or a kill, it finishes what the earlier run began.
// Two runs at once (on this database) would each draw an epoch of their
// own, and the second's keyring would replace the first's after the
// first had rewrapped every key under it: a run holds this advisory lock.
const lockKey = "pgcipher shred-tenant"

func Tenant(ctx context.Context, conn *pgconn.PgConn, kr Keyring, tenant string) (Result, error) {
	if _, err := query(ctx, conn, "SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext($1))", lockKey); err != nil {
		return Result{}, err
	}
	defer query(context.Background(), conn, "SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtext($1))", lockKey)
	done, err := Advance(ctx, conn, kr, tenant)
	if err != nil || done {
		return shredded(ctx, conn, kr, tenant, err)
	}
	res, err := Rewrap(ctx, conn, kr, tenant)
	if err != nil {
		return res, err
	}
	return res, Forget(ctx, conn, kr)
}

// tableEpoch is the epoch the database's tenant keys are under (0: none yet).
func tableEpoch(ctx context.Context, conn *pgconn.PgConn) (int, error) {
	rows, err := query(ctx, conn, "SELECT coalesce(max(epoch), 0) FROM pgcipher.tenant_epoch")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(rows[0][0]))
}

// Advance, step 1: the keyring gets the epoch after the newest, beside
// it (nothing is done when it holds two epochs already: an earlier run
// got this far).  A tenant without a key that was never shredded is
// refused first, before the keyring changes; done reports one shredded
// already, its keyring down to one epoch: nothing is left to do.
func Advance(ctx context.Context, conn *pgconn.PgConn, kr Keyring, tenant string) (done bool, err error) {
	rows, err := query(ctx, conn, `SELECT (SELECT count(*) FROM pgcipher.tenant_keys WHERE tenant = $1),
		(SELECT count(*) FROM pgcipher.shredded_tenants WHERE tenant = $1)`, tenant)
	if err != nil {
		return false, err
	}
	live := string(rows[0][0]) != "0"
	if !live && string(rows[0][1]) == "0" {
		return false, fmt.Errorf("shred-tenant: tenant %q has no key and was never shredded: %w", tenant, ErrNoTenant)
	}
	r, err := kr.load()
	if err != nil {
		return false, err
	}
	// a keyring older than the database's keys (another host's copy, not
	// updated after a shredding) must not draw an epoch of its own
	newest, _ := r.Newest()
	if te, err := tableEpoch(ctx, conn); err != nil {
		return false, err
	} else if te > newest {
		return false, fmt.Errorf("shred-tenant: the tenant keys are under keyring epoch %d, and %s holds up to %d: use the newest keyring", te, kr.Path, newest)
	}
	if len(r.Epochs()) > 1 {
		return false, nil
	}
	if !live {
		return true, nil
	}
	if _, err := r.Advance(rand.Reader); err != nil {
		return false, err
	}
	return false, kr.write(r)
}

// shredded is the result of a shredding finished earlier (err passed on).
func shredded(ctx context.Context, conn *pgconn.PgConn, kr Keyring, tenant string, err error) (Result, error) {
	if err != nil {
		return Result{}, err
	}
	r, err := kr.load()
	if err != nil {
		return Result{}, err
	}
	res := Result{}
	res.Epoch, _ = r.Newest()
	got, err := query(ctx, conn, "SELECT max(key_id) FROM pgcipher.shredded_tenants WHERE tenant = $1", tenant)
	if err != nil {
		return res, err
	}
	id, _ := strconv.ParseUint(string(got[0][0]), 10, 32)
	res.KeyID = uint32(id)
	return res, nil
}

// Rewrap, step 2, in one transaction: every tenant key but tenant's
// moves to the keyring's newest epoch (those already there stay), the
// tenant's row goes and its key id is recorded as shredded.  It refuses
// to commit while any key is left under another epoch: Forget would
// lose it.
func Rewrap(ctx context.Context, conn *pgconn.PgConn, kr Keyring, tenant string) (Result, error) {
	r, err := kr.load()
	if err != nil {
		return Result{}, err
	}
	epoch, tkk := r.Newest()
	res := Result{Epoch: epoch}
	if _, err := exec(ctx, conn, "BEGIN"); err != nil {
		return res, err
	}
	done := false
	defer func() {
		if !done {
			exec(context.Background(), conn, "ROLLBACK")
		}
	}()
	// the commit must be durable before Forget destroys the old epoch;
	// no tenant is added under the old epoch meanwhile (add_tenant_key
	// takes a weaker lock that this one conflicts with, and the epoch
	// row, locked by the UPDATE, is what every key written is checked
	// against)
	if _, err := exec(ctx, conn, "SET LOCAL synchronous_commit = on"); err != nil {
		return res, err
	}
	if _, err := exec(ctx, conn, "LOCK TABLE pgcipher.tenant_keys IN EXCLUSIVE MODE"); err != nil {
		return res, err
	}
	if _, err := query(ctx, conn, `INSERT INTO pgcipher.tenant_epoch (epoch) VALUES ($1)
		ON CONFLICT (one) DO UPDATE SET epoch = EXCLUDED.epoch`, strconv.Itoa(epoch)); err != nil {
		return res, err
	}
	rows, err := query(ctx, conn, "SELECT key_id, tenant, epoch, pg_catalog.encode(wrapped, 'hex') FROM pgcipher.tenant_keys")
	if err != nil {
		return res, err
	}
	var ids, wrapped []string
	for _, row := range rows {
		id64, _ := strconv.ParseUint(string(row[0]), 10, 32)
		id, name := uint32(id64), string(row[1])
		e, _ := strconv.Atoi(string(row[2]))
		if name == tenant {
			res.KeyID = id
			continue
		}
		w, _ := hex.DecodeString(string(row[3]))
		if e == epoch {
			// rewrapped by an earlier run: it must unwrap with this
			// keyring's key of the epoch, or Forget would lose it
			tk, err := colcrypt.UnwrapTenantKey(tkk, w, name, id, e)
			if err != nil {
				return res, fmt.Errorf("shred-tenant: tenant %q's key is under epoch %d and %s's key of that epoch does not unwrap it (another keyring?): %w", name, e, kr.Path, err)
			}
			clear(tk)
			continue
		}
		old := r.Key(e)
		if old == nil {
			return res, fmt.Errorf("shred-tenant: tenant %q's key is under keyring epoch %d, which %s does not hold", name, e, kr.Path)
		}
		tk, err := colcrypt.UnwrapTenantKey(old, w, name, id, e)
		if err != nil {
			return res, fmt.Errorf("shred-tenant: %w", err)
		}
		nw, err := colcrypt.WrapTenantKey(tkk, tk, name, id, epoch, rand.Reader)
		clear(tk)
		if err != nil {
			return res, err
		}
		ids = append(ids, strconv.FormatUint(uint64(id), 10))
		wrapped = append(wrapped, `\x`+hex.EncodeToString(nw))
	}
	if len(ids) > 0 {
		// one statement for all: arrays as text, bytea in hex
		if _, err := query(ctx, conn, `UPDATE pgcipher.tenant_keys t SET epoch = $1, wrapped = v.w
			FROM unnest($2::int[], $3::bytea[]) AS v(id, w) WHERE t.key_id = v.id`,
			strconv.Itoa(epoch), "{"+strings.Join(ids, ",")+"}", "{"+quoteAll(wrapped)+"}"); err != nil {
			return res, err
		}
	}
	res.Rewrapped = len(ids)
	if res.KeyID != 0 {
		if _, err := query(ctx, conn, "DELETE FROM pgcipher.tenant_keys WHERE key_id = $1",
			strconv.FormatUint(uint64(res.KeyID), 10)); err != nil {
			return res, err
		}
		if _, err := query(ctx, conn, "INSERT INTO pgcipher.shredded_tenants (key_id, tenant) VALUES ($1, $2)",
			strconv.FormatUint(uint64(res.KeyID), 10), tenant); err != nil {
			return res, err
		}
	} else if prev, err := shredded(ctx, conn, kr, tenant, nil); err == nil {
		res.KeyID = prev.KeyID // shredded by an earlier run: its id, for the report
	}
	left, err := query(ctx, conn, "SELECT count(*) FROM pgcipher.tenant_keys WHERE epoch <> $1", strconv.Itoa(epoch))
	if err != nil {
		return res, err
	}
	if string(left[0][0]) != "0" {
		return res, fmt.Errorf("shred-tenant: %s tenant keys are still under another epoch than %d; nothing was changed", left[0][0], epoch)
	}
	if _, err := exec(ctx, conn, "COMMIT"); err != nil {
		return res, err
	}
	done = true
	return res, nil
}

// Forget, step 3: the keyring keeps its newest epoch alone, once the
// database says every tenant key is under it.  The keys of the older
// ones are gone from the file; its old copies must not be kept.
func Forget(ctx context.Context, conn *pgconn.PgConn, kr Keyring) error {
	r, err := kr.load()
	if err != nil {
		return err
	}
	if len(r.Epochs()) == 1 {
		return nil
	}
	newest, _ := r.Newest()
	rows, err := query(ctx, conn, `SELECT (SELECT count(*) FROM pgcipher.tenant_keys WHERE epoch <> $1),
		(SELECT coalesce(max(epoch), 0) FROM pgcipher.tenant_epoch)`, strconv.Itoa(newest))
	if err != nil {
		return err
	}
	if string(rows[0][0]) != "0" || string(rows[0][1]) != strconv.Itoa(newest) {
		return fmt.Errorf("shred-tenant: the database's tenant keys are not all under epoch %d (%s are not, its epoch is %s): the older epoch is kept; run shred-tenant again",
			newest, rows[0][0], rows[0][1])
	}
	r.Drop(newest)
	return kr.write(r)
}

// quoteAll quotes array elements for an array literal.
func quoteAll(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
	}
	return strings.Join(q, ",")
}

func exec(ctx context.Context, conn *pgconn.PgConn, sql string) ([]*pgconn.Result, error) {
	res, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("shred-tenant: %s: %w", sql, err)
	}
	return res, nil
}

// query runs sql with text parameters and returns its rows.
func query(ctx context.Context, conn *pgconn.PgConn, sql string, params ...string) ([][][]byte, error) {
	p := make([][]byte, len(params))
	for i, s := range params {
		p[i] = []byte(s)
	}
	res := conn.ExecParams(ctx, sql, p, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, fmt.Errorf("shred-tenant: %w", res.Err)
	}
	return res.Rows, nil
}
