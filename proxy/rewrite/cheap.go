// The cheap tests a statement that names no encrypted relation passes
// through instead of the parser (design 15.11): byte scans, where the
// regular expressions they replace cost a quarter of the proxy's CPU per
// simple-protocol query.  Both may say yes where nothing changes (the
// statement is then parsed); neither may say no where the regular
// expression in cheap_test.go says yes for ASCII text.  PostgreSQL folds
// the case of ASCII letters only in keywords, so the scans do too.

package rewrite

// catalogWords start statements that may change what the catalog says
// (DDL).
var catalogWords = []string{"create", "alter", "drop", "import"}

// sessionWordList: words of statements that may change name resolution.
var sessionWordList = []string{"search_path", "set_config", "temp", "discard", "role", "authoriz", "reset", "drop",
	"pgcipher.tenant"}

// changesCatalog: a statement of sql (its start, or after a semicolon,
// then blanks) starts with one of catalogWords as a whole word.
func changesCatalog(sql string) bool {
	for i := 0; i <= len(sql); i++ {
		if i > 0 && sql[i-1] != ';' {
			continue
		}
		j := i
		for j < len(sql) && isBlank(sql[j]) {
			j++
		}
		for _, w := range catalogWords {
			if hasPrefixFold(sql[j:], w) && (j+len(w) == len(sql) || !isWordByte(sql[j+len(w)])) {
				return true
			}
		}
	}
	return false
}

// namesSessionWord: sql holds one of sessionWordList, any case.
func namesSessionWord(sql string) bool {
	for i := 0; i < len(sql); i++ {
		switch sql[i] | 0x20 {
		case 's', 't', 'd', 'r', 'a', 'p':
			for _, w := range sessionWordList {
				if hasPrefixFold(sql[i:], w) {
					return true
				}
			}
		}
	}
	return false
}

// hasPrefixFold: s starts with w (lower case ASCII), ASCII case folded.
func hasPrefixFold(s, w string) bool {
	if len(s) < len(w) {
		return false
	}
	for k := 0; k < len(w); k++ {
		c := s[k]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[k] {
			return false
		}
	}
	return true
}

// isBlank is RE2's \s: tab, newline, form feed, carriage return, space.
func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// isWordByte is RE2's \w (ASCII letters, digits, underscore).
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
