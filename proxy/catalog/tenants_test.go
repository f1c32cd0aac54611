package catalog

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// tenantSetup: keys with a keyring, a tenant-keyed binding under a real
// column key, and a catalog holding n tenants' keys ("t0", "t1", ...)
// and a shredded "gone".
func tenantSetup(t *testing.T, n, cacheSize int) (*Keys, *Catalog, *Binding, *colcrypt.Keyring) {
	t.Helper()
	cmk := bytes.Repeat([]byte{3}, 32)
	keys := NewKeys(cmk, "main")
	ring, err := colcrypt.NewKeyring(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys.SetTenantKeyring(ring, cacheSize)
	cek, _ := colcrypt.NewCEK(rand.Reader)
	w, err := colcrypt.WrapCEK(cmk, cek, "main", "k1", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b := &Binding{Spec: colcrypt.Spec{KeyID: 1, Type: colcrypt.Int8, Level: colcrypt.EQ, Label: "public.t.c"},
		KeyName: "k1", CMKName: "main", WrappedCEK: w, TenantBy: "session"}
	rel := &Relation{OID: 1, Schema: "public", Name: "t", Attrs: []*Attr{{Name: "c", Num: 1, Binding: b}}}
	cat := New("public", nil, []*Relation{rel}, nil)
	cat.SetDatabase("db")
	var tks []*TenantKey
	for i := 0; i < n; i++ {
		name := "t" + string(rune('0'+i))
		id, epoch, wrapped, err := NewTenantKey(ring, name)
		if err != nil {
			t.Fatal(err)
		}
		tks = append(tks, &TenantKey{ID: id, Tenant: name, Epoch: epoch, Wrapped: wrapped})
	}
	cat.SetTenants(tks, map[uint32]string{77: "gone"})
	return keys, cat, b, ring
}

func TestTenantColumns(t *testing.T) {
	keys, cat, b, _ := tenantSetup(t, 5, 3)
	cols := map[string]*colcrypt.Column{}
	for _, name := range []string{"t0", "t1", "t2", "t3", "t4"} {
		c, err := keys.TenantColumn(cat, b, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !c.Header().IsTenant() || c.Spec().KeyID == b.Spec.KeyID {
			t.Fatalf("%s: header %+v", name, c.Header())
		}
		cols[name] = c
	}
	// the cache holds 3 at most; each tenant decrypts its own values only
	if held, _, misses := keys.TenantCacheStats(); held != 3 || misses != 5 {
		t.Errorf("cache: %d held, %d misses", held, misses)
	}
	ct, _ := cols["t1"].Encrypt("42", rand.Reader)
	x, _ := colcrypt.Parse(ct)
	back, err := keys.TenantColumnByID(cat, b, x.Header.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := back.Decrypt(ct); err != nil || p != "42" {
		t.Errorf("decrypted by key id: %q %v", p, err)
	}
	if _, err := cols["t2"].Decrypt(ct); err == nil {
		t.Error("t2's key decrypted t1's value")
	}
	// refusals
	var te *TenantError
	if _, err := keys.TenantColumn(cat, b, "nobody"); !errors.As(err, &te) {
		t.Errorf("a tenant without a key: %v", err)
	}
	if _, err := keys.TenantColumn(cat, b, "gone"); !errors.Is(err, ErrTenantShredded) {
		t.Errorf("a shredded tenant: %v", err)
	}
	if _, err := keys.TenantColumnByID(cat, b, 77); !errors.Is(err, ErrTenantShredded) {
		t.Errorf("a shredded key id: %v", err)
	}
	if _, err := keys.TenantColumnByID(cat, b, 12345); err == nil || errors.Is(err, ErrTenantShredded) {
		t.Errorf("an unknown key id: %v", err)
	}
	// a keyring without the keys' epoch, and none at all
	other, _ := colcrypt.NewKeyring(rand.Reader)
	other.Advance(rand.Reader)
	other.Drop(2)
	keys.SetTenantKeyring(other, 3)
	if _, err := keys.TenantColumn(cat, b, "t0"); err == nil {
		t.Error("a keyring without epoch 1 unwrapped a tenant key")
	}
	keys.SetTenantKeyring(nil, 3)
	if _, err := keys.TenantColumn(cat, b, "t0"); err == nil {
		t.Error("no keyring, and a tenant column")
	}
}

// BenchmarkTenantColumn: a tenant's column found in the cache (warm), and
// made again from its wrapped key (cold: unwrap, HKDF, the column's keys).
func BenchmarkTenantColumn(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int
	}{{"warm", 16}, {"cold", 1}} {
		b.Run(c.name, func(b *testing.B) {
			t := &testing.T{}
			keys, cat, bd, _ := tenantSetup(t, 2, c.cache)
			names := []string{"t0", "t1"}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := keys.TenantColumn(cat, bd, names[i%2]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
