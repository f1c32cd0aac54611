// LIKE as PostgreSQL evaluates it on text in the C collation: % any
// string, _ any one character, backslash escapes the next character.

package wire

import (
	"errors"
	"unicode/utf8"
)

var errLikeEscape = errors.New("LIKE pattern must not end with escape character")

// like reports whether s matches pattern p.
func like(s, p string) (bool, error) {
	for len(p) > 0 {
		switch p[0] {
		case '%':
			for len(p) > 0 && p[0] == '%' {
				p = p[1:]
			}
			if p == "" {
				return true, nil
			}
			for i := 0; i <= len(s); {
				ok, err := like(s[i:], p)
				if ok || err != nil {
					return ok, err
				}
				if i == len(s) {
					break
				}
				_, n := utf8.DecodeRuneInString(s[i:])
				i += n
			}
			return false, nil
		case '_':
			if s == "" {
				return false, nil
			}
			_, n := utf8.DecodeRuneInString(s)
			s, p = s[n:], p[1:]
		case '\\':
			if len(p) < 2 {
				return false, errLikeEscape
			}
			p = p[1:]
			fallthrough
		default:
			_, n := utf8.DecodeRuneInString(p)
			if len(s) < n || s[:n] != p[:n] {
				return false, nil
			}
			s, p = s[n:], p[n:]
		}
	}
	return s == "", nil
}
