// COPY FROM STDIN and COPY TO STDOUT on relations with encrypted
// columns: rows are split into fields (text or CSV format, as PostgreSQL
// writes and reads them), and the encrypted columns' fields are encrypted
// or decrypted row by row as the data streams.

package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/rewrite"
	"github.com/pgcipher/pgcipher/proxy/values"
)

type copyStream struct {
	s      *session
	plan   *rewrite.CopyPlan
	buf    []byte
	header bool // the header row is still to come
	failed bool
	answer *queryAnswer
	// binary format: the header has been passed on
	binHeader bool
}

// binarySignature starts binary COPY data.
var binarySignature = []byte("PGCOPY\n\xff\r\n\x00")

// binaryRows passes on the complete tuples of binary COPY data in c.buf,
// their encrypted columns' fields (binary values of the plain types)
// encrypted; the rest stays in c.buf.
func (c *copyStream) binaryRows() ([]byte, error) {
	b := c.buf
	var out []byte
	if !c.binHeader {
		if len(b) < 19 {
			return nil, nil
		}
		if !bytes.Equal(b[:11], binarySignature) {
			return nil, errors.New("binary COPY data without its signature")
		}
		ext := int(binary.BigEndian.Uint32(b[15:19]))
		if ext < 0 || len(b) < 19+ext {
			return nil, nil
		}
		out = append(out, b[:19+ext]...)
		b = b[19+ext:]
		c.binHeader = true
	}
	for len(b) >= 2 {
		n := int(int16(binary.BigEndian.Uint16(b)))
		if n == -1 { // the trailer
			out = append(out, b[:2]...)
			b = b[2:]
			continue
		}
		if n != len(c.plan.Columns) {
			return nil, fmt.Errorf("a binary COPY row has %d fields, COPY names %d columns", n, len(c.plan.Columns))
		}
		pos, fields, complete := 2, make([][]byte, 0, n), true
		for i := 0; i < n; i++ {
			if len(b) < pos+4 {
				complete = false
				break
			}
			l := int(int32(binary.BigEndian.Uint32(b[pos:])))
			pos += 4
			if l < 0 {
				fields = append(fields, nil)
				continue
			}
			if len(b) < pos+l {
				complete = false
				break
			}
			fields = append(fields, b[pos:pos+l])
			pos += l
		}
		if !complete {
			break
		}
		out = binary.BigEndian.AppendUint16(out, uint16(n))
		for i, f := range fields {
			col := c.plan.Columns[i]
			switch {
			case f == nil:
				out = binary.BigEndian.AppendUint32(out, 0xFFFFFFFF)
				continue
			case col == nil:
				out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
				out = append(out, f...)
				continue
			}
			t := col.Spec().Type
			p, err := values.Payload(t, values.PlainOID(t), 1, f)
			var ct []byte
			if err == nil {
				ct, err = col.EncryptPayload(p, rand.Reader)
			}
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", c.plan.Names[i], err)
			}
			c.audit().add(col.Spec().Label, colcrypt.AccessWrite, 0, 1)
			out = binary.BigEndian.AppendUint32(out, uint32(len(ct)))
			out = append(out, ct...)
		}
		b = b[pos:]
	}
	c.buf = bytes.Clone(b)
	return out, nil
}

func newCopyStream(s *session, p *rewrite.CopyPlan) *copyStream {
	return &copyStream{s: s, plan: p, header: p.Header}
}

// data takes a chunk of COPY FROM data: complete rows are encrypted and
// sent, the rest is kept for the next chunk.
func (c *copyStream) data(d []byte) error {
	if c.failed {
		return nil
	}
	c.buf = append(c.buf, d...)
	if c.plan.Binary {
		out, err := c.binaryRows()
		if err != nil {
			return c.fail(err)
		}
		if len(out) == 0 {
			return nil
		}
		c.s.sendServer(&pgproto3.CopyData{Data: out})
		return c.s.flushServer()
	}
	var out []byte
	for {
		n := c.rowEnd(c.buf)
		if n < 0 {
			break
		}
		row := c.buf[:n]
		c.buf = c.buf[n:]
		enc, err := c.encryptRow(row)
		if err != nil {
			return c.fail(err)
		}
		out = append(out, enc...)
	}
	c.buf = bytes.Clone(c.buf)
	if len(out) == 0 {
		return nil
	}
	c.s.sendServer(&pgproto3.CopyData{Data: out})
	return c.s.flushServer()
}

// done ends COPY FROM: a last row without a newline, then CopyDone.
func (c *copyStream) done() error {
	if c.failed {
		return nil
	}
	if len(c.buf) > 0 && c.plan.Binary {
		return c.fail(errors.New("binary COPY data ends inside a row"))
	}
	if len(c.buf) > 0 {
		enc, err := c.encryptRow(c.buf)
		if err != nil {
			return c.fail(err)
		}
		c.s.sendServer(&pgproto3.CopyData{Data: enc})
	}
	c.s.sendServer(&pgproto3.CopyDone{})
	return c.s.flushServer()
}

// fail stops the COPY: the server gets a CopyFail with a constant text
// (the row may hold plaintext), the client the proxy's error.
func (c *copyStream) fail(err error) error {
	c.failed = true
	if c.answer != nil {
		c.answer.refusedLater.Store(&rewrite.Refusal{Code: rewrite.CodeValue,
			Message: "pgcipher: COPY data does not fit an encrypted column", Detail: err.Error()})
	}
	c.s.sendServer(&pgproto3.CopyFail{Message: "pgcipher: COPY data refused by the proxy"})
	return c.s.flushServer()
}

// rowEnd returns the length of the first complete row of b (its newline
// included), or -1.  CSV rows may hold newlines inside quotes.
func (c *copyStream) rowEnd(b []byte) int {
	if !c.plan.CSV {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return -1
		}
		return i + 1
	}
	inQuote := false
	for i := 0; i < len(b); i++ {
		ch := b[i]
		switch {
		case inQuote && ch == c.plan.Escape && c.plan.Escape != c.plan.Quote && i+1 < len(b) &&
			(b[i+1] == c.plan.Quote || b[i+1] == c.plan.Escape):
			i++
		case ch == c.plan.Quote:
			inQuote = !inQuote
		case ch == '\n' && !inQuote:
			return i + 1
		}
	}
	return -1
}

// splitRow splits a row (without its line end) into raw fields.
func (c *copyStream) splitRow(row []byte) [][]byte {
	var fields [][]byte
	start, inQuote := 0, false
	for i := 0; i < len(row); i++ {
		ch := row[i]
		switch {
		case !c.plan.CSV && ch == '\\':
			i++ // an escaped character, perhaps the delimiter
		case c.plan.CSV && inQuote && ch == c.plan.Escape && c.plan.Escape != c.plan.Quote && i+1 < len(row) &&
			(row[i+1] == c.plan.Quote || row[i+1] == c.plan.Escape):
			i++
		case c.plan.CSV && ch == c.plan.Quote:
			inQuote = !inQuote
		case ch == c.plan.Delimiter && !inQuote:
			fields = append(fields, row[start:i])
			start = i + 1
		}
	}
	return append(fields, row[start:])
}

func trimEOL(row []byte) ([]byte, []byte) {
	n := len(row)
	if n > 0 && row[n-1] == '\n' {
		n--
		if n > 0 && row[n-1] == '\r' {
			n--
		}
	}
	return row[:n], row[n:]
}

// fieldFunc rewrites the field f of encrypted column col (number i),
// appending the result to out.
type fieldFunc func(out []byte, i int, col *colcrypt.Column, f []byte) ([]byte, error)

// mapRow rewrites the encrypted columns' fields of one text or CSV row
// with fn; the header row and the end marker pass unchanged.
func (c *copyStream) mapRow(row []byte, fn fieldFunc) ([]byte, error) {
	body, eol := trimEOL(row)
	if c.header {
		c.header = false
		return row, nil
	}
	if !c.plan.CSV && string(body) == `\.` {
		return row, nil
	}
	fields := c.splitRow(body)
	if len(fields) != len(c.plan.Columns) {
		return nil, fmt.Errorf("a COPY row has %d fields, COPY names %d columns", len(fields), len(c.plan.Columns))
	}
	var out []byte
	for i, f := range fields {
		if i > 0 {
			out = append(out, c.plan.Delimiter)
		}
		col := c.plan.Columns[i]
		if col == nil {
			out = append(out, f...)
			continue
		}
		var err error
		if out, err = fn(out, i, col, f); err != nil {
			return nil, err
		}
	}
	return append(out, eol...), nil
}

// encryptRow encrypts the encrypted columns' fields of one COPY FROM row.
func (c *copyStream) encryptRow(row []byte) ([]byte, error) {
	return c.mapRow(row, func(out []byte, i int, col *colcrypt.Column, f []byte) ([]byte, error) {
		v, null := c.unquote(f)
		if null {
			return append(out, f...), nil
		}
		p, err := values.Encode(col.Spec().Type, string(v))
		var ct []byte
		if err == nil {
			ct, err = col.EncryptPayload(p, rand.Reader)
		}
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c.plan.Names[i], err)
		}
		c.audit().add(col.Spec().Label, colcrypt.AccessWrite, 0, 1)
		return base64.StdEncoding.AppendEncode(out, ct), nil
	})
}

// unquote returns a field's value, or null.
func (c *copyStream) unquote(f []byte) ([]byte, bool) {
	if !c.plan.CSV {
		if string(f) == c.plan.Null {
			return nil, true
		}
		return unescapeText(f), false
	}
	if len(f) == 0 || f[0] != c.plan.Quote {
		if string(f) == c.plan.Null {
			return nil, true
		}
		return f, false
	}
	var out []byte
	for i := 1; i < len(f); i++ {
		ch := f[i]
		if ch == c.plan.Escape && i+1 < len(f) && (f[i+1] == c.plan.Quote || f[i+1] == c.plan.Escape) && (c.plan.Escape != c.plan.Quote || f[i+1] == c.plan.Quote) {
			out = append(out, f[i+1])
			i++
			continue
		}
		if ch == c.plan.Quote {
			continue
		}
		out = append(out, ch)
	}
	return out, false
}

// unescapeText reads COPY text format's backslash escapes.
func unescapeText(f []byte) []byte {
	if bytes.IndexByte(f, '\\') < 0 {
		return f
	}
	out := make([]byte, 0, len(f))
	for i := 0; i < len(f); i++ {
		ch := f[i]
		if ch != '\\' || i+1 == len(f) {
			out = append(out, ch)
			continue
		}
		i++
		switch e := f[i]; e {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'v':
			out = append(out, '\v')
		case 'x':
			v, n := 0, 0
			for n < 2 && i+1 < len(f) && isHex(f[i+1]) {
				v = v*16 + hexVal(f[i+1])
				i++
				n++
			}
			if n == 0 {
				out = append(out, 'x')
			} else {
				out = append(out, byte(v))
			}
		default:
			if e >= '0' && e <= '7' {
				v := int(e - '0')
				for n := 1; n < 3 && i+1 < len(f) && f[i+1] >= '0' && f[i+1] <= '7'; n++ {
					v = v*8 + int(f[i+1]-'0')
					i++
				}
				out = append(out, byte(v))
			} else {
				out = append(out, e)
			}
		}
	}
	return out
}

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}

func hexVal(b byte) int {
	switch {
	case b >= '0' && b <= '9':
		return int(b - '0')
	case b >= 'a' && b <= 'f':
		return int(b-'a') + 10
	}
	return int(b-'A') + 10
}

// decryptRow decrypts the encrypted columns' fields of one COPY TO row
// (one CopyData message: PostgreSQL sends a row per message).
func (c *copyStream) decryptRow(row []byte) ([]byte, error) {
	return c.mapRow(row, func(out []byte, _ int, col *colcrypt.Column, f []byte) ([]byte, error) {
		if _, null := c.unquote(f); null {
			return append(out, f...), nil
		}
		ct, err := base64.StdEncoding.DecodeString(string(f))
		if err != nil {
			return nil, errors.New("COPY field of an encrypted column is not base64")
		}
		if x, perr := colcrypt.Parse(ct); perr == nil && x.Header.IsTenant() && c.s != nil {
			// under the key of the tenant it names (design 13.13)
			if col, err = c.s.tenantColumnOf(col, x.Header); err != nil {
				return nil, err
			}
		}
		s, err := col.Decrypt(ct)
		if err == nil {
			c.audit().add(col.Spec().Label, colcrypt.AccessRead, 1, 0)
		}
		if err == nil && col.Spec().Type == colcrypt.Numeric {
			s, err = values.NumericText(s) // as numeric_out writes it
		}
		if err != nil {
			return nil, err
		}
		return c.quote(out, s), nil
	})
}

// quote writes a value as COPY TO would.
func (c *copyStream) quote(out []byte, s string) []byte {
	if !c.plan.CSV {
		for i := 0; i < len(s); i++ {
			ch := s[i]
			switch ch {
			case '\\':
				out = append(out, '\\', '\\')
			case '\n':
				out = append(out, '\\', 'n')
			case '\r':
				out = append(out, '\\', 'r')
			case '\t':
				out = append(out, '\\', 't')
			case '\b':
				out = append(out, '\\', 'b')
			case '\f':
				out = append(out, '\\', 'f')
			case '\v':
				out = append(out, '\\', 'v')
			default:
				if ch == c.plan.Delimiter {
					out = append(out, '\\')
				}
				out = append(out, ch)
			}
		}
		return out
	}
	need := s == c.plan.Null || bytes.ContainsAny([]byte(s), string([]byte{c.plan.Delimiter, c.plan.Quote, '\r', '\n'})) ||
		(c.plan.Escape != c.plan.Quote && bytes.IndexByte([]byte(s), c.plan.Escape) >= 0)
	if !need {
		return append(out, s...)
	}
	out = append(out, c.plan.Quote)
	for i := 0; i < len(s); i++ {
		if s[i] == c.plan.Quote || s[i] == c.plan.Escape {
			out = append(out, c.plan.Escape)
		}
		out = append(out, s[i])
	}
	return append(out, c.plan.Quote)
}
