package wire

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/metrics"
)

// TestRawRow: which DataRows the relay passes on undecoded (a result's
// without a description, a plain result's of the described field count),
// and that each plain one is counted for the command tag as rowState's
// row counts it.
func TestRawRow(t *testing.T) {
	row := func(values ...[]byte) []byte {
		raw, err := (&pgproto3.DataRow{Values: values}).Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	two := row([]byte("1"), []byte("x"))
	// resize changes the message's length by d bytes, its values' not
	resize := func(raw []byte, d int) []byte {
		out := append([]byte(nil), raw...)
		if d > 0 {
			out = append(out, make([]byte, d)...)
		} else {
			out = out[:len(out)+d]
		}
		binary.BigEndian.PutUint32(out[1:5], uint32(len(out)-1))
		return out
	}
	minus2 := func(raw []byte) []byte {
		out := append([]byte(nil), raw...)
		binary.BigEndian.PutUint32(out[7:11], uint32(0xfffffffe))
		return out
	}
	plainShape := &shape{fields: make([]field, 2), visible: 2, plain: true}
	plain := func() *rowState { return &rowState{shape: plainShape} }
	described := func(sh *shape) *portal {
		return &portal{st: &stmt{desc: &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, 2)}, shape: sh}}
	}
	tests := []struct {
		name string
		a    answer
		raw  []byte
		want bool
	}{
		{"execute, plain", &executeAnswer{rowsResult: rowsResult{rows: plain()}}, two, true},
		{"simple query, plain", &queryAnswer{rowsResult: rowsResult{rows: plain()}}, two, true},
		{"NULL fields count too", &executeAnswer{rowsResult: rowsResult{rows: plain()}}, row(nil, nil), true},
		{"first row of a plain result", &executeAnswer{portal: described(plainShape)}, two, true},
		{"first row of a result to decrypt", &executeAnswer{portal: described(&shape{fields: make([]field, 2), visible: 2})}, two, false},
		{"no description: rows pass as they are", &executeAnswer{}, two, true},
		{"simple query before its description", &queryAnswer{}, two, true},
		{"a field to decrypt", &executeAnswer{rowsResult: rowsResult{rows: &rowState{shape: &shape{fields: make([]field, 2), visible: 2}}}}, two, false},
		{"the result failed", &executeAnswer{rowsResult: rowsResult{rows: plain(), failed: true}}, two, false},
		{"field count not the description's", &executeAnswer{rowsResult: rowsResult{rows: plain()}}, row([]byte("1")), false},
		{"truncated", &executeAnswer{rowsResult: rowsResult{rows: plain()}}, two[:6], false},
		{"a value past the end", &executeAnswer{rowsResult: rowsResult{rows: plain()}}, resize(two, -1), false},
		{"bytes after the last value", &executeAnswer{rowsResult: rowsResult{rows: plain()}}, resize(two, 1), false},
		{"a length below -1", &executeAnswer{rowsResult: rowsResult{rows: plain()}}, minus2(two), false},
		{"malformed, no description", &executeAnswer{}, resize(two, -1), false},
		{"not a result", &completeAnswer{}, two, false},
		{"no answer", nil, two, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&session{}).rawRow(tt.a, tt.raw); got != tt.want {
				t.Fatalf("rawRow = %v, want %v", got, tt.want)
			}
			if r := resultOf(tt.a); r != nil && r.rows != nil && r.rows.plain {
				want := 0
				if tt.want {
					want = 1
				}
				if r.rows.kept != want {
					t.Fatalf("kept = %d, want %d", r.rows.kept, want)
				}
			}
		})
	}
}

// TestBadRow: a DataRow that does not decode is never relayed: the client
// gets an error in place of its result's rows (08P01), or, for a row of
// the proxy's own lock query, the session ends.
func TestBadRow(t *testing.T) {
	bad := []byte{'D', 0, 0, 0, 10, 0, 1, 0, 0, 0, 9}   // one value of 9 bytes, none there
	enc := &shape{fields: make([]field, 1), visible: 1} // a field to decrypt: not plain
	for _, tt := range []struct {
		name    string
		a       answer
		ends    bool
		errSent bool
	}{
		{"simple query", &queryAnswer{rowsResult: rowsResult{rows: &rowState{shape: enc}}}, false, true},
		{"execute", &executeAnswer{rowsResult: rowsResult{rows: &rowState{shape: enc}}}, false, true},
		{"plain result", &executeAnswer{rowsResult: rowsResult{rows: &rowState{shape: &shape{fields: make([]field, 1), visible: 1, plain: true}}}}, false, true},
		{"result failed already", &executeAnswer{rowsResult: rowsResult{failed: true}}, false, false},
		{"the proxy's lock query", &lockAnswer{}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			s := &session{srv: &Server{metrics: metrics.New()}}
			s.clW = newFrameWriter(&out)
			_, err := s.relayOne(tt.a, 'D', bad)
			if (err != nil) != tt.ends {
				t.Fatalf("relayOne error = %v, want the session to end: %v", err, tt.ends)
			}
			if err := s.clW.flush(); err != nil {
				t.Fatal(err)
			}
			got := out.Bytes()
			if bytes.Contains(got, bad) {
				t.Fatal("the row was relayed")
			}
			if sent := len(got) > 0 && got[0] == 'E' && strings.Contains(string(got), "08P01"); sent != tt.errSent {
				t.Fatalf("error sent = %v (%q), want %v", sent, got, tt.errSent)
			}
			if r := resultOf(tt.a); r != nil && !r.failed {
				t.Fatal("the result is not marked failed")
			}
		})
	}
}
