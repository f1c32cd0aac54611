package wire

// What one value of a group costs the proxy (SUM, AVG … over an encrypted
// column: array_agg's elements, each decrypted and decoded): in text (the
// simple protocol: array text, base64) and in binary (the extended
// protocol, where the proxy asks for array_send's form).  Run with
//
//	go test ./wire -run TestArrayValues -bench ArrayValues -benchmem
//
// ns/op is per value (b.N counts values).

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

// groupOf returns a session over testcat's catalog and the array of n
// values 1..n of enc_t.i4 (enc_int4, EQ), as array_out and array_send
// write it, a NULL last.
func groupOf(t testing.TB, n int) (s *session, text, bin []byte) {
	cat, keys := testcat.New(t)
	srv := &Server{cfg: Config{Keys: keys, Log: slog.New(slog.DiscardHandler)}, catalogs: newCatalogCache()}
	s = newSession(srv, &conns{}, &conns{}, "bench", "bench")
	s.setCatalog(cat)
	col, _ := testcat.Column(t, cat, keys, "public.enc_t.i4")
	var txt []string
	bin = binary.BigEndian.AppendUint32(nil, 1)           // dimensions
	bin = binary.BigEndian.AppendUint32(bin, 1)           // has NULLs
	bin = binary.BigEndian.AppendUint32(bin, 90000)       // element type
	bin = binary.BigEndian.AppendUint32(bin, uint32(n+1)) // length
	bin = binary.BigEndian.AppendUint32(bin, 1)           // lower bound
	for i := 1; i <= n; i++ {
		ct, err := col.Encrypt(strconv.Itoa(i), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		txt = append(txt, base64.StdEncoding.EncodeToString(ct))
		bin = binary.BigEndian.AppendUint32(bin, uint32(len(ct)))
		bin = append(bin, ct...)
	}
	txt = append(txt, "NULL")
	bin = binary.BigEndian.AppendUint32(bin, 0xffffffff)
	return s, []byte("{" + strings.Join(txt, ",") + "}"), bin
}

var sumInput = rewrite.Input{Type: colcrypt.Int4, Array: true, Enc: true}

// TestArrayValues: both forms give the same values, NULL included, and a
// damaged binary array is an error, not a panic.
func TestArrayValues(t *testing.T) {
	s, text, bin := groupOf(t, 50)
	for _, c := range []struct {
		name   string
		v      []byte
		format int16
	}{{"text", text, 0}, {"binary", bin, 1}} {
		vals, err := s.arrayValues(sumInput, c.v, c.format, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(vals) != 51 || !vals[50].Null {
			t.Fatalf("%s: %d values, the last NULL: %v", c.name, len(vals), len(vals) == 51 && vals[50].Null)
		}
		for i, v := range vals[:50] {
			if v.Int != int64(i+1) {
				t.Fatalf("%s: value %d is %d", c.name, i, v.Int)
			}
		}
	}
	for cut := 0; cut < len(bin)-1; cut += 7 {
		if _, err := s.arrayValues(sumInput, bin[:cut], 1, nil); err == nil {
			t.Fatalf("binary array cut at %d of %d bytes: no error", cut, len(bin))
		}
	}
	flipped := bytes.Clone(bin)
	flipped[len(flipped)-10] ^= 1 // inside the last ciphertext
	if _, err := s.arrayValues(sumInput, flipped, 1, nil); err == nil {
		t.Fatal("a damaged ciphertext in a binary array: no error")
	}
}

func benchArrayValues(b *testing.B, format int16) {
	const n = 1000
	s, text, bin := groupOf(b, n)
	v := text
	if format == 1 {
		v = bin
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += n {
		if _, err := s.arrayValues(sumInput, v, format, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkArrayValuesText(b *testing.B)   { benchArrayValues(b, 0) }
func BenchmarkArrayValuesBinary(b *testing.B) { benchArrayValues(b, 1) }
