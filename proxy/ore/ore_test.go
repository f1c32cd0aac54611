// Tests of the Lewi–Wu block ORE: Compare on ciphertexts must agree with
// bytes.Compare on the inputs, and bad input must give errors.

package ore

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	mrand "math/rand/v2"
	"testing"
)

func testKey(t testing.TB) *Key {
	t.Helper()
	k, err := NewKey(bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func enc(t testing.TB, k *Key, in []byte) []byte {
	t.Helper()
	ct, err := k.Encrypt(in, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if len(ct) != Size(len(in)) {
		t.Fatalf("len %d, want %d", len(ct), Size(len(in)))
	}
	return ct
}

func checkOrder(t *testing.T, k *Key, x, y []byte) {
	t.Helper()
	got, err := Compare(enc(t, k, x), enc(t, k, y))
	if err != nil {
		t.Fatalf("Compare(%x, %x): %v", x, y, err)
	}
	if want := bytes.Compare(x, y); got != want {
		t.Fatalf("Compare(%x, %x) = %d, want %d", x, y, got, want)
	}
}

func TestSize(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{1, 57}, {4, 180}, {8, 344}, {16, 672}} {
		if got := Size(tc.in); got != tc.want {
			t.Errorf("Size(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestEdgeValues(t *testing.T) {
	k := testKey(t)
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	cases := []struct {
		name string
		x, y []byte
	}{
		{"zero-zero", u64(0), u64(0)},
		{"zero-one", u64(0), u64(1)},
		{"one-zero", u64(1), u64(0)},
		{"max-max", u64(^uint64(0)), u64(^uint64(0))},
		{"zero-max", u64(0), u64(^uint64(0))},
		{"max-minus-one", u64(^uint64(0)), u64(^uint64(0) - 1)},
		{"last-nibble", u64(0x1234567812345670), u64(0x1234567812345671)},
		{"last-nibble-f", u64(0x123456781234567f), u64(0x123456781234567e)},
		{"first-nibble", u64(0x1000000000000000), u64(0x2000000000000000)},
		{"high-low", u64(0x10), u64(0x0f)},
		{"1-byte", []byte{0x00}, []byte{0xff}},
		{"1-byte-eq", []byte{0x7f}, []byte{0x7f}},
		{"1-byte-nibble", []byte{0x70}, []byte{0x7f}},
		{"4-byte", []byte{0, 0, 1, 0}, []byte{0, 0, 0, 255}},
		{"16-byte", bytes.Repeat([]byte{0xab}, 16), append(bytes.Repeat([]byte{0xab}, 15), 0xac)},
		{"16-byte-eq", bytes.Repeat([]byte{0}, 16), bytes.Repeat([]byte{0}, 16)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkOrder(t, k, tc.x, tc.y) })
	}
}

func TestRandomUint64(t *testing.T) {
	k := testKey(t)
	r := mrand.New(mrand.NewPCG(1, 2))
	n := 2000
	if testing.Short() {
		n = 200
	}
	for i := 0; i < n; i++ {
		x, y := r.Uint64(), r.Uint64()
		if i%4 == 1 { // share a random-length prefix
			shift := r.UintN(64)
			y = x ^ (y >> shift)
		}
		checkOrder(t, k,
			binary.BigEndian.AppendUint64(nil, x),
			binary.BigEndian.AppendUint64(nil, y))
	}
}

func TestRandomLengths(t *testing.T) {
	k := testKey(t)
	r := mrand.New(mrand.NewPCG(3, 4))
	for _, l := range []int{1, 4, 8, 16} {
		for i := 0; i < 200; i++ {
			x := make([]byte, l)
			y := make([]byte, l)
			for j := range x {
				x[j] = byte(r.UintN(256))
				y[j] = byte(r.UintN(256))
			}
			if i%2 == 0 { // same prefix, differing later
				p := int(r.UintN(uint(l)))
				copy(y[:p], x[:p])
			}
			checkOrder(t, k, x, y)
		}
	}
}

func TestDeterministicLeft(t *testing.T) {
	k := testKey(t)
	in := []byte{1, 2, 3, 4}
	a, b := enc(t, k, in), enc(t, k, in)
	left := 16*8 + 4
	if !bytes.Equal(a[:left], b[:left]) {
		t.Fatal("left parts differ for equal inputs")
	}
	if bytes.Equal(a[left:], b[left:]) {
		t.Fatal("right parts equal: r not random")
	}
}

func TestDifferentKeys(t *testing.T) {
	k1 := testKey(t)
	k2, _ := NewKey(bytes.Repeat([]byte{3}, 32), bytes.Repeat([]byte{2}, 32))
	a := enc(t, k1, []byte{5, 5, 5, 5})
	b := enc(t, k2, []byte{5, 5, 5, 5})
	if c, err := Compare(a, b); err == nil && c == 0 {
		t.Fatal("ciphertexts under different keys compare equal")
	}
}

func TestErrors(t *testing.T) {
	k := testKey(t)
	if _, err := NewKey(make([]byte, 31), make([]byte, 32)); err == nil {
		t.Error("NewKey accepted a short key")
	}
	if _, err := k.Encrypt(nil, rand.Reader); err == nil {
		t.Error("Encrypt accepted empty input")
	}
	if _, err := k.Encrypt(make([]byte, MaxInput+1), rand.Reader); err == nil {
		t.Error("Encrypt accepted long input")
	}
	if _, err := k.Encrypt([]byte{1}, bytes.NewReader(nil)); err == nil {
		t.Error("Encrypt ignored a failing reader")
	}
	a := enc(t, k, []byte{1, 2, 3, 4})
	b := enc(t, k, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	for _, tc := range []struct {
		name string
		a, b []byte
	}{
		{"lengths differ", a, b},
		{"empty", nil, nil},
		{"16 bytes", make([]byte, 16), make([]byte, 16)},
		{"not 41k+16", a[:len(a)-1], a[:len(a)-1]},
	} {
		if _, err := Compare(tc.a, tc.b); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// Corrupt the z entry that decides a comparison: one of the two other
	// values mod 3 must be the impossible 0 or flip the result.
	x := enc(t, k, []byte{0x10})
	y := enc(t, k, []byte{0x20})
	sawCorrupt := false
	for delta := byte(1); delta <= 2; delta++ {
		yy := bytes.Clone(y)
		n := 2
		xt := nibble(x[16*n:], 0)
		pos := 16*n + n/2 + 16 + int(xt)/4
		shift := 2 * (xt % 4)
		v := (yy[pos] >> shift) & 3
		yy[pos] = yy[pos]&^(3<<shift) | ((v+delta)%3)<<shift
		if _, err := Compare(x, yy); errors.Is(err, ErrCorrupt) {
			sawCorrupt = true
		}
	}
	if !sawCorrupt {
		t.Error("no corruption detected for either altered z value")
	}
	// An entry of 3 is no residue mod 3.
	yy := bytes.Clone(y)
	xt := nibble(x[32:], 0)
	yy[32+1+16+int(xt)/4] |= 3 << (2 * (xt % 4))
	if _, err := Compare(x, yy); !errors.Is(err, ErrCorrupt) {
		t.Errorf("z entry 3: %v", err)
	}
}

func BenchmarkEncrypt8(b *testing.B) {
	k := testKey(b)
	in := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	for b.Loop() {
		k.Encrypt(in, rand.Reader)
	}
}

func BenchmarkCompare(b *testing.B) {
	k := testKey(b)
	x := enc(b, k, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	y := enc(b, k, []byte{1, 2, 3, 4, 5, 6, 7, 9})
	b.ReportAllocs()
	for b.Loop() {
		Compare(x, y)
	}
}
