// A record's JSON, written by hand: encoding/json's reflection was a
// quarter of a record's cost (design 15.15), and the fields are few and
// fixed.  Verify reads records back with encoding/json.

package audit

import (
	"strconv"
	"unicode/utf8"
)

// appendJSON appends r as one JSON object, its members in the order of
// Record's fields (cert left out when empty), as encoding/json writes it.
func (r *Record) appendJSON(b []byte) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = appendMember(b, "time", r.Time)
	b = appendMember(b, "role", r.Role)
	b = appendMember(b, "client", r.Client)
	if r.Cert != "" {
		b = appendMember(b, "cert", r.Cert)
	}
	b = appendMember(b, "database", r.Database)
	b = appendMember(b, "statement", r.Statement)
	b = append(b, `,"columns":[`...)
	for i, c := range r.Columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"column":`...)
		b = appendString(b, c.Column)
		b = appendMember(b, "access", c.Access)
		b = append(b, `,"decrypted":`...)
		b = strconv.AppendInt(b, c.Decrypted, 10)
		b = append(b, `,"encrypted":`...)
		b = strconv.AppendInt(b, c.Encrypted, 10)
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendMember(b, "outcome", r.Outcome)
	b = appendMember(b, "prev", r.Prev)
	return append(b, '}')
}

func appendMember(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 as U+FFFD (as encoding/json).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	clean := 0 // the plain ASCII that starts s, appended in one piece
	for clean < len(s) && s[clean] >= 0x20 && s[clean] < utf8.RuneSelf && s[clean] != '"' && s[clean] != '\\' {
		clean++
	}
	b = append(b, s[:clean]...)
	for i := clean; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
