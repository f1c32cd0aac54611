package rewrite

// What each kind of statement records in Plan.Uses: the access the
// session's role needs on each encrypted column (design 13.12).

import (
	"testing"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
)

func TestUses(t *testing.T) {
	cat, keys := testcat.New(t)
	W, R := colcrypt.AccessWrite, colcrypt.AccessRead
	for _, tc := range []struct {
		sql  string
		want map[string]colcrypt.Access // by column name of enc_t
	}{
		{"INSERT INTO enc_t (id, i4) VALUES (1, 5)", map[string]colcrypt.Access{"i4": W}},
		{"INSERT INTO enc_t (id, i4, t) VALUES ($1, $2, $3)", map[string]colcrypt.Access{"i4": W, "t": W}},
		{"INSERT INTO enc_t (id, i4) SELECT * FROM unnest($1::int[], $2::int[])", map[string]colcrypt.Access{"i4": W}},
		{"UPDATE enc_t SET t = 'x' WHERE id = 1", map[string]colcrypt.Access{"t": W}},
		{"UPDATE enc_t SET t = $1 WHERE i4 = $2", map[string]colcrypt.Access{"t": W, "i4": R}},
		{"UPDATE enc_t SET i4 = i4 + 1 WHERE id = 1", map[string]colcrypt.Access{"i4": R}},
		{"SELECT id FROM enc_t WHERE i4 = 5", map[string]colcrypt.Access{"i4": R}},
		{"SELECT id FROM enc_t WHERE i4 = $1", map[string]colcrypt.Access{"i4": R}},
		{"SELECT id FROM enc_t WHERE i4 = ANY($1)", map[string]colcrypt.Access{"i4": R}},
		{"SELECT id FROM enc_t WHERE i4o > 3", map[string]colcrypt.Access{"i4o": R}},
		{"SELECT id, tm FROM enc_t WHERE tm LIKE '%ab%'", map[string]colcrypt.Access{"tm": R}},
		{"SELECT sum(i4) FROM enc_t", map[string]colcrypt.Access{"i4": R}},
		{"SELECT max(i4o) FROM enc_t", map[string]colcrypt.Access{"i4o": R}},
		{"SELECT a.id FROM enc_t a JOIN other b ON a.j = b.j", map[string]colcrypt.Access{"j": R}},
		{"DELETE FROM enc_t WHERE t = 'x'", map[string]colcrypt.Access{"t": R}},
		{"COPY enc_t (id, i4) FROM STDIN", map[string]colcrypt.Access{"i4": W}},
		{"COPY enc_t (id, i4) TO STDOUT", map[string]colcrypt.Access{"i4": R}},
		// what a statement returns is read, before it is sent
		{"SELECT i4, t FROM enc_t WHERE id = 1", map[string]colcrypt.Access{"i4": R, "t": R}},
		{"SELECT id FROM enc_t WHERE id = 1", map[string]colcrypt.Access{}},
		// comparisons the server makes are reads too
		{"SELECT count(*) FROM enc_t GROUP BY i4", map[string]colcrypt.Access{"i4": R}},
		{"SELECT id FROM enc_t ORDER BY i4o LIMIT 3", map[string]colcrypt.Access{"i4o": R}},
		{"SELECT count(DISTINCT i4o) FROM enc_t", map[string]colcrypt.Access{"i4o": R}},
		{"SELECT count(i4) FROM enc_t", map[string]colcrypt.Access{}},
		{"INSERT INTO enc_t (id, t) VALUES (1, 'x') RETURNING t", map[string]colcrypt.Access{"t": R}},
		{"UPDATE enc_t SET t = 'x' WHERE id = 1 RETURNING id", map[string]colcrypt.Access{"t": W}},
	} {
		p, err := Analyze(tc.sql, cat, keys)
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		got := map[string]colcrypt.Access{}
		for _, u := range p.Uses {
			col := u.Binding.Spec.Label[len("public.enc_t."):]
			if u.Binding.Spec.Label == "public.other.j" {
				col = "j"
			}
			got[col] = max(got[col], u.Access)
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: uses %v, want %v", tc.sql, got, tc.want)
			continue
		}
		for c, a := range tc.want {
			if got[c] != a {
				t.Errorf("%s: uses %v, want %v", tc.sql, got, tc.want)
				break
			}
		}
	}
}

// BenchmarkFingerprint: the audit log's fingerprint of a statement the
// session has not fingerprinted before (one with literals).
func BenchmarkFingerprint(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if Fingerprint("SELECT c FROM test1 WHERE id = 4711") == "" {
			b.Fatal("no fingerprint")
		}
	}
}
