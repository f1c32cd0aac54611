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
// group "g") and other(id int4, j enc_int4 EQ in group "g").
func New(t testing.TB) (*catalog.Catalog, *catalog.Keys) {
	t.Helper()
	cmk := make([]byte, 32)
	rand.Read(cmk)
	keys := catalog.NewKeys(cmk, "main")
	wrapped, err := keys.NewWrappedKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]*catalog.EncType{}
	var list []*catalog.EncType
	oid := uint32(90000)
	for _, pt := range colcrypt.Types {
		for _, ord := range []bool{false, true} {
			name := "enc_" + pt.String()
			if ord {
				name += "_ord"
			}
			et := &catalog.EncType{OID: oid, Name: name, Plain: pt, Ord: ord, ArrayOID: oid + 1}
			oid += 2
			types[name] = et
			list = append(list, et)
		}
	}
	bind := func(rel, name, typ string, lvl colcrypt.Level, group string) *catalog.Attr {
		et := types[typ]
		label := "public." + rel + "." + name
		if group == "" {
			group = label
		}
		return &catalog.Attr{Name: name, TypeOID: et.OID, Enc: et, Binding: &catalog.Binding{
			Spec:    colcrypt.Spec{KeyID: 1, Type: et.Plain, Level: lvl, Label: label, Group: group},
			KeyName: "k1", CMKName: "main", WrappedCEK: wrapped}}
	}
	enc := &catalog.Relation{OID: 16400, Schema: "public", Name: "enc_t", Attrs: []*catalog.Attr{
		{Name: "id", TypeOID: 23},
		bind("enc_t", "i4", "enc_int4", colcrypt.EQ, ""),
		bind("enc_t", "i4o", "enc_int4_ord", colcrypt.ORD, ""),
		bind("enc_t", "i8o", "enc_int8_ord", colcrypt.ORD, ""),
		bind("enc_t", "t", "enc_text", colcrypt.EQ, ""),
		bind("enc_t", "tm", "enc_text", colcrypt.MATCH, ""),
		bind("enc_t", "tr", "enc_text", colcrypt.RND, ""),
		bind("enc_t", "to2", "enc_text_ord", colcrypt.ORD, ""),
		bind("enc_t", "j", "enc_int4", colcrypt.EQ, "g"),
		bind("enc_t", "k", "enc_int4", colcrypt.EQ, "g"),
	}}
	other := &catalog.Relation{OID: 16500, Schema: "public", Name: "other", Attrs: []*catalog.Attr{
		{Name: "id", TypeOID: 23},
		bind("other", "j", "enc_int4", colcrypt.EQ, "g"),
	}}
	for i, a := range enc.Attrs {
		a.Num = int16(i + 1)
	}
	for i, a := range other.Attrs {
		a.Num = int16(i + 1)
	}
	return catalog.New("public", list, []*catalog.Relation{enc, other}, []string{"pg_catalog", "public"}), keys
}
