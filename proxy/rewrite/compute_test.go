package rewrite

import (
	"strings"
	"testing"

	"github.com/pgcipher/pgcipher/proxy/internal/testcat"
)

// TestComputePlans: the server's query and the proxy's share of each
// computation.
func TestComputePlans(t *testing.T) {
	cat, keys := testcat.New(t)
	for _, tc := range []struct {
		sql      string
		want     []string // substrings of the server's SQL
		lock     []string // substrings of an UPDATE's lock query
		outputs  int
		inputs   int
		buffered bool
		refused  string // substring of the refusal
	}{
		{sql: "SELECT sum(i4) FROM enc_t WHERE id BETWEEN $1 AND $2", want: []string{"SELECT pg_catalog.array_agg(i4) FROM enc_t WHERE id BETWEEN $1 AND $2"}, outputs: 1, inputs: 1},
		{sql: "SELECT sum(i4o) FROM enc_t WHERE i4o BETWEEN 1 AND 5", want: []string{"array_agg(i4o)", "BETWEEN '"}, outputs: 1, inputs: 1},
		{sql: "SELECT t, sum(i4), avg(i8o) AS a, count(*) FROM enc_t GROUP BY t", want: []string{"SELECT t, pg_catalog.array_agg(i4), pg_catalog.array_agg(i8o), count(*) FROM enc_t GROUP BY t"}, outputs: 4, inputs: 4},
		{sql: "SELECT id, sum(i4) FROM enc_t GROUP BY id HAVING sum(i4) > 10 ORDER BY 2 DESC LIMIT 3", want: []string{"GROUP BY id"}, outputs: 2, inputs: 3, buffered: true},
		{sql: "SELECT id, sum(i4) FROM enc_t GROUP BY id ORDER BY 1", want: []string{"ORDER BY 1"}, outputs: 2, inputs: 2},
		{sql: "SELECT i4 + 1, upper(t) AS u, id FROM enc_t WHERE id = 1", want: []string{"SELECT i4, t, id FROM enc_t WHERE id = 1"}, outputs: 3, inputs: 3},
		{sql: "SELECT sum(i4 * id) FROM enc_t", want: []string{"array_agg(i4), pg_catalog.array_agg(id)"}, outputs: 1, inputs: 2},
		{sql: "UPDATE enc_t SET i4 = i4 + 1 WHERE id = $1", want: []string{"SET i4 = $2::public.enc_int4 WHERE id = $1 AND enc_t.ctid = $3::pg_catalog.tid AND enc_t.tableoid = $4::pg_catalog.oid"},
			lock: []string{"SELECT enc_t.ctid, enc_t.tableoid, i4 FROM enc_t WHERE id = $1 FOR UPDATE"}},
		{sql: "UPDATE enc_t x SET t = upper(x.t), tr = 'a', i4o = i4o + $2 WHERE x.i8o < 7", want: []string{"tr = '", "t = $3::public.enc_text", "i4o = $4::public.enc_int4_ord", "x.ctid = $5"}, lock: []string{"FROM enc_t x WHERE x.i8o < '"}},
		{sql: "UPDATE enc_t SET t = tr WHERE id = 2", want: []string{"t = $1::public.enc_text"}, lock: []string{"SELECT enc_t.ctid, enc_t.tableoid, tr FROM"}},
		{sql: "SELECT sum(tr) FROM enc_t", refused: "sum"},
		{sql: "SELECT i4 + $1 FROM enc_t", want: []string{"SELECT i4 FROM enc_t"}, outputs: 1, inputs: 1},
		{sql: "SELECT sum(i4) FILTER (WHERE id > $1) * $2 FROM enc_t", want: []string{"FILTER (WHERE id > $1)"}, outputs: 1, inputs: 1},
		{sql: "SELECT upper($1) || t FROM enc_t", refused: "type of parameter $1"},
		{sql: "SELECT i4 + 1 FROM enc_t; SELECT 1", refused: "on its own"},
		{sql: "SELECT sum(i4) FROM enc_t GROUP BY 1", refused: "GROUP BY"},
		{sql: "SELECT DISTINCT i4 + 1 FROM enc_t", refused: "DISTINCT"},
		{sql: "SELECT sum(DISTINCT i4), count(DISTINCT t) FROM enc_t", want: []string{"SELECT pg_catalog.array_agg(i4), pg_catalog.array_agg(t) FROM enc_t"}, outputs: 2, inputs: 2},
		{sql: "SELECT t, sum(i4) FROM enc_t GROUP BY 1", want: []string{"GROUP BY t"}, outputs: 2, inputs: 2},
		{sql: "SELECT t::text, j, count(*), sum(i4) FROM enc_t GROUP BY 1, 2", want: []string{"SELECT t, j, count(*)", "GROUP BY t, j"}, outputs: 4, inputs: 4},
		{sql: "SELECT sum(i4) FILTER (WHERE t = 'x'), count(*) FILTER (WHERE i4 = $1) FROM enc_t",
			want: []string{"array_agg(i4) FILTER (WHERE t = '", "count(*) FILTER (WHERE i4 = $1)"}, outputs: 2, inputs: 2},
		{sql: "SELECT sum(i4) FILTER (WHERE tr = 'x') FROM enc_t", refused: "level"},
		{sql: "SELECT i4 + 1 FROM (SELECT i4 FROM enc_t) s", want: []string{"SELECT i4 FROM (SELECT i4 FROM enc_t) s"}, outputs: 1, inputs: 1},
		{sql: "SELECT s.x + i4 FROM (SELECT id AS x FROM enc_t) s, enc_t", refused: "types the proxy knows"},
		{sql: "SELECT md5(t) FROM enc_t", refused: "md5"},
		{sql: "UPDATE enc_t SET i4 = i4 + 1 RETURNING i4", refused: "RETURNING"},
		{sql: "UPDATE enc_t SET i4 = i4 + $1, i4o = i4o * $1::int8", refused: "two types"},
		{sql: "UPDATE enc_t SET i4 = t", refused: "assigned"},
		{sql: "UPDATE enc_t SET t = i4 WHERE id = 1", want: []string{"t = $1::public.enc_text"}, lock: []string{"i4 FROM"}},
	} {
		p, err := Analyze(tc.sql, cat, keys)
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: want a refusal about %q, got %v", tc.sql, tc.refused, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.sql, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(p.SQL, w) {
				t.Errorf("%s:\n sent %s\n want %q in it", tc.sql, p.SQL, w)
			}
		}
		if len(tc.lock) > 0 {
			if p.Update == nil {
				t.Errorf("%s: no read-modify-write plan", tc.sql)
				continue
			}
			for _, w := range tc.lock {
				if !strings.Contains(p.Update.LockSQL, w) {
					t.Errorf("%s:\n lock %s\n want %q in it", tc.sql, p.Update.LockSQL, w)
				}
			}
			continue
		}
		if p.Compute == nil {
			t.Errorf("%s: no compute plan", tc.sql)
			continue
		}
		if len(p.Compute.Outputs) != tc.outputs || len(p.Compute.Inputs) != tc.inputs || p.Compute.Buffered() != tc.buffered {
			t.Errorf("%s: %d outputs, %d inputs, buffered %v; want %d, %d, %v", tc.sql, len(p.Compute.Outputs),
				len(p.Compute.Inputs), p.Compute.Buffered(), tc.outputs, tc.inputs, tc.buffered)
		}
	}
}
