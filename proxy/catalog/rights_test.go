package catalog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// signed returns the grant's row as pgcipher-keys would sign it.
func signed(t *testing.T, cmk []byte, g colcrypt.Grant) GrantRow {
	key, err := colcrypt.RightsKey(cmk, "main")
	if err != nil {
		t.Fatal(err)
	}
	return GrantRow{Grant: g, MAC: g.MAC(key)}
}

func rightsCatalog(rows []GrantRow) *Catalog {
	c := Empty()
	c.SetGrants(rows)
	c.SetDatabase("db")
	return c
}

// The rights matrix: roles × columns × the access a statement needs,
// against what the grants allow.
func TestRightsMatrix(t *testing.T) {
	cmk := bytes.Repeat([]byte{1}, 32)
	keys := NewKeys(cmk, "main")
	ssn := &Binding{Spec: colcrypt.Spec{Label: "public.p.ssn"}, KeyName: "k1", Database: "db"}
	email := &Binding{Spec: colcrypt.Spec{Label: "public.p.email"}, KeyName: "k1", Database: "db"}
	legacy := &Binding{Spec: colcrypt.Spec{Label: "public.old.c"}, KeyName: "k1", Database: "db"}
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
	cat := rightsCatalog(rows)
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
	cat2 := rightsCatalog([]GrantRow{rows[3], revoked})
	if err := keys.Allow(cat2, email, "analyst", R); err == nil {
		t.Errorf("a revoked right still reads")
	}
	cat3 := rightsCatalog([]GrantRow{rows[3], rows[4]})
	if err := keys.Allow(cat3, email, "analyst", R); !errors.Is(err, ErrRightForged) {
		t.Errorf("an old grant put back after its revocation: %v, want ErrRightForged", err)
	}
	if err := keys.Allow(cat3, ssn, "owner", R); err == nil {
		t.Errorf("a column whose grants the server removed fell back to every role")
	}

	// a grant signed for the column under another key does not apply
	rekeyed := &Binding{Spec: colcrypt.Spec{Label: "public.p.email"}, KeyName: "k2", Database: "db"}
	if err := keys.Allow(cat2, rekeyed, "owner", R); err == nil {
		t.Errorf("a grant for key k1 allowed the column bound to k2")
	}
	// another CMK verifies nothing
	other := NewKeys(bytes.Repeat([]byte{2}, 32), "main")
	if err := other.Allow(rightsCatalog(rows), email, "owner", R); !errors.Is(err, ErrRightForged) {
		t.Errorf("a proxy with another CMK accepted a grant: %v", err)
	}
}

// BenchmarkAllow: the check a statement pays per encrypted column it uses.
func BenchmarkAllow(b *testing.B) {
	cmk := bytes.Repeat([]byte{1}, 32)
	keys := NewKeys(cmk, "main")
	key, _ := colcrypt.RightsKey(cmk, "main")
	var rows []GrantRow
	for i := 0; i < 1000; i++ {
		g := colcrypt.Grant{Label: "public.p.c", KeyName: "k1", Role: "role" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)), Access: colcrypt.AccessRead, Serial: 1}
		rows = append(rows, GrantRow{Grant: g, MAC: g.MAC(key)})
	}
	cat := rightsCatalog(rows)
	bd := &Binding{Spec: colcrypt.Spec{Label: "public.p.c"}, KeyName: "k1", Database: "db"}
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
