// Tenant keys (design 13.13): the rows of pgcipher.tenant_keys and
// shredded_tenants as the server returns them, unwrapped with the tenant
// keyring's key of their epoch, and the columns derived from them, kept
// in a cache of bounded size.

package catalog

import (
	"container/list"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// TenantKey is one row of pgcipher.tenant_keys.
type TenantKey struct {
	ID      uint32
	Tenant  string
	Epoch   int
	Wrapped []byte
	wrapped string // Wrapped, for the cache's key (made once, SetTenants)
}

// tenants is one catalog's tenant keys, by name and by id, and the key
// ids shredded (id → tenant).
type tenants struct {
	byName    map[string]*TenantKey
	byID      map[uint32]*TenantKey
	shredded  map[uint32]string
	shredName map[string]bool
}

// SetTenants records the tenant keys and the shredded ones (Load does).
func (c *Catalog) SetTenants(keys []*TenantKey, shredded map[uint32]string) {
	t := &tenants{byName: map[string]*TenantKey{}, byID: map[uint32]*TenantKey{},
		shredded: shredded, shredName: map[string]bool{}}
	for _, k := range keys {
		k.wrapped = string(k.Wrapped)
		t.byName[k.Tenant], t.byID[k.ID] = k, k
	}
	for _, name := range shredded {
		t.shredName[name] = true
	}
	c.tenants = t
}

// ErrTenantShredded: the value, or the tenant named, is under a tenant key
// that was destroyed (pgcipher-keys shred-tenant); errors.Is finds it in
// a *ShreddedError.
var ErrTenantShredded = errors.New("the tenant's key was destroyed")

// ShreddedError names the column and the tenant whose key was destroyed.
type ShreddedError struct{ Label, Tenant string }

func (e *ShreddedError) Error() string {
	return fmt.Sprintf("column %s: the key of tenant %q was destroyed", e.Label, e.Tenant)
}

func (e *ShreddedError) Unwrap() error { return ErrTenantShredded }

// TenantError: a tenant-keyed column used without a tenant the proxy can
// encrypt for (none set, one without a key, one the proxy cannot follow).
type TenantError struct {
	Label, Tenant, Why string
}

func (e *TenantError) Error() string {
	if e.Tenant == "" {
		return fmt.Sprintf("column %s is tenant-keyed: %s", e.Label, e.Why)
	}
	return fmt.Sprintf("column %s is tenant-keyed: tenant %q %s", e.Label, e.Tenant, e.Why)
}

// tenantKeyByName finds the key of tenant name in catalog c.
func (c *Catalog) tenantKeyByName(b *Binding, name string) (*TenantKey, error) {
	if c.tenants != nil {
		if k := c.tenants.byName[name]; k != nil {
			return k, nil
		}
		if c.tenants.shredName[name] {
			return nil, &ShreddedError{b.Spec.Label, name}
		}
	}
	return nil, &TenantError{Label: b.Spec.Label, Tenant: name,
		Why: "has no key (pgcipher-keys add-tenant makes one)"}
}

// tenantKeyByID finds the tenant key a value names.
func (c *Catalog) tenantKeyByID(b *Binding, id uint32) (*TenantKey, error) {
	if c.tenants != nil {
		if k := c.tenants.byID[id]; k != nil {
			return k, nil
		}
		if name, ok := c.tenants.shredded[id]; ok {
			return nil, &ShreddedError{b.Spec.Label, name}
		}
	}
	return nil, fmt.Errorf("column %s: a value under tenant key %d, which pgcipher.tenant_keys does not hold", b.Spec.Label, id)
}

// tenantCache holds the columns derived from tenant keys, the least
// recently used dropped beyond its size.  Safe for concurrent use.
type tenantCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // of *tenantEntry, most recent first
	byKey map[tenantCacheKey]*list.Element
	// hits and misses since start (metrics, the benchmark)
	hits, misses uint64
}

type tenantCacheKey struct {
	database, label, oreFormat string
	id                         uint32
	epoch                      int
	wrapped                    string
}

type tenantEntry struct {
	key tenantCacheKey
	col *colcrypt.Column
}

func newTenantCache(size int) *tenantCache {
	return &tenantCache{size: size, order: list.New(), byKey: map[tenantCacheKey]*list.Element{}}
}

func (t *tenantCache) get(k tenantCacheKey) *colcrypt.Column {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byKey[k]; e != nil {
		t.order.MoveToFront(e)
		t.hits++
		return e.Value.(*tenantEntry).col
	}
	t.misses++
	return nil
}

func (t *tenantCache) put(k tenantCacheKey, c *colcrypt.Column) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byKey[k]; e != nil {
		t.order.MoveToFront(e)
		return
	}
	t.byKey[k] = t.order.PushFront(&tenantEntry{k, c})
	for t.order.Len() > t.size {
		last := t.order.Back()
		delete(t.byKey, last.Value.(*tenantEntry).key)
		t.order.Remove(last)
	}
}

func (t *tenantCache) clear() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.order.Init()
	clear(t.byKey)
}

// DefaultTenantCache is the number of tenant columns Keys keeps unless
// told otherwise (SetTenantKeyring).
const DefaultTenantCache = 4096

// SetTenantKeyring gives Keys the tenant keyring (nil: none) and the
// size of its cache of tenant columns, and forgets every tenant column
// it holds: a keyring read again after a shredding holds no epoch the
// cache's keys came from.
func (k *Keys) SetTenantKeyring(r *colcrypt.Keyring, cacheSize int) {
	if cacheSize < 1 {
		cacheSize = DefaultTenantCache
	}
	k.tenantMu.Lock()
	defer k.tenantMu.Unlock()
	k.keyring = r
	if k.tenantCols == nil || k.tenantCols.size != cacheSize {
		k.tenantCols = newTenantCache(cacheSize)
	} else {
		k.tenantCols.clear()
	}
}

// LoadTenantKeyring reads the keyring file at path with the proxy's CMK
// ("" : no keyring) and gives it to SetTenantKeyring.
func (k *Keys) LoadTenantKeyring(path string, cacheSize int) error {
	var r *colcrypt.Keyring
	if path != "" {
		var err error
		if r, err = colcrypt.LoadKeyring(path, k.cmk, k.cmkName); err != nil {
			return err
		}
	}
	k.SetTenantKeyring(r, cacheSize)
	return nil
}

// NewTenantKey draws a key for tenant name and a key id (31 random bits),
// and wraps the key under the keyring's newest epoch, for
// pgcipher.add_tenant_key(tenant, key_id, epoch, wrapped).
func (k *Keys) NewTenantKey(name string) (id uint32, epoch int, wrapped []byte, err error) {
	k.tenantMu.RLock()
	ring := k.keyring
	k.tenantMu.RUnlock()
	if ring == nil {
		return 0, 0, nil, errors.New("no tenant keyring")
	}
	return NewTenantKey(ring, name)
}

// NewTenantKey draws a tenant key and its id, wrapped under the newest
// epoch of ring.
func NewTenantKey(ring *colcrypt.Keyring, name string) (id uint32, epoch int, wrapped []byte, err error) {
	var b [4]byte
	for id == 0 {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, 0, nil, err
		}
		id = binary.BigEndian.Uint32(b[:]) & 0x7fffffff
	}
	tk, err := colcrypt.NewCEK(rand.Reader)
	if err != nil {
		return 0, 0, nil, err
	}
	defer clear(tk)
	epoch, tkk := ring.Newest()
	wrapped, err = colcrypt.WrapTenantKey(tkk, tk, name, id, epoch, rand.Reader)
	return id, epoch, wrapped, err
}

// TenantCacheStats: the tenant columns held, and the hits and misses so far.
func (k *Keys) TenantCacheStats() (held int, hits, misses uint64) {
	k.tenantMu.RLock()
	t := k.tenantCols
	k.tenantMu.RUnlock()
	if t == nil {
		return 0, 0, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.order.Len(), t.hits, t.misses
}

// TenantColumn is the column of tenant-keyed binding b under the key of
// tenant name (the session's or the row's), as catalog c knows it.
func (k *Keys) TenantColumn(c *Catalog, b *Binding, name string) (*colcrypt.Column, error) {
	tk, err := c.tenantKeyByName(b, name)
	if err != nil {
		return nil, err
	}
	return k.tenantColumn(b, tk)
}

// TenantColumnByID is the column of tenant-keyed binding b under the
// tenant key a value names (its key id).
func (k *Keys) TenantColumnByID(c *Catalog, b *Binding, id uint32) (*colcrypt.Column, error) {
	tk, err := c.tenantKeyByID(b, id)
	if err != nil {
		return nil, err
	}
	return k.tenantColumn(b, tk)
}

func (k *Keys) tenantColumn(b *Binding, tk *TenantKey) (*colcrypt.Column, error) {
	// the binding is pinned as any other: a changed key, level or group
	// of its label is refused
	if _, err := k.Column(b); err != nil {
		return nil, err
	}
	k.tenantMu.RLock()
	ring, cache := k.keyring, k.tenantCols
	k.tenantMu.RUnlock()
	if ring == nil {
		return nil, fmt.Errorf("column %s is tenant-keyed and the proxy has no tenant keyring (--tenant-keyring)", b.Spec.Label)
	}
	ck := tenantCacheKey{database: b.Database, label: b.Spec.Label, oreFormat: b.Spec.OREFormat,
		id: tk.ID, epoch: tk.Epoch, wrapped: tk.wrapped}
	if col := cache.get(ck); col != nil {
		return col, nil
	}
	tkk := ring.Key(tk.Epoch)
	if tkk == nil {
		newest, _ := ring.Newest()
		return nil, fmt.Errorf("column %s: tenant %q's key is under keyring epoch %d, the proxy's keyring holds up to %d: reload the tenant keyring (SIGHUP)",
			b.Spec.Label, tk.Tenant, tk.Epoch, newest)
	}
	raw, err := colcrypt.UnwrapTenantKey(tkk, tk.Wrapped, tk.Tenant, tk.ID, tk.Epoch)
	if err != nil {
		return nil, fmt.Errorf("column %s: %w", b.Spec.Label, err)
	}
	defer clear(raw)
	key, err := colcrypt.TenantColumnKey(raw, b.KeyName)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	spec := b.Spec
	spec.KeyID, spec.Tenant = tk.ID, true
	col, err := colcrypt.NewColumn(key, spec)
	if err != nil {
		return nil, err
	}
	cache.put(ck, col)
	return col, nil
}

// tenantRows reads pgcipher.tenant_keys (key_id, tenant, epoch, wrapped
// in hex) and shredded_tenants (key_id, tenant).
func tenantRows(keys, shredded [][][]byte) ([]*TenantKey, map[uint32]string, error) {
	out := make([]*TenantKey, 0, len(keys))
	for _, row := range keys {
		if len(row) != 4 {
			return nil, nil, fmt.Errorf("catalog: tenant key row of %d fields, want 4", len(row))
		}
		id, err := strconv.ParseUint(string(row[0]), 10, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("catalog: tenant key id %q: %w", row[0], err)
		}
		epoch, err := strconv.Atoi(string(row[2]))
		if err != nil {
			return nil, nil, fmt.Errorf("catalog: tenant key epoch %q: %w", row[2], err)
		}
		w, err := hexBytes(row[3])
		if err != nil {
			return nil, nil, fmt.Errorf("catalog: tenant %q's wrapped key: %w", row[1], err)
		}
		out = append(out, &TenantKey{ID: uint32(id), Tenant: string(row[1]), Epoch: epoch, Wrapped: w})
	}
	gone := map[uint32]string{}
	for _, row := range shredded {
		if len(row) != 2 {
			return nil, nil, fmt.Errorf("catalog: shredded tenant row of %d fields, want 2", len(row))
		}
		id, err := strconv.ParseUint(string(row[0]), 10, 32)
		if err != nil {
			return nil, nil, fmt.Errorf("catalog: shredded tenant key id %q: %w", row[0], err)
		}
		gone[uint32(id)] = string(row[1])
	}
	return out, gone, nil
}
