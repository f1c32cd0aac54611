package catalog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// wrapped is the test's column key, as the server stores it.
var wrapped = bytes.Repeat([]byte{9}, colcrypt.WrappedCEKSize)

// signed returns the grant's row as pgcipher-keys would sign it, for
// the column key wrapped.
func signed(t testing.TB, cmk []byte, g colcrypt.Grant) GrantRow {
	key, err := colcrypt.RightsKey(cmk, "main")
	if err != nil {
		t.Fatal(err)
	}
	g.WrappedCEK = wrapped
	row := GrantRow{Grant: g, MAC: g.MAC(key)}
	row.WrappedCEK = nil // not in the server's row
	return row
}

// binding is a column of the test catalog, bound under key k1.
func binding(label string) *Binding {
	return &Binding{Spec: colcrypt.Spec{Label: label}, KeyName: "k1", WrappedCEK: wrapped, Database: "db"}
}

// rightsCatalog is a catalog of bindings bs with the grants rows.
func rightsCatalog(rows []GrantRow, bs ...*Binding) *Catalog {
	rel := &Relation{OID: 1, Schema: "public", Name: "p"}
	for i, b := range bs {
		rel.Attrs = append(rel.Attrs, &Attr{Name: b.Spec.Label, Num: int16(i + 1), Binding: b})
	}
	c := New("public", nil, []*Relation{rel}, nil)
	c.SetGrants(rows)
	c.SetDatabase("db")
	return c
}

// The rights matrix: roles × columns × the access a statement needs,
// against what the grants allow.
func TestRightsMatrix(t *testing.T) {
	cmk := bytes.Repeat([]byte{1}, 32)
	keys := NewKeys(cmk, "main")
	ssn, email, legacy := binding("public.p.ssn"), binding("public.p.email"), binding("public.old.c")
	rows := []GrantRow{
		signed(t, cmk, colcrypt.Grant{Label: "public.p.ssn", KeyName: "k1", Role: "owner", Access: colcrypt.AccessRead, Serial: 1}),
		signed(t, cmk, colcrypt.Grant{Label: "public.p.ssn", KeyName: "k1", Role: "loader", Access: colcrypt.AccessWrite, Serial: 1}),
		signed(t, cmk, colcrypt.Grant{Label: "public.p.ssn", KeyName: "k1", Role: "gone", Access: colcrypt.AccessNone, Serial: 2}),
		signed(t, cmk, colcrypt.Grant{Label: "public.p.email", KeyName: "k1", Role: "owner", Access: colcrypt.AccessRead, Serial: 1}),
		signed(t, cmk, colcrypt.Grant{Label: "public.p.email", KeyName: "k1", Role: "analyst", Access: colcrypt.AccessRead, Serial: 1}),
		// a grant of the DBA's making: right fields, MAC of another key
		{Grant: colcrypt.Grant{Label: "public.p.email", KeyName: "k1", Role: "postgres", Access: colcrypt.AccessRead, Serial: 9},
			MAC: bytes.Repeat([]byte{0}, 32)},
	}
	cat := rightsCatalog(rows, ssn, email, legacy)
	W, R := colcrypt.AccessWrite, colcrypt.AccessRead
	type want int
	const (
		ok want = iota
		denied
		forged
	)
	for _, tc := range []struct {
		role string
		b    *Binding
		need colcrypt.Access
		want want
	}{
		{"owner", ssn, R, ok}, {"owner", ssn, W, ok},
		{"loader", ssn, W, ok}, {"loader", ssn, R, denied},
		{"gone", ssn, W, denied}, {"gone", ssn, R, denied},
		{"analyst", ssn, R, denied}, {"analyst", ssn, W, denied},
		{"analyst", email, R, ok}, {"loader", email, W, denied},
		{"postgres", ssn, R, denied}, {"postgres", ssn, W, denied},
		{"postgres", email, R, forged}, {"postgres", email, W, forged},
		// a column without grants: every role, as before rights
		{"postgres", legacy, R, ok}, {"anyone", legacy, W, ok},
	} {
		err := keys.Allow(cat, tc.b, tc.role, tc.need)
		var re *RightError
		got := ok
		switch {
		case errors.Is(err, ErrRightForged):
			got = forged
		case errors.As(err, &re):
			got = denied
		case err != nil:
			t.Fatalf("%s %s %v: %v", tc.role, tc.b.Spec.Label, tc.need, err)
		}
		if got != tc.want {
			t.Errorf("%s needs %v on %s: got %d, want %d (%v)", tc.role, tc.need, tc.b.Spec.Label, got, tc.want, err)
		}
	}

	// ungranted-columns = none closes the legacy column
	keys.SetUngranted(UngrantedNone)
	if err := keys.Allow(cat, legacy, "postgres", R); err == nil {
		t.Errorf("ungranted none: a column without grants was readable")
	}
	keys.SetUngranted(UngrantedAll)

	// the server drops every grant of ssn, and puts back analyst's old
	// grant on email after its revocation: neither widens a right
	revoked := signed(t, cmk, colcrypt.Grant{Label: "public.p.email", KeyName: "k1", Role: "analyst", Access: colcrypt.AccessNone, Serial: 2})
	cat2 := rightsCatalog([]GrantRow{rows[3], revoked}, ssn, email)
	if err := keys.Allow(cat2, email, "analyst", R); err == nil {
		t.Errorf("a revoked right still reads")
	}
	cat3 := rightsCatalog([]GrantRow{rows[3], rows[4]}, ssn, email)
	if err := keys.Allow(cat3, email, "analyst", R); !errors.Is(err, ErrRightForged) {
		t.Errorf("an old grant put back after its revocation: %v, want ErrRightForged", err)
	}
	if err := keys.Allow(cat3, ssn, "owner", R); err == nil {
		t.Errorf("a column whose grants the server removed fell back to every role")
	}

	// a grant signed for the column under another key does not apply:
	// another key name, or the same names over another wrapped key
	// (another database whose column and key are named alike)
	rekeyed := binding("public.p.email")
	rekeyed.KeyName = "k2"
	if err := keys.Allow(rightsCatalog(rows[3:5], rekeyed), rekeyed, "owner", R); err == nil {
		t.Errorf("a grant for key k1 allowed the column bound to k2")
	}
	elsewhere := binding("public.p.email")
	elsewhere.WrappedCEK, elsewhere.Database = bytes.Repeat([]byte{8}, colcrypt.WrappedCEKSize), "db2"
	c2 := rightsCatalog(rows[3:5], elsewhere)
	c2.SetDatabase("db2")
	if err := keys.Allow(c2, elsewhere, "analyst", R); !errors.Is(err, ErrRightForged) {
		t.Errorf("a grant copied into another database, its column under another key: %v", err)
	}
	// another CMK verifies nothing
	other := NewKeys(bytes.Repeat([]byte{2}, 32), "main")
	if err := other.Allow(rightsCatalog(rows, email), email, "owner", R); !errors.Is(err, ErrRightForged) {
		t.Errorf("a proxy with another CMK accepted a grant: %v", err)
	}
}

// BenchmarkAllow: the check a statement pays per encrypted column it uses.
func BenchmarkAllow(b *testing.B) {
	cmk := bytes.Repeat([]byte{1}, 32)
	keys := NewKeys(cmk, "main")
	var rows []GrantRow
	for i := 0; i < 1000; i++ {
		rows = append(rows, signed(b, cmk, colcrypt.Grant{Label: "public.p.c", KeyName: "k1",
			Role: "role" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)), Access: colcrypt.AccessRead, Serial: 1}))
	}
	bd := binding("public.p.c")
	cat := rightsCatalog(rows, bd)
	if err := keys.Allow(cat, bd, "roleab", colcrypt.AccessRead); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := keys.Allow(cat, bd, "roleab", colcrypt.AccessRead); err != nil {
			b.Fatal(err)
		}
	}
}
