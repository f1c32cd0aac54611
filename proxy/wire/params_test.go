package wire

// encryptArray: each element of an array parameter decrypts to its own
// value, in its place, NULLs kept, and an invalid element fails the whole
// array.

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
)

func TestEncryptArrayElements(t *testing.T) {
	cat, keys := testcat.New(t)
	c, b := testcat.Column(t, cat, keys, "public.enc_t.i4o")
	prm := &rewrite.Param{Column: c, EncType: &catalog.EncType{OID: 90001, Plain: b.Spec.Type}}
	for _, n := range []int{1, 31, 163} {
		var want []string
		for i := range n {
			if i%7 == 3 {
				want = append(want, "NULL")
			} else {
				want = append(want, fmt.Sprint(i*11-40))
			}
		}
		out, err := encryptArray(prm, 0, 0, []byte("{"+strings.Join(want, ",")+"}"))
		if err != nil {
			t.Fatalf("%d elements: %v", n, err)
		}
		elems, _, err := readBinaryArray(out)
		if err != nil || len(elems) != n {
			t.Fatalf("%d elements: read back %d, %v", n, len(elems), err)
		}
		for i, ct := range elems {
			got := "NULL"
			if ct != nil {
				if got, err = prm.Column.Decrypt(ct); err != nil {
					t.Fatalf("element %d: %v", i, err)
				}
			}
			if got != want[i] {
				t.Fatalf("%d elements: element %d is %s, want %s", n, i, got, want[i])
			}
		}
		if nulls := binary.BigEndian.Uint32(out[4:]); nulls != 1 && n > 3 {
			t.Errorf("%d elements: the has-NULLs flag is %d", n, nulls)
		}
		bad := append(append([]string(nil), want...), "not-a-number")
		if _, err := encryptArray(prm, 0, 0, []byte("{"+strings.Join(bad, ",")+"}")); err == nil {
			t.Errorf("%d elements and an invalid one: no error", n)
		}
	}
}
