// Verifying a chain of audit records across its files.

package audit

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ErrBroken: a record was removed, edited or put out of order, or a line
// is not a record.
var ErrBroken = errors.New("the audit chain is broken")

// macSuffix is how every line ends: ,"mac":"<64 hex digits>"}
const macSuffix = len(`,"mac":""}`) + 64

// Verify checks the records of files, oldest first, as one chain: each
// line's MAC over the previous MAC and the line, its prev and its number.
// The first file may begin inside the chain (older files removed); with
// fromStart the first record must be the chain's first.  A non-empty head
// (hex) must be the MAC of the last record.  It returns the chain's head.
func Verify(files []string, key []byte, head string, fromStart ...bool) (Head, error) {
	var h Head
	var prev []byte
	m := hmac.New(sha256.New, key)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return h, fmt.Errorf("audit: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		line := 0
		for sc.Scan() {
			line++
			b := sc.Bytes()
			at := func(format string, args ...any) error {
				return fmt.Errorf("%s:%d: %s: %w", name, line, fmt.Sprintf(format, args...), ErrBroken)
			}
			var r struct {
				Seq  uint64 `json:"seq"`
				Prev string `json:"prev"`
				MAC  string `json:"mac"`
			}
			if len(b) < macSuffix || json.Unmarshal(b, &r) != nil {
				f.Close()
				return h, at("not a record")
			}
			mac, err := hex.DecodeString(r.MAC)
			if err != nil || !bytes.HasSuffix(b, []byte(`,"mac":"`+r.MAC+`"}`)) {
				f.Close()
				return h, at("no MAC at the end of the line")
			}
			rprev, err := hex.DecodeString(r.Prev)
			if err != nil || len(rprev) != len(zeroMAC) {
				f.Close()
				return h, at("prev is not a MAC")
			}
			switch {
			case prev == nil && len(fromStart) > 0 && fromStart[0] && (r.Seq != 1 || !bytes.Equal(rprev, zeroMAC)):
				f.Close()
				return h, at("the chain does not start here (record %d)", r.Seq)
			case prev != nil && (!bytes.Equal(rprev, prev) || r.Seq != h.Seq+1):
				f.Close()
				return h, at("record %d does not follow record %d: one was removed, edited or moved", r.Seq, h.Seq)
			}
			body := append(bytes.Clone(b[:len(b)-macSuffix]), '}')
			if _, want := seal(m, rprev, body); !hmac.Equal(want, mac) {
				f.Close()
				return h, at("record %d was altered, or written under another key", r.Seq)
			}
			prev, h = mac, Head{Records: h.Records + 1, Seq: r.Seq, MAC: mac}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return h, fmt.Errorf("audit: %s: %w", name, err)
		}
	}
	if head != "" && hex.EncodeToString(h.MAC) != head {
		return h, fmt.Errorf("the last record (%d) is not the head %s: records after it were removed: %w", h.Seq, head, ErrBroken)
	}
	return h, nil
}
