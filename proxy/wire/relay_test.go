package wire

import (
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
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
