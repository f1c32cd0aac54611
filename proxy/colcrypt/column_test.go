// Tests of Column: round trips of every type at every level, the server's
// order and equality on ciphertexts against PostgreSQL's on plaintexts,
// binding to label, key and group, and malformed input.

package colcrypt

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var testCEK = bytes.Repeat([]byte{0x42}, 32)

func testColumn(t testing.TB, ty Type, l Level, label string) *Column {
	t.Helper()
	c, err := NewColumn(testCEK, Spec{KeyID: 1, Type: ty, Level: l, Label: label})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustEncrypt(t testing.TB, c *Column, s string) []byte {
	t.Helper()
	ct, err := c.Encrypt(s, rand.Reader)
	if err != nil {
		t.Fatalf("Encrypt(%s %q): %v", c.spec.Type, s, err)
	}
	return ct
}

func sampleValue(ty Type) string {
	return map[Type]string{
		Int4: "7", Int8: "7", Float8: "7.5", Numeric: "7.50", Text: "seven",
		Bytea: `\x07`, Date: "2007-07-07", Timestamptz: "2007-07-07 07:07:07.7+00", Bool: "t",
	}[ty]
}

// edgeValues are each type's edge cases, in PostgreSQL's text form.
var edgeValues = map[Type][]string{
	Int4:    {"-2147483648", "-2147483647", "-65536", "-256", "-16", "-1", "0", "1", "15", "16", "255", "256", "65535", "65536", "2147483646", "2147483647"},
	Int8:    {"-9223372036854775808", "-9223372036854775807", "-4294967296", "-2147483649", "-1", "0", "1", "15", "16", "4294967296", "9223372036854775806", "9223372036854775807"},
	Float8:  {"-Infinity", "-1e308", "-1.5", "-1", "-5e-324", "-0", "0", "5e-324", "2.2250738585072014e-308", "1", "1.0000000000000002", "1.5", "1e20", "1.7976931348623157e+308", "Infinity", "NaN", "nan"},
	Numeric: {"-Infinity", "-1e10", "-123.45", "-1", "-0.001", "-0", "0", "0.000", "0.001", "0.01", "0.1", "1", "1.0", "1.00", "9.99", "10", "12345678901234567890.123456789", "123456789012345678901234", "123456789012345678901234.5", "123456789012345678901235", "1e10", "Infinity", "NaN"},
	Text:    {"", "a", "ab", "abc", "b", "Zebra", "zebra", "café", "\xff", "0123456789abcdef", "0123456789abcdef0", "0123456789abcdefA", "0123456789abcdeg"},
	Bytea:   {`\x`, `\x00`, `\x0000`, `\x0001`, `\x01`, `\x61`, `\x7f`, `\x80`, `\xff`, `\xffff`},
	Date:    {"-infinity", "0001-01-01", "1999-12-31", "2000-01-01", "2000-01-02", "2024-02-29", "9999-12-31", "infinity"},
	Timestamptz: {"-infinity", "0001-01-01 00:00:00", "1999-12-31 23:59:59.999999+00", "2000-01-01 00:00:00+00",
		"2000-01-01 00:00:00.000001", "2024-06-01 12:00:00.5+02", "2024-06-01 10:00:00.5Z", "9999-12-31 23:59:59.999999", "infinity"},
	Bool: {"f", "t", "false", "true"},
}

// randomValues draws n random values of a type, in text form.
func randomValues(ty Type, r *mrand.Rand, n int) []string {
	out := make([]string, n)
	for i := range out {
		switch ty {
		case Int4:
			out[i] = strconv.Itoa(int(int32(r.Uint32())) >> r.IntN(32))
		case Int8:
			out[i] = strconv.FormatInt(int64(r.Uint64())>>r.IntN(64), 10)
		case Float8:
			if i%2 == 0 {
				out[i] = FormatFloat8(math.Float64frombits(r.Uint64()))
			} else {
				out[i] = FormatFloat8(r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10)))
			}
		case Numeric:
			var b strings.Builder
			if r.IntN(2) == 0 {
				b.WriteByte('-')
			}
			for j := r.IntN(30) + 1; j > 0; j-- {
				b.WriteByte(byte('0' + r.IntN(10)))
			}
			if r.IntN(2) == 0 {
				b.WriteByte('.')
				for j := r.IntN(6); j > 0; j-- {
					b.WriteByte(byte('0' + r.IntN(10)))
				}
			}
			if r.IntN(3) == 0 {
				fmt.Fprintf(&b, "e%d", r.IntN(40)-20)
			}
			out[i] = b.String()
		case Text, Bytea:
			b := make([]byte, r.IntN(20))
			for j := range b {
				b[j] = "aAb\x00\xff"[r.IntN(5)]
			}
			if ty == Text {
				out[i] = strings.ReplaceAll(string(b), "\x00", "z")
			} else {
				out[i] = fmt.Sprintf(`\x%x`, b)
			}
		case Date:
			out[i] = pgEpoch.AddDate(0, 0, r.IntN(2000000)-700000).Format("2006-01-02")
		case Timestamptz:
			us := r.Int64N(300000000000000000) - 60000000000000000
			s, err := formatTimestamptz(us)
			if err != nil {
				panic(err)
			}
			out[i] = s
		case Bool:
			out[i] = []string{"t", "f"}[r.IntN(2)]
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	r := mrand.New(mrand.NewPCG(5, 6))
	for _, ty := range Types {
		for _, l := range Levels {
			if !ty.HasLevel(l) {
				continue
			}
			c := testColumn(t, ty, l, "public.t."+ty.String())
			for _, v := range append(slices.Clone(edgeValues[ty]), randomValues(ty, r, 10)...) {
				p, _ := Encode(ty, v)
				ct := mustEncrypt(t, c, v)
				if len(ct) != Size(ty, l, len(p)) {
					t.Errorf("%s %s %q: %d bytes, want %d", ty, l, v, len(ct), Size(ty, l, len(p)))
				}
				got, err := c.Decrypt(ct)
				if err != nil {
					t.Fatalf("%s %s %q: %v", ty, l, v, err)
				}
				want, _ := Decode(ty, p)
				if got != want {
					t.Errorf("%s %s: %q decrypts to %q, want %q", ty, l, v, got, want)
				}
				txt, err := c.EncryptText(v, rand.Reader)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := c.DecryptText(txt); err != nil || got != want {
					t.Errorf("%s %s text form: %q, %v", ty, l, got, err)
				}
			}
		}
	}
}

// refCompare is PostgreSQL's comparison of two values of a type.
func refCompare(t *testing.T, ty Type, a, b string) int {
	pa, err := Encode(ty, a)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := Encode(ty, b)
	if err != nil {
		t.Fatal(err)
	}
	switch ty {
	case Int4, Date:
		return cmpInt(int64(int32(binary.BigEndian.Uint32(pa))), int64(int32(binary.BigEndian.Uint32(pb))))
	case Int8, Timestamptz:
		return cmpInt(int64(binary.BigEndian.Uint64(pa)), int64(binary.BigEndian.Uint64(pb)))
	case Float8:
		x := math.Float64frombits(binary.BigEndian.Uint64(pa))
		y := math.Float64frombits(binary.BigEndian.Uint64(pb))
		switch { // NaN is greatest and equal to itself
		case math.IsNaN(x) && math.IsNaN(y):
			return 0
		case math.IsNaN(x):
			return 1
		case math.IsNaN(y):
			return -1
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case Numeric:
		return cmpNumeric(t, a, b)
	case Text, Bytea, Bool:
		return bytes.Compare(pa, pb)
	}
	t.Fatalf("no reference for %s", ty)
	return 0
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpNumeric compares with math/big: -Infinity < finite < Infinity < NaN.
func cmpNumeric(t *testing.T, a, b string) int {
	rank := func(s string) (int, *big.Rat) {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "nan":
			return 3, nil
		case "infinity", "+infinity", "inf", "+inf":
			return 2, nil
		case "-infinity", "-inf":
			return 0, nil
		}
		x, ok := new(big.Rat).SetString(strings.TrimSpace(s))
		if !ok {
			t.Fatalf("big.Rat cannot parse %q", s)
		}
		return 1, x
	}
	ra, xa := rank(a)
	rb, xb := rank(b)
	if ra != rb || ra != 1 {
		return cmpInt(int64(ra), int64(rb))
	}
	return xa.Cmp(xb)
}

// exactPrefixEqual reports whether two values tie in the order input, so
// that only equality (not the plaintext order) is guaranteed.
func orderInputsEqual(t *testing.T, ty Type, a, b string) bool {
	pa, _ := Encode(ty, a)
	pb, _ := Encode(ty, b)
	oa, err := OrderInput(ty, pa)
	if err != nil {
		t.Fatal(err)
	}
	ob, _ := OrderInput(ty, pb)
	return bytes.Equal(oa, ob)
}

func TestServerOrderAgreesWithPostgres(t *testing.T) {
	r := mrand.New(mrand.NewPCG(7, 8))
	for _, ty := range Types {
		t.Run(ty.String(), func(t *testing.T) {
			c := testColumn(t, ty, ORD, "public.t.c")
			vals := append(slices.Clone(edgeValues[ty]), randomValues(ty, r, 30)...)
			cts := make([][]byte, len(vals))
			for i, v := range vals {
				cts[i] = mustEncrypt(t, c, v)
			}
			for i := range vals {
				for j := range vals {
					got, err := Compare(cts[i], cts[j])
					if err != nil {
						t.Fatalf("Compare(%q, %q): %v", vals[i], vals[j], err)
					}
					want := refCompare(t, ty, vals[i], vals[j])
					eq, err := Equal(cts[i], cts[j])
					if err != nil {
						t.Fatal(err)
					}
					if eq != (want == 0) {
						t.Errorf("Equal(%q, %q) = %v, want %v", vals[i], vals[j], eq, want == 0)
					}
					if (got == 0) != (want == 0) {
						t.Errorf("Compare(%q, %q) = %d, want %d", vals[i], vals[j], got, want)
					} else if got != want && !orderInputsEqual(t, ty, vals[i], vals[j]) {
						t.Errorf("Compare(%q, %q) = %d, want %d", vals[i], vals[j], got, want)
					}
				}
			}
		})
	}
}

// TestPrefixTiesAreConsistent: values equal in the ORE part are ordered by
// their tokens, antisymmetrically.
func TestPrefixTiesAreConsistent(t *testing.T) {
	c := testColumn(t, Text, ORD, "public.t.c")
	a := mustEncrypt(t, c, "0123456789abcdefA")
	b := mustEncrypt(t, c, "0123456789abcdefB")
	x, _ := Compare(a, b)
	y, _ := Compare(b, a)
	if x == 0 || x != -y {
		t.Fatalf("Compare = %d and %d", x, y)
	}
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct {
		ty    Type
		a, b  string
		equal bool
	}{
		{Numeric, "1.0", "1.00", true}, {Numeric, "1", "1.0", true}, {Numeric, "-0", "0", true},
		{Numeric, "0.000", "0", true}, {Numeric, "1e1", "10", true}, {Numeric, "NaN", "nan", true},
		{Numeric, "inf", "Infinity", true}, {Numeric, "1", "2", false}, {Numeric, "Infinity", "NaN", false},
		{Numeric, "-1", "1", false}, {Numeric, "0.1", "0.10000000000000000000000001", false},
		{Float8, "-0", "0", true}, {Float8, "NaN", "nan", true}, {Float8, "1", "1.0", true},
		{Float8, "1e1", "10", true}, {Float8, "1", "1.0000000000000002", false},
		{Float8, "Infinity", "NaN", false},
		{Int4, "+5", "5", true}, {Int4, "007", "7", true}, {Int4, "5", "-5", false},
		{Int8, "1", "2", false}, {Text, "a", "A", false}, {Text, "a", "a", true},
		{Bytea, `\xAB`, `\xab`, true}, {Bool, "yes", "t", true}, {Bool, "t", "f", false},
		{Date, "2000-01-01", "2000-01-01", true},
		{Timestamptz, "2024-06-01 12:00:00+02", "2024-06-01 10:00:00Z", true},
		{Timestamptz, "2024-06-01 12:00:00+02", "2024-06-01 12:00:00Z", false},
	} {
		for _, l := range []Level{EQ, ORD} {
			c := testColumn(t, tc.ty, l, "public.t.c")
			eq, err := Equal(mustEncrypt(t, c, tc.a), mustEncrypt(t, c, tc.b))
			if err != nil || eq != tc.equal {
				t.Errorf("%s %s: Equal(%q, %q) = %v, %v; want %v", tc.ty, l, tc.a, tc.b, eq, err, tc.equal)
			}
		}
	}
}

func TestJoinGroups(t *testing.T) {
	mk := func(label, group string, keyID uint32, cek []byte) *Column {
		c, err := NewColumn(cek, Spec{KeyID: keyID, Type: Int4, Level: ORD, Label: label, Group: group})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := mk("public.a.x", "g", 1, testCEK)
	b := mk("public.b.y", "g", 1, testCEK)
	other := mk("public.c.z", "", 1, testCEK)
	if other.Spec().Group != "public.c.z" {
		t.Errorf("default group %q", other.Spec().Group)
	}
	ca, cb := mustEncrypt(t, a, "5"), mustEncrypt(t, b, "5")
	if eq, err := Equal(ca, cb); err != nil || !eq {
		t.Errorf("same group: Equal = %v, %v", eq, err)
	}
	if cmp, err := Compare(ca, mustEncrypt(t, b, "6")); err != nil || cmp != -1 {
		t.Errorf("same group: Compare = %v, %v", cmp, err)
	}
	if _, err := Equal(ca, mustEncrypt(t, other, "5")); err == nil {
		t.Error("values of different groups compared")
	}
	if _, err := Compare(ca, mustEncrypt(t, mk("x", "g", 2, bytes.Repeat([]byte{1}, 32)), "5")); err == nil {
		t.Error("values of different keys compared")
	}
	// Same group, other label: the payload is bound to its column.
	if _, err := b.Decrypt(ca); err == nil {
		t.Error("decrypted a value of another column")
	}
	if GroupTag("g") == GroupTag("h") {
		t.Error("group tags collide")
	}
}

func TestDecryptRejects(t *testing.T) {
	c := testColumn(t, Int4, EQ, "public.t.c")
	ct := mustEncrypt(t, c, "5")
	for _, tc := range []struct {
		name string
		col  *Column
		ct   []byte
	}{
		{"other label", testColumn(t, Int4, EQ, "public.t.d"), ct},
		{"other level", testColumn(t, Int4, ORD, "public.t.c"), ct},
		{"other type", testColumn(t, Date, EQ, "public.t.c"), ct},
		{"truncated", c, ct[:len(ct)-1]},
	} {
		if v, err := tc.col.Decrypt(tc.ct); err == nil {
			t.Errorf("%s: decrypted to %q", tc.name, v)
		}
	}
	// Every header and payload byte is authenticated; a changed header
	// that still parses fails too.
	for i := range ct {
		if i >= HeaderSize && i < HeaderSize+TokenSize {
			continue // the token is not part of the associated data
		}
		b := bytes.Clone(ct)
		b[i] ^= 0x01
		if v, err := c.Decrypt(b); err == nil {
			t.Errorf("byte %d flipped: decrypted to %q", i, v)
		}
	}
	if _, err := c.DecryptText("not base64!"); err == nil {
		t.Error("DecryptText accepted garbage")
	}
	if _, err := c.DecryptText(base64.StdEncoding.EncodeToString(ct[:20])); err == nil {
		t.Error("DecryptText accepted a short ciphertext")
	}
	// A ciphertext of another key and the same id does not authenticate.
	c2, _ := NewColumn(bytes.Repeat([]byte{1}, 32), Spec{KeyID: 1, Type: Int4, Level: EQ, Label: "public.t.c"})
	if _, err := c2.Decrypt(ct); err == nil {
		t.Error("decrypted under another CEK")
	}
}

func TestLevelRestrictions(t *testing.T) {
	rnd := testColumn(t, Int4, RND, "public.t.c")
	eq := testColumn(t, Int4, EQ, "public.t.c")
	a, b := mustEncrypt(t, rnd, "1"), mustEncrypt(t, rnd, "1")
	if _, err := Equal(a, b); err == nil {
		t.Error("Equal on RND values")
	}
	if _, err := Compare(mustEncrypt(t, eq, "1"), mustEncrypt(t, eq, "2")); err == nil {
		t.Error("Compare on EQ values")
	}
	if _, err := rnd.Token([]byte{0, 0, 0, 1}); err == nil {
		t.Error("Token at RND")
	}
	if _, err := NewColumn(testCEK, Spec{Type: 0, Level: EQ}); err == nil {
		t.Error("NewColumn accepted type 0")
	}
	if _, err := NewColumn(testCEK, Spec{Type: Int4, Level: 9}); err == nil {
		t.Error("NewColumn accepted level 9")
	}
	if _, err := NewColumn(testCEK[:5], Spec{Type: Int4, Level: EQ}); err == nil {
		t.Error("NewColumn accepted a short CEK")
	}
	if _, err := rnd.Encrypt("x", rand.Reader); err == nil {
		t.Error("Encrypt accepted a bad int4")
	}
	if _, err := rnd.EncryptPayload([]byte{1}, rand.Reader); err == nil {
		t.Error("EncryptPayload accepted a short payload")
	}
	if _, err := rnd.Encrypt("1", bytes.NewReader(nil)); err == nil {
		t.Error("Encrypt ignored a failing reader")
	}
}

// FuzzParse feeds arbitrary bytes to everything that reads ciphertexts:
// nothing may panic, and what parses must have consistent sizes.
func FuzzParse(f *testing.F) {
	cols := map[[2]byte]*Column{}
	for _, ty := range Types {
		for _, l := range Levels {
			if !ty.HasLevel(l) {
				continue
			}
			c := testColumn(f, ty, l, "public.t.c")
			cols[[2]byte{byte(ty), byte(l)}] = c
			f.Add(mustEncrypt(f, c, sampleValue(ty)))
		}
	}
	match := cols[[2]byte{byte(Text), byte(MATCH)}]
	for _, p := range []string{"%even%", "s_v%", `a\%b`} {
		q, err := match.EncryptPattern(p, rand.Reader)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(q)
	}
	ref := mustEncrypt(f, cols[[2]byte{byte(Int4), byte(ORD)}], "1")
	refMatch := mustEncrypt(f, match, "seventeen")
	f.Fuzz(func(t *testing.T, b []byte) {
		x, err := Parse(b)
		if err != nil {
			return
		}
		if Size(x.Header.Type, x.Header.Level, x.PayloadLen()) != len(b) {
			t.Fatalf("parsed %d bytes, sizes say %d", len(b), Size(x.Header.Type, x.Header.Level, x.PayloadLen()))
		}
		c := cols[[2]byte{byte(x.Header.Type), byte(x.Header.Level)}]
		want := c.header
		want.Flags = x.Header.Flags // Parse allows only FlagQuery, only at MATCH
		if _, err := c.Decrypt(b); err == nil && !bytes.Equal(b[:HeaderSize], want.Append(nil)) {
			t.Fatal("decrypted a ciphertext with a foreign header")
		}
		Equal(b, b)
		Compare(b, b)
		Compare(b, ref)
		Compare(ref, b)
		MayMatch(b, b)
		MayMatch(b, refMatch)
		MayMatch(refMatch, b)
	})
}
