package testcat

import (
	"crypto/rand"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// New returns enc_t(id int4, i4 enc_int4 EQ, i4o enc_int4_ord ORD,
// i8o enc_int8_ord ORD, t enc_text EQ, tm enc_text MATCH, tr enc_text RND,
// to2 enc_text_ord ORD, j enc_int4 EQ in group "g", k enc_int4 EQ in
// group "g", ti enc_text MATCH case-insensitive) and other(id int4, j
// enc_int4 EQ in group "g").
func New(t testing.TB) (*catalog.Catalog, *catalog.Keys) {
	t.Helper()
	k := newKeyring(t)
	enc := &catalog.Relation{OID: 16400, Schema: "public", Name: "enc_t", Attrs: []*catalog.Attr{
		{Name: "id", TypeOID: 23},
		k.bind("enc_t", "i4", "enc_int4", colcrypt.EQ, ""),
		k.bind("enc_t", "i4o", "enc_int4_ord", colcrypt.ORD, ""),
		k.bind("enc_t", "i8o", "enc_int8_ord", colcrypt.ORD, ""),
		k.bind("enc_t", "t", "enc_text", colcrypt.EQ, ""),
		k.bind("enc_t", "tm", "enc_text", colcrypt.MATCH, ""),
		k.bind("enc_t", "tr", "enc_text", colcrypt.RND, ""),
		k.bind("enc_t", "to2", "enc_text_ord", colcrypt.ORD, ""),
		k.bind("enc_t", "j", "enc_int4", colcrypt.EQ, "g"),
		k.bind("enc_t", "k", "enc_int4", colcrypt.EQ, "g"),
		k.bind("enc_t", "ti", "enc_text", colcrypt.MATCH, ""),
	}}
	enc.Attrs[len(enc.Attrs)-1].Binding.Spec.CaseInsensitive = true
	other := &catalog.Relation{OID: 16500, Schema: "public", Name: "other", Attrs: []*catalog.Attr{
		{Name: "id", TypeOID: 23},
		k.bind("other", "j", "enc_int4", colcrypt.EQ, "g"),
	}}
	return k.catalog(enc, other), k.keys
}

// Col is a column of a table that Build makes: encrypted (Level set, of
// plain type Plain) or plaintext (Level 0, of the built-in type TypeOID).
type Col struct {
	Name    string
	Plain   colcrypt.Type
	Level   colcrypt.Level
	TypeOID uint32
	// CaseInsensitive: a MATCH column bound case-insensitive
	CaseInsensitive bool
}

// Table is a table that Build makes.
type Table struct {
	Name string
	Cols []Col
}

// Build returns the catalog of tables under a new random column master
// key: those with encrypted columns, as catalog.Load reads them (the
// others stay unknown to it), each column bound under key k1 in its own
// join group.
func Build(t testing.TB, tables ...Table) (*catalog.Catalog, *catalog.Keys) {
	t.Helper()
	k := newKeyring(t)
	var rels []*catalog.Relation
	for i, tb := range tables {
		r := &catalog.Relation{OID: uint32(17000 + i), Schema: "public", Name: tb.Name}
		enc := false
		for _, c := range tb.Cols {
			if c.Level == 0 {
				r.Attrs = append(r.Attrs, &catalog.Attr{Name: c.Name, TypeOID: c.TypeOID})
				continue
			}
			typ := "enc_" + c.Plain.String()
			if c.Level == colcrypt.ORD {
				typ += "_ord"
			}
			a := k.bind(tb.Name, c.Name, typ, c.Level, "")
			a.Binding.Spec.CaseInsensitive = c.CaseInsensitive
			r.Attrs = append(r.Attrs, a)
			enc = true
		}
		if enc {
			rels = append(rels, r)
		}
	}
	return k.catalog(rels...), k.keys
}

// keyring: the encrypted types and one wrapped column key k1.
type keyring struct {
	keys    *catalog.Keys
	wrapped []byte
	types   map[string]*catalog.EncType
	list    []*catalog.EncType
}

func newKeyring(t testing.TB) *keyring {
	cmk := make([]byte, 32)
	rand.Read(cmk)
	k := &keyring{keys: catalog.NewKeys(cmk, "main"), types: map[string]*catalog.EncType{}}
	var err error
	if k.wrapped, err = k.keys.NewWrappedKey("k1"); err != nil {
		t.Fatal(err)
	}
	oid := uint32(90000)
	for _, pt := range colcrypt.Types {
		for _, ord := range []bool{false, true} {
			name := "enc_" + pt.String()
			if ord {
				name += "_ord"
			}
			et := &catalog.EncType{OID: oid, Name: name, Plain: pt, Ord: ord, ArrayOID: oid + 1}
			oid += 2
			k.types[name] = et
			k.list = append(k.list, et)
		}
	}
	return k
}

func (k *keyring) bind(rel, name, typ string, lvl colcrypt.Level, group string) *catalog.Attr {
	et := k.types[typ]
	label := "public." + rel + "." + name
	if group == "" {
		group = label
	}
	return &catalog.Attr{Name: name, TypeOID: et.OID, Enc: et, Binding: &catalog.Binding{
		Spec:    colcrypt.Spec{KeyID: 1, Type: et.Plain, Level: lvl, Label: label, Group: group},
		KeyName: "k1", CMKName: "main", WrappedCEK: k.wrapped}}
}

func (k *keyring) catalog(rels ...*catalog.Relation) *catalog.Catalog {
	for _, r := range rels {
		for i, a := range r.Attrs {
			a.Num = int16(i + 1)
		}
	}
	return catalog.New("public", k.list, rels, []string{"pg_catalog", "public"})
}

// Column returns the crypto of the bound column labelled label
// ("public.enc_t.i4") in cat, and its binding.
func Column(t testing.TB, cat *catalog.Catalog, keys *catalog.Keys, label string) (*colcrypt.Column, *catalog.Binding) {
	t.Helper()
	for _, b := range cat.Bindings() {
		if b.Spec.Label == label {
			c, err := keys.Column(b)
			if err != nil {
				t.Fatal(err)
			}
			return c, b
		}
	}
	t.Fatalf("testcat: no column %s", label)
	return nil, nil
}
