package catalog

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

func TestKeysPinAndUnwrap(t *testing.T) {
	cmk := make([]byte, 32)
	rand.Read(cmk)
	k := NewKeys(cmk, "main")
	wrapped, err := k.NewWrappedKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	b := &Binding{Spec: colcrypt.Spec{KeyID: 1, Type: colcrypt.Int4, Level: colcrypt.EQ, Label: "public.t.c"},
		KeyName: "k1", CMKName: "main", WrappedCEK: wrapped}
	c1, err := k.Column(b)
	if err != nil {
		t.Fatal(err)
	}
	same := *b
	if c2, err := k.Column(&same); err != nil || c2 != c1 {
		t.Fatalf("the same binding again: %v, %v", c2 == c1, err)
	}
	for name, change := range map[string]func(*Binding){
		"level":       func(x *Binding) { x.Spec.Level = colcrypt.RND },
		"key id":      func(x *Binding) { x.Spec.KeyID = 2 },
		"join group":  func(x *Binding) { x.Spec.Group = "other" },
		"wrapped key": func(x *Binding) { x.WrappedCEK = append([]byte(nil), wrapped[:len(wrapped)-1]...) },
	} {
		x := *b
		change(&x)
		if _, err := k.Column(&x); !errors.Is(err, ErrPinMismatch) {
			t.Errorf("a server that changes the %s: %v, want ErrPinMismatch", name, err)
		}
	}
	other := *b
	other.Spec.Label, other.CMKName = "public.t.d", "someone-elses"
	if _, err := k.Column(&other); !errors.Is(err, ErrForeignCMK) {
		t.Errorf("a key under another CMK: %v", err)
	}
	bad := *b
	bad.Spec.Label, bad.KeyName = "public.t.e", "k2" // the name is wrapped in: does not unwrap
	if _, err := k.Column(&bad); err == nil {
		t.Error("a wrapped key registered under another name unwrapped")
	}
}

func TestLookupAndMentions(t *testing.T) {
	et := &EncType{OID: 9001, Name: "enc_int4", Plain: colcrypt.Int4}
	a := &Relation{OID: 1, Schema: "a", Name: "patients", Attrs: []*Attr{{Name: "c", Num: 1, TypeOID: 9001, Enc: et}}}
	b := &Relation{OID: 2, Schema: "b", Name: "patients", Attrs: []*Attr{{Name: "c", Num: 1, TypeOID: 9001, Enc: et}}}
	c := New("public", []*EncType{et}, []*Relation{a, b}, []string{"pg_catalog", "b", "a"})
	if got := c.Lookup("", "patients"); got != b {
		t.Errorf("unqualified patients resolved to %v, want schema b (first in the search path)", got)
	}
	if got := c.Lookup("a", "patients"); got != a {
		t.Errorf("a.patients resolved to %v", got)
	}
	if c.Lookup("", "u") != nil {
		t.Error("an unknown relation resolved")
	}
	if !c.Mentions("select * from PATIENTS where x = 1") || c.Mentions("select 1") || !c.Mentions("SELECT pgcipher.add_column_key('x')") {
		t.Error("Mentions")
	}
	if Empty().Mentions("select * from t") {
		t.Error("a database without the extension mentions nothing but pgcipher")
	}
}

// TestPinsPerDatabase: two databases may each have a column labelled
// public.t.c under keys of their own (one proxy in front of both); within
// one database a changed binding is still refused.
func TestPinsPerDatabase(t *testing.T) {
	cmk := make([]byte, 32)
	k := NewKeys(cmk, "main")
	bind := func(db string) *Binding {
		w, err := k.NewWrappedKey("k1")
		if err != nil {
			t.Fatal(err)
		}
		return &Binding{Spec: colcrypt.Spec{KeyID: 1, Type: colcrypt.Text, Level: colcrypt.EQ, Label: "public.t.c", Group: "public.t.c"},
			KeyName: "k1", CMKName: "main", WrappedCEK: w, Database: db}
	}
	a, b := bind("app1"), bind("app2")
	if _, err := k.Column(a); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Column(b); err != nil {
		t.Errorf("the same label in another database, under its own key: %v", err)
	}
	if _, err := k.Column(bind("app1")); !errors.Is(err, ErrPinMismatch) {
		t.Errorf("another key for a label pinned in the same database: %v, want ErrPinMismatch", err)
	}
}
