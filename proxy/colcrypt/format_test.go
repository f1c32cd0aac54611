// Tests of the ciphertext header, type and level names, sizes and Parse.

package colcrypt

import (
	"bytes"
	"strings"
	"testing"
)

func TestTypeLevelNames(t *testing.T) {
	for _, ty := range Types {
		got, err := ParseType(strings.ToUpper(ty.String()))
		if err != nil || got != ty {
			t.Errorf("ParseType(%q) = %v, %v", ty, got, err)
		}
	}
	for _, l := range Levels {
		got, err := ParseLevel(strings.ToLower(l.String()))
		if err != nil || got != l {
			t.Errorf("ParseLevel(%q) = %v, %v", l, got, err)
		}
	}
	for _, bad := range []string{"", "int", "enc_int4", "varchar"} {
		if _, err := ParseType(bad); err == nil {
			t.Errorf("ParseType(%q) succeeded", bad)
		}
	}
	if _, err := ParseLevel("DET"); err == nil {
		t.Error("ParseLevel(DET) succeeded")
	}
	if Type(0).Valid() || Type(10).Valid() || Level(0).Valid() || Level(5).Valid() {
		t.Error("invalid codes reported valid")
	}
	if Type(12).String() != "Type(12)" || Level(7).String() != "Level(7)" {
		t.Error("String of invalid codes")
	}
}

func TestSizes(t *testing.T) {
	cases := []struct {
		ty   Type
		l    Level
		m    int
		want int
	}{
		{Int4, RND, 4, 44}, {Int4, EQ, 4, 60}, {Int4, ORD, 4, 240},
		{Int8, RND, 8, 48}, {Int8, EQ, 8, 64}, {Int8, ORD, 8, 408},
		{Text, RND, 0, 40}, {Text, EQ, 0, 56}, {Text, ORD, 0, 728},
		{Text, ORD, 5, 733}, {Bool, ORD, 1, 114}, {Float8, ORD, 8, 408},
		{Text, MATCH, 0, 88}, {Text, MATCH, 5, 93}, {Text, MATCH, 40, 128},
	}
	for _, tc := range cases {
		if got := Size(tc.ty, tc.l, tc.m); got != tc.want {
			t.Errorf("Size(%s, %s, %d) = %d, want %d", tc.ty, tc.l, tc.m, got, tc.want)
		}
	}
}

func TestHeaderAppend(t *testing.T) {
	h := Header{Version: 1, Type: Text, Level: ORD, KeyID: 0x01020304, GroupTag: [4]byte{9, 8, 7, 6}}
	want := []byte{1, 5, 3, 0, 1, 2, 3, 4, 9, 8, 7, 6}
	if got := h.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("Append = %x, want %x", got, want)
	}
}

// TestParseMalformed alters valid ciphertexts in every way the server
// must reject.
func TestParseMalformed(t *testing.T) {
	for _, ty := range []Type{Int4, Text, Bool} {
		for _, l := range Levels {
			if !ty.HasLevel(l) {
				continue
			}
			c := testColumn(t, ty, l, "public.t.c")
			ct := mustEncrypt(t, c, sampleValue(ty))
			if _, err := Parse(ct); err != nil {
				t.Fatalf("%s %s: valid ciphertext rejected: %v", ty, l, err)
			}
			set := func(i int, v byte) []byte { b := bytes.Clone(ct); b[i] = v; return b }
			bad := map[string][]byte{
				"empty":      nil,
				"header":     ct[:HeaderSize],
				"version 0":  set(0, 0),
				"version 3":  set(0, 3),
				"type 0":     set(1, 0),
				"type 10":    set(1, 10),
				"level 0":    set(2, 0),
				"level 5":    set(2, 5),
				"flags 2":    set(3, 2),
				"flags 3":    set(3, 3),
				"flags 0x80": set(3, 0x80),
				"flags 0x81": set(3, 0x81),
			}
			if l != MATCH { // a MATCH value with flags 1 reads as a query
				bad["flags 1"] = set(3, 1)
			}
			if ty != Text {
				bad["MATCH"] = set(2, byte(MATCH))
			}
			if ty != Text {
				bad["payload +1"] = append(bytes.Clone(ct), 0)
				bad["payload -1"] = ct[:len(ct)-1]
			}
			// A level that claims more or fewer parts than present.
			if l == RND {
				bad["RND as EQ"] = set(2, byte(EQ))
			} else if ty != Text { // variable payload: reads as a longer RND payload
				bad["as RND"] = set(2, byte(RND))
			}
			for name, b := range bad {
				if _, err := Parse(b); err == nil {
					t.Errorf("%s %s: %s accepted", ty, l, name)
				}
			}
			// Every truncation below the minimum size is an error.
			min := Size(ty, l, 0)
			for n := 0; n < min; n++ {
				if _, err := Parse(ct[:n]); err == nil {
					t.Errorf("%s %s: truncated to %d accepted", ty, l, n)
				}
			}
		}
	}
}

func TestParseParts(t *testing.T) {
	c := testColumn(t, Int8, ORD, "public.t.c")
	ct := mustEncrypt(t, c, "42")
	x, err := Parse(ct)
	if err != nil {
		t.Fatal(err)
	}
	if x.Header != c.Header() || len(x.Token) != 16 || len(x.ORE) != 344 ||
		len(x.Nonce) != 12 || x.PayloadLen() != 8 {
		t.Fatalf("parts: %+v token %d ore %d nonce %d payload %d",
			x.Header, len(x.Token), len(x.ORE), len(x.Nonce), x.PayloadLen())
	}
}
