// The tenant test-vector file (design 13.13): values of one column under
// two tenants' keys, and under the column key itself, with a fixed random
// stream, so that the Go tests regenerate it byte for byte and the C
// tests (columns/test/sql/11_tenants.sql) load it.

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	mrand "math/rand/v2"
	"strconv"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
)

// The tenants of the vectors: key ids and fixed tenant keys (never use
// them for anything else); the column key named tenantVectorKey.
var tenantVectorKeys = []struct {
	tenant string
	keyID  uint32
	hex    string
}{
	{"t1", 101, "1111111111111111111111111111111111111111111111111111111111111111"},
	{"t2", 202, "2222222222222222222222222222222222222222222222222222222222222222"},
}

const (
	tenantVectorKey   = "vk"
	tenantVectorLabel = "public.tv.v"
)

// tenantVectorSets: per type and level, the plaintexts each tenant
// encrypts (a MATCH set's patterns follow as PATTERN rows).
var tenantVectorSets = []struct {
	typ      colcrypt.Type
	level    colcrypt.Level
	plains   []string
	patterns []string
}{
	{colcrypt.Int4, colcrypt.EQ, []string{"1", "2", "3"}, nil},
	{colcrypt.Int8, colcrypt.ORD, []string{"-5", "0", "7", "42"}, nil},
	{colcrypt.Text, colcrypt.MATCH, []string{"abc", "zebra"}, []string{"%ab%", "%zeb%"}},
}

// tenantVectors returns the CSV: type,level,tenant,key_id,n,plain,ct.
// Tenant "-" rows are under the column key (key id 1), not a tenant's.
func tenantVectors() ([]byte, error) {
	random := mrand.NewChaCha8(seed("pgcipher tenant vector randomness"))
	cek, _ := hex.DecodeString(vectorCEK1Hex)
	var b bytes.Buffer
	b.WriteString("type,level,tenant,key_id,n,plain,ct\n")
	n := 0
	row := func(t colcrypt.Type, level, tenant string, keyID uint32, plain string, ct []byte) {
		n++
		for i, f := range []string{t.String(), level, tenant, strconv.FormatUint(uint64(keyID), 10),
			strconv.Itoa(n), plain, base64.StdEncoding.EncodeToString(ct)} {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(csvField(f))
		}
		b.WriteByte('\n')
	}
	type owner struct {
		tenant string
		keyID  uint32
		key    []byte
	}
	owners := []owner{{"-", 1, cek}}
	for _, k := range tenantVectorKeys {
		tk, _ := hex.DecodeString(k.hex)
		key, err := colcrypt.TenantColumnKey(tk, tenantVectorKey)
		if err != nil {
			return nil, err
		}
		owners = append(owners, owner{k.tenant, k.keyID, key})
	}
	for _, o := range owners {
		for _, set := range tenantVectorSets {
			spec := colcrypt.Spec{KeyID: o.keyID, Type: set.typ, Level: set.level, Label: tenantVectorLabel,
				Tenant: o.tenant != "-"}
			if set.level == colcrypt.ORD {
				spec.OREFormat = "2"
			}
			col, err := colcrypt.NewColumn(o.key, spec)
			if err != nil {
				return nil, err
			}
			for _, p := range set.plains {
				ct, err := col.Encrypt(p, random)
				if err != nil {
					return nil, err
				}
				row(set.typ, set.level.String(), o.tenant, o.keyID, p, ct)
			}
			for _, p := range set.patterns {
				ct, err := col.EncryptPattern(p, random)
				if err != nil {
					return nil, err
				}
				row(set.typ, patternLevel, o.tenant, o.keyID, p, ct)
			}
		}
	}
	return b.Bytes(), nil
}
