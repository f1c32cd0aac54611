// Level MATCH (design 13.5a): a Bloom filter of the trigrams of a text
// value, LIKE-pattern queries, and the server's candidate test MayMatch.

package colcrypt

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"unicode"
)

// Bloom filter parameters: m = 256 bits (BloomSize bytes), k = 3 bits per
// trigram, trigrams of bloomGram bytes.
const (
	bloomGram   = 3
	bloomHashes = 3
)

// bloomAdd sets the bits of every bloomGram-byte window of run: for a
// window t, h = HMAC-SHA-256(k_match, t) and bits h[0], h[1], h[2], bit i
// being bit i mod 8 (least significant first) of byte i/8.
func bloomAdd(f *[BloomSize]byte, mac hash.Hash, run []byte) {
	var sum [sha256.Size]byte
	for i := 0; i+bloomGram <= len(run); i++ {
		mac.Reset()
		mac.Write(run[i : i+bloomGram])
		h := mac.Sum(sum[:0])
		for _, bit := range h[:bloomHashes] {
			f[bit/8] |= 1 << (bit % 8)
		}
	}
}

// valueBloom is the Bloom filter of a stored MATCH value: every 3-byte
// window of its bytes (none for a value shorter than 3 bytes), of the
// case-folded text at a case-insensitive column.
func (c *Column) valueBloom(p []byte) *[BloomSize]byte {
	var f [BloomSize]byte
	if c.spec.CaseInsensitive {
		p = []byte(Fold(string(p)))
	}
	bloomAdd(&f, hmac.New(sha256.New, c.matchKey), p)
	return &f
}

// Fold is the case folding of a case-insensitive MATCH column's filters:
// each character mapped to the lower case of its upper case (Unicode's
// simple mappings), so that a text, its upper() and its lower() fold
// alike: Fold(upper(s)) = Fold(lower(s)) = Fold(s).  Whatever LIKE pattern
// upper(s), lower(s) or s matches under either case, the folded pattern's
// literal runs are substrings of Fold(s): the filter test has no false
// negatives for ILIKE and for upper() or lower() LIKE.
func Fold(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, s)
}

// LikeRuns splits a LIKE pattern (default escape character `\`) into its
// literal runs: the stretches between the wildcards `%` (any run of
// characters) and `_` (any one character), with escapes resolved (`\x`
// is the literal x).  A pattern ending in a lone `\` is an error, as in
// PostgreSQL.  Empty runs are left out.
func LikeRuns(pattern string) ([][]byte, error) {
	var runs [][]byte
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			runs = append(runs, cur)
			cur = nil
		}
	}
	for i := 0; i < len(pattern); i++ {
		switch b := pattern[i]; b {
		case '%', '_':
			flush()
		case '\\':
			if i+1 == len(pattern) {
				return nil, errors.New("colcrypt: LIKE pattern must not end with escape character")
			}
			i++
			cur = append(cur, pattern[i])
		default:
			cur = append(cur, b)
		}
	}
	flush()
	return runs, nil
}

// EncryptPattern encrypts a LIKE pattern as a MATCH query (flags
// FlagQuery) for a MATCH column: its Bloom filter has the bits of every
// 3-byte window lying inside one literal run of the pattern, its token is
// that of the pattern text and its payload the pattern text.  At a
// case-insensitive column the runs are folded (Fold) and the query
// carries FlagFolded, as the column's values do.  The server
// returns the values whose filters contain the query's (MayMatch), a
// superset of those the pattern matches; the client decrypts them and
// applies the pattern.
func (c *Column) EncryptPattern(pattern string, rand io.Reader) ([]byte, error) {
	if c.spec.Level != MATCH {
		return nil, fmt.Errorf("colcrypt: column %q: pattern queries need level MATCH, not %s", c.spec.Label, c.spec.Level)
	}
	runs, err := LikeRuns(pattern)
	if err != nil {
		return nil, err
	}
	if c.spec.CaseInsensitive {
		for i, r := range runs {
			runs[i] = []byte(Fold(string(r)))
		}
	}
	var f [BloomSize]byte
	mac := hmac.New(sha256.New, c.matchKey)
	for _, r := range runs {
		bloomAdd(&f, mac, r)
	}
	h := c.header
	h.Flags |= FlagQuery
	return c.seal(h, []byte(pattern), &f, rand)
}

// MayMatch is the server's candidate test `value @> query`: both MATCH
// ciphertexts of one key and join group, and every bit set in the query's
// Bloom filter is set in the value's.  It is true whenever the value
// matches the query's pattern (no false negatives), and sometimes when it
// does not.  Value and query must agree on FlagFolded: a folded query's
// bits mean nothing in an exact filter.
func MayMatch(value, query []byte) (bool, error) {
	x, y, err := comparable(value, query, MATCH)
	if err != nil {
		return false, err
	}
	if x.IsFolded() != y.IsFolded() {
		return false, errors.New("colcrypt: comparing a case-folded MATCH filter with an exact one")
	}
	if x.Header.KeyID != y.Header.KeyID {
		return false, nil // another tenant's value (design 13.13)
	}
	for i := range y.Bloom {
		if x.Bloom[i]&y.Bloom[i] != y.Bloom[i] {
			return false, nil
		}
	}
	return true, nil
}

// LikeEscape rewrites a LIKE pattern written for ESCAPE esc (the empty
// string for an empty ESCAPE: no escape character) into the default form,
// whose escape character is the backslash, which LikeRuns and the proxy's
// recheck read.
func LikeEscape(pattern, esc string) (string, error) {
	if esc == `\` {
		return pattern, nil
	}
	e := []rune(esc)
	if len(e) > 1 {
		return "", fmt.Errorf("invalid escape string: %q is more than one character", esc)
	}
	var b strings.Builder
	r := []rune(pattern)
	for i := 0; i < len(r); i++ {
		switch {
		case len(e) == 1 && r[i] == e[0]:
			if i+1 == len(r) {
				return "", fmt.Errorf("LIKE pattern must not end with escape character")
			}
			i++
			b.WriteByte('\\')
			b.WriteRune(r[i])
		case r[i] == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteRune(r[i])
		}
	}
	return b.String(), nil
}
