package rewrite

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// The regular expressions the scans replace: the reference.
var (
	refChangesCatalog = regexp.MustCompile(`(?i)(^|;)\s*(create|alter|drop|import)\b`)
	refSessionWords   = regexp.MustCompile(`(?i)search_path|set_config|temp|discard|role|authoriz|reset|drop|pgcipher\.tenant`)
)

// TestCheapScans: the scans answer as the regular expressions on
// hand-picked statements and on random ASCII text made of their words,
// blanks, semicolons and word bytes.
func TestCheapScans(t *testing.T) {
	cases := []string{
		"", ";", "create table t (x int)", "  CREATE TABLE t", "select 1; DROP table t", "select 1;\n\t alter table t",
		"created", "select create", "IMPORT FOREIGN SCHEMA s", "importx", "drop", ";drop;", "x;  drop_", "x; drop(",
		"SELECT abalance FROM pgbench_accounts WHERE aid = 1", "SET search_path = a", "select set_config('x','y',false)",
		"CREATE TEMP TABLE t", "discard all", "SET ROLE x", "SET SESSION AUTHORIZATION x", "RESET ALL", "Attemptive",
		"sElEcT 1; \f\rCrEaTe x", "select 'drop'", "select 1 --\ncreate", "/* x */ create table t",
	}
	words := append(append([]string{}, catalogWords...), sessionWordList...)
	pieces := append(words, " ", "\t", "\n", ";", "x", "_", "1", "(", "'", "SELECT", "Drop", "CREATE", "Temp", "ſ", "K")
	r := rand.New(rand.NewSource(1))
	for range 20000 {
		var b strings.Builder
		for range 1 + r.Intn(6) {
			p := pieces[r.Intn(len(pieces))]
			if r.Intn(3) == 0 {
				p = strings.ToUpper(p)
			}
			b.WriteString(p)
		}
		cases = append(cases, b.String())
	}
	for _, sql := range cases {
		// RE2's (?i) also folds the long s and the Kelvin sign to ASCII
		// letters, which PostgreSQL's keywords do not: compared on
		// ASCII text only
		ascii := !strings.ContainsFunc(sql, func(r rune) bool { return r > 127 })
		if got, want := changesCatalog(sql), refChangesCatalog.MatchString(sql); got != want && ascii {
			t.Errorf("changesCatalog(%q) = %v, the regular expression %v", sql, got, want)
		}
		if got, want := namesSessionWord(sql), refSessionWords.MatchString(sql); got != want && ascii {
			t.Errorf("namesSessionWord(%q) = %v, the regular expression %v", sql, got, want)
		}
	}
}

func BenchmarkCheapScans(b *testing.B) {
	sql := "SELECT abalance FROM pgbench_accounts WHERE aid = 123456;"
	b.Run("scans", func(b *testing.B) {
		for range b.N {
			changesCatalog(sql)
			namesSessionWord(sql)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for range b.N {
			refChangesCatalog.MatchString(sql)
			refSessionWords.MatchString(sql)
		}
	})
}
