package colcrypt

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTenantKeyWrap(t *testing.T) {
	tkk, tk := bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{9}, 32)
	w, err := WrapTenantKey(tkk, tk, "t42", 4242, 3, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != WrappedCEKSize {
		t.Fatalf("wrapped %d bytes", len(w))
	}
	got, err := UnwrapTenantKey(tkk, w, "t42", 4242, 3)
	if err != nil || !bytes.Equal(got, tk) {
		t.Fatalf("unwrap: %v", err)
	}
	// each bound field, and another keyring key, fail authentication
	for _, c := range []struct {
		name   string
		tkk    []byte
		tenant string
		id     uint32
		epoch  int
	}{
		{"tenant", tkk, "t43", 4242, 3},
		{"key id", tkk, "t42", 4243, 3},
		{"epoch", tkk, "t42", 4242, 4},
		{"keyring key", bytes.Repeat([]byte{8}, 32), "t42", 4242, 3},
	} {
		if _, err := UnwrapTenantKey(c.tkk, w, c.tenant, c.id, c.epoch); err == nil {
			t.Errorf("another %s unwrapped", c.name)
		}
	}
	if _, err := WrapTenantKey(tkk, tk, "", 1, 1, rand.Reader); err == nil {
		t.Error("an empty tenant name wrapped")
	}
}

// tenantColumn is a column of tenant key tk (id) under column key "k".
func tenantColumn(t *testing.T, tk []byte, id uint32, s Spec) *Column {
	t.Helper()
	key, err := TenantColumnKey(tk, "k")
	if err != nil {
		t.Fatal(err)
	}
	s.KeyID, s.Tenant, s.Label = id, true, "public.t.c"
	c, err := NewColumn(key, s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTenantColumns(t *testing.T) {
	tk1, tk2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	for _, s := range []Spec{
		{Type: Int8, Level: ORD, OREFormat: "2"},
		{Type: Int8, Level: ORD, OREFormat: "1+2"},
		{Type: Int4, Level: EQ},
		{Type: Text, Level: MATCH},
		{Type: Text, Level: MATCH, CaseInsensitive: true},
	} {
		a, b := tenantColumn(t, tk1, 10, s), tenantColumn(t, tk2, 20, s)
		plain := "7"
		if s.Type == Text {
			plain = "zebra"
		}
		x, err := a.Encrypt(plain, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		x2, _ := a.Encrypt(plain, rand.Reader)
		y, _ := b.Encrypt(plain, rand.Reader)
		ct, err := Parse(x)
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		if !ct.Header.IsTenant() || ct.Header.KeyID != 10 {
			t.Fatalf("%v: header %+v", s, ct.Header)
		}
		py, _ := Parse(y)
		if ct.Header.Identity() != py.Header.Identity() {
			t.Errorf("%v: two tenants' values of one column have identities %+v and %+v", s, ct.Header.Identity(), py.Header.Identity())
		}
		if eq, err := Equal(x, x2); err != nil || !eq {
			t.Errorf("%v: one tenant's equal values: %v %v", s, eq, err)
		}
		if eq, err := Equal(x, y); err != nil || eq {
			t.Errorf("%v: two tenants' values equal: %v %v", s, eq, err)
		}
		if s.Level == ORD {
			if c, err := Compare(x, y); err != nil || c != -1 {
				t.Errorf("%v: key 10 against key 20: %d %v", s, c, err)
			}
			q, _ := b.EncryptOperand([]byte{0, 0, 0, 0, 0, 0, 0, 7}, rand.Reader)
			if c, err := Compare(y, q); err != nil || c != 0 {
				t.Errorf("%v: a tenant's value against its own query: %d %v", s, c, err)
			}
		}
		if s.Level == MATCH {
			q, err := b.EncryptPattern("%zeb%", rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			if m, err := MayMatch(y, q); err != nil || !m {
				t.Errorf("%v: own tenant's pattern: %v %v", s, m, err)
			}
			if m, err := MayMatch(x, q); err != nil || m {
				t.Errorf("%v: another tenant's pattern matched: %v %v", s, m, err)
			}
		}
		if got, err := a.Decrypt(x); err != nil || got != plain {
			t.Errorf("%v: decrypt: %q %v", s, got, err)
		}
		// another tenant's keys, even with the key id put back, do not decrypt
		forged := bytes.Clone(y)
		copy(forged[4:8], x[4:8])
		if _, err := a.Decrypt(forged); err == nil {
			t.Errorf("%v: tenant 1 decrypted tenant 2's value", s)
		}
		// a value that is not a tenant's never compares with one that is
		plainCol, _ := NewColumn(tk1, Spec{KeyID: 10, Type: s.Type, Level: s.Level, Label: "public.t.c",
			OREFormat: s.OREFormat, CaseInsensitive: s.CaseInsensitive})
		z, _ := plainCol.Encrypt(plain, rand.Reader)
		if s.Level != MATCH {
			if _, err := Equal(x, z); err == nil {
				t.Errorf("%v: a tenant's value compared with a column key's", s)
			}
		}
	}
}

func TestKeyring(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keyring")
	cmk := bytes.Repeat([]byte{3}, 32)
	r, err := NewKeyring(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Write(path, cmk, "main", rand.Reader); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keyring file: %v %v", fi, err)
	}
	_, k1 := r.Newest()
	e, err := r.Advance(rand.Reader)
	if err != nil || e != 2 {
		t.Fatalf("advance: %d %v", e, err)
	}
	if err := r.Write(path, cmk, "main", rand.Reader); err != nil {
		t.Fatal(err)
	}
	got, err := LoadKeyring(path, cmk, "main")
	if err != nil {
		t.Fatal(err)
	}
	if ep := got.Epochs(); len(ep) != 2 || !bytes.Equal(got.Key(1), k1) {
		t.Fatalf("epochs %v", ep)
	}
	got.Drop(2)
	os.Chmod(path, 0o644) // the group's read is kept, the others' never
	if err := got.Write(path, cmk, "main", rand.Reader); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("a keyring replaced over mode 0644 has mode %v, want 0640", fi.Mode().Perm())
	}
	again, err := LoadKeyring(path, cmk, "main")
	if err != nil || again.Key(1) != nil || again.Key(2) == nil {
		t.Fatalf("after dropping epoch 1: %v %v", again.Epochs(), err)
	}
	data, _ := os.ReadFile(path)
	if strings.Count(string(data), "epoch ") != 1 {
		t.Fatalf("file holds %q", data)
	}
	if _, err := LoadKeyring(path, bytes.Repeat([]byte{4}, 32), "main"); err == nil {
		t.Error("another CMK read the keyring")
	}
	if _, err := LoadKeyring(path, cmk, "other"); err == nil {
		t.Error("another CMK name read the keyring")
	}
	os.WriteFile(path, []byte("epoch 1 00\n"), 0o600)
	if _, err := LoadKeyring(path, cmk, "main"); err == nil || !strings.Contains(err.Error(), "not a tenant keyring") {
		t.Errorf("a file without the header: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}
