// Tests of version 2 of the block ORE: Compare2 on full and left-only
// ciphertexts must agree with bytes.Compare on the inputs.

package ore

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	mrand "math/rand/v2"
	"testing"
)

func testKey2(t testing.TB) *Key2 {
	t.Helper()
	k, err := NewKey2(bytes.Repeat([]byte{3}, 32), bytes.Repeat([]byte{4}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func enc2(t testing.TB, k *Key2, in []byte) (full, left []byte) {
	t.Helper()
	full, err := k.Encrypt(in, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	left, err = k.EncryptLeft(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != Size2(len(in)) || len(left) != LeftSize2(len(in)) {
		t.Fatalf("sizes %d, %d; want %d, %d", len(full), len(left), Size2(len(in)), LeftSize2(len(in)))
	}
	if !bytes.Equal(full[:len(left)], left) {
		t.Fatalf("left part of %x differs from its left-only ciphertext", in)
	}
	return full, left
}

func TestSize2(t *testing.T) {
	for _, tc := range []struct{ in, size, left int }{{1, 57, 33}, {4, 180, 132}, {8, 344, 264}, {16, 672, 528}} {
		if got := Size2(tc.in); got != tc.size {
			t.Errorf("Size2(%d) = %d, want %d", tc.in, got, tc.size)
		}
		if got := LeftSize2(tc.in); got != tc.left {
			t.Errorf("LeftSize2(%d) = %d, want %d", tc.in, got, tc.left)
		}
	}
}

func TestOrder2(t *testing.T) {
	k := testKey2(t)
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	pairs := [][2][]byte{
		{u64(0), u64(0)}, {u64(0), u64(1)}, {u64(1), u64(0)}, {u64(255), u64(256)},
		{u64(1 << 63), u64(1<<63 - 1)}, {u64(^uint64(0)), u64(0)},
		{[]byte{0}, []byte{255}}, {bytes.Repeat([]byte{0xab}, 16), append(bytes.Repeat([]byte{0xab}, 15), 0xac)},
	}
	r := mrand.New(mrand.NewPCG(1, 2))
	for range 300 {
		a, b := r.Uint64(), r.Uint64()
		if r.IntN(3) == 0 { // a shared prefix
			b = a ^ uint64(r.IntN(1<<12))
		}
		pairs = append(pairs, [2][]byte{u64(a), u64(b)})
	}
	for _, p := range pairs {
		x, y := p[0], p[1]
		fx, lx := enc2(t, k, x)
		fy, ly := enc2(t, k, y)
		want := bytes.Compare(x, y)
		for _, c := range []struct {
			name string
			a, b []byte
			want int
		}{{"full/full", fx, fy, want}, {"left/full", lx, fy, want}, {"full/left reversed", ly, fx, -want}} {
			got, err := Compare2(c.a, c.b)
			if err != nil {
				t.Fatalf("%s %x %x: %v", c.name, x, y, err)
			}
			if got != c.want {
				t.Fatalf("%s: Compare2(%x, %x) = %d, want %d", c.name, x, y, got, c.want)
			}
		}
	}
}

func TestPermutationIsOne(t *testing.T) {
	k := testKey2(t)
	in := bytes.Repeat([]byte{0x5a}, 16)
	distinct := map[[16]byte]bool{}
	for i := range 32 {
		pi, err := (&encrypter2{k: k}).block(in, i)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[byte]bool{}
		for _, x := range pi {
			seen[x] = true
		}
		if len(seen) != 16 {
			t.Fatalf("block %d: %d distinct images", i, len(seen))
		}
		distinct[pi] = true
	}
	if len(distinct) < 30 { // 32 random permutations of 16 rarely repeat
		t.Errorf("only %d distinct permutations among 32 blocks", len(distinct))
	}
}

func TestCompare2Errors(t *testing.T) {
	k := testKey2(t)
	f4, l4 := enc2(t, k, []byte{1, 2, 3, 4})
	f8, _ := enc2(t, k, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	if _, err := Compare2(f4, f8); err == nil {
		t.Error("different lengths compared")
	}
	if _, err := Compare2(f4, l4); err == nil {
		t.Error("a left-only ciphertext served as the right one")
	}
	g, _ := enc2(t, k, []byte{1, 2, 3, 5})
	bad := bytes.Clone(g)
	for i := LeftSize2(4) + nonceLen; i < len(bad); i++ {
		bad[i] = 0xff // every entry 3
	}
	if _, err := Compare2(f4, bad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("entry 3: %v, want ErrCorrupt", err)
	}
	if _, err := k.EncryptLeft(make([]byte, 17)); err == nil {
		t.Error("17-byte input accepted")
	}
}

func BenchmarkEncryptLeft2Int4(b *testing.B) { benchLeft2(b, 4) }
func BenchmarkEncryptLeft2Int8(b *testing.B) { benchLeft2(b, 8) }

// benchLeft2 encrypts sysbench-like keys: random below 2^20, sign bit set.
func benchLeft2(b *testing.B, size int) {
	k := testKey2(b)
	r := mrand.New(mrand.NewPCG(3, 4))
	in := make([]byte, size)
	b.ReportAllocs()
	for b.Loop() {
		v := uint64(r.IntN(1<<20)) | 1<<(8*size-1)
		for i := range size {
			in[size-1-i] = byte(v >> (8 * i))
		}
		if _, err := k.EncryptLeft(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncrypt2Int8(b *testing.B) {
	k := testKey2(b)
	in := binary.BigEndian.AppendUint64(nil, 1<<63|12345)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Encrypt(in, rand.Reader); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompare2Int8(b *testing.B) {
	k := testKey2(b)
	x, _ := enc2(b, k, binary.BigEndian.AppendUint64(nil, 1<<63|12345))
	y, _ := enc2(b, k, binary.BigEndian.AppendUint64(nil, 1<<63|12346))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compare2(x, y); err != nil {
			b.Fatal(err)
		}
	}
}
